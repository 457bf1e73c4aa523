// Statements written out in SQL, with `?` placeholders: `db.execute(sql:arguments:)`,
// `Int64.fetchOne(db, sql:arguments:)`, `SQLRow.fetchAll(db, sql:arguments:)`, and statements
// prepared once per connection (`db.cachedStatement(sql:)`).

/// A statement's arguments, in placeholder order (`[userId, name]`; `nil` is NULL).
public struct StatementArguments: ExpressibleByArrayLiteral, Sendable {
    public var values: [SQLValue]

    public init(arrayLiteral elements: (any SQLValueConvertible)?...) {
        values = elements.map { $0?.sqlValue ?? .null }
    }

    public init(_ values: some Sequence<some SQLValueConvertible>) {
        self.values = values.map(\.sqlValue)
    }

    public init(values: [SQLValue]) { self.values = values }

    public static func + (lhs: Self, rhs: Self) -> Self { StatementArguments(values: lhs.values + rhs.values) }
}

/// A statement kept for reuse: every backend caches its prepared form by SQL text, so this only
/// names the text and the connection it runs on.
public struct SQLStatement {
    public let db: any SQLConnection
    public let sql: String

    /// Runs the statement; returns how many rows it inserted, changed or deleted.
    @discardableResult
    public func execute(arguments: StatementArguments = []) throws -> Int { try db.execute(sql, arguments.values) }
}

extension SQLConnection {
    public func cachedStatement(sql: String) throws -> SQLStatement { SQLStatement(db: self, sql: sql) }

    /// Runs one statement with arguments, or (without) a script of several separated by `;`.
    @discardableResult
    public func execute(sql: String, arguments: StatementArguments = []) throws -> Int {
        if arguments.values.isEmpty, Self.isScript(sql) {
            try executeScript(sql)
            return 0
        }
        return try execute(sql, arguments.values)
    }

    /// Runs an `INSERT` and returns the new row's `id` (`RETURNING id`).
    public func insert(sql: String, arguments: StatementArguments) throws -> Int64 {
        guard let row = try rows(sql + " RETURNING id", arguments.values).first else {
            throw SQLError(.statement, "the insert returned no row")
        }
        return try row.get(0, as: Int64.self)
    }

    /// More than one statement: a `;` with anything but white space after it.
    static func isScript(_ sql: String) -> Bool {
        guard let semicolon = sql.firstIndex(of: ";") else { return false }
        return sql[sql.index(after: semicolon)...].contains { !$0.isWhitespace }
    }
}

extension SQLValueConvertible {
    /// The first column of the first row; nil when there is no row or it holds NULL.
    public static func fetchOne(_ db: any SQLConnection, sql: String, arguments: StatementArguments = []) throws -> Self? {
        guard let row = try db.rows(sql, arguments.values).first else { return nil }
        return try row.get(0, as: Self?.self)
    }

    /// The first column of every row (rows holding NULL are an error, as a missing value would be).
    public static func fetchAll(_ db: any SQLConnection, sql: String, arguments: StatementArguments = []) throws -> [Self] {
        try db.rows(sql, arguments.values).map { try $0.get(0, as: Self.self) }
    }

    public static func fetchOne(_ statement: SQLStatement, arguments: StatementArguments = []) throws -> Self? {
        try fetchOne(statement.db, sql: statement.sql, arguments: arguments)
    }

    public static func fetchAll(_ statement: SQLStatement, arguments: StatementArguments = []) throws -> [Self] {
        try fetchAll(statement.db, sql: statement.sql, arguments: arguments)
    }
}

extension SQLRow {
    public static func fetchAll(_ db: any SQLConnection, sql: String, arguments: StatementArguments = []) throws -> [SQLRow] {
        try db.rows(sql, arguments.values)
    }

    public static func fetchOne(_ db: any SQLConnection, sql: String, arguments: StatementArguments = []) throws -> SQLRow? {
        try db.rows(sql, arguments.values).first
    }

    public static func fetchAll(_ statement: SQLStatement, arguments: StatementArguments = []) throws -> [SQLRow] {
        try fetchAll(statement.db, sql: statement.sql, arguments: arguments)
    }

    public static func fetchOne(_ statement: SQLStatement, arguments: StatementArguments = []) throws -> SQLRow? {
        try fetchOne(statement.db, sql: statement.sql, arguments: arguments)
    }

    /// The value of the column named `name`. The engine reads its own rows with the types it
    /// wrote; a missing column or another type is a programming error and stops the process,
    /// with the column's name.
    public subscript<T: SQLValueConvertible>(_ name: String) -> T {
        do { return try get(name, as: T.self) } catch { preconditionFailure("\(error)") }
    }

    /// The value of column `index` (see the subscript by name).
    public subscript<T: SQLValueConvertible>(_ index: Int) -> T {
        do { return try get(index, as: T.self) } catch { preconditionFailure("\(error)") }
    }
}
