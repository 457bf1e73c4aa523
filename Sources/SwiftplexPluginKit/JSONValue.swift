import Foundation

/// A JSON value: what crosses the plugin ABI (events, command responses, config) read into a
/// tree that can be walked with subscripts, and written back as compact RFC 8259 text.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Parses JSON text; a syntax error is a `PluginError` of the given code.
    /// (JSONSerialization, then a walk of its tree: about ten times faster than decoding the
    /// tree with JSONDecoder, which tries each type in turn at every value.)
    public static func parse(_ text: String, as code: PluginError.Code = .event) throws(PluginError) -> JSONValue {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            throw PluginError(code, "malformed JSON: \((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)")")
        }
        return JSONValue(foundation: object)
    }

    /// Converts what JSONSerialization returns.
    init(foundation value: Any) {
        // Cheapest checks first: casting a collection to NSNumber would bridge it.
        if let s = value as? String {
            self = .string(s)
        } else if let o = value as? [String: Any] {
            self = .object(o.mapValues(JSONValue.init(foundation:)))
        } else if let a = value as? [Any] {
            self = .array(a.map(JSONValue.init(foundation:)))
        } else if let n = value as? NSNumber {
            // JSON booleans come back as NSNumbers of ObjC type "c" (char); numbers never do.
            switch n.objCType.pointee {
            case CChar(UInt8(ascii: "c")): self = .bool(n.boolValue)
            case CChar(UInt8(ascii: "d")), CChar(UInt8(ascii: "f")): self = .double(n.doubleValue)
            // Integers above Int64.max come back unsigned ("Q"): as Int64 they would wrap to a
            // different, negative number, so they are doubles (as any larger number is).
            case CChar(UInt8(ascii: "Q")) where n.uint64Value > UInt64(Int64.max): self = .double(n.doubleValue)
            default: self = .int(n.int64Value)
            }
        } else {
            self = .null
        }
    }

    /// Decodes a `Decodable` value from this JSON tree.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(text.utf8))
    }

    /// Builds a JSON tree from an `Encodable` value.
    public static func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        let data = try JSONEncoder().encode(value)
        return try JSONDecoder().decode(JSONValue.self, from: data)
    }

    public subscript(key: String) -> JSONValue? {
        if case let .object(o) = self { return o[key] }
        return nil
    }

    public subscript(index: Int) -> JSONValue? {
        if case let .array(a) = self, a.indices.contains(index) { return a[index] }
        return nil
    }

    public var stringValue: String? { if case let .string(s) = self { s } else { nil } }
    public var boolValue: Bool? { if case let .bool(b) = self { b } else { nil } }
    public var arrayValue: [JSONValue]? { if case let .array(a) = self { a } else { nil } }
    public var objectValue: [String: JSONValue]? { if case let .object(o) = self { o } else { nil } }
    public var int64Value: Int64? {
        switch self {
        case let .int(i): i
        case let .double(d) where d == d.rounded() && abs(d) < 9e15: Int64(d)
        default: nil
        }
    }

    /// Compact JSON text with object keys sorted, so the same value always gives the same text.
    public var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .int(i): out += String(i)
        case let .double(d): out += d.isFinite ? "\(d)" : "null"
        case let .string(s): Self.writeString(s, to: &out)
        case let .array(a):
            out += "["
            for (i, v) in a.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case let .object(o):
            out += "{"
            for (i, key) in o.keys.sorted().enumerated() {
                if i > 0 { out += "," }
                Self.writeString(key, to: &out)
                out += ":"
                o[key]!.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ s: String, to out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20:
                out += "\\u" + String(repeating: "0", count: 4 - String(c.value, radix: 16).count) + String(c.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }

    /// A decoding error in one line, with the path of the offending value.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch error {
        case let .keyNotFound(key, ctx): return "\(path(ctx.codingPath + [key])): missing"
        case let .typeMismatch(type, ctx): return "\(path(ctx.codingPath)): expected \(typeName(type))"
        case let .valueNotFound(type, ctx): return "\(path(ctx.codingPath)): expected \(typeName(type)), got null"
        case let .dataCorrupted(ctx):
            let underlying = (ctx.underlyingError as NSError?)?.userInfo[NSDebugDescriptionErrorKey] as? String
            return "\(path(ctx.codingPath)): \(underlying ?? ctx.debugDescription)"
        @unknown default: return "\(error)"
        }
    }

    /// `rules[2].regex` from a coding path (`$` for the top level).
    static func path(_ keys: [any CodingKey]) -> String {
        var out = ""
        for key in keys {
            if let i = key.intValue { out += "[\(i)]" } else { out += out.isEmpty ? key.stringValue : ".\(key.stringValue)" }
        }
        return out.isEmpty ? "$" : out
    }

    static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type, is UInt64.Type: "an integer"
        case is Double.Type, is Float.Type: "a number"
        case is [Any].Type: "an array"
        case is [String: Any].Type: "an object"
        default: "\(type)"
        }
    }
}

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int64.self) { self = .int(i) }
        else if let d = try? c.decode(Double.self) { self = .double(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([JSONValue].self) { self = .array(a) }
        else { self = .object(try c.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case let .bool(b): try c.encode(b)
        case let .int(i): try c.encode(i)
        case let .double(d): try c.encode(d)
        case let .string(s): try c.encode(s)
        case let .array(a): try c.encode(a)
        case let .object(o): try c.encode(o)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}
