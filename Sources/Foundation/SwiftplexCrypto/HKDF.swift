import CSodium

/// HMAC-SHA512 and HKDF-SHA512 (RFC 5869) over libsodium.
public enum HKDF {
    /// HMAC-SHA512 with a key of any length.
    public static func hmacSHA512(key: [UInt8], message: [UInt8]) -> [UInt8] {
        Sodium.ensureInitialized()
        var state = crypto_auth_hmacsha512_state()
        var out = [UInt8](repeating: 0, count: Int(crypto_auth_hmacsha512_BYTES))
        crypto_auth_hmacsha512_init(&state, key, key.count)
        crypto_auth_hmacsha512_update(&state, message, UInt64(message.count))
        crypto_auth_hmacsha512_final(&state, &out)
        return out
    }

    /// HKDF-SHA512: extract with `salt` (64 zero bytes when empty), expand to `length` bytes
    /// (at most 255 × 64) with `info`.
    public static func sha512(inputKeyMaterial ikm: [UInt8], salt: [UInt8], info: [UInt8], length: Int) -> [UInt8] {
        precondition(length > 0 && length <= 255 * 64, "HKDF-SHA512 output length out of range")
        let prk = hmacSHA512(key: salt.isEmpty ? [UInt8](repeating: 0, count: 64) : salt, message: ikm)
        var okm: [UInt8] = []
        okm.reserveCapacity(length)
        var previous: [UInt8] = []
        var counter: UInt8 = 1
        while okm.count < length {
            previous = hmacSHA512(key: prk, message: previous + info + [counter])
            okm.append(contentsOf: previous)
            counter &+= 1
        }
        return Array(okm.prefix(length))
    }
}
