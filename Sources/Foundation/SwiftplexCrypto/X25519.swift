import CSodium
import Foundation
import Synchronization

/// X25519 Diffie-Hellman and the `crypto_box` construction (X25519 + XSalsa20-Poly1305).
public enum X25519 {
    public static let keyLength = Int(crypto_box_PUBLICKEYBYTES)

    public struct PublicKey: Hashable, Sendable {
        public let bytes: [UInt8]

        public init(bytes: [UInt8]) throws {
            guard bytes.count == X25519.keyLength else {
                throw CryptoError(.invalidKeyLength, "an X25519 public key has \(X25519.keyLength) bytes, got \(bytes.count)")
            }
            self.bytes = bytes
        }
    }

    /// An X25519 private key. Its `description` never shows key material; its bytes are zeroed
    /// when the last copy of the key is released (see ``SecretBytes``).
    public struct PrivateKey: Sendable, CustomStringConvertible {
        private let secret: SecretBytes
        private let derived: DerivedPublicKey

        /// The public key. A key read back from its secret derives it on first use (a scalar
        /// multiplication, ~28 µs here), not when read: a bot restarting with 10,000 queues only
        /// authorises with their keys, and deriving them all made a third of its restart.
        public var publicKey: PublicKey { derived.publicKey(of: secret) }

        /// A copy of the secret scalar, owned by the caller (to persist it).
        public var secretBytes: [UInt8] { secret.bytes }

        public init() {
            Sodium.ensureInitialized()
            var pk = [UInt8](repeating: 0, count: X25519.keyLength)
            var sk = [UInt8](repeating: 0, count: X25519.keyLength)
            crypto_box_keypair(&pk, &sk)
            self.secret = SecretBytes(sk)
            Sodium.wipe(&sk)
            self.derived = DerivedPublicKey(try! PublicKey(bytes: pk))
        }

        public init(secretBytes: [UInt8]) throws {
            Sodium.ensureInitialized()
            guard secretBytes.count == X25519.keyLength else {
                throw CryptoError(.invalidKeyLength, "an X25519 private key has \(X25519.keyLength) bytes, got \(secretBytes.count)")
            }
            self.secret = SecretBytes(secretBytes)
            self.derived = DerivedPublicKey(nil)
        }

        /// The raw X25519 shared secret with `peer`. Fails for low-order (all-zero output) points.
        public func sharedSecret(with peer: PublicKey) throws -> [UInt8] {
            var out = [UInt8](repeating: 0, count: X25519.keyLength)
            let status = secret.withUnsafeBytes { sk in
                crypto_scalarmult(&out, sk.bindMemory(to: UInt8.self).baseAddress!, peer.bytes)
            }
            guard status == 0 else {
                throw CryptoError(.invalidPublicKey, "X25519 peer key is a low-order point")
            }
            return out
        }

        public var description: String { "X25519.PrivateKey(<redacted>)" }
    }
}

/// A precomputed `crypto_box` key (X25519 shared secret hashed by libsodium) for one pair of
/// parties; seals and opens XSalsa20-Poly1305 boxes with caller-supplied 24-byte nonces.
public struct BoxKey: Sendable, CustomStringConvertible {
    public static let nonceLength = Int(crypto_box_NONCEBYTES)
    public static let macLength = Int(crypto_box_MACBYTES)
    public static let keyLength = Int(crypto_box_BEFORENMBYTES)

    public let secretBytes: [UInt8]

    public init(privateKey: X25519.PrivateKey, peer: X25519.PublicKey) throws {
        Sodium.ensureInitialized()
        var k = [UInt8](repeating: 0, count: BoxKey.keyLength)
        guard crypto_box_beforenm(&k, peer.bytes, privateKey.secretBytes) == 0 else {
            throw CryptoError(.invalidPublicKey, "crypto_box peer key rejected")
        }
        self.secretBytes = k
    }

    public init(secretBytes: [UInt8]) throws {
        guard secretBytes.count == BoxKey.keyLength else {
            throw CryptoError(.invalidKeyLength, "a box key has \(BoxKey.keyLength) bytes, got \(secretBytes.count)")
        }
        self.secretBytes = secretBytes
    }

    public func seal(_ plaintext: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        guard nonce.count == BoxKey.nonceLength else {
            throw CryptoError(.invalidNonceLength, "a box nonce has \(BoxKey.nonceLength) bytes, got \(nonce.count)")
        }
        var c = [UInt8](repeating: 0, count: plaintext.count + BoxKey.macLength)
        crypto_box_easy_afternm(&c, plaintext, UInt64(plaintext.count), nonce, secretBytes)
        return c
    }

    public func open(_ ciphertext: [UInt8], nonce: [UInt8]) throws -> [UInt8] {
        guard nonce.count == BoxKey.nonceLength else {
            throw CryptoError(.invalidNonceLength, "a box nonce has \(BoxKey.nonceLength) bytes, got \(nonce.count)")
        }
        guard ciphertext.count >= BoxKey.macLength else {
            throw CryptoError(.authenticationFailed, "box ciphertext shorter than its tag")
        }
        var m = [UInt8](repeating: 0, count: ciphertext.count - BoxKey.macLength)
        guard crypto_box_open_easy_afternm(&m, ciphertext, UInt64(ciphertext.count), nonce, secretBytes) == 0 else {
            throw CryptoError(.authenticationFailed, "box authentication failed")
        }
        return m
    }

    public var description: String { "BoxKey(<redacted>)" }
}

extension BoxKey {
    /// Length of an ``authenticator(for:nonce:)``.
    public static let authenticatorLength = 32 + macLength

    /// A deniable message authenticator: the box of SHA-256(`message`) under this DH key.
    /// Either party of the DH can compute it, so it proves the message to the other party
    /// without proving it to anyone else. Verify with ``isValidAuthenticator(_:for:nonce:)``.
    public func authenticator(for message: [UInt8], nonce: [UInt8]) -> [UInt8] {
        (try? seal(Digest.sha256(message), nonce: nonce)) ?? []
    }

    /// Constant-time check of an authenticator made by ``authenticator(for:nonce:)``.
    public func isValidAuthenticator(_ authenticator: [UInt8], for message: [UInt8], nonce: [UInt8]) -> Bool {
        guard authenticator.count == Self.authenticatorLength, nonce.count == Self.nonceLength else { return false }
        return Sodium.constantTimeEquals(self.authenticator(for: message, nonce: nonce), authenticator)
    }
}

/// An X25519 private key's public key, derived once on first use and shared by the key's copies.
final class DerivedPublicKey: Sendable {
    private let value: Mutex<X25519.PublicKey?>

    init(_ known: X25519.PublicKey?) { value = Mutex(known) }

    func publicKey(of secret: SecretBytes) -> X25519.PublicKey {
        value.withLock { known in
            if let known { return known }
            var pk = [UInt8](repeating: 0, count: X25519.keyLength)
            secret.withUnsafeBytes { sk in _ = crypto_scalarmult_base(&pk, sk.bindMemory(to: UInt8.self).baseAddress!) }
            let derived = try! X25519.PublicKey(bytes: pk)  // 32 bytes: cannot fail
            known = derived
            return derived
        }
    }
}
