/// `JSONValue` inside `Codable` types: with `JSONValueEncoder`/`JSONValueDecoder` it is taken as it
/// is (no round trip); with any other coder it goes through the ordinary containers.
extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        if let d = decoder as? _JSONValueDecoder { self = d.value; return }
        if let c = try? decoder.container(keyedBy: _JSONKey.self) {
            var pairs: [(String, JSONValue)] = []
            for key in c.allKeys { pairs.append((key.stringValue, try c.decode(JSONValue.self, forKey: key))) }
            self = .object(pairs)
            return
        }
        if var c = try? decoder.unkeyedContainer() {
            var items: [JSONValue] = []
            while !c.isAtEnd { items.append(try c.decode(JSONValue.self)) }
            self = .array(items)
            return
        }
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int64.self) { self = .int(i) }
        else if let d = try? c.decode(Double.self) { self = .double(d) }
        else { self = .string(try c.decode(String.self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        if let e = encoder as? _JSONValueEncoder { e.slot = .value(self); return }
        switch self {
        case .null: var c = encoder.singleValueContainer(); try c.encodeNil()
        case let .bool(b): var c = encoder.singleValueContainer(); try c.encode(b)
        case let .int(i): var c = encoder.singleValueContainer(); try c.encode(i)
        case let .double(d):
            var c = encoder.singleValueContainer()
            if d.isFinite { try c.encode(d) } else { try c.encodeNil() }
        case let .string(s): var c = encoder.singleValueContainer(); try c.encode(s)
        case let .array(a):
            var c = encoder.unkeyedContainer()
            for v in a { try c.encode(v) }
        case let .object(pairs):
            var c = encoder.container(keyedBy: _JSONKey.self)
            for (k, v) in pairs { try c.encode(v, forKey: _JSONKey(k)) }
        }
    }
}
