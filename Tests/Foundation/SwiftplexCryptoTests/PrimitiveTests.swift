import Testing
@testable import SwiftplexCrypto

@Suite struct PrimitiveTests {
    @Test func ed25519SignsAndVerifies() throws {
        let key = Ed25519.PrivateKey()
        let message = Array("relay command".utf8)
        let sig = key.signature(for: message)
        #expect(sig.count == Ed25519.signatureLength)
        #expect(key.publicKey.isValidSignature(sig, for: message))

        var tampered = message
        tampered[0] ^= 1
        #expect(!key.publicKey.isValidSignature(sig, for: tampered))
        #expect(!Ed25519.PrivateKey().publicKey.isValidSignature(sig, for: message))
        #expect(!key.publicKey.isValidSignature(Array(sig.dropLast()), for: message))
        #expect(!key.publicKey.isValidSignature([], for: message))
    }

    @Test func ed25519KeyRestoresFromSeedAndSecret() throws {
        let key = Ed25519.PrivateKey()
        let restored = try Ed25519.PrivateKey(secretBytes: key.secretBytes)
        #expect(restored.publicKey == key.publicKey)
        let fromSeed = try Ed25519.PrivateKey(secretBytes: Array(key.secretBytes.prefix(32)))
        #expect(fromSeed.publicKey == key.publicKey)
        #expect(throws: CryptoError(.invalidKeyLength, "")) { try Ed25519.PrivateKey(secretBytes: [1, 2, 3]) }
        #expect(!"\(key)".contains(Base64URL.encode(key.secretBytes)))
    }

    @Test func boxKeysAgreeAndAuthenticate() throws {
        let a = X25519.PrivateKey()
        let b = X25519.PrivateKey()
        let ab = try BoxKey(privateKey: a, peer: b.publicKey)
        let ba = try BoxKey(privateKey: b, peer: a.publicKey)
        #expect(ab.secretBytes == ba.secretBytes)
        let nonce = Sodium.randomBytes(BoxKey.nonceLength)
        let sealed = try ab.seal(Array("hello".utf8), nonce: nonce)
        #expect(try ba.open(sealed, nonce: nonce) == Array("hello".utf8))

        var bad = sealed
        bad[bad.count - 1] ^= 0x80
        #expect(throws: CryptoError(.authenticationFailed, "")) { try ba.open(bad, nonce: nonce) }
        #expect(throws: CryptoError(.authenticationFailed, "")) { try ba.open(sealed, nonce: Sodium.randomBytes(24)) }
        #expect(throws: CryptoError(.invalidNonceLength, "")) { try ba.open(sealed, nonce: [1]) }
        #expect(throws: CryptoError(.authenticationFailed, "")) { try ba.open([1, 2], nonce: nonce) }
    }

    @Test func x25519RejectsLowOrderPoints() throws {
        let zero = try X25519.PublicKey(bytes: [UInt8](repeating: 0, count: 32))
        #expect(throws: CryptoError(.invalidPublicKey, "")) { try X25519.PrivateKey().sharedSecret(with: zero) }
    }

    @Test func xchachaRoundTripsAndBindsAssociatedData() throws {
        let key = XChaChaPoly.randomKey()
        let nonce = XChaChaPoly.randomNonce()
        let sealed = try XChaChaPoly.seal(Array("secret".utf8), key: key, nonce: nonce, associatedData: [1, 2, 3])
        #expect(try XChaChaPoly.open(sealed, key: key, nonce: nonce, associatedData: [1, 2, 3]) == Array("secret".utf8))
        #expect(throws: CryptoError(.authenticationFailed, "")) {
            try XChaChaPoly.open(sealed, key: key, nonce: nonce, associatedData: [1, 2, 4])
        }
        #expect(throws: CryptoError(.invalidKeyLength, "")) { try XChaChaPoly.seal([], key: [1], nonce: nonce) }
    }

    @Test func base64URLRoundTrips() throws {
        for n in 0..<70 {
            let bytes = Sodium.randomBytes(n)
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(text) == bytes)
        }
        #expect(Base64URL.encode(Array("hello?>".utf8)) == "aGVsbG8_Pg")
        #expect(Base64URL.decode("aGVsbG8_Pg==") == Array("hello?>".utf8))
        #expect(Base64URL.decode("a") == nil)
        #expect(Base64URL.decode("ab$d") == nil)
    }

    @Test func constantTimeEquality() {
        #expect(Sodium.constantTimeEquals([1, 2, 3], [1, 2, 3]))
        #expect(!Sodium.constantTimeEquals([1, 2, 3], [1, 2, 4]))
        #expect(!Sodium.constantTimeEquals([1, 2, 3], [1, 2]))
        #expect(Sodium.constantTimeEquals([UInt8](), [UInt8]()))
    }

    @Test func digestsMatchKnownVectors() {
        #expect(Base64URL.encode(Digest.sha256(Array("abc".utf8))) == "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0")
        #expect(Digest.sha512([]).count == 64)
    }
}
