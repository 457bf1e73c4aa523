// A small query interface over `SQLConnection`, with the names the engine's code was written
// against (GRDB's): `Column`, `filter`, `order`, `limit`, `fetchOne`, `updateAll`, …. Each request
// becomes one statement with `?` placeholders, which every backend takes, so the same code runs on
// SQLite and PostgreSQL. Identifiers are quoted (`"user"` is a keyword in PostgreSQL).

/// An identifier quoted for SQL (`"name"`, inner quotes doubled).
public func quoted(_ identifier: String) -> String {
    identifier.contains("\"") ? "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : "\"" + identifier + "\""
}

/// A fragment of SQL with its arguments, in order.
public struct SQLExpression: Sendable {
    public let sql: String
    public let arguments: [SQLValue]

    public init(sql: String, arguments: [SQLValue] = []) {
        self.sql = sql
        self.arguments = arguments
    }

    /// A value bound as an argument.
    public static func value(_ v: SQLValue) -> SQLExpression { SQLExpression(sql: "?", arguments: [v]) }
}

/// Anything that can stand where an SQL expression can: a column, a value, a condition.
public protocol SQLExpressible: Sendable {
    var sqlExpression: SQLExpression { get }
}

extension SQLExpression: SQLExpressible {
    public var sqlExpression: SQLExpression { self }
}

/// A column of a table, by name.
public struct Column: SQLExpressible, Hashable {
    public let name: String

    public init(_ name: String) { self.name = name }

    public var sqlExpression: SQLExpression { SQLExpression(sql: quoted(name)) }

    public var asc: SQLOrdering { SQLOrdering(sql: quoted(name) + " ASC") }
    public var desc: SQLOrdering { SQLOrdering(sql: quoted(name) + " DESC") }

    /// `column = value` in an `updateAll`.
    public func set(to value: some SQLValueConvertible) -> ColumnAssignment {
        ColumnAssignment(column: name, value: .value(value.sqlValue))
    }

    /// `column = NULL` in an `updateAll` (for a `nil` literal).
    public func set(to _: _OptionalNilComparisonType) -> ColumnAssignment {
        ColumnAssignment(column: name, value: .value(.null))
    }
}

/// One `column = value` of an `UPDATE`.
public struct ColumnAssignment: Sendable {
    public let column: String
    public let value: SQLExpression
}

/// One term of an `ORDER BY`.
public struct SQLOrdering: Sendable {
    public let sql: String
}

/// A column (or expression) alone in `order(…)` sorts ascending.
public protocol SQLOrderingTerm: Sendable {
    var orderingSQL: String { get }
}

extension SQLOrdering: SQLOrderingTerm {
    public var orderingSQL: String { sql }
}

extension Column: SQLOrderingTerm {
    public var orderingSQL: String { quoted(name) }
}

// MARK: - Operators

private func binary(_ lhs: SQLExpression, _ op: String, _ rhs: SQLExpression) -> SQLExpression {
    SQLExpression(sql: "(" + lhs.sql + " " + op + " " + rhs.sql + ")", arguments: lhs.arguments + rhs.arguments)
}

private func comparison(_ lhs: some SQLExpressible, _ op: String, _ value: SQLValue) -> SQLExpression {
    if case .null = value {
        switch op {
        case "=": return SQLExpression(sql: "(" + lhs.sqlExpression.sql + " IS NULL)", arguments: lhs.sqlExpression.arguments)
        case "<>": return SQLExpression(sql: "(" + lhs.sqlExpression.sql + " IS NOT NULL)", arguments: lhs.sqlExpression.arguments)
        default: break
        }
    }
    return binary(lhs.sqlExpression, op, .value(value))
}

public func == (lhs: Column, rhs: some SQLValueConvertible) -> SQLExpression { comparison(lhs, "=", rhs.sqlValue) }
public func != (lhs: Column, rhs: some SQLValueConvertible) -> SQLExpression { comparison(lhs, "<>", rhs.sqlValue) }
public func < (lhs: Column, rhs: some SQLValueConvertible) -> SQLExpression { comparison(lhs, "<", rhs.sqlValue) }
public func <= (lhs: Column, rhs: some SQLValueConvertible) -> SQLExpression { comparison(lhs, "<=", rhs.sqlValue) }
public func > (lhs: Column, rhs: some SQLValueConvertible) -> SQLExpression { comparison(lhs, ">", rhs.sqlValue) }
public func >= (lhs: Column, rhs: some SQLValueConvertible) -> SQLExpression { comparison(lhs, ">=", rhs.sqlValue) }
public func == (lhs: Column, _: _OptionalNilComparisonType) -> SQLExpression { comparison(lhs, "=", .null) }
public func != (lhs: Column, _: _OptionalNilComparisonType) -> SQLExpression { comparison(lhs, "<>", .null) }
public func == (lhs: Column, rhs: Column) -> SQLExpression { binary(lhs.sqlExpression, "=", rhs.sqlExpression) }
public func != (lhs: Column, rhs: Column) -> SQLExpression { binary(lhs.sqlExpression, "<>", rhs.sqlExpression) }

public func && (lhs: SQLExpression, rhs: SQLExpression) -> SQLExpression { binary(lhs, "AND", rhs) }
public func || (lhs: SQLExpression, rhs: SQLExpression) -> SQLExpression { binary(lhs, "OR", rhs) }
public prefix func ! (operand: SQLExpression) -> SQLExpression {
    SQLExpression(sql: "(NOT " + operand.sql + ")", arguments: operand.arguments)
}

extension Sequence where Element: SQLValueConvertible {
    /// `column IN (…)`; an empty sequence is a condition no row meets.
    public func contains(_ column: Column) -> SQLExpression {
        let values = map(\.sqlValue)
        guard !values.isEmpty else { return SQLExpression(sql: "(1 = 0)") }
        let marks = Array(repeating: "?", count: values.count).joined(separator: ", ")
        return SQLExpression(sql: "(" + quoted(column.name) + " IN (" + marks + "))", arguments: values)
    }
}

// MARK: - Aggregates

/// `min(column)` in a `select`.
public func min(_ column: Column) -> SQLExpression { SQLExpression(sql: "min(" + quoted(column.name) + ")") }
/// `max(column)` in a `select`.
public func max(_ column: Column) -> SQLExpression { SQLExpression(sql: "max(" + quoted(column.name) + ")") }
