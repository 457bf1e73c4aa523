/// A Swiftplex plugin written in Swift. The type says what it is (name, version, config and its
/// schema) and declares its handlers in `routes`; the SDK derives the descriptor's `events` list
/// and the bot command menu from them. One instance is made per `plugins:` entry in the host's
/// YAML, with that entry's decoded config.
///
///     final class Greeter: Plugin {
///         struct Config: Decodable { var greeting: String }
///         static let name = "greeter"
///         static let version = "1.0.0"
///         static let description = "Greets whoever writes"
///         static let configSchema: JSONSchema? = .object(["greeting": .string()], required: ["greeting"])
///         let config: Config
///         let context: PluginContext
///         init(config: Config, context: PluginContext) { self.config = config; self.context = context }
///         static func routes(_ r: inout Routes<Greeter>) {
///             r.onMessage(.contentType("text")) { plugin, message in
///                 try plugin.context.reply(to: message, text: plugin.config.greeting)
///             }
///         }
///     }
///
/// Calls come one at a time per instance (the host queues them), so a plugin needs no locks for
/// its own state.
public protocol Plugin: AnyObject {
    /// The instance configuration, decoded from the `config:` JSON object with `JSONDecoder`.
    associatedtype Config: Decodable = EmptyConfig

    /// The plugin's name, e.g. `auto-accept`.
    static var name: String { get }
    /// Its version, e.g. `1.0.0`.
    static var version: String { get }
    /// One line saying what it does.
    static var description: String { get }
    /// The JSON Schema of `Config` that the descriptor exports (nil: any object).
    static var configSchema: JSONSchema? { get }

    /// Creates an instance. Throw (a `PluginError.config(...)` for bad settings) to refuse to start.
    init(config: Config, context: PluginContext) throws

    /// Declares the handlers. Called once per loaded image (for the descriptor) and per instance.
    static func routes(_ routes: inout Routes<Self>)

    /// Called before the instance is freed; no host callbacks after it returns.
    func stop()
}

extension Plugin {
    public static var configSchema: JSONSchema? { nil }
    public func stop() {}
}

/// The config of a plugin that takes none (any object is accepted and ignored).
public struct EmptyConfig: Decodable, Sendable {
    public init() {}
    public init(from decoder: any Decoder) throws {}
}
