/// The JSON Schema of a plugin's `config:`, built from a small DSL so the schema the descriptor
/// exports and the config type the plugin decodes sit side by side. It covers the subset the host
/// validates: type, properties, required, additionalProperties, items, enum, minimum, maximum,
/// format (regex), default, description.
///
///     static let configSchema: JSONSchema? = .object([
///         "welcome": .string("Sent to each new contact"),
///         "max_per_hour": .integer("0 = no cap", minimum: 0, default: 0),
///     ], required: ["welcome"])
public struct JSONSchema: Sendable, Hashable {
    /// The schema as JSON.
    public let json: JSONValue

    public init(json: JSONValue) { self.json = json }

    /// A schema written by hand as JSON text (it must be an object).
    public init(literal text: String) throws(PluginError) {
        let value = try JSONValue.parse(text, as: .config)
        guard case .object = value else { throw PluginError(.config, "a JSON Schema must be an object") }
        json = value
    }

    public static func string(_ description: String? = nil, default value: String? = nil, enum cases: [String]? = nil) -> JSONSchema {
        make("string", description, value.map { .string($0) }, cases.map { ["enum": .array($0.map { .string($0) })] } ?? [:])
    }

    /// A string that must be a valid regular expression (`"format": "regex"`): the host reports a
    /// bad one at its place in the YAML (`bot.yaml:12:9`) before the plugin starts.
    public static func regex(_ description: String? = nil) -> JSONSchema {
        make("string", description, nil, ["format": "regex"])
    }

    public static func integer(_ description: String? = nil, minimum: Int64? = nil, maximum: Int64? = nil, default value: Int64? = nil) -> JSONSchema {
        var extra: [String: JSONValue] = [:]
        if let minimum { extra["minimum"] = .int(minimum) }
        if let maximum { extra["maximum"] = .int(maximum) }
        return make("integer", description, value.map { .int($0) }, extra)
    }

    public static func number(_ description: String? = nil, minimum: Double? = nil, maximum: Double? = nil, default value: Double? = nil) -> JSONSchema {
        var extra: [String: JSONValue] = [:]
        if let minimum { extra["minimum"] = .double(minimum) }
        if let maximum { extra["maximum"] = .double(maximum) }
        return make("number", description, value.map { .double($0) }, extra)
    }

    public static func boolean(_ description: String? = nil, default value: Bool? = nil) -> JSONSchema {
        make("boolean", description, value.map { .bool($0) }, [:])
    }

    public static func array(of items: JSONSchema, _ description: String? = nil, default value: JSONValue? = nil) -> JSONSchema {
        make("array", description, value, ["items": items.json])
    }

    /// An object with the given properties; unknown keys are refused unless `additionalProperties`.
    public static func object(_ properties: KeyValuePairs<String, JSONSchema>, required: [String] = [],
                              additionalProperties: Bool = false, _ description: String? = nil) -> JSONSchema {
        var props: [String: JSONValue] = [:]
        for (name, schema) in properties { props[name] = schema.json }
        var extra: [String: JSONValue] = ["properties": .sorted(props), "additionalProperties": .bool(additionalProperties)]
        if !required.isEmpty { extra["required"] = .array(required.map { .string($0) }) }
        return make("object", description, nil, extra)
    }

    private static func make(_ type: String, _ description: String?, _ value: JSONValue?, _ extra: [String: JSONValue]) -> JSONSchema {
        var o = extra
        o["type"] = .string(type)
        if let description { o["description"] = .string(description) }
        if let value { o["default"] = value }
        return JSONSchema(json: .sorted(o))
    }
}
