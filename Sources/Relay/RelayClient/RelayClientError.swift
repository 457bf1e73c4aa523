import SwiftplexCrypto

import RelayProtocol
import SwiftplexBase

/// Why a relay operation failed. `relay(code)` carries the relay's own `ERR` answer.
public struct RelayClientError: CodedError {
    public enum Code: Hashable, Sendable {
        /// The relay answered `ERR <code>`.
        case relay(RelayErrorCode)
        /// The relay's certificate does not match the fingerprint in its address.
        case fingerprintMismatch
        /// TCP or TLS could not be established.
        case connectFailed
        /// The relay's hello was missing, malformed or offered no common version.
        case handshake
        /// The connection closed before the answer arrived.
        case connectionClosed
        /// The relay sent something this client cannot parse, or an unexpected answer.
        case unexpectedResponse
        /// No answer in time.
        case timeout
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func relay(_ code: RelayErrorCode) -> RelayClientError {
        RelayClientError(.relay(code), "relay error \(code.rawValue)")
    }
}
