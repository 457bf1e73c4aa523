/// The SQL a backend speaks. Statements are written once, in the SQL both take (`?` placeholders,
/// `INSERT … ON CONFLICT … DO UPDATE`, `RETURNING`); where they differ a caller asks the dialect.
public enum SQLDialect: String, Sendable {
    case sqlite
    case postgres

    /// The text at `path` (object keys) in the JSON text `expression`: a string as the string, an
    /// object as its JSON (SQLite's `json_extract`, PostgreSQL's `#>>`).
    public func jsonText(_ expression: String, _ path: String...) -> String {
        switch self {
        case .sqlite: "json_extract(\(expression), '$.\(path.joined(separator: "."))')"
        case .postgres: "((\(expression))::jsonb #>> '{\(path.joined(separator: ","))}')"
        }
    }

    /// A blob holding UTF-8 as text.
    public func utf8Text(_ expression: String) -> String {
        switch self {
        case .sqlite: "CAST(\(expression) AS TEXT)"
        case .postgres: "convert_from(\(expression), 'UTF8')"
        }
    }

    /// An expression that orders a table's rows as they were inserted, for a table without an id
    /// column: SQLite's `rowid`; PostgreSQL's inserting transaction (`xmin`; rows of one
    /// transaction tie).
    public var insertionOrder: String {
        switch self {
        case .sqlite: "rowid"
        case .postgres: "xmin::text::bigint"
        }
    }

    /// The larger of two values: SQLite's scalar `max(a, b)`, PostgreSQL's `GREATEST(a, b)`.
    public func greatest(_ a: String, _ b: String) -> String {
        switch self {
        case .sqlite: "max(\(a), \(b))"
        case .postgres: "GREATEST(\(a), \(b))"
        }
    }
}

/// A connection inside a transaction (a store's `read` or `write`): statements with `?`
/// placeholders and their arguments. Not thread-safe and not to be kept: it is valid only inside
/// the closure it was passed to.
public protocol SQLConnection {
    var dialect: SQLDialect { get }

    /// Runs one statement; returns how many rows it inserted, changed or deleted.
    @discardableResult
    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int

    /// Runs one query and returns every row.
    func rows(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow]

    /// Runs several statements without arguments (a migration's script).
    func executeScript(_ sql: String) throws

    /// The rows the last `execute` inserted, changed or deleted (0 after an `INSERT … ON CONFLICT
    /// DO NOTHING` that found its row).
    var changesCount: Int { get }
}

extension SQLConnection {
    @discardableResult
    public func execute(_ sql: String, _ arguments: any SQLValueConvertible...) throws -> Int {
        try execute(sql, arguments.map(\.sqlValue))
    }

    public func rows(_ sql: String, _ arguments: any SQLValueConvertible...) throws -> [SQLRow] {
        try rows(sql, arguments.map(\.sqlValue))
    }

    /// The first row, or nil when there is none.
    public func row(_ sql: String, _ arguments: any SQLValueConvertible...) throws -> SQLRow? {
        try rows(sql, arguments.map(\.sqlValue)).first
    }

    /// The first column of the first row as `T`, or nil when there is no row or it is NULL.
    public func value<T: SQLValueConvertible>(_: T.Type, _ sql: String, _ arguments: any SQLValueConvertible...) throws -> T? {
        guard let row = try rows(sql, arguments.map(\.sqlValue)).first else { return nil }
        return try row.get(0, as: T?.self)
    }

    /// An `INSERT` that returns the new row's `column` (its generated id): `RETURNING`, which
    /// SQLite (3.35 and later) and PostgreSQL both take.
    public func insert(_ sql: String, returning column: String = "id", _ arguments: any SQLValueConvertible...) throws -> Int64 {
        guard let row = try rows(sql + " RETURNING " + column, arguments.map(\.sqlValue)).first else {
            throw SQLError(.statement, "the insert returned no row")
        }
        return try row.get(0, as: Int64.self)
    }
}

/// A schema change. Applied once, in order, each in its own transaction: a script per dialect, one
/// script in SQLite's SQL (which the PostgreSQL backend translates), or Swift code that runs
/// statements of its own (data moved or rewritten).
public struct SQLMigration: Sendable {
    public enum Step: Sendable {
        case scripts(sqlite: String, postgres: String)
        case sqlite(String)
        case code(@Sendable (any SQLConnection) throws -> Void)
        /// A script in SQLite's SQL, then code in the same transaction (data moved into what the
        /// script made).
        case sqliteThenCode(String, @Sendable (any SQLConnection) throws -> Void)
    }

    public let identifier: String
    public let step: Step

    /// A script for each dialect.
    public init(_ identifier: String, sqlite: String, postgres: String) {
        self.identifier = identifier
        step = .scripts(sqlite: sqlite, postgres: postgres)
    }

    /// One script in SQLite's SQL.
    public init(_ identifier: String, sql: String) {
        self.identifier = identifier
        step = .sqlite(sql)
    }

    /// One script in SQLite's SQL, then statements of its own.
    public init(_ identifier: String, sql: String, then body: @escaping @Sendable (any SQLConnection) throws -> Void) {
        self.identifier = identifier
        step = .sqliteThenCode(sql, body)
    }

    /// Statements of its own.
    public init(_ identifier: String, body: @escaping @Sendable (any SQLConnection) throws -> Void) {
        self.identifier = identifier
        step = .code(body)
    }
}

/// A database: transactions run their closure on the store's own thread (never on the caller's
/// Swift task), so a backend that waits for a server does not hold up the cooperative pool.
public protocol SQLStore: Sendable {
    var dialect: SQLDialect { get }

    /// A read-only transaction.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T
    /// A transaction committed when `body` returns and rolled back when it throws.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T

    /// Blocking forms, for callers on plain threads (a plugin's C ABI call), never on a Swift task.
    func readNow<T>(_ body: (any SQLConnection) throws -> T) throws -> T
    @discardableResult
    func writeNow<T>(_ body: (any SQLConnection) throws -> T) throws -> T

    /// Closes the database; later transactions fail.
    func close() throws
}
