import CSodium

/// XChaCha20-Poly1305 (IETF) authenticated encryption with associated data.
public enum XChaChaPoly {
    public static let keyLength = Int(crypto_aead_xchacha20poly1305_ietf_KEYBYTES)
    public static let nonceLength = Int(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES)
    public static let tagLength = Int(crypto_aead_xchacha20poly1305_ietf_ABYTES)

    public static func randomKey() -> [UInt8] { Sodium.randomBytes(keyLength) }
    public static func randomNonce() -> [UInt8] { Sodium.randomBytes(nonceLength) }

    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], associatedData: [UInt8] = []) throws -> [UInt8] {
        Sodium.ensureInitialized()
        try check(key: key, nonce: nonce)
        var c = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var clen: UInt64 = 0
        crypto_aead_xchacha20poly1305_ietf_encrypt(&c, &clen, plaintext, UInt64(plaintext.count),
                                                   associatedData, UInt64(associatedData.count), nil, nonce, key)
        return c
    }

    public static func open(_ ciphertext: [UInt8], key: [UInt8], nonce: [UInt8], associatedData: [UInt8] = []) throws -> [UInt8] {
        Sodium.ensureInitialized()
        try check(key: key, nonce: nonce)
        guard ciphertext.count >= tagLength else {
            throw CryptoError(.authenticationFailed, "ciphertext shorter than its tag")
        }
        var m = [UInt8](repeating: 0, count: ciphertext.count - tagLength)
        var mlen: UInt64 = 0
        guard crypto_aead_xchacha20poly1305_ietf_decrypt(&m, &mlen, nil, ciphertext, UInt64(ciphertext.count),
                                                         associatedData, UInt64(associatedData.count), nonce, key) == 0 else {
            throw CryptoError(.authenticationFailed, "AEAD authentication failed")
        }
        return m
    }

    private static func check(key: [UInt8], nonce: [UInt8]) throws {
        guard key.count == keyLength else {
            throw CryptoError(.invalidKeyLength, "an XChaCha20-Poly1305 key has \(keyLength) bytes, got \(key.count)")
        }
        guard nonce.count == nonceLength else {
            throw CryptoError(.invalidNonceLength, "an XChaCha20-Poly1305 nonce has \(nonceLength) bytes, got \(nonce.count)")
        }
    }
}
