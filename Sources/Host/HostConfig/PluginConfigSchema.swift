import Foundation
import SwiftplexBase

/// Why a plugin's config schema was refused; `location` is a JSON pointer into the schema.
public struct PluginSchemaError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// The text is not JSON.
        case syntax
        /// A keyword Swiftplex does not know (typos such as `requried` are caught this way).
        case unknownKeyword
        /// A keyword with a value of the wrong shape, or one that does not apply to the type.
        case badKeyword
        /// A `default` or `enum` value that its own schema refuses.
        case badValue
    }

    public let code: Code
    public let location: String
    public let message: String

    init(_ code: Code, at location: String, _ message: String) {
        self.code = code
        self.location = location
        self.message = message
    }

    public var description: String {
        "invalid plugin config schema at \(location.isEmpty ? "the top" : location): \(message)"
    }
}

/// A plugin's config schema: the JSON-Schema subset a plugin descriptor carries, used to check
/// the plugin's `config:` mapping and turn it into the JSON the plugin's start function gets.
///
/// Supported: `type` (string, integer, number, boolean, array, object), `properties`,
/// `required`, `additionalProperties` (boolean or a schema; **false when absent**, unlike JSON
/// Schema, so a misspelt key is reported), `items`, `enum`, `default`, `minimum`, `maximum`,
/// `minLength`, `maxLength`, `pattern`, `format` (`"regex"` is checked: the value must be a valid
/// regular expression; other formats are annotations), `minItems`, `maxItems`, and the annotations
/// `description`, `title`, `examples`, `$schema`, `$id`, `$comment`. Any other keyword is refused.
public struct PluginConfigSchema: Sendable {
    let root: SchemaNode

    /// Parses and checks a schema; its root must be an object schema.
    public init(json: String) throws(PluginSchemaError) {
        let value: JSONValue
        do {
            value = try JSONValue.parse(json, maxDepth: 100)
        } catch {
            throw PluginSchemaError(.syntax, at: "", "not valid JSON at byte \(error.offset): \(error.reason)")
        }
        let root = try SchemaNode(value, at: "")
        guard root.type == .object else {
            throw PluginSchemaError(.badKeyword, at: "/type", "the top of a plugin config schema must have \"type\": \"object\"")
        }
        self.root = root
    }

    /// Checks a plugin's `config:` node and returns it as JSON text with defaults filled in, or
    /// every problem at the position of the YAML node concerned.
    ///
    /// - Parameters:
    ///   - node: the plugin's `config:` mapping (null counts as an empty mapping).
    ///   - file: the config file, for messages.
    ///   - path: the key path of `node` in messages, such as `plugins[0].config`.
    public func validate(_ node: ConfigNode, file: String, path: String = "config") -> Result<String, ConfigErrors> {
        var decoder = NodeDecoder(file: file)
        let input = node.isNull ? ConfigNode.emptyMapping(at: node.mark) : node
        let value = root.decode(input, path, &decoder)
        guard decoder.sink.isEmpty, let value else { return .failure(ConfigErrors(decoder.sink.problems)) }
        return .success(value.text)
    }
}

extension ConfigNode {
    /// The node as JSON text without a schema: plain scalars by the YAML 1.2 core schema (null,
    /// booleans, integers, numbers), everything else a string.
    public func toJSON() -> String { untypedJSON.text }

    var untypedJSON: JSONValue {
        switch value {
        case .sequence(let items): return .array(items.map(\.untypedJSON))
        case .mapping(let entries): return .object(entries.map { ($0.key, $0.value.untypedJSON) })
        case .scalar(let s, .quoted): return .string(s)
        case .scalar(let s, .plain):
            if isNull { return .null }
            if let b = boolValue { return .bool(b) }
            if let i = intValue { return .int(Int64(i)) }
            if let d = doubleValue { return .double(d) }
            return .string(s)
        }
    }
}

/// One schema (or subschema), checked when parsed.
final class SchemaNode: Sendable {
    enum Kind: String, Sendable, CaseIterable {
        case string, integer, number, boolean, array, object
    }

    enum Additional: Sendable {
        case forbidden, allowed, schema(SchemaNode)
    }

    let type: Kind?
    let defaultValue: JSONValue?
    let enumValues: [JSONValue]?
    let minimum: Double?
    let maximum: Double?
    let minLength: Int?
    let maxLength: Int?
    let pattern: String?
    /// `regex`: the value must compile as a regular expression (other formats are not checked).
    let format: String?
    let minItems: Int?
    let maxItems: Int?
    let items: SchemaNode?
    let properties: [(String, SchemaNode)]
    let required: [String]
    let additional: Additional

    static let annotations: Set<String> = ["description", "title", "examples", "$schema", "$id", "$comment"]
    static let keywordTypes: [String: Set<Kind>] = [
        "minimum": [.integer, .number], "maximum": [.integer, .number],
        "minLength": [.string], "maxLength": [.string], "pattern": [.string], "format": [.string],
        "items": [.array], "minItems": [.array], "maxItems": [.array],
        "properties": [.object], "required": [.object], "additionalProperties": [.object],
    ]

    init(_ json: JSONValue, at location: String) throws(PluginSchemaError) {
        guard case let .object(pairs) = json else {
            throw PluginSchemaError(.badKeyword, at: location, "a schema must be a JSON object")
        }
        var typeName: Kind?
        if let t = json["type"] {
            guard case let .string(s) = t, let k = Kind(rawValue: s) else {
                throw PluginSchemaError(.badKeyword, at: location + "/type", "type must be one of \(Kind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            typeName = k
        }
        type = typeName
        let known = Set(Self.keywordTypes.keys).union(Self.annotations).union(["type", "default", "enum"])
        for (key, _) in pairs where !known.contains(key) {
            throw PluginSchemaError(.unknownKeyword, at: location + "/" + key, "unknown keyword \(JSONWriter.quote(key))\(Suggestion.hint(for: key, in: known.sorted()))")
        }
        for (key, _) in pairs {
            if let types = Self.keywordTypes[key], let t = typeName, !types.contains(t) {
                throw PluginSchemaError(.badKeyword, at: location + "/" + key, "\(key) does not apply to type \(t.rawValue)")
            }
            if Self.keywordTypes[key] != nil, typeName == nil {
                throw PluginSchemaError(.badKeyword, at: location + "/" + key, "\(key) needs a \"type\" next to it")
            }
        }
        func number(_ key: String) throws(PluginSchemaError) -> Double? {
            switch json[key] {
            case nil: return nil
            case let .int(i)?: return Double(i)
            case let .double(d)?: return d
            default: throw PluginSchemaError(.badKeyword, at: location + "/" + key, "\(key) must be a number")
            }
        }
        func count(_ key: String) throws(PluginSchemaError) -> Int? {
            switch json[key] {
            case nil: return nil
            case let .int(i)? where i >= 0: return Int(i)
            default: throw PluginSchemaError(.badKeyword, at: location + "/" + key, "\(key) must be a non-negative integer")
            }
        }
        minimum = try number("minimum")
        maximum = try number("maximum")
        if let lo = minimum, let hi = maximum, lo > hi {
            throw PluginSchemaError(.badKeyword, at: location + "/maximum", "maximum is below minimum")
        }
        minLength = try count("minLength")
        maxLength = try count("maxLength")
        minItems = try count("minItems")
        maxItems = try count("maxItems")
        if let p = json["pattern"] {
            guard case let .string(s) = p, (try? NSRegularExpression(pattern: s)) != nil else {
                throw PluginSchemaError(.badKeyword, at: location + "/pattern", "pattern must be a valid regular expression")
            }
            pattern = s
        } else {
            pattern = nil
        }
        switch json["format"] {
        case nil: format = nil
        case let .string(f)?: format = f
        default: throw PluginSchemaError(.badKeyword, at: location + "/format", "format must be a string")
        }
        if let i = json["items"] {
            items = try SchemaNode(i, at: location + "/items")
        } else {
            items = nil
        }
        var props: [(String, SchemaNode)] = []
        if let p = json["properties"] {
            guard case let .object(entries) = p else {
                throw PluginSchemaError(.badKeyword, at: location + "/properties", "properties must be an object of schemas")
            }
            for (name, sub) in entries {
                props.append((name, try SchemaNode(sub, at: location + "/properties/" + name)))
            }
        }
        properties = props
        var req: [String] = []
        if let r = json["required"] {
            guard case let .array(names) = r else {
                throw PluginSchemaError(.badKeyword, at: location + "/required", "required must be an array of property names")
            }
            for n in names {
                guard case let .string(s) = n, props.contains(where: { $0.0 == s }) else {
                    throw PluginSchemaError(.badKeyword, at: location + "/required", "required names \(n.text), which is not in properties")
                }
                req.append(s)
            }
        }
        required = req
        switch json["additionalProperties"] {
        case nil, .bool(false)?: additional = .forbidden
        case .bool(true)?: additional = .allowed
        case let s?: additional = .schema(try SchemaNode(s, at: location + "/additionalProperties"))
        }
        if let e = json["enum"] {
            guard case let .array(values) = e, !values.isEmpty else {
                throw PluginSchemaError(.badKeyword, at: location + "/enum", "enum must be a non-empty array")
            }
            enumValues = values
        } else {
            enumValues = nil
        }
        defaultValue = json["default"]
        // Both need the finished node, so they are checked last.
        for (i, v) in (enumValues ?? []).enumerated() {
            if let why = problem(with: v) {
                throw PluginSchemaError(.badValue, at: location + "/enum/\(i)", "enum value \(v.text) does not fit the schema: \(why)")
            }
        }
        if let d = defaultValue, let why = problem(with: d) {
            throw PluginSchemaError(.badValue, at: location + "/default", "the default does not fit the schema: \(why)")
        }
    }

    subscript(property: String) -> SchemaNode? { properties.first { $0.0 == property }?.1 }

    /// What an allowed-values list says in a message.
    var enumText: String { (enumValues ?? []).map(\.text).joined(separator: ", ") }
}
