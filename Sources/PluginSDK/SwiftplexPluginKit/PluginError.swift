/// Why a plugin could not start or could not handle an event. The SDK turns it into the
/// `*error` string of the C ABI, so its message is what the host logs: it names the config field,
/// the handler or the Chat API error, and never carries message contents.
public struct PluginError: CodedError {
    public enum Code: String, Sendable {
        /// The instance's `config:` does not decode or fails the plugin's own checks.
        case config
        /// The host's callback table is missing, too old or of another ABI version.
        case host
        /// A Chat API command answered with an error or an unexpected response type.
        case command
        /// An event's JSON is not what the Chat API emits.
        case event
        /// A handler or a plugin's own code refused something.
        case plugin
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A config error naming the field, e.g. `config.rules[2].regex: invalid regular expression`.
    public static func config(_ field: String, _ problem: String) -> PluginError {
        PluginError(.config, "config.\(field): \(problem)")
    }
}
