/// The initial key agreement of a connection, X3DH-style with two X25519 key pairs per side.
///
/// The inviting party publishes two public keys in its invitation (``X3DH/PublicKeys``); the
/// joining party answers with its own two in its confirmation. Each side computes the same three
/// Diffie-Hellman values — DH(inviter₁, joiner₂), DH(inviter₂, joiner₁), DH(inviter₂, joiner₂) —
/// and derives the double ratchet's root key and initial header keys from them with HKDF-SHA512.
/// The inviter's second key doubles as its first ratchet key.
public enum X3DH {
    public struct PublicKeys: Sendable, Hashable, Codable {
        public var key1: [UInt8]
        public var key2: [UInt8]

        public init(key1: X25519.PublicKey, key2: X25519.PublicKey) {
            self.key1 = key1.bytes
            self.key2 = key2.bytes
        }

        func keys() throws -> (X25519.PublicKey, X25519.PublicKey) {
            (try X25519.PublicKey(bytes: key1), try X25519.PublicKey(bytes: key2))
        }
    }

    public struct PrivateKeys: Sendable {
        public let key1: X25519.PrivateKey
        public let key2: X25519.PrivateKey

        public init() {
            key1 = X25519.PrivateKey()
            key2 = X25519.PrivateKey()
        }

        public init(key1: X25519.PrivateKey, key2: X25519.PrivateKey) {
            self.key1 = key1
            self.key2 = key2
        }

        public var publicKeys: PublicKeys { PublicKeys(key1: key1.publicKey, key2: key2.publicKey) }
    }

    /// What both sides derive: the root key and the two shared header keys.
    public struct SharedSecrets: Sendable, Equatable {
        public let rootKey: [UInt8]
        /// Header key of the joiner's first sending chain.
        public let headerKeyA: [UInt8]
        /// Next header key of the inviter's first sending chain.
        public let nextHeaderKeyB: [UInt8]
    }

    static let info = Array("Swiftplex X3DH v1".utf8)

    /// The joining party's computation (it sends first).
    public static func joinerSecrets(own: PrivateKeys, inviter: PublicKeys) throws -> SharedSecrets {
        let (i1, i2) = try inviter.keys()
        var ikm = try own.key2.sharedSecret(with: i1)
        ikm += try own.key1.sharedSecret(with: i2)
        ikm += try own.key2.sharedSecret(with: i2)
        return derive(&ikm)
    }

    /// The inviting party's computation.
    public static func inviterSecrets(own: PrivateKeys, joiner: PublicKeys) throws -> SharedSecrets {
        let (j1, j2) = try joiner.keys()
        var ikm = try own.key1.sharedSecret(with: j2)
        ikm += try own.key2.sharedSecret(with: j1)
        ikm += try own.key2.sharedSecret(with: j2)
        return derive(&ikm)
    }

    /// Derives the secrets and zeroes the Diffie-Hellman outputs and the HKDF output.
    private static func derive(_ ikm: inout [UInt8]) -> SharedSecrets {
        var okm = HKDF.sha512(inputKeyMaterial: ikm, salt: [], info: info, length: 96)
        defer {
            Sodium.wipe(&ikm)
            Sodium.wipe(&okm)
        }
        return SharedSecrets(rootKey: Array(okm[0..<32]), headerKeyA: Array(okm[32..<64]), nextHeaderKeyB: Array(okm[64..<96]))
    }
}
