import Foundation
import CSodium

/// Ed25519 signatures (libsodium `crypto_sign_*`), used to authorise every relay command.
public enum Ed25519 {
    public static let publicKeyLength = Int(crypto_sign_PUBLICKEYBYTES)
    public static let signatureLength = Int(crypto_sign_BYTES)
    static let secretKeyLength = Int(crypto_sign_SECRETKEYBYTES)
    static let seedLength = Int(crypto_sign_SEEDBYTES)

    public struct PublicKey: Hashable, Sendable {
        public let bytes: [UInt8]

        public init(bytes: [UInt8]) throws {
            guard bytes.count == Ed25519.publicKeyLength else {
                throw CryptoError(.invalidKeyLength, "an Ed25519 public key has \(Ed25519.publicKeyLength) bytes, got \(bytes.count)")
            }
            self.bytes = bytes
        }

        /// Verifies a detached signature. Runs in time independent of where a mismatch is.
        public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
            Sodium.ensureInitialized()
            guard signature.count == Ed25519.signatureLength else { return false }
            return crypto_sign_verify_detached(signature, message, UInt64(message.count), bytes) == 0
        }
    }

    /// An Ed25519 signing key. Its `description` never shows key material; its bytes are zeroed
    /// when the last copy of the key is released (see ``SecretBytes``).
    public struct PrivateKey: Sendable, CustomStringConvertible {
        private let secret: SecretBytes
        public let publicKey: PublicKey

        /// A copy of libsodium's 64-byte secret key (seed ‖ public key), owned by the caller.
        public var secretBytes: [UInt8] { secret.bytes }

        /// A fresh random key pair.
        public init() {
            Sodium.ensureInitialized()
            var pk = [UInt8](repeating: 0, count: Ed25519.publicKeyLength)
            var sk = [UInt8](repeating: 0, count: Ed25519.secretKeyLength)
            crypto_sign_keypair(&pk, &sk)
            self.secret = SecretBytes(sk)
            Sodium.wipe(&sk)
            self.publicKey = try! PublicKey(bytes: pk)
        }

        /// Restores a key from its 64-byte libsodium secret key or its 32-byte seed.
        public init(secretBytes: [UInt8]) throws {
            Sodium.ensureInitialized()
            var pk = [UInt8](repeating: 0, count: Ed25519.publicKeyLength)
            var sk = [UInt8](repeating: 0, count: Ed25519.secretKeyLength)
            switch secretBytes.count {
            case Ed25519.seedLength:
                crypto_sign_seed_keypair(&pk, &sk, secretBytes)
            case Ed25519.secretKeyLength:
                crypto_sign_ed25519_sk_to_pk(&pk, secretBytes)
                self.secret = SecretBytes(secretBytes)
                self.publicKey = try PublicKey(bytes: pk)
                return
            default:
                throw CryptoError(.invalidKeyLength, "an Ed25519 secret key has 32 or 64 bytes, got \(secretBytes.count)")
            }
            self.secret = SecretBytes(sk)
            Sodium.wipe(&sk)
            self.publicKey = try PublicKey(bytes: pk)
        }

        public func signature(for message: [UInt8]) -> [UInt8] {
            var sig = [UInt8](repeating: 0, count: Ed25519.signatureLength)
            secret.withUnsafeBytes { sk in
                _ = crypto_sign_detached(&sig, nil, message, UInt64(message.count), sk.bindMemory(to: UInt8.self).baseAddress!)
            }
            return sig
        }

        public var description: String { "Ed25519.PrivateKey(<redacted>)" }
    }
}
