import Foundation
import GRDB
import SwiftplexStorage

/// An SQLite file through GRDB: created 0600, WAL, foreign keys and `secure_delete` on
/// (`PrivateDatabase`), migrated by the `sqlite` scripts of the migrations.
public final class SQLiteStore: SQLStore {
    public let queue: DatabaseQueue
    public var dialect: SQLDialect { .sqlite }

    public init(path: URL, label: String, migrations: [SQLMigration]) throws {
        var migrator = DatabaseMigrator()
        for m in migrations {
            migrator.registerMigration(m.identifier) { db in try db.execute(sql: m.sqlite) }
        }
        do {
            queue = try PrivateDatabase.open(path: path, label: label, migrator: migrator)
        } catch let e as DatabaseError {
            throw SQLError(.connection, "cannot open \(path.path): \(e.message ?? "\(e.resultCode)")")
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await Self.translating { try await queue.read { db in try body(GRDBConnection(db: db)) } }
    }

    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await Self.translating { try await queue.write { db in try body(GRDBConnection(db: db)) } }
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
        do { return try body() } catch let e as DatabaseError { throw SQLError(.statement, e.message ?? "\(e.resultCode)") }
    }

    private static func translating<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let e as DatabaseError { throw SQLError(.statement, e.message ?? "\(e.resultCode)") }
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

    static func arguments(_ values: [SQLValue]) -> StatementArguments {
        StatementArguments(values.map { v -> DatabaseValue in
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
