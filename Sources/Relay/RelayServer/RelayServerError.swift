import SwiftplexBase
import SwiftplexCrypto

/// A failure to start or run the relay. The message is safe to log: it never holds keys or
/// message contents.
public struct RelayServerError: CodedError {
    public enum Code: String, Sendable {
        case dataDirectory, identity, database, bind, limit, configuration
    }
    public let code: Code
    public let message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}
