import Foundation

// Codable records to and from rows. A record is flat: each property is one column holding an
// integer, a real, text or a blob (or NULL for an optional), or an enum stored as its raw value.
// A property of any other shape is a programming error reported as an `SQLError`, not guessed at.

/// Reads a record out of one row.
struct RowDecoder: Decoder {
    let row: SQLRow
    let naming: (String) -> String
    /// The record type's coding keys → column positions known for this row's columns (`SQLColumns`
    /// keeps them per record type, so rows of one cached statement name each key once).
    let record: ObjectIdentifier
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(RowContainer<Key>(row: row, naming: naming, record: record, known: row.columns.keyPositions(record)))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw SQLError(.column, "a record is read from a row by column name")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw SQLError(.column, "a record is read from a row by column name")
    }
}

private struct RowContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let row: SQLRow
    let naming: (String) -> String
    let record: ObjectIdentifier
    let known: [String: Int]
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { row.columns.names.compactMap { Key(stringValue: $0) } }

    /// The key's column position; nil when the row has no such column.
    func position(_ key: Key) -> Int? {
        let k = key.stringValue
        if let i = known[k] { return i >= 0 ? i : nil }
        let i = row.columns.index(of: naming(k))
        row.columns.remember(k, position: i, for: record)
        return i
    }

    func index(_ key: Key) throws -> Int {
        guard let i = position(key) else {
            throw SQLError(.column, "no column \(naming(key.stringValue)) in the row (\(row.columns.names.joined(separator: ", ")))")
        }
        return i
    }

    func contains(_ key: Key) -> Bool { position(key) != nil }

    func decodeNil(forKey key: Key) throws -> Bool { row.values[try index(key)] == .null }

    func decode<T: Decodable>(_: T.Type, forKey key: Key) throws -> T {
        let i = try index(key)
        return try ColumnDecoder(value: row.values[i], column: row.columns.names[i]).decode(T.self)
    }

    /// The types the SQL layer reads directly, without a dynamic cast.
    private func known<T: SQLValueConvertible>(_: T.Type, _ key: Key) throws -> T {
        let i = try index(key)
        guard let v = T(sqlValue: row.values[i]) else {
            throw SQLError(.column, "column \(row.columns.names[i]) holds \(row.values[i].kindName), not \(T.self)")
        }
        return v
    }

    private func knownIfPresent<T: SQLValueConvertible>(_: T.Type, _ key: Key) throws -> T? {
        guard let i = position(key) else { return nil }
        let value = row.values[i]
        if value == .null { return nil }
        guard let v = T(sqlValue: value) else {
            throw SQLError(.column, "column \(row.columns.names[i]) holds \(value.kindName), not \(T.self)")
        }
        return v
    }

    func decode(_: String.Type, forKey key: Key) throws -> String { try known(String.self, key) }
    func decode(_: Int64.Type, forKey key: Key) throws -> Int64 { try known(Int64.self, key) }
    func decode(_: Int.Type, forKey key: Key) throws -> Int { try known(Int.self, key) }
    func decode(_: Bool.Type, forKey key: Key) throws -> Bool { try known(Bool.self, key) }
    func decode(_: Double.Type, forKey key: Key) throws -> Double { try known(Double.self, key) }
    func decodeIfPresent(_: String.Type, forKey key: Key) throws -> String? { try knownIfPresent(String.self, key) }
    func decodeIfPresent(_: Int64.Type, forKey key: Key) throws -> Int64? { try knownIfPresent(Int64.self, key) }
    func decodeIfPresent(_: Int.Type, forKey key: Key) throws -> Int? { try knownIfPresent(Int.self, key) }
    func decodeIfPresent(_: Bool.Type, forKey key: Key) throws -> Bool? { try knownIfPresent(Bool.self, key) }
    func decodeIfPresent(_: Double.Type, forKey key: Key) throws -> Double? { try knownIfPresent(Double.self, key) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw SQLError(.column, "column \(naming(key.stringValue)) is one value, not a nested record")
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw SQLError(.column, "column \(naming(key.stringValue)) is one value, not a list")
    }

    func superDecoder() throws -> any Decoder { throw SQLError(.column, "records have no superclass") }
    func superDecoder(forKey _: Key) throws -> any Decoder { throw SQLError(.column, "records have no superclass") }
}

/// One column's value as a `Decodable`: a type the SQL layer knows directly, or one that decodes
/// itself from a single value (an enum with a raw value).
private struct ColumnDecoder: Decoder, SingleValueDecodingContainer {
    let value: SQLValue
    let column: String
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func decode<T: Decodable>(_: T.Type) throws -> T {
        if let known = T.self as? any SQLValueConvertible.Type {
            guard let v = known.init(sqlValue: value) else {
                throw SQLError(.column, "column \(column) holds \(value.kindName), not \(T.self)")
            }
            return v as! T  // swiftlint:disable:this force_cast — `known` is `T.self`
        }
        return try T(from: self)
    }

    func decodeNil() -> Bool { value == .null }

    func container<Key: CodingKey>(keyedBy _: Key.Type) throws -> KeyedDecodingContainer<Key> {
        throw SQLError(.column, "column \(column) is one value, not a nested record")
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw SQLError(.column, "column \(column) is one value, not a list")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }
}

/// Collects a record's values and their coding keys, in the order its properties encode (the
/// columns' names come from the type's `RecordTable`, made once).
final class RecordEncoder: Encoder {
    final class Storage {
        var keys: [String] = []
        var values: [SQLValue] = []
    }

    let storage = Storage()
    let naming: (String) -> String
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(naming: @escaping (String) -> String) {
        self.naming = naming
        storage.keys.reserveCapacity(16)
        storage.values.reserveCapacity(16)
    }

    func container<Key: CodingKey>(keyedBy _: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RecordContainer<Key>(storage: storage, naming: naming))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        preconditionFailure("a record is written to a row by column name")
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        preconditionFailure("a record is written to a row by column name")
    }
}

private struct RecordContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let storage: RecordEncoder.Storage
    let naming: (String) -> String
    var codingPath: [any CodingKey] { [] }

    func put(_ value: SQLValue, _ key: Key) {
        storage.keys.append(key.stringValue)
        storage.values.append(value)
    }

    func encodeNil(forKey key: Key) throws { put(.null, key) }

    func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        put(try ColumnEncoder.value(of: value, column: { naming(key.stringValue) }), key)
    }

    // The types the SQL layer stores directly, without a dynamic cast.
    func encode(_ value: String, forKey key: Key) throws { put(.text(value), key) }
    func encode(_ value: Int64, forKey key: Key) throws { put(.integer(value), key) }
    func encode(_ value: Int, forKey key: Key) throws { put(.integer(Int64(value)), key) }
    func encode(_ value: Bool, forKey key: Key) throws { put(.integer(value ? 1 : 0), key) }
    func encode(_ value: Double, forKey key: Key) throws { put(.real(value), key) }

    // A nil optional is a NULL column (the synthesized `encodeIfPresent` would leave it out).
    func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }
    func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { put(value?.sqlValue ?? .null, key) }
    func encodeIfPresent(_ value: String?, forKey key: Key) throws { put(value?.sqlValue ?? .null, key) }
    func encodeIfPresent(_ value: Double?, forKey key: Key) throws { put(value?.sqlValue ?? .null, key) }
    func encodeIfPresent(_ value: Int?, forKey key: Key) throws { put(value?.sqlValue ?? .null, key) }
    func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { put(value?.sqlValue ?? .null, key) }
    func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) } else { put(.null, key) }
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy _: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        preconditionFailure("column \(naming(key.stringValue)) is one value, not a nested record")
    }

    func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        preconditionFailure("column \(naming(key.stringValue)) is one value, not a list")
    }

    func superEncoder() -> any Encoder { preconditionFailure("records have no superclass") }
    func superEncoder(forKey _: Key) -> any Encoder { preconditionFailure("records have no superclass") }
}

/// One property's value as a column: a type the SQL layer knows, or one that encodes itself as a
/// single value (an enum with a raw value).
private final class ColumnEncoder: Encoder, SingleValueEncodingContainer {
    var result: SQLValue?
    /// The column's name, for errors (made only then).
    let columnName: () -> String
    var column: String { columnName() }
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(column: @escaping () -> String) { columnName = column }

    static func value<T: Encodable>(of value: T, column: @escaping () -> String) throws -> SQLValue {
        if let known = value as? any SQLValueConvertible { return known.sqlValue }
        let encoder = ColumnEncoder(column: column)
        try value.encode(to: encoder)
        guard let result = encoder.result else { throw SQLError(.column, "column \(column()): \(T.self) encoded no value") }
        return result
    }

    func encodeNil() throws { result = .null }
    func encode<T: Encodable>(_ value: T) throws { result = try Self.value(of: value, column: columnName) }

    func container<Key: CodingKey>(keyedBy _: Key.Type) -> KeyedEncodingContainer<Key> {
        preconditionFailure("column \(column) is one value, not a nested record")
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        preconditionFailure("column \(column) is one value, not a list")
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }
}

extension UInt64: SQLValueConvertible {
    /// Stored as the signed 64-bit integer with the same bits (both backends' integers are signed).
    public var sqlValue: SQLValue { .integer(Int64(bitPattern: self)) }
    public init?(sqlValue: SQLValue) {
        guard case let .integer(v) = sqlValue else { return nil }
        self = UInt64(bitPattern: v)
    }
}

extension SQLValueConvertible where Self: RawRepresentable, RawValue: SQLValueConvertible {
    public var sqlValue: SQLValue { rawValue.sqlValue }
    public init?(sqlValue: SQLValue) {
        guard let raw = RawValue(sqlValue: sqlValue) else { return nil }
        self.init(rawValue: raw)
    }
}
