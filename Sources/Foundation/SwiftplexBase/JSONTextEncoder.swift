/// Encodes any `Encodable` straight to compact JSON text (UTF-8), without building a `JSONValue`
/// first: the bytes are exactly `JSONWriter.bytes(try JSONValueEncoder().encode(value))`, written
/// as the type encodes itself.
///
/// Writing as it goes needs the type to encode each key of an object once and to fill a nested
/// container before its parent moves on, as synthesized and ordinary hand-written conformances do.
/// A value that does otherwise (a key encoded twice, a nested container filled late, a container
/// of another kind asked of the same encoder, a super encoder) is noticed, and that value is
/// written through `JSONValueEncoder` instead — so the text is the same either way. A value the
/// tree encoder refuses (a non-finite double, an unsigned integer beyond `Int64`) is refused with
/// its error.
public struct JSONTextEncoder {
    public init() {}

    /// `value` as compact JSON, UTF-8.
    public func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        try encode(value, into: &out)
        return out
    }

    /// Appends `value` as compact JSON to `out`.
    public func encode<T: Encodable>(_ value: T, into out: inout [UInt8]) throws {
        if T.self == JSONValue.self { JSONWriter.write(value as! JSONValue, to: &out); return }
        let writer = _TextWriter()
        swap(&writer.bytes, &out)
        let start = writer.bytes.count
        var fellBack = false
        do {
            try writer.root.write(value)
            if writer.unsupported { fellBack = true }
        } catch {
            fellBack = true
        }
        if fellBack {
            writer.bytes.removeSubrange(start...)
            // The tree encoder's text, or its error.
            let tree = try JSONValueEncoder().encode(value)
            JSONWriter.write(tree, to: &writer.bytes)
        }
        swap(&writer.bytes, &out)
    }
}

/// Thrown inside the text encoder when the value uses the coding API in a way that cannot be
/// written in order; `JSONTextEncoder` then writes it through the tree encoder.
struct _OutOfOrder: Error {}

/// The bytes being written and the stack of containers still open. Only one encode uses a
/// writer, on one thread, and no access to its state overlaps another: the exclusivity checks are
/// off for its hot fields.
final class _TextWriter {
    @exclusivity(unchecked) var bytes: [UInt8] = []
    /// Keys written in the objects still open, innermost last (each level knows where its own start).
    @exclusivity(unchecked) var keys: [String] = []
    /// The innermost level still open.
    @exclusivity(unchecked) var top: _TextLevel!
    /// Set when a value used the coding API out of order: the text is discarded.
    @exclusivity(unchecked) var unsupported = false
    var root: _TextLevel!

    init() {
        keys.reserveCapacity(32)
        root = _TextLevel(writer: self, parent: nil, key: .root, nested: false)
        top = root
    }

    @inline(__always) func append(_ s: StaticString) { JSONWriter.append(s, to: &bytes) }
}

/// Where a level sits in its parent, for `codingPath` (built only when asked).
enum _TextPathKey {
    case root
    case key(any CodingKey)
    case index(Int)
    case superKey
}

/// One JSON value being written: an encoder for a value's `encode(to:)`, or a nested container.
final class _TextLevel: Encoder {
    enum State { case empty, object, array, value, closed }

    unowned(unsafe) let writer: _TextWriter
    let parent: _TextLevel?
    let pathKey: _TextPathKey
    /// A nested container (closed when its parent writes on); otherwise a value being encoded by `write`.
    let nested: Bool
    @exclusivity(unchecked) var state: State = .empty
    @exclusivity(unchecked) var count = 0
    @exclusivity(unchecked) var keyStart = 0

    init(writer: _TextWriter, parent: _TextLevel?, key: _TextPathKey, nested: Bool) {
        self.writer = writer
        self.parent = parent
        self.pathKey = key
        self.nested = nested
    }

    var codingPath: [any CodingKey] {
        var path: [any CodingKey] = []
        var l: _TextLevel? = self
        while let current = l {
            switch current.pathKey {
            case .root: break
            case let .key(k): path.append(k)
            case let .index(i): path.append(_JSONKey(intValue: i))
            case .superKey: path.append(_JSONKey.super)
            }
            l = current.parent
        }
        return path.reversed()
    }

    var userInfo: [CodingUserInfoKey: Any] { [:] }

    // MARK: Order

    /// Makes this level the one being written: nested containers opened inside it are closed
    /// first. False (and the writer marked) when this level is closed or a value is still being
    /// encoded above it.
    @inline(__always) func prepare() -> Bool {
        if writer.top === self, state != .closed { return true }
        return slowPrepare()
    }

    private func slowPrepare() -> Bool {
        guard state != .closed else { writer.unsupported = true; return false }
        while writer.top !== self {
            let t = writer.top!
            guard t.nested, t !== writer.root else { writer.unsupported = true; return false }
            t.close()
        }
        return true
    }

    /// Closes this level: its open nested containers first, then its own bracket (`{}` when
    /// nothing was encoded, as the tree encoder gives).
    func close() {
        while writer.top !== self, let t = writer.top, t.nested { t.close() }
        switch state {
        case .empty: writer.append("{}")
        case .object:
            writer.bytes.append(UInt8(ascii: "}"))
            writer.keys.removeSubrange(keyStart...)
        case .array: writer.bytes.append(UInt8(ascii: "]"))
        case .value, .closed: break
        }
        state = .closed
        if writer.top === self { writer.top = parent }
    }

    /// Starts the next member of this object: `,` and the key. Throws when out of order or when
    /// the key was written already.
    @inline(__always) func key(_ key: String) throws {
        guard prepare(), state == .object else { throw fail() }
        for i in writer.keys.indices[keyStart...] where writer.keys[i] == key { throw fail() }
        writer.keys.append(key)
        if count > 0 { writer.bytes.append(UInt8(ascii: ",")) }
        count += 1
        JSONWriter.writeString(key, to: &writer.bytes)
        writer.bytes.append(UInt8(ascii: ":"))
    }

    /// Starts the next element of this array.
    @inline(__always) func element() throws {
        guard prepare(), state == .array else { throw fail() }
        if count > 0 { writer.bytes.append(UInt8(ascii: ",")) }
        count += 1
    }

    /// Starts this level's single value.
    @inline(__always) func single() throws {
        guard prepare(), state == .empty else { throw fail() }
        state = .value
    }

    func fail() -> _OutOfOrder {
        writer.unsupported = true
        return _OutOfOrder()
    }

    // MARK: Values

    /// Writes `value` as the value this level holds next (after its key or comma).
    @inline(__always) func write<T: Encodable>(_ value: T, key: _TextPathKey = .root) throws {
        if T.self == String.self { JSONWriter.writeString(value as! String, to: &writer.bytes); return }
        if T.self == Int.self { JSONWriter.writeInt(Int64(value as! Int), to: &writer.bytes); return }
        if T.self == Int64.self { JSONWriter.writeInt(value as! Int64, to: &writer.bytes); return }
        if T.self == Bool.self { writer.append((value as! Bool) ? "true" : "false"); return }
        if T.self == Double.self { try writeDouble(value as! Double); return }
        if T.self == JSONValue.self { JSONWriter.write(value as! JSONValue, to: &writer.bytes); return }
        let child = _TextLevel(writer: writer, parent: self, key: key, nested: false)
        writer.top = child
        try value.encode(to: child)
        guard writer.top === child || child.prepare() else { throw fail() }
        child.close()
    }

    func writeDouble(_ d: Double) throws {
        guard d.isFinite else { throw fail() }
        JSONWriter.writeDouble(d, to: &writer.bytes)
    }

    func writeFloat(_ f: Float) throws {
        try writeDouble(Double(f.description) ?? Double(f))
    }

    func writeUnsigned(_ v: UInt64) throws {
        guard let i = Int64(exactly: v) else { throw fail() }
        JSONWriter.writeInt(i, to: &writer.bytes)
    }

    /// Opens a container of this level's value.
    func open(_ kind: State) -> Bool {
        guard prepare() else { return false }
        switch (state, kind) {
        case (.empty, .object):
            writer.bytes.append(UInt8(ascii: "{"))
            keyStart = writer.keys.count
            state = .object
        case (.empty, .array):
            writer.bytes.append(UInt8(ascii: "["))
            state = .array
        case (.object, .object), (.array, .array):
            break
        default:
            writer.unsupported = true
            return false
        }
        return true
    }

    /// A nested container's level, opened after its key or comma has been written.
    func nestedLevel(_ key: _TextPathKey, _ kind: State) -> _TextLevel {
        let child = _TextLevel(writer: writer, parent: self, key: key, nested: true)
        writer.top = child
        _ = child.open(kind)
        return child
    }

    // MARK: Encoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        _ = open(.object)
        return KeyedEncodingContainer(_TextKeyed<Key>(level: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        _ = open(.array)
        return _TextUnkeyed(level: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { _TextSingle(level: self) }
}

struct _TextKeyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let level: _TextLevel
    var codingPath: [any CodingKey] { level.codingPath }

    private var w: _TextWriter { level.writer }

    mutating func encodeNil(forKey key: Key) throws { try level.key(key.stringValue); w.append("null") }
    mutating func encode(_ value: Bool, forKey key: Key) throws { try level.key(key.stringValue); w.append(value ? "true" : "false") }
    mutating func encode(_ value: String, forKey key: Key) throws { try level.key(key.stringValue); JSONWriter.writeString(value, to: &w.bytes) }
    mutating func encode(_ value: Double, forKey key: Key) throws { try level.key(key.stringValue); try level.writeDouble(value) }
    mutating func encode(_ value: Float, forKey key: Key) throws { try level.key(key.stringValue); try level.writeFloat(value) }
    mutating func encode(_ value: Int, forKey key: Key) throws { try level.key(key.stringValue); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try level.key(key.stringValue); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try level.key(key.stringValue); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try level.key(key.stringValue); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try level.key(key.stringValue); JSONWriter.writeInt(value, to: &w.bytes) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try level.key(key.stringValue); try level.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try level.key(key.stringValue); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try level.key(key.stringValue); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try level.key(key.stringValue); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try level.key(key.stringValue); try level.writeUnsigned(value) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try level.key(key.stringValue)
        try level.write(value, key: .key(key))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        guard (try? level.key(key.stringValue)) != nil else { return KeyedEncodingContainer(_TextKeyed<NestedKey>(level: level)) }
        return KeyedEncodingContainer(_TextKeyed<NestedKey>(level: level.nestedLevel(.key(key), .object)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        guard (try? level.key(key.stringValue)) != nil else { return _TextUnkeyed(level: level) }
        return _TextUnkeyed(level: level.nestedLevel(.key(key), .array))
    }

    // A super encoder may be filled at any time: written through the tree encoder instead.
    mutating func superEncoder() -> any Encoder {
        level.writer.unsupported = true
        return _JSONValueEncoder(parent: nil, key: nil)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        level.writer.unsupported = true
        return _JSONValueEncoder(parent: nil, key: nil)
    }
}

struct _TextUnkeyed: UnkeyedEncodingContainer {
    let level: _TextLevel
    var codingPath: [any CodingKey] { level.codingPath }
    var count: Int { level.count }

    private var w: _TextWriter { level.writer }

    mutating func encodeNil() throws { try level.element(); w.append("null") }
    mutating func encode(_ value: Bool) throws { try level.element(); w.append(value ? "true" : "false") }
    mutating func encode(_ value: String) throws { try level.element(); JSONWriter.writeString(value, to: &w.bytes) }
    mutating func encode(_ value: Double) throws { try level.element(); try level.writeDouble(value) }
    mutating func encode(_ value: Float) throws { try level.element(); try level.writeFloat(value) }
    mutating func encode(_ value: Int) throws { try level.element(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int8) throws { try level.element(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int16) throws { try level.element(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int32) throws { try level.element(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int64) throws { try level.element(); JSONWriter.writeInt(value, to: &w.bytes) }
    mutating func encode(_ value: UInt) throws { try level.element(); try level.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try level.element(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: UInt16) throws { try level.element(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: UInt32) throws { try level.element(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: UInt64) throws { try level.element(); try level.writeUnsigned(value) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        let index = level.count
        try level.element()
        try level.write(value, key: .index(index))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let index = level.count
        guard (try? level.element()) != nil else { return KeyedEncodingContainer(_TextKeyed<NestedKey>(level: level)) }
        return KeyedEncodingContainer(_TextKeyed<NestedKey>(level: level.nestedLevel(.index(index), .object)))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let index = level.count
        guard (try? level.element()) != nil else { return _TextUnkeyed(level: level) }
        return _TextUnkeyed(level: level.nestedLevel(.index(index), .array))
    }

    mutating func superEncoder() -> any Encoder {
        level.writer.unsupported = true
        return _JSONValueEncoder(parent: nil, key: nil)
    }
}

struct _TextSingle: SingleValueEncodingContainer {
    let level: _TextLevel
    var codingPath: [any CodingKey] { level.codingPath }

    private var w: _TextWriter { level.writer }

    mutating func encodeNil() throws { try level.single(); w.append("null") }
    mutating func encode(_ value: Bool) throws { try level.single(); w.append(value ? "true" : "false") }
    mutating func encode(_ value: String) throws { try level.single(); JSONWriter.writeString(value, to: &w.bytes) }
    mutating func encode(_ value: Double) throws { try level.single(); try level.writeDouble(value) }
    mutating func encode(_ value: Float) throws { try level.single(); try level.writeFloat(value) }
    mutating func encode(_ value: Int) throws { try level.single(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int8) throws { try level.single(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int16) throws { try level.single(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int32) throws { try level.single(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: Int64) throws { try level.single(); JSONWriter.writeInt(value, to: &w.bytes) }
    mutating func encode(_ value: UInt) throws { try level.single(); try level.writeUnsigned(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { try level.single(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: UInt16) throws { try level.single(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: UInt32) throws { try level.single(); JSONWriter.writeInt(Int64(value), to: &w.bytes) }
    mutating func encode(_ value: UInt64) throws { try level.single(); try level.writeUnsigned(value) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        if T.self == JSONValue.self {
            try level.single()
            JSONWriter.write(value as! JSONValue, to: &w.bytes)
            return
        }
        // The value encodes itself into this same encoder (as a wrapper type's single value does).
        guard level.prepare(), level.state == .empty else { throw level.fail() }
        try value.encode(to: level)
    }
}
