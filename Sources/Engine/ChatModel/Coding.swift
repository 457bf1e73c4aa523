import SwiftplexBase

import Foundation

/// A coding key spelled as a string literal (`"type"`, `"user_"`): the tagged unions of the model
/// read and write their fields with it, so that each type's Codable is self-contained and needs
/// no encoder or decoder strategy.
struct FieldKey: CodingKey, ExpressibleByStringLiteral, Hashable {
    let stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init(stringLiteral value: String) { stringValue = value }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// Why a value could not be decoded into the model, beyond the `DecodingError`s of missing
/// fields and wrong JSON types (which pass through as they are).
public struct ModelDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// A `"type"` (or enum string) this model has no case for.
        case unknownTag
        /// A timestamp that is not `YYYY-MM-DDTHH:MM:SS[.fraction]Z`.
        case badTimestamp
    }

    public let code: Code
    /// The model type being decoded (`ChatResponse`, `CIStatus`, …).
    public let type: String
    /// The offending tag or text.
    public let value: String
    /// Where in the JSON it was found, as coding-key names.
    public let path: [String]

    init(_ code: Code, type: String, value: String, path: [any CodingKey]) {
        self.code = code
        self.type = type
        self.value = value
        self.path = path.map(\.stringValue)
    }

    public var description: String {
        let at = path.isEmpty ? "" : " at \(path.joined(separator: "."))"
        switch code {
        case .unknownTag: return "unknown \(type) type \"\(value)\"\(at)"
        case .badTimestamp: return "malformed timestamp\(at)"
        }
    }
}

extension KeyedDecodingContainer where K == FieldKey {
    /// The union's `"type"` tag.
    func tag() throws -> String { try decode(String.self, forKey: "type") }

    func unknown(_ tag: String, in type: String) -> ModelDecodingError {
        ModelDecodingError(.unknownTag, type: type, value: tag, path: codingPath + [FieldKey("type")])
    }

    /// The names of the fields present, for the types that keep fields they do not know.
    var keyNames: Set<String> { Set(allKeys.map(\.stringValue)) }

    /// The fields not in `known`, as an object (in the decoder's key order).
    func otherFields(excluding known: Set<String>) throws -> JSONValue {
        .object(try allKeys.filter { !known.contains($0.stringValue) }.map { ($0.stringValue, try decode(JSONValue.self, forKey: $0)) })
    }
}

extension KeyedEncodingContainer where K == FieldKey {
    mutating func tag(_ tag: String) throws { try encode(tag, forKey: "type") }
}

/// A string enum whose raw values are the JSON strings: decoding an unknown string is a typed
/// ``ModelDecodingError`` (`unknownTag`) rather than a bare `dataCorrupted`.
public protocol StringEnum: RawRepresentable, Codable, Sendable, Hashable where RawValue == String {}

extension StringEnum {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        let raw = try c.decode(String.self)
        guard let value = Self(rawValue: raw) else {
            throw ModelDecodingError(.unknownTag, type: String(describing: Self.self), value: raw, path: decoder.codingPath)
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
}
