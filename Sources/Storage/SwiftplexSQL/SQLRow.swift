import SwiftplexBase
import Synchronization

/// One result row: its values in column order, and the statement's column names (shared by every
/// row of one result).
public struct SQLRow: Sendable {
    public let columns: SQLColumns
    public let values: [SQLValue]

    public init(columns: SQLColumns, values: [SQLValue]) {
        precondition(columns.names.count == values.count, "a row has one value per column")
        self.columns = columns
        self.values = values
    }

    /// The value of column `index` as `T`; throws when it is NULL or of another kind.
    public func get<T: SQLValueConvertible>(_ index: Int, as _: T.Type = T.self) throws -> T {
        guard values.indices.contains(index) else { throw SQLError(.column, "no column \(index) in a row of \(values.count)") }
        guard let v = T(sqlValue: values[index]) else {
            throw SQLError(.column, "column \(columns.names[index]) holds \(values[index].kindName), not \(T.self)")
        }
        return v
    }

    /// The value of the column named `name` as `T`; throws when there is no such column, or it
    /// holds another kind (ask for an Optional to accept NULL).
    public func get<T: SQLValueConvertible>(_ name: String, as _: T.Type = T.self) throws -> T {
        guard let i = columns.index(of: name) else { throw SQLError(.column, "no column \(name) (\(columns.names.joined(separator: ", ")))") }
        return try get(i, as: T.self)
    }
}

/// Column names with a lookup by name, made once per statement.
public final class SQLColumns: Sendable {
    public let names: [String]
    private let byName: [String: Int]
    /// Per record type, its coding keys' positions among these columns (-1: none), learnt as
    /// rows are decoded (`RowDecoder`).
    private let keys = Mutex<[ObjectIdentifier: [String: Int]]>([:])

    public init(_ names: [String]) {
        self.names = names
        var byName: [String: Int] = [:]
        // The first of two equal names wins, as in SQLite's and PostgreSQL's own lookups.
        for (i, n) in names.enumerated() where byName[n] == nil { byName[n] = i }
        self.byName = byName
    }

    public func index(of name: String) -> Int? { byName[name] }

    func keyPositions(_ record: ObjectIdentifier) -> [String: Int] { keys.withLock { $0[record] ?? [:] } }

    func remember(_ key: String, position: Int?, for record: ObjectIdentifier) {
        keys.withLock { $0[record, default: [:]][key] = position ?? -1 }
    }
}

extension SQLValue {
    var kindName: String {
        switch self {
        case .null: "NULL"
        case .integer: "an integer"
        case .real: "a real"
        case .text: "text"
        case .blob: "a blob"
        }
    }
}

/// A failure of the SQL layer, with the backend's message.
public struct SQLError: CodedError {
    public enum Code: String, Sendable {
        /// A column missing, or of another kind than asked.
        case column
        /// The backend refused a statement (syntax, constraint, …).
        case statement
        /// The database could not be opened, or the connection to it was lost.
        case connection
        /// A migration failed or the database is newer than this program.
        case migration
        /// Another process holds the database.
        case locked
        /// A fault that goes away by itself: the disk full, an I/O error, the database busy or
        /// read-only for a while. The work is to be retried, not dropped.
        case transient
    }

    /// The work that failed can succeed later: a transient fault, or the connection to the
    /// server lost (the next transaction reconnects).
    public var isTransient: Bool { code == .transient || code == .connection }

    public let code: Code
    public let message: String
    /// The backend's own code for the failure (SQLite's result code, PostgreSQL's SQLSTATE), when it gave one.
    public let backendCode: String?

    public init(_ code: Code, _ message: String, backendCode: String? = nil) {
        self.code = code
        self.message = message
        self.backendCode = backendCode
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
