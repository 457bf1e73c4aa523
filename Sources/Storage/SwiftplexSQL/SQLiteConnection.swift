import Foundation
import GRDB
import GRDBSQLite

// The SQLite backend's statements. GRDB opens the file, migrates it and runs the transactions'
// `BEGIN IMMEDIATE` / `COMMIT` (`SQLiteStore`); the statements inside a transaction run on the
// SQLite C API directly: arguments bound from `SQLValue`s as they are (GRDB's path converted each
// to a `DatabaseValue`, built a `StatementArguments` and bound it through nested closures), rows
// read into `SQLValue`s, and each statement prepared once per connection with its column names
// (`SQLColumns`) made once with it. The engine's message path runs a few dozen statements per
// message, so this path's cost counts (docs/performance.md, "Chat echo").

/// `SQLITE_TRANSIENT`: SQLite copies a bound text or blob (the C macro is not imported).
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One statement prepared for a connection: GRDB's `Statement` owns the SQLite handle (finalized
/// with it); its column names are read once.
final class SQLitePrepared {
    let statement: GRDB.Statement
    let handle: OpaquePointer
    let sql: String
    let parameterCount: Int
    /// `CREATE`, `ALTER` or `DROP`: run through GRDB (which then forgets its schema cache), never
    /// cached, and every cached statement's columns are read again after it.
    let changesSchema: Bool
    private var cachedColumns: SQLColumns?

    init(_ statement: GRDB.Statement, sql: String) {
        self.statement = statement
        handle = statement.sqliteStatement
        self.sql = sql
        parameterCount = Int(sqlite3_bind_parameter_count(handle))
        changesSchema = Self.isSchemaChange(sql)
    }

    /// The result's column names (read again if a schema change altered their number; SQLite
    /// re-prepares a statement whose tables changed).
    var columns: SQLColumns {
        let count = Int(sqlite3_column_count(handle))
        if let cachedColumns, cachedColumns.names.count == count { return cachedColumns }
        let made = SQLColumns((0..<count).map { String(cString: sqlite3_column_name(handle, CInt($0))) })
        cachedColumns = made
        return made
    }

    static func isSchemaChange(_ sql: String) -> Bool {
        let word = sql.utf8.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x09 || $0 == 0x0D }.prefix(6)
        let upper = String(decoding: word.map { $0 & 0xDF }, as: UTF8.self)
        return upper.hasPrefix("CREATE") || upper.hasPrefix("ALTER") || upper.hasPrefix("DROP")
    }
}

/// The prepared statements of one store's connection, by SQL text. Only touched inside the
/// store's transactions, which GRDB's queue serialises (hence `@unchecked Sendable`); emptied
/// before the connection closes (SQLite does not close a connection with statements left).
final class SQLiteStatementCache: @unchecked Sendable {
    var statements: [String: SQLitePrepared] = [:]
}

/// GRDB's `Database` as an `SQLConnection`, its statements run on SQLite's C API.
struct GRDBConnection: SQLConnection {
    let db: Database
    /// The store's statement cache; nil while migrating (statements prepared then are not kept:
    /// the schema is still changing).
    let cache: SQLiteStatementCache?
    /// Inside `write`'s transaction: a statement after SQLite rolled it back by itself (a full
    /// disk, an I/O error) fails instead of running outside any transaction.
    let inTransaction: Bool

    init(db: Database, cache: SQLiteStatementCache? = nil, inTransaction: Bool = false) {
        self.db = db
        self.cache = cache
        self.inTransaction = inTransaction
    }

    var dialect: SQLDialect { .sqlite }

    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        let p = try prepared(sql)
        if p.changesSchema {
            try p.statement.execute(arguments: GRDB.StatementArguments(arguments.map(Self.databaseValue)))
            cache?.statements.removeAll()
            return db.changesCount
        }
        try run(p, arguments) { _ in }
        return Int(sqlite3_changes(db.sqliteConnection))
    }

    func rows(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        let p = try prepared(sql)
        if p.changesSchema {
            try p.statement.execute(arguments: GRDB.StatementArguments(arguments.map(Self.databaseValue)))
            cache?.statements.removeAll()
            return []
        }
        let columns = p.columns
        let count = columns.names.count
        var result: [SQLRow] = []
        try run(p, arguments) { h in
            var values: [SQLValue] = []
            values.reserveCapacity(count)
            for i in 0..<CInt(count) { values.append(Self.value(h, i)) }
            result.append(SQLRow(columns: columns, values: values))
        }
        return result
    }

    func executeScript(_ sql: String) throws {
        cache?.statements.removeAll()
        try db.execute(sql: sql)
    }

    var changesCount: Int { db.changesCount }

    private func prepared(_ sql: String) throws -> SQLitePrepared {
        if let p = cache?.statements[sql] { return p }
        let p = SQLitePrepared(try db.makeStatement(sql: sql), sql: sql)
        if let cache, !p.changesSchema { cache.statements[sql] = p }
        return p
    }

    /// Binds `arguments`, steps the statement to its end (`row` for each row), and resets it.
    private func run(_ p: SQLitePrepared, _ arguments: [SQLValue], row: (OpaquePointer) throws -> Void) throws {
        let h = p.handle
        let connection = db.sqliteConnection
        guard arguments.count == p.parameterCount else {
            throw DatabaseError(resultCode: .SQLITE_MISUSE, message: "wrong number of statement arguments: \(arguments.count) for \(p.parameterCount) placeholders", sql: p.sql)
        }
        if inTransaction, sqlite3_get_autocommit(connection) != 0 {
            throw DatabaseError(resultCode: .SQLITE_ABORT, message: "the transaction was rolled back", sql: p.sql)
        }
        // A statement that failed last time reports that failure again here; it is run afresh.
        _ = sqlite3_reset(h)
        defer {
            _ = sqlite3_reset(h)
            _ = sqlite3_clear_bindings(h)
        }
        var index: CInt = 1
        for v in arguments {
            let code: CInt
            switch v {
            case .null: code = sqlite3_bind_null(h, index)
            case let .integer(i): code = sqlite3_bind_int64(h, index, i)
            case let .real(d): code = sqlite3_bind_double(h, index, d)
            case var .text(s):
                code = s.withUTF8 { utf8 in
                    guard let base = utf8.baseAddress else { return sqlite3_bind_text(h, index, "", 0, transient) }
                    return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
                        sqlite3_bind_text(h, index, $0, CInt(utf8.count), transient)
                    }
                }
            case let .blob(b):
                code = b.withUnsafeBytes { bytes in
                    guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(h, index, 0) }
                    return sqlite3_bind_blob(h, index, base, CInt(bytes.count), transient)
                }
            }
            guard code == SQLITE_OK else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)), sql: p.sql)
            }
            index += 1
        }
        while true {
            switch sqlite3_step(h) {
            case SQLITE_ROW: try row(h)
            case SQLITE_DONE: return
            case let code:
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)), sql: p.sql)
            }
        }
    }

    private static func value(_ h: OpaquePointer, _ i: CInt) -> SQLValue {
        switch sqlite3_column_type(h, i) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(h, i))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(h, i))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(h, i) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: Int(sqlite3_column_bytes(h, i))), as: UTF8.self))
        default:
            guard let blob = sqlite3_column_blob(h, i) else { return .blob([]) }
            return .blob([UInt8](UnsafeRawBufferPointer(start: blob, count: Int(sqlite3_column_bytes(h, i)))))
        }
    }

    static func databaseValue(_ v: SQLValue) -> DatabaseValue {
        switch v {
        case .null: .null
        case let .integer(i): i.databaseValue
        case let .real(d): d.databaseValue
        case let .text(s): s.databaseValue
        case let .blob(b): Data(b).databaseValue
        }
    }
}
