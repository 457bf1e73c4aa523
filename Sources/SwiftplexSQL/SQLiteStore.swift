import Foundation
import GRDB
import SwiftplexStorage

/// An SQLite file through GRDB: created 0600, WAL, foreign keys and `secure_delete` on
/// (`PrivateDatabase`), migrated by the `sqlite` scripts of the migrations.
public final class SQLiteStore: SQLStore {
    public let queue: DatabaseQueue
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
                case let .code(body): try body(GRDBConnection(db: db))
                case let .sqliteThenCode(sqlite, body):
                    try db.execute(sql: sqlite)
                    try body(GRDBConnection(db: db))
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
        do { return try await queue.plainRead { db in try body(GRDBConnection(db: db)) } } catch let e as DatabaseError { throw Self.sqlError(e) }
    }

    /// A transaction with cached `BEGIN IMMEDIATE` and `COMMIT` (`cachedWrite`).
    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        do { return try await queue.cachedWrite { db in try body(GRDBConnection(db: db)) } } catch let e as DatabaseError { throw Self.sqlError(e) }
    }

    public func readNow<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try Self.translating { try queue.read { db in try body(GRDBConnection(db: db)) } }
    }

    @discardableResult
    public func writeNow<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try Self.translating { try queue.write { db in try body(GRDBConnection(db: db)) } }
    }

    public func close() throws { try queue.close() }

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

/// GRDB's `Database` as an `SQLConnection`: statements are cached per SQL text.
struct GRDBConnection: SQLConnection {
    let db: Database
    var dialect: SQLDialect { .sqlite }

    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        let statement = try db.cachedStatement(sql: sql)
        try statement.execute(arguments: Self.arguments(arguments))
        return db.changesCount
    }

    func rows(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        let statement = try db.cachedStatement(sql: sql)
        let columns = SQLColumns(statement.columnNames)
        let count = columns.names.count
        var result: [SQLRow] = []
        let cursor = try Row.fetchCursor(statement, arguments: Self.arguments(arguments))
        while let row = try cursor.next() {
            var values: [SQLValue] = []
            values.reserveCapacity(count)
            for i in 0..<count { values.append(Self.value(row[i] as DatabaseValue)) }
            result.append(SQLRow(columns: columns, values: values))
        }
        return result
    }

    func executeScript(_ sql: String) throws { try db.execute(sql: sql) }

    var changesCount: Int { db.changesCount }

    static func arguments(_ values: [SQLValue]) -> GRDB.StatementArguments {
        GRDB.StatementArguments(values.map { v -> DatabaseValue in
            switch v {
            case .null: .null
            case let .integer(i): i.databaseValue
            case let .real(d): d.databaseValue
            case let .text(s): s.databaseValue
            case let .blob(b): Data(b).databaseValue
            }
        })
    }

    static func value(_ v: DatabaseValue) -> SQLValue {
        switch v.storage {
        case .null: .null
        case let .int64(i): .integer(i)
        case let .double(d): .real(d)
        case let .string(s): .text(s)
        case let .blob(data): .blob([UInt8](data))
        }
    }
}
