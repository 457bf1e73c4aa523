import Foundation
import SwiftplexSQL

/// Where one database lives: an SQLite file (0600, WAL) or a schema of a PostgreSQL database
/// (held under its advisory lock while open).
public enum DatabaseLocation: Sendable, CustomStringConvertible {
    case sqlite(URL)
    case postgres(PostgresLocation)

    /// Opens (creating and migrating) the database. A PostgreSQL schema another process holds is
    /// refused after `lockWait` with ``SQLError`` `.locked`.
    public func open(label: String, migrations: [SQLMigration], lockWait: Duration = .seconds(5)) throws -> any SQLStore {
        switch self {
        case let .sqlite(path): try SQLiteStore(path: path, label: label, migrations: migrations)
        case let .postgres(location): try PostgresStore(location: location, label: label, migrations: migrations, lockWait: lockWait)
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
