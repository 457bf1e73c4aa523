/// Any JSON value, for what the bot API leaves open: `customData`, the JSON of message content
/// this model does not know, profile fields it does not know. Integers and doubles stay apart.
///
/// This stands in until the foundation module's JSON value type can be used here; object keys
/// keep the order they were built in, and equality ignores that order.
public enum AnyJSON: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([AnyJSON])
    case object(JSONObject)

    public init(from decoder: any Decoder) throws {
        if let c = try? decoder.singleValueContainer() {
            if c.decodeNil() { self = .null; return }
            if let b = try? c.decode(Bool.self) { self = .bool(b); return }
            if let i = try? c.decode(Int64.self) { self = .int(i); return }
            if let d = try? c.decode(Double.self) { self = .double(d); return }
            if let s = try? c.decode(String.self) { self = .string(s); return }
        }
        if var a = try? decoder.unkeyedContainer() {
            var items: [AnyJSON] = []
            while !a.isAtEnd { items.append(try a.decode(AnyJSON.self)) }
            self = .array(items)
            return
        }
        self = .object(try JSONObject(from: decoder))
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null: var c = encoder.singleValueContainer(); try c.encodeNil()
        case let .bool(b): var c = encoder.singleValueContainer(); try c.encode(b)
        case let .int(i): var c = encoder.singleValueContainer(); try c.encode(i)
        case let .double(d): var c = encoder.singleValueContainer(); try c.encode(d)
        case let .string(s): var c = encoder.singleValueContainer(); try c.encode(s)
        case let .array(a): var c = encoder.unkeyedContainer(); for v in a { try c.encode(v) }
        case let .object(o): try o.encode(to: encoder)
        }
    }
}

/// A JSON object: fields in the order they were built (or decoded); equal to another with the
/// same fields in any order.
public struct JSONObject: Sendable, Hashable, Codable, ExpressibleByDictionaryLiteral {
    public var fields: [(key: String, value: AnyJSON)]

    public init(_ fields: [(key: String, value: AnyJSON)] = []) { self.fields = fields }
    public init(dictionaryLiteral elements: (String, AnyJSON)...) { fields = elements.map { (key: $0.0, value: $0.1) } }

    public subscript(key: String) -> AnyJSON? { fields.first { $0.key == key }?.value }
    public var isEmpty: Bool { fields.isEmpty }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        fields = try c.allKeys.map { (key: $0.stringValue, value: try c.decode(AnyJSON.self, forKey: $0)) }
    }

    init(_ c: KeyedDecodingContainer<FieldKey>, excluding known: Set<String>) throws {
        fields = try c.allKeys.filter { !known.contains($0.stringValue) }.map { (key: $0.stringValue, value: try c.decode(AnyJSON.self, forKey: $0)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        try encodeFields(into: &c)
    }

    func encodeFields(into c: inout KeyedEncodingContainer<FieldKey>) throws {
        for (k, v) in fields { try c.encode(v, forKey: FieldKey(k)) }
    }

    private var dictionary: [String: AnyJSON] { Dictionary(fields.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a }) }
    public static func == (l: JSONObject, r: JSONObject) -> Bool { l.fields.count == r.fields.count && l.dictionary == r.dictionary }
    public func hash(into h: inout Hasher) { h.combine(dictionary) }
}
