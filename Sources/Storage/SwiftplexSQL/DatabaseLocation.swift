import Foundation
import SwiftplexBase
import Synchronization

/// Where one database lives: an SQLite file (0600, WAL) or a schema of a PostgreSQL database
/// (held under its advisory lock while open). SQLite is this layer's own; PostgreSQL is opened
/// through the backend the program passed in (``SQLBackends/use(postgres:)``).
public enum DatabaseLocation: Sendable, CustomStringConvertible {
    case sqlite(URL)
    case postgres(PostgresLocation)

    /// Opens (creating and migrating) the database. A PostgreSQL schema another process holds is
    /// refused after `lockWait` with ``SQLError`` `.locked`.
    public func open(label: String, migrations: [SQLMigration], lockWait: Duration = .seconds(5)) throws -> any SQLStore {
        switch self {
        case let .sqlite(path): try SQLiteStore(path: path, label: label, migrations: migrations)
        case let .postgres(location): try SQLBackends.postgres().open(location: location, label: label, migrations: migrations, lockWait: lockWait)
        }
    }

    /// Opens an existing database for reading only, beside the process that holds it (a tool's
    /// view): nothing is created, locked or migrated. Nil for an SQLite file that does not exist.
    public func openReadingOnly(label: String) async throws -> (any SQLStore)? {
        switch self {
        case let .sqlite(path):
            guard FileManager.default.fileExists(atPath: path.path) else { return nil }
            return try await Blocking.run("\(label)-open") { try SQLiteStore(readingOnly: path, label: label) as any SQLStore }
        case let .postgres(location):
            return try await SQLBackends.postgres().openReadingOnly(location: location, label: label)
        }
    }

    /// The identifiers of `migrations` not yet applied here (all of them when the database does
    /// not exist). Reads only.
    public func pendingMigrations(_ migrations: [SQLMigration]) throws -> [String] {
        switch self {
        case let .sqlite(path): try SQLiteStore.pendingMigrations(migrations, at: path)
        case let .postgres(location): try SQLBackends.postgres().pendingMigrations(migrations, at: location)
        }
    }

    /// Deletes the database: the file and its WAL, journal and shared-memory companions, or the
    /// schema and everything in it (``SQLError`` `.locked` while another process holds it).
    public func destroy() throws {
        switch self {
        case let .sqlite(path):
            for companion in ["", "-wal", "-shm", "-journal"] where FileManager.default.fileExists(atPath: path.path + companion) {
                try FileManager.default.removeItem(atPath: path.path + companion)
            }
        case let .postgres(location):
            try SQLBackends.postgres().dropSchema(at: location)
        }
    }

    /// The file's path, or the server and schema (never a password).
    public var description: String {
        switch self {
        case let .sqlite(path): path.path
        case let .postgres(location): location.description
        }
    }
}

/// What the SQL layer needs of a PostgreSQL driver. The engine and the stores written on this
/// layer never import one: a program that offers PostgreSQL passes its backend in at start
/// (SwiftplexSQLPostgres's `PostgresStore.backend`, through ``SQLBackends/use(postgres:)``).
public protocol PostgresBackend: Sendable {
    /// Opens (creating and migrating) the schema, holding its advisory lock while open.
    func open(location: PostgresLocation, label: String, migrations: [SQLMigration], lockWait: Duration) throws -> any SQLStore
    /// Opens an existing schema for reading only, taking no lock.
    func openReadingOnly(location: PostgresLocation, label: String) async throws -> any SQLStore
    /// The identifiers of `migrations` not applied in the schema.
    func pendingMigrations(_ migrations: [SQLMigration], at location: PostgresLocation) throws -> [String]
    /// Drops the schema unless another process holds it.
    func dropSchema(at location: PostgresLocation) throws
}

/// The backends the SQL layer opens databases through, beyond its own SQLite.
public enum SQLBackends {
    private static let registered = Mutex<(any PostgresBackend)?>(nil)

    /// Makes PostgreSQL locations openable in this process (a program does this once, at start).
    public static func use(postgres backend: any PostgresBackend) {
        registered.withLock { $0 = backend }
    }

    /// The PostgreSQL backend, or ``SQLError`` `.connection` naming what is missing.
    public static func postgres() throws -> any PostgresBackend {
        guard let backend = registered.withLock({ $0 }) else {
            throw SQLError(.connection, "this program was started without the PostgreSQL backend, so it cannot open a PostgreSQL database")
        }
        return backend
    }
}
