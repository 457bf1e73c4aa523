/// Decodes any `Decodable` from a `JSONValue`, strictly: a value of another JSON type is a
/// `DecodingError.typeMismatch`, `null` where a value is required `valueNotFound`, a missing key
/// `keyNotFound`, each with the coding path. Numbers convert only without loss: an integer type
/// takes `.int` within its range, or a `.double` holding exactly an integer (`3.0`); `Double` takes
/// either (`.int` beyond 2^53 rounds); anything else is `dataCorrupted`.
public struct JSONValueDecoder {
    public init() {}

    public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        if T.self == JSONValue.self { return value as! T }
        return try T(from: _JSONValueDecoder(value: value, path: []))
    }
}

extension JSONValue {
    /// This value decoded as `T` with `JSONValueDecoder`.
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try JSONValueDecoder().decode(type, from: self)
    }
}

extension JSONValue {
    /// The JSON type's name, for error messages.
    var kindName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int: "an integer"
        case .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

final class _JSONValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(value: JSONValue, path: [any CodingKey]) {
        self.value = value
        self.codingPath = path
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case let .object(pairs) = value else {
            throw _JSONDecoding.mismatch([String: JSONValue].self, value, codingPath)
        }
        return KeyedDecodingContainer(_KeyedDecoding<Key>(pairs: pairs, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case let .array(items) = value else {
            throw _JSONDecoding.mismatch([JSONValue].self, value, codingPath)
        }
        return _UnkeyedDecoding(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        _SingleValueDecoding(value: value, codingPath: codingPath)
    }
}

/// The conversions every container shares.
enum _JSONDecoding {
    static func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: [any CodingKey]) -> DecodingError {
        if case .null = value {
            return .valueNotFound(type, .init(codingPath: path, debugDescription: "expected \(type), found null"))
        }
        return .typeMismatch(type, .init(codingPath: path, debugDescription: "expected \(type), found \(value.kindName)"))
    }

    @inline(__always) static func bool(_ v: JSONValue, _ path: [any CodingKey]) throws -> Bool {
        if case let .bool(b) = v { return b }
        throw mismatch(Bool.self, v, path)
    }

    @inline(__always) static func string(_ v: JSONValue, _ path: [any CodingKey]) throws -> String {
        if case let .string(s) = v { return s }
        throw mismatch(String.self, v, path)
    }

    static func double(_ v: JSONValue, _ path: [any CodingKey]) throws -> Double {
        switch v {
        case let .double(d): return d
        case let .int(i): return Double(i)
        default: throw mismatch(Double.self, v, path)
        }
    }

    static func float(_ v: JSONValue, _ path: [any CodingKey]) throws -> Float {
        let d = try double(v, path)
        let f = Float(d)
        guard f.isFinite else {
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "number \(d) does not fit in Float"))
        }
        return f
    }

    static func integer<T: FixedWidthInteger>(_ v: JSONValue, _ path: [any CodingKey]) throws -> T {
        switch v {
        case let .int(i):
            if let t = T(exactly: i) { return t }
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "number \(i) does not fit in \(T.self)"))
        case let .double(d):
            if let t = T(exactly: d) { return t }
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "number \(d) is not an integer that fits in \(T.self)"))
        default: throw mismatch(T.self, v, path)
        }
    }

    static func decode<T: Decodable>(_ type: T.Type, _ v: JSONValue, _ path: [any CodingKey]) throws -> T {
        if T.self == JSONValue.self { return v as! T }
        if T.self == String.self { return try string(v, path) as! T }
        if T.self == Int.self { return try (integer(v, path) as Int) as! T }
        if T.self == Int64.self { return try (integer(v, path) as Int64) as! T }
        if T.self == Bool.self { return try bool(v, path) as! T }
        if T.self == Double.self { return try double(v, path) as! T }
        return try T(from: _JSONValueDecoder(value: v, path: path))
    }
}

struct _KeyedDecoding<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let pairs: [(String, JSONValue)]
    let codingPath: [any CodingKey]
    /// For larger objects a key → index map, so decoding stays linear.
    let index: [String: Int]?

    init(pairs: [(String, JSONValue)], codingPath: [any CodingKey]) {
        self.pairs = pairs
        self.codingPath = codingPath
        if pairs.count > 12 {
            var index: [String: Int] = [:]
            index.reserveCapacity(pairs.count)
            for (i, pair) in pairs.enumerated() where index[pair.0] == nil { index[pair.0] = i }
            self.index = index
        } else {
            index = nil
        }
    }

    var allKeys: [Key] { pairs.compactMap { Key(stringValue: $0.0) } }

    @inline(__always) func find(_ key: Key) -> JSONValue? {
        let name = key.stringValue
        if let index { return index[name].map { pairs[$0].1 } }
        for (k, v) in pairs where k == name { return v }
        return nil
    }

    func contains(_ key: Key) -> Bool { find(key) != nil }

    func require(_ key: Key) throws -> JSONValue {
        guard let v = find(key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no value for key \"\(key.stringValue)\""))
        }
        return v
    }

    func path(_ key: Key) -> [any CodingKey] { codingPath + [key] }

    func decodeNil(forKey key: Key) throws -> Bool { try require(key).isNull }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try _JSONDecoding.bool(require(key), path(key)) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try _JSONDecoding.string(require(key), path(key)) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try _JSONDecoding.double(require(key), path(key)) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try _JSONDecoding.float(require(key), path(key)) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try _JSONDecoding.integer(require(key), path(key)) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try _JSONDecoding.integer(require(key), path(key)) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try _JSONDecoding.integer(require(key), path(key)) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try _JSONDecoding.integer(require(key), path(key)) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try _JSONDecoding.integer(require(key), path(key)) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try _JSONDecoding.integer(require(key), path(key)) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try _JSONDecoding.integer(require(key), path(key)) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try _JSONDecoding.integer(require(key), path(key)) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try _JSONDecoding.integer(require(key), path(key)) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try _JSONDecoding.integer(require(key), path(key)) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try _JSONDecoding.decode(type, require(key), path(key)) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try _JSONValueDecoder(value: require(key), path: path(key)).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try _JSONValueDecoder(value: require(key), path: path(key)).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        let key = _JSONKey.super
        return _JSONValueDecoder(value: pairs.first { $0.0 == key.stringValue }?.1 ?? .null, path: codingPath + [key])
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        _JSONValueDecoder(value: find(key) ?? .null, path: path(key))
    }
}

struct _UnkeyedDecoding: UnkeyedDecodingContainer {
    let items: [JSONValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0
    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    init(items: [JSONValue], codingPath: [any CodingKey]) {
        self.items = items
        self.codingPath = codingPath
    }

    private var path: [any CodingKey] { codingPath + [_JSONKey(intValue: currentIndex)] }

    private mutating func next(_ type: Any.Type) throws -> JSONValue {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: path, debugDescription: "unkeyed container is at its end"))
        }
        defer { currentIndex += 1 }
        return items[currentIndex]
    }

    /// Reads the next element with `read`, advancing only when it succeeds.
    private mutating func take<T>(_ type: T.Type, _ read: (JSONValue, [any CodingKey]) throws -> T) throws -> T {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(type, .init(codingPath: path, debugDescription: "unkeyed container is at its end"))
        }
        let v = try read(items[currentIndex], path)
        currentIndex += 1
        return v
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(Any?.self, .init(codingPath: path, debugDescription: "unkeyed container is at its end"))
        }
        if items[currentIndex].isNull { currentIndex += 1; return true }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try take(type, _JSONDecoding.bool) }
    mutating func decode(_ type: String.Type) throws -> String { try take(type, _JSONDecoding.string) }
    mutating func decode(_ type: Double.Type) throws -> Double { try take(type, _JSONDecoding.double) }
    mutating func decode(_ type: Float.Type) throws -> Float { try take(type, _JSONDecoding.float) }
    mutating func decode(_ type: Int.Type) throws -> Int { try take(type, _JSONDecoding.integer) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try take(type, _JSONDecoding.integer) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try take(type, _JSONDecoding.integer) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try take(type, _JSONDecoding.integer) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try take(type, _JSONDecoding.integer) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try take(type, _JSONDecoding.integer) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try take(type, _JSONDecoding.integer) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try take(type, _JSONDecoding.integer) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try take(type, _JSONDecoding.integer) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try take(type, _JSONDecoding.integer) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try take(type) { try _JSONDecoding.decode(type, $0, $1) } }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        let p = path
        return try _JSONValueDecoder(value: next(KeyedDecodingContainer<NestedKey>.self), path: p).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        let p = path
        return try _JSONValueDecoder(value: next([JSONValue].self), path: p).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder {
        let p = path
        return _JSONValueDecoder(value: try next(JSONValue.self), path: p)
    }
}

struct _SingleValueDecoding: SingleValueDecodingContainer {
    let value: JSONValue
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { value.isNull }
    func decode(_ type: Bool.Type) throws -> Bool { try _JSONDecoding.bool(value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try _JSONDecoding.string(value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try _JSONDecoding.double(value, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { try _JSONDecoding.float(value, codingPath) }
    func decode(_ type: Int.Type) throws -> Int { try _JSONDecoding.integer(value, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try _JSONDecoding.integer(value, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try _JSONDecoding.integer(value, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try _JSONDecoding.integer(value, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try _JSONDecoding.integer(value, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try _JSONDecoding.integer(value, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try _JSONDecoding.integer(value, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try _JSONDecoding.integer(value, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try _JSONDecoding.integer(value, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try _JSONDecoding.integer(value, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if T.self == JSONValue.self { return value as! T }
        return try T(from: _JSONValueDecoder(value: value, path: codingPath))
    }
}
