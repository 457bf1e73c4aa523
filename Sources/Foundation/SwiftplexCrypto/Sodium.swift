import Foundation
import CSodium
import SwiftplexBase

/// Process-wide libsodium state and the small helpers every other primitive uses.
///
/// `sodium_init()` is idempotent and thread-safe; every entry point of this module calls
/// ``Sodium/ensureInitialized()`` through a lazily-initialised global, so callers never have to.
public enum Sodium {
    private static let initialized: Bool = {
        sodium_init() >= 0
    }()

    /// Initialises libsodium once. Traps if the library cannot initialise (no entropy source),
    /// because nothing in this process can be secure without it.
    @inline(__always)
    public static func ensureInitialized() {
        precondition(initialized, "libsodium failed to initialise (no entropy source?)")
    }

    /// `count` bytes from the operating system's CSPRNG.
    public static func randomBytes(_ count: Int) -> [UInt8] {
        ensureInitialized()
        var bytes = [UInt8](repeating: 0, count: count)
        if count > 0 { randombytes_buf(&bytes, count) }
        return bytes
    }

    /// Compares two byte sequences in time that depends only on their length.
    /// Sequences of different length compare unequal (the length itself is not secret).
    public static func constantTimeEquals(_ a: some ContiguousBytes, _ b: some ContiguousBytes) -> Bool {
        ensureInitialized()
        return a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                guard pa.count == pb.count else { return false }
                if pa.count == 0 { return true }
                return sodium_memcmp(pa.baseAddress, pb.baseAddress, pa.count) == 0
            }
        }
    }

    /// Overwrites `bytes` with zeros (`sodium_memzero`, which the compiler may not elide).
    ///
    /// Swift arrays are copy-on-write: if another array still shares this buffer, writing makes
    /// a private copy first and zeroes that copy, and the shared original lives on until its
    /// last owner releases it. So this wipes a buffer only where it is the sole owner — a key
    /// derived and used in one function, a key taken out of a state that is being discarded.
    public static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress, raw.count > 0 { sodium_memzero(base, raw.count) }
        }
    }
}

/// SHA-256 and SHA-512 digests.
public enum Digest {
    public static func sha256(_ data: [UInt8]) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha256_BYTES))
        crypto_hash_sha256(&out, data, UInt64(data.count))
        return out
    }

    public static func sha512(_ data: [UInt8]) -> [UInt8] {
        Sodium.ensureInitialized()
        var out = [UInt8](repeating: 0, count: Int(crypto_hash_sha512_BYTES))
        crypto_hash_sha512(&out, data, UInt64(data.count))
        return out
    }
}

/// A failure of a cryptographic operation. The message never contains key material.
public struct CryptoError: CodedError {
    public enum Code: String, Sendable {
        case invalidKeyLength
        case invalidNonceLength
        case authenticationFailed
        case invalidPublicKey
        case invalidInput
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "crypto error (\(code.rawValue)): \(message)" }
}
