/// Encodes any `Encodable` into a `JSONValue`, keys in the order the type encodes them (for
/// synthesized conformances: the order of `CodingKeys`). `encodeIfPresent` with nil omits the key;
/// `encodeNil` writes `null`. Integers of every width become `.int`; `UInt64`/`UInt` above
/// `Int64.max`, and non-finite doubles, are refused with `EncodingError.invalidValue` (JSON here
/// carries no unsigned 64-bit integers and no infinity). A key encoded twice in one container
/// keeps its first position and takes the last value.
public struct JSONValueEncoder {
    public init() {}

    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        if T.self == JSONValue.self { return value as! JSONValue }
        let encoder = _JSONValueEncoder(parent: nil, key: nil)
        try value.encode(to: encoder)
        return encoder.slot?.value ?? .object([])
    }
}

extension JSONValue {
    /// `value` encoded with `JSONValueEncoder`.
    public init<T: Encodable>(encoding value: T) throws {
        self = try JSONValueEncoder().encode(value)
    }

    /// `value` encoded with `JSONValueEncoder`, as compact JSON text.
    public static func text<T: Encodable>(encoding value: T) throws -> String {
        try JSONValueEncoder().encode(value).text
    }
}

/// What an encoder or container has produced so far: a finished value or a container still being
/// filled (containers are references so that nested containers and super encoders can fill them
/// after they have been placed).
enum _EncodingSlot {
    case value(JSONValue)
    case object(_ObjectBox)
    case array(_ArrayBox)
    case encoder(_JSONValueEncoder)

    var value: JSONValue {
        switch self {
        case let .value(v): return v
        case let .object(box): return box.value
        case let .array(box): return box.value
        case let .encoder(e): return e.slot?.value ?? .object([])
        }
    }
}

/// An object being filled (by one encode, on one thread: its fields skip the exclusivity checks). Members hold their values as they are encoded; only a member whose
/// value is a container or encoder handed out (a nested container, a super encoder) is read when
/// the object is finished, so that one filled later still counts.
final class _ObjectBox {
    @exclusivity(unchecked) var pairs: [(String, JSONValue)] = []
    @exclusivity(unchecked) var pending: [(String, _JSONValueEncoder)] = []

    init() { pairs.reserveCapacity(8) }

    @inline(__always) func set(_ key: String, _ value: JSONValue) {
        // Keys are few; a repeated key replaces its value in place rather than writing it twice.
        for i in pairs.indices.reversed() where pairs[i].0 == key {
            pairs[i].1 = value
            if !pending.isEmpty { pending.removeAll { $0.0 == key } }
            return
        }
        pairs.append((key, value))
    }

    func set(_ key: String, deferred encoder: _JSONValueEncoder) {
        set(key, .null)  // its place, filled when the object is finished
        pending.append((key, encoder))
    }

    var value: JSONValue {
        guard !pending.isEmpty else { return .object(pairs) }
        var out = pairs
        for (key, encoder) in pending {
            if let i = out.firstIndex(where: { $0.0 == key }) { out[i].1 = encoder.slot?.value ?? .object([]) }
        }
        return .object(out)
    }
}

/// An array being filled; as ``_ObjectBox``, elements handed out as containers are read at the end.
final class _ArrayBox {
    @exclusivity(unchecked) var items: [JSONValue] = []
    @exclusivity(unchecked) var pending: [(Int, _JSONValueEncoder)] = []

    func append(deferred encoder: _JSONValueEncoder) {
        pending.append((items.count, encoder))
        items.append(.null)
    }

    var value: JSONValue {
        guard !pending.isEmpty else { return .array(items) }
        var out = items
        for (i, encoder) in pending { out[i] = encoder.slot?.value ?? .object([]) }
        return .array(out)
    }
}

/// The key of an array element or of `super` in a coding path.
struct _JSONKey: CodingKey {
    private let name: String?
    var intValue: Int?
    /// An element's key is named only when asked (in a coding path): not for every element written.
    var stringValue: String { name ?? "Index \(intValue ?? 0)" }
    init(stringValue: String) { name = stringValue; intValue = nil }
    init(intValue: Int) { name = nil; self.intValue = intValue }
    init(_ string: String) { name = string; intValue = nil }
    static let `super` = _JSONKey("super")
}

final class _JSONValueEncoder: Encoder {
    let parent: _JSONValueEncoder?
    let key: (any CodingKey)?
    @exclusivity(unchecked) var slot: _EncodingSlot?

    init(parent: _JSONValueEncoder?, key: (any CodingKey)?) {
        self.parent = parent
        self.key = key
    }

    /// Built on demand: most encodes never ask for it.
    var codingPath: [any CodingKey] {
        var path: [any CodingKey] = []
        var e: _JSONValueEncoder? = self
        while let current = e, let key = current.key {
            path.append(key)
            e = current.parent
        }
        return path.reversed()
    }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: _ObjectBox
        if case let .object(existing)? = slot {
            box = existing
        } else {
            box = _ObjectBox()
            slot = .object(box)
        }
        return KeyedEncodingContainer(_KeyedEncoding<Key>(encoder: self, box: box))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let box: _ArrayBox
        if case let .array(existing)? = slot {
            box = existing
        } else {
            box = _ArrayBox()
            slot = .array(box)
        }
        return _UnkeyedEncoding(encoder: self, box: box)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { _SingleValueEncoding(encoder: self) }

    /// `value` as JSON: primitives directly, anything else through a child encoder, read as soon
    /// as the value has encoded itself.
    @inline(__always) func box<T: Encodable>(_ value: T, key: any CodingKey) throws -> JSONValue {
        // Elements of arrays and optionals' contents arrive here generically: no child encoder for them.
        if T.self == String.self { return .string(value as! String) }
        if T.self == Int.self { return .int(Int64(value as! Int)) }
        if T.self == Int64.self { return .int(value as! Int64) }
        if T.self == Bool.self { return .bool(value as! Bool) }
        if T.self == Double.self { return try checked(value as! Double, key: key) }
        if T.self == JSONValue.self { return value as! JSONValue }
        let child = _JSONValueEncoder(parent: self, key: key)
        try value.encode(to: child)
        return child.slot?.value ?? .object([])
    }

    func checked(_ value: UInt64, key: (any CodingKey)?) throws -> JSONValue {
        guard let i = Int64(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath + (key.map { [$0] } ?? []),
                                                          debugDescription: "\(value) is beyond Int64, which JSON here cannot carry exactly"))
        }
        return .int(i)
    }

    func checked(_ value: Double, key: (any CodingKey)?) throws -> JSONValue {
        guard value.isFinite else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath + (key.map { [$0] } ?? []),
                                                          debugDescription: "JSON has no infinity or NaN"))
        }
        return .double(value)
    }

    func checked(_ value: Float, key: (any CodingKey)?) throws -> JSONValue {
        // Through the float's own shortest text, so 0.1 as Float writes 0.1, not 0.10000000149011612.
        try checked(Double(value.description) ?? Double(value), key: key)
    }
}

struct _KeyedEncoding<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: _JSONValueEncoder
    let box: _ObjectBox
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil(forKey key: Key) throws { box.set(key.stringValue, .null) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { box.set(key.stringValue, .bool(value)) }
    mutating func encode(_ value: String, forKey key: Key) throws { box.set(key.stringValue, .string(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws { box.set(key.stringValue, try encoder.checked(value, key: key)) }
    mutating func encode(_ value: Float, forKey key: Key) throws { box.set(key.stringValue, try encoder.checked(value, key: key)) }
    mutating func encode(_ value: Int, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { box.set(key.stringValue, .int(value)) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { box.set(key.stringValue, try encoder.checked(UInt64(value), key: key)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { box.set(key.stringValue, .int(Int64(value))) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { box.set(key.stringValue, try encoder.checked(value, key: key)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { box.set(key.stringValue, try encoder.box(value, key: key)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let child = _JSONValueEncoder(parent: encoder, key: key)
        box.set(key.stringValue, deferred: child)
        return child.container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let child = _JSONValueEncoder(parent: encoder, key: key)
        box.set(key.stringValue, deferred: child)
        return child.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let child = _JSONValueEncoder(parent: encoder, key: _JSONKey.super)
        box.set("super", deferred: child)
        return child
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        let child = _JSONValueEncoder(parent: encoder, key: key)
        box.set(key.stringValue, deferred: child)
        return child
    }
}

struct _UnkeyedEncoding: UnkeyedEncodingContainer {
    let encoder: _JSONValueEncoder
    let box: _ArrayBox
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { box.items.count }
    private var nextKey: _JSONKey { _JSONKey(intValue: box.items.count) }

    init(encoder: _JSONValueEncoder, box: _ArrayBox) {
        self.encoder = encoder
        self.box = box
    }

    mutating func encodeNil() throws { box.items.append(.null) }
    mutating func encode(_ value: Bool) throws { box.items.append(.bool(value)) }
    mutating func encode(_ value: String) throws { box.items.append(.string(value)) }
    mutating func encode(_ value: Double) throws { box.items.append(try encoder.checked(value, key: nextKey)) }
    mutating func encode(_ value: Float) throws { box.items.append(try encoder.checked(value, key: nextKey)) }
    mutating func encode(_ value: Int) throws { box.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { box.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { box.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { box.items.append(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { box.items.append(.int(value)) }
    mutating func encode(_ value: UInt) throws { box.items.append(try encoder.checked(UInt64(value), key: nextKey)) }
    mutating func encode(_ value: UInt8) throws { box.items.append(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { box.items.append(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { box.items.append(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { box.items.append(try encoder.checked(value, key: nextKey)) }
    mutating func encode<T: Encodable>(_ value: T) throws { box.items.append(try encoder.box(value, key: nextKey)) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let child = _JSONValueEncoder(parent: encoder, key: nextKey)
        box.append(deferred: child)
        return child.container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let child = _JSONValueEncoder(parent: encoder, key: nextKey)
        box.append(deferred: child)
        return child.unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder {
        let child = _JSONValueEncoder(parent: encoder, key: nextKey)
        box.append(deferred: child)
        return child
    }
}

struct _SingleValueEncoding: SingleValueEncodingContainer {
    let encoder: _JSONValueEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func put(_ v: JSONValue) { encoder.slot = .value(v) }

    mutating func encodeNil() throws { put(.null) }
    mutating func encode(_ value: Bool) throws { put(.bool(value)) }
    mutating func encode(_ value: String) throws { put(.string(value)) }
    mutating func encode(_ value: Double) throws { put(try encoder.checked(value, key: nil)) }
    mutating func encode(_ value: Float) throws { put(try encoder.checked(value, key: nil)) }
    mutating func encode(_ value: Int) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: Int8) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: Int16) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: Int32) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: Int64) throws { put(.int(value)) }
    mutating func encode(_ value: UInt) throws { put(try encoder.checked(UInt64(value), key: nil)) }
    mutating func encode(_ value: UInt8) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: UInt16) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: UInt32) throws { put(.int(Int64(value))) }
    mutating func encode(_ value: UInt64) throws { put(try encoder.checked(value, key: nil)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        if T.self == JSONValue.self { put(value as! JSONValue); return }
        // The value encodes itself into this same encoder (as a wrapper type's single value does).
        try value.encode(to: encoder)
    }
}
