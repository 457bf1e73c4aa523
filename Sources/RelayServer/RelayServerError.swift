/// A failure to start or run the relay. The message is safe to log: it never holds keys or
/// message contents.
public struct RelayServerError: Error, Hashable, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable {
        case dataDirectory, identity, database, bind, configuration
    }
    public let code: Code
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
    public static func == (l: RelayServerError, r: RelayServerError) -> Bool { l.code == r.code }
    public func hash(into h: inout Hasher) { h.combine(code) }
}
