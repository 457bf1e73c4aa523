import Foundation

// `JSONValue` itself is SwiftplexBase's, compiled into the SDK from the same files (symlinks in
// `Base/`): a plugin links its own copy, and only C types and JSON text cross the plugin ABI, so
// the SDK must not depend on a host module, yet it reads and writes JSON exactly as the host does.

extension JSONValue {
    /// Parses JSON text (RFC 8259, strictly); malformed text is a `PluginError` of the given code.
    /// Besides syntax errors, a number too large for a double (`1e999`: JSON has no infinity) and
    /// an object naming a key twice (readers disagree on which one wins) are refused.
    public static func parse(_ text: String, as code: PluginError.Code) throws(PluginError) -> JSONValue {
        do throws(JSONError) {
            return try JSONValue.parse(text)
        } catch {
            throw PluginError(code, "malformed JSON at byte \(error.offset): \(error.reason)")
        }
    }

    /// Builds a JSON tree from an `Encodable` value (keys in the type's encoding order).
    public static func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        try JSONValueEncoder().encode(value)
    }

    /// An object from a dictionary, keys sorted, so the same dictionary always gives the same text.
    public static func sorted(_ dictionary: [String: JSONValue]) -> JSONValue {
        .object(dictionary.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
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
