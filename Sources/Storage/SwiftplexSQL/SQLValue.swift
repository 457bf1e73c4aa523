import Foundation

/// A value bound to or read from a statement, the same on every backend: SQLite's storage classes,
/// which PostgreSQL's `bigint`, `double precision`, `text` and `bytea` carry as well.
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

/// A Swift type stored as one column.
public protocol SQLValueConvertible: Sendable {
    var sqlValue: SQLValue { get }
    /// Nil when the value is of another kind (or NULL).
    init?(sqlValue: SQLValue)
}

extension SQLValue: SQLValueConvertible {
    public var sqlValue: SQLValue { self }
    public init?(sqlValue: SQLValue) { self = sqlValue }
}

extension Int64: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(self) }
    public init?(sqlValue: SQLValue) {
        guard case let .integer(v) = sqlValue else { return nil }
        self = v
    }
}

extension Int: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(Int64(self)) }
    public init?(sqlValue: SQLValue) {
        guard case let .integer(v) = sqlValue, let i = Int(exactly: v) else { return nil }
        self = i
    }
}

extension Bool: SQLValueConvertible {
    public var sqlValue: SQLValue { .integer(self ? 1 : 0) }
    public init?(sqlValue: SQLValue) {
        guard case let .integer(v) = sqlValue else { return nil }
        self = v != 0
    }
}

extension Double: SQLValueConvertible {
    public var sqlValue: SQLValue { .real(self) }
    public init?(sqlValue: SQLValue) {
        switch sqlValue {
        case let .real(v): self = v
        case let .integer(v): self = Double(v)
        default: return nil
        }
    }
}

extension String: SQLValueConvertible {
    public var sqlValue: SQLValue { .text(self) }
    public init?(sqlValue: SQLValue) {
        guard case let .text(v) = sqlValue else { return nil }
        self = v
    }
}

extension Array: SQLValueConvertible where Element == UInt8 {
    public var sqlValue: SQLValue { .blob(self) }
    public init?(sqlValue: SQLValue) {
        guard case let .blob(v) = sqlValue else { return nil }
        self = v
    }
}

extension Data: SQLValueConvertible {
    public var sqlValue: SQLValue { .blob([UInt8](self)) }
    public init?(sqlValue: SQLValue) {
        guard case let .blob(v) = sqlValue else { return nil }
        self = Data(v)
    }
}

extension Optional: SQLValueConvertible where Wrapped: SQLValueConvertible {
    public var sqlValue: SQLValue { self?.sqlValue ?? .null }
    /// NULL is `.some(nil)`; a value of another kind is nil.
    public init?(sqlValue: SQLValue) {
        if case .null = sqlValue { self = .none; return }
        guard let v = Wrapped(sqlValue: sqlValue) else { return nil }
        self = .some(v)
    }
}
