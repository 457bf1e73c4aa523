import Foundation
import GRDB
import SwiftplexStorage
import SwiftplexBase

/// An SQLite file through GRDB: created 0600, WAL, foreign keys and `secure_delete` on
/// (`PrivateDatabase`), migrated by the `sqlite` scripts of the migrations.
public final class SQLiteStore: SQLStore {
    public let queue: DatabaseQueue
    /// Statements prepared once per SQL text (`GRDBConnection`).
    let statements = SQLiteStatementCache()
    public var dialect: SQLDialect { .sqlite }

    public init(path: URL, label: String, migrations: [SQLMigration]) throws {
        do {
            queue = try PrivateDatabase.open(path: path, label: label, migrator: Self.migrator(migrations))
        } catch let e as DatabaseError {
            throw SQLError(.connection, "cannot open \(path.path): \(e.message ?? "\(e.resultCode)")")
        }
    }

    /// A queue opened elsewhere (tests that build a file as an older version left it).
    public init(wrapping queue: DatabaseQueue) { self.queue = queue }

    /// An existing file opened read-only, beside the process that writes it (WAL readers do not
    /// block the writer): for monitoring.
    public init(readingOnly path: URL, label: String) throws {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = label
        do {
            queue = try DatabaseQueue(path: path.path, configuration: configuration)
        } catch let e as DatabaseError {
            throw SQLError(.connection, "cannot open \(path.path): \(e.message ?? "\(e.resultCode)")")
        }
    }

    /// GRDB's migrator for `migrations` (its `grdb_migrations` table records what was applied, so
    /// files made before this layer existed carry on where they were).
    public static func migrator(_ migrations: [SQLMigration]) -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        for m in migrations {
            migrator.registerMigration(m.identifier) { db in
                switch m.step {
                case let .scripts(sqlite, _), let .sqlite(sqlite): try db.execute(sql: sqlite)
                case let .code(body): try body(GRDBConnection(db: db, inTransaction: true))
                case let .sqliteThenCode(sqlite, body):
                    try db.execute(sql: sqlite)
                    try body(GRDBConnection(db: db, inTransaction: true))
                }
            }
        }
        return migrator
    }

    /// The identifiers of `migrations` not yet applied to the file at `path` (all of them when it
    /// does not exist). Opens nothing for writing.
    public static func pendingMigrations(_ migrations: [SQLMigration], at path: URL) throws -> [String] {
        try PrivateDatabase.pendingMigrations(migrator(migrations), at: path)
    }

    /// Reads without a transaction around them (`plainRead`: one connection serialises every
    /// access, so the statements of `body` see one state).
    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        do { return try await queue.plainRead { [statements] db in try body(GRDBConnection(db: db, cache: statements)) } } catch let e as DatabaseError { throw Self.sqlError(e) }
    }

    /// A transaction with cached `BEGIN IMMEDIATE` and `COMMIT` (`cachedWrite`).
    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        do { return try await queue.cachedWrite { [statements] db in try body(GRDBConnection(db: db, cache: statements, inTransaction: true)) } } catch let e as DatabaseError { throw Self.sqlError(e) }
    }

    public func readNow<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        Blocking.willWait("SQLiteStore.readNow")
        return try Self.translating { try queue.read { db in try body(GRDBConnection(db: db, cache: statements)) } }
    }

    @discardableResult
    public func writeNow<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        Blocking.willWait("SQLiteStore.writeNow")
        return try Self.translating { try queue.write { db in try body(GRDBConnection(db: db, cache: statements, inTransaction: true)) } }
    }

    /// Finalizes the cached statements (SQLite closes no connection with statements left), then
    /// closes the file.
    public func close() throws {
        Blocking.willWait("SQLiteStore.close")
        queue.inDatabase { [statements] _ in statements.statements.removeAll() }
        try queue.close()
    }

    private static func translating<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let e as DatabaseError { throw sqlError(e) }
    }

    /// SQLite's faults that go away by themselves (space returns, a lock is released, the file
    /// can be opened again) are `transient`; the rest are the statement's.
    static func sqlError(_ e: DatabaseError) -> SQLError {
        let passing: [ResultCode] = [.SQLITE_FULL, .SQLITE_IOERR, .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_READONLY, .SQLITE_NOMEM, .SQLITE_CANTOPEN, .SQLITE_PROTOCOL]
        return SQLError(passing.contains(e.resultCode) ? .transient : .statement, e.message ?? "\(e.resultCode)", backendCode: "\(e.resultCode)")
    }

}

