import Foundation

/// Any JSON value, keeping object key order as received, so that content the engine does not
/// interpret (unknown message content types, extra fields) passes through unchanged.
public enum JSONValue: Sendable, Hashable, Codable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    public subscript(key: String) -> JSONValue? {
        guard case let .object(pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }

    public var stringValue: String? { if case let .string(s) = self { s } else { nil } }
    public var intValue: Int? { if case let .number(n) = self, n == n.rounded(), abs(n) < 9e15 { Int(n) } else { nil } }
    public var boolValue: Bool? { if case let .bool(b) = self { b } else { nil } }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let n = try? c.decode(Double.self) { self = .number(n); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        let keyed = try decoder.container(keyedBy: AnyKey.self)
        var pairs: [(String, JSONValue)] = []
        for key in keyed.allKeys { pairs.append((key.stringValue, try keyed.decode(JSONValue.self, forKey: key))) }
        self = .object(pairs)
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null: var c = encoder.singleValueContainer(); try c.encodeNil()
        case let .bool(b): var c = encoder.singleValueContainer(); try c.encode(b)
        case let .number(n):
            var c = encoder.singleValueContainer()
            if let i = intValue { try c.encode(i) } else if n.isFinite { try c.encode(n) } else { try c.encodeNil() }
        case let .string(s): var c = encoder.singleValueContainer(); try c.encode(s)
        case let .array(a): var c = encoder.singleValueContainer(); try c.encode(a)
        case let .object(pairs):
            var c = encoder.container(keyedBy: AnyKey.self)
            for (k, v) in pairs { try c.encode(v, forKey: AnyKey(k)) }
        }
    }

    /// Compact JSON text with keys in their stored order.
    public var description: String {
        switch self {
        case .null: return "null"
        case let .bool(b): return b ? "true" : "false"
        // JSON has no infinity or NaN: a non-finite number (which `parse` never makes) is written as null.
        case let .number(n): return intValue.map(String.init) ?? (n.isFinite ? "\(n)" : "null")
        case let .string(s): return Self.quote(s)
        case let .array(a): return "[" + a.map(\.description).joined(separator: ",") + "]"
        case let .object(pairs): return "{" + pairs.map { Self.quote($0.0) + ":" + $0.1.description }.joined(separator: ",") + "}"
        }
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20: out += String(format: "\\u%04x", c.value)
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }

    /// Parses JSON text (preserving key order); throws on malformed input.
    public static func parse(_ text: String) throws -> JSONValue {
        var p = Parser(bytes: Array(text.utf8))
        let v = try p.value()
        p.skipSpace()
        guard p.i == p.bytes.count else { throw JSONError(.syntax, offset: p.i, reason: "trailing characters") }
        return v
    }

    public static func == (l: JSONValue, r: JSONValue) -> Bool {
        switch (l, r) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.number(a), .number(b)): a == b
        case let (.string(a), .string(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.object(a), .object(b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    public func hash(into h: inout Hasher) { h.combine(description) }
}

/// Malformed JSON: what is wrong and the byte offset where it was found.
public struct JSONError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable, Hashable {
        /// Not JSON's grammar (RFC 8259).
        case syntax
        /// A number too large for a double (`1e999`): JSON has no infinity.
        case nonFiniteNumber
        /// An object names the same key twice (readers disagree on which one wins).
        case duplicateKey
        /// Arrays and objects nested deeper than 128 levels.
        case tooDeep
    }

    public let kind: Kind
    public let offset: Int
    public let reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }

    init(_ kind: Kind, offset: Int, reason: String) {
        self.kind = kind
        self.offset = offset
        self.reason = reason
    }
}

struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ s: String) { stringValue = s }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

private struct Parser {
    let bytes: [UInt8]
    var i = 0
    var depth = 0

    mutating func skipSpace() {
        while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 }
    }

    mutating func fail(_ reason: String, _ kind: JSONError.Kind = .syntax) -> JSONError { JSONError(kind, offset: i, reason: reason) }

    mutating func value() throws -> JSONValue {
        skipSpace()
        guard i < bytes.count else { throw fail("unexpected end") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        default: return .number(try number())
        }
    }

    mutating func literal(_ word: String) throws {
        let w = Array(word.utf8)
        guard i + w.count <= bytes.count, Array(bytes[i..<i + w.count]) == w else { throw fail("expected \(word)") }
        i += w.count
    }

    mutating func nest() throws {
        depth += 1
        guard depth <= 128 else { throw fail("nested too deeply", .tooDeep) }
    }

    mutating func object() throws -> JSONValue {
        try nest(); defer { depth -= 1 }
        i += 1
        var pairs: [(String, JSONValue)] = []
        var keys = Set<String>()
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(pairs) }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let keyAt = i
            let k = try string()
            if !keys.insert(k).inserted { throw JSONError(.duplicateKey, offset: keyAt, reason: "duplicate key \(JSONValue.quote(k))") }
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected :") }
            i += 1
            pairs.append((k, try value()))
            skipSpace()
            guard i < bytes.count else { throw fail("unterminated object") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(pairs) }
            throw fail("expected , or }")
        }
    }

    mutating func array() throws -> JSONValue {
        try nest(); defer { depth -= 1 }
        i += 1
        var items: [JSONValue] = []
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
        while true {
            items.append(try value())
            skipSpace()
            guard i < bytes.count else { throw fail("unterminated array") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            throw fail("expected , or ]")
        }
    }

    mutating func string() throws -> String {
        i += 1
        var out: [UInt8] = []
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "\"") { i += 1; return String(decoding: out, as: UTF8.self) }
            if c < 0x20 { throw fail("control character in string") }
            if c == UInt8(ascii: "\\") {
                i += 1
                guard i < bytes.count else { break }
                switch bytes[i] {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard i + 2 < bytes.count, bytes[i + 1] == UInt8(ascii: "\\"), bytes[i + 2] == UInt8(ascii: "u") else { throw fail("lone surrogate") }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("bad surrogate pair") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("bad unicode escape") }
                    out.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw fail("bad escape")
                }
                i += 1
            } else {
                out.append(c)
                i += 1
            }
        }
        throw fail("unterminated string")
    }

    mutating func hex4() throws -> UInt32 {
        guard i + 4 < bytes.count, let v = UInt32(String(decoding: bytes[(i + 1)...(i + 4)], as: UTF8.self), radix: 16) else {
            throw fail("bad \\u escape")
        }
        i += 4
        return v
    }

    /// A number in JSON's grammar: `-`? (`0` | [1-9][0-9]*) (`.` [0-9]+)? ([eE] [+-]? [0-9]+)?, finite.
    mutating func number() throws -> Double {
        let start = i
        func digits() -> Int {
            let from = i
            while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1 }
            return i - from
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        let intStart = i
        guard digits() > 0 else { throw fail("bad number") }
        if bytes[intStart] == 0x30, i - intStart > 1 { i = intStart; throw fail("leading zero in a number") }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard digits() > 0 else { throw fail("digits expected after '.'") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { throw fail("digits expected in the exponent") }
        }
        guard let d = Double(String(decoding: bytes[start..<i], as: UTF8.self)) else { throw fail("bad number") }
        guard d.isFinite else { throw JSONError(.nonFiniteNumber, offset: start, reason: "number out of range") }
        return d
    }
}
