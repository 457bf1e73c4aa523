import NIOConcurrencyHelpers
import SwiftplexCrypto

/// A queue key that authorises commands: an Ed25519 key (commands carry a signature) or an
/// X25519 key (commands carry a deniable authenticator made with the relay's per-session key).
///
/// Wire form: a short field of `E` or `X` followed by the 32-byte public key.
public enum AuthPublicKey: Sendable, Hashable {
    case ed25519(Ed25519.PublicKey)
    case x25519(X25519.PublicKey)

    public var wireBytes: [UInt8] {
        switch self {
        case let .ed25519(k): [UInt8(ascii: "E")] + k.bytes
        case let .x25519(k): [UInt8(ascii: "X")] + k.bytes
        }
    }

    public init(wireBytes b: [UInt8]) throws(RelayErrorCode) {
        guard b.count == 33 else { throw .syntax }
        let key = Array(b[1...])
        switch b[0] {
        case UInt8(ascii: "E"):
            guard let k = try? Ed25519.PublicKey(bytes: key) else { throw .syntax }
            self = .ed25519(k)
        case UInt8(ascii: "X"):
            guard let k = try? X25519.PublicKey(bytes: key) else { throw .syntax }
            self = .x25519(k)
        default:
            throw .syntax
        }
    }

    /// The length of the authorisation field a command signed by this key carries.
    public var authorizationLength: Int {
        switch self {
        case .ed25519: Ed25519.signatureLength
        case .x25519: BoxKey.authenticatorLength
        }
    }
}

/// The private half of an ``AuthPublicKey``. Its description never shows key material.
public enum AuthPrivateKey: Sendable, CustomStringConvertible {
    case ed25519(Ed25519.PrivateKey)
    case x25519(X25519.PrivateKey)

    public static func newEd25519() -> AuthPrivateKey { .ed25519(Ed25519.PrivateKey()) }
    public static func newX25519() -> AuthPrivateKey { .x25519(X25519.PrivateKey()) }

    public var publicKey: AuthPublicKey {
        switch self {
        case let .ed25519(k): .ed25519(k.publicKey)
        case let .x25519(k): .x25519(k.publicKey)
        }
    }

    /// Authorises `signedBytes` for a session: a signature, or an authenticator keyed by DH with
    /// the relay's session key (the correlation ID is the nonce).
    public func authorization(for signedBytes: [UInt8], correlationId: [UInt8], session: SessionKeys) -> [UInt8] {
        switch self {
        case let .ed25519(k):
            return k.signature(for: signedBytes)
        case let .x25519(k):
            guard let box = session.boxKey(for: k) else { return [] }
            return box.authenticator(for: signedBytes, nonce: correlationId)
        }
    }

    /// The secret bytes, for persistence by the owner.
    public var secretBytes: [UInt8] {
        switch self {
        case let .ed25519(k): [UInt8(ascii: "E")] + k.secretBytes
        case let .x25519(k): [UInt8(ascii: "X")] + k.secretBytes
        }
    }

    public init(secretBytes b: [UInt8]) throws {
        guard let tag = b.first else { throw CryptoError(.invalidKeyLength, "empty key") }
        switch tag {
        case UInt8(ascii: "E"): self = .ed25519(try Ed25519.PrivateKey(secretBytes: Array(b.dropFirst())))
        case UInt8(ascii: "X"): self = .x25519(try X25519.PrivateKey(secretBytes: Array(b.dropFirst())))
        default: throw CryptoError(.invalidInput, "unknown key type")
        }
    }

    public var description: String { "AuthPrivateKey(<redacted>)" }
}

/// One side's view of a connection's session: the session ID every authorisation covers and the
/// DH keys that make X25519 authenticators, with the per-key DH results cached (one scalar
/// multiplication per key per connection).
public final class SessionKeys: Sendable {
    public let sessionId: [UInt8]
    private let local: X25519.PrivateKey
    private let peer: X25519.PublicKey?
    private let cache = NIOLockedValueBox<[[UInt8]: BoxKey]>([:])
    private static let cacheLimit = 4096

    /// The relay's side: its private session key; peers' queue keys vary per command.
    public init(sessionId: [UInt8], relayKey: X25519.PrivateKey) {
        self.sessionId = sessionId
        self.local = relayKey
        self.peer = nil
    }

    /// A client's side: the relay's public session key.
    public init(sessionId: [UInt8], relaySessionKey: X25519.PublicKey) {
        self.sessionId = sessionId
        self.local = X25519.PrivateKey()
        self.peer = relaySessionKey
    }

    /// Client side: the DH of `key` with the relay's session key.
    func boxKey(for key: X25519.PrivateKey) -> BoxKey? {
        guard let peer else { return nil }
        return cached(key.publicKey.bytes) { try? BoxKey(privateKey: key, peer: peer) }
    }

    /// Relay side: the DH of the relay's session key with a queue's public key.
    public func boxKey(for key: X25519.PublicKey) -> BoxKey? {
        cached(key.bytes) { try? BoxKey(privateKey: local, peer: key) }
    }

    private func cached(_ id: [UInt8], _ make: () -> BoxKey?) -> BoxKey? {
        if let k = cache.withLockedValue({ $0[id] }) { return k }
        guard let k = make() else { return nil }
        cache.withLockedValue { c in
            if c.count >= Self.cacheLimit { c.removeAll(keepingCapacity: true) }
            c[id] = k
        }
        return k
    }

    /// Checks a command's authorisation against `key` in time that does not depend on whether
    /// `key` is the right one.
    public func verify(_ authorization: [UInt8], signedBytes: [UInt8], correlationId: [UInt8], key: AuthPublicKey) -> Bool {
        switch key {
        case let .ed25519(k):
            return k.isValidSignature(authorization, for: signedBytes)
        case let .x25519(k):
            guard let box = boxKey(for: k) else { return false }
            return box.isValidAuthenticator(authorization, for: signedBytes, nonce: correlationId)
        }
    }
}
