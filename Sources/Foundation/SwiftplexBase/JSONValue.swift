/// Any JSON value. Object keys keep their order (as read, or as written by the code or by a
/// type's `CodingKeys`), and integers stay apart from doubles: an integer literal that fits
/// `Int64` is `.int` (so `9007199254740993` comes back exactly), every other number — one with a
/// fraction or an exponent (`1.0`, `1e3`) or an integer beyond `Int64` — is `.double`, and each
/// is written back the way it was read (`1.0` stays `1.0`).
///
/// Equality follows JSON's meaning: objects compare by their key set whatever the order, and an
/// integer equals a double of exactly the same value (`1 == 1.0`).
///
/// This file is also compiled into the plugin SDK (a symlink in `SwiftplexPluginKit/Base`): plugins
/// link their own copy, so nothing here may depend on another module.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    // MARK: Reading

    /// The value under `key` of an object (the first, though `parse` refuses duplicates); nil otherwise.
    public subscript(key: String) -> JSONValue? {
        guard case let .object(pairs) = self else { return nil }
        for (k, v) in pairs where k == key { return v }
        return nil
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    public subscript(index: Int) -> JSONValue? {
        if case let .array(a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    public var stringValue: String? { if case let .string(s) = self { s } else { nil } }
    public var boolValue: Bool? { if case let .bool(b) = self { b } else { nil } }
    public var arrayValue: [JSONValue]? { if case let .array(a) = self { a } else { nil } }
    /// An object's pairs, in order.
    public var objectValue: [(String, JSONValue)]? { if case let .object(o) = self { o } else { nil } }
    public var isNull: Bool { if case .null = self { true } else { false } }

    /// An integer, or a double holding exactly an integer within `Int64` (`3.0`); nil otherwise.
    public var int64Value: Int64? {
        switch self {
        case let .int(i): i
        case let .double(d): Int64(exactly: d)
        default: nil
        }
    }

    /// `int64Value` as an `Int`.
    public var intValue: Int? { int64Value.flatMap { Int(exactly: $0) } }

    /// Any number as a double (an integer beyond 2^53 rounds).
    public var doubleValue: Double? {
        switch self {
        case let .int(i): Double(i)
        case let .double(d): d
        default: nil
        }
    }

    // MARK: Changing

    /// Sets `key` of an object (replacing its value in place, or appending it); no effect on other values.
    public mutating func set(_ key: String, _ value: JSONValue) {
        guard case var .object(pairs) = self else { return }
        self = .null
        if let i = pairs.firstIndex(where: { $0.0 == key }) { pairs[i].1 = value } else { pairs.append((key, value)) }
        self = .object(pairs)
    }

    /// Removes `key` from an object; no effect on other values.
    public mutating func remove(_ key: String) {
        guard case var .object(pairs) = self else { return }
        self = .null
        pairs.removeAll { $0.0 == key }
        self = .object(pairs)
    }
}

extension JSONValue: Hashable {
    public static func == (l: JSONValue, r: JSONValue) -> Bool {
        switch (l, r) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Int64(exactly: b) == a
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            guard a.count == b.count else { return false }
            // Same order (the usual case) compares pairwise; otherwise by key.
            if zip(a, b).allSatisfy({ $0.0 == $1.0 && $0.1 == $1.1 }) { return true }
            return a.allSatisfy { pair in b.contains { $0.0 == pair.0 && $0.1 == pair.1 } }
        default: return false
        }
    }

    public func hash(into h: inout Hasher) {
        switch self {
        case .null: h.combine(0 as UInt8)
        case let .bool(b): h.combine(b)
        // Numbers hash as a double when the integer converts exactly, so that `1` and `1.0` agree.
        case let .int(i):
            if let d = Double(exactly: i) { h.combine(d) } else { h.combine(i) }
        case let .double(d): h.combine(d)
        case let .string(s): h.combine(s)
        case let .array(a): h.combine(a)
        case let .object(pairs):
            // Order-independent, as equality is.
            var sum = 0
            for (k, v) in pairs {
                var one = Hasher()
                one.combine(k)
                one.combine(v)
                sum &+= one.finalize()
            }
            h.combine(pairs.count)
            h.combine(sum)
        }
    }
}

extension JSONValue: CustomStringConvertible {
    /// Compact JSON text (RFC 8259), keys in their stored order.
    public var description: String { JSONWriter.text(self) }
    /// Compact JSON text (RFC 8259), keys in their stored order; the same as `description`.
    public var text: String { JSONWriter.text(self) }
}

// Not ExpressibleByNilLiteral: `cond ? value : nil` would then quietly make a JSON null instead
// of an Optional. Write `.null`.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// Keys in the order written.
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(elements) }
}
