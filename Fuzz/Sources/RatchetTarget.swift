@testable import SwiftplexCrypto

/// Frames fed to a double ratchet set up from fixed keys (the same state in every process, so a
/// seed or a reproducer means the same thing each run).
///
/// Input: `[mode][rest]`. Even mode: `rest` is up to 8 frames (2-byte length each) given in turn
/// to the receiving ratchet. Odd mode: `rest` is up to 8 records
/// `[header key][previous chain length: 4][number: 4][ratchet key][body mode][length: 2][body]`,
/// each made into a frame whose header *is* sealed with the receiver's keys (current, next, or a
/// wrong one), so the fields inside the header — the skip counts, a new ratchet key, a duplicate
/// number — reach the ratchet; with body mode odd the body is sealed with the message key the
/// sender would use, and a frame that decrypts must give back that body.
/// After every frame: a failed decrypt leaves the state as it was, and at most `maxSkip` keys are kept.
enum RatchetFrameTarget: FuzzTarget {
    static let name = "ratchet-frame"
    static let summary = "SwiftplexCrypto DoubleRatchet.decrypt: raw frames, and frames with forged (correctly sealed) headers"

    static let associatedData = Array("swiftplex fuzz".utf8)
    static let inviterKeys = X3DH.PrivateKeys(key1: FixedKeys.x25519(11), key2: FixedKeys.x25519(12))
    static let joinerKeys = X3DH.PrivateKeys(key1: FixedKeys.x25519(13), key2: FixedKeys.x25519(14))
    static let joinerRatchetKey = FixedKeys.x25519(15)
    static let otherKey = FixedKeys.x25519(16)

    /// The sender, as `DoubleRatchet.joiner` makes it but with a fixed ratchet key.
    static let joiner: DoubleRatchet = {
        let secrets = try! X3DH.joinerSecrets(own: joinerKeys, inviter: inviterKeys.publicKeys)
        let (rk, cks, nhks) = DoubleRatchet.kdfRoot(secrets.rootKey, try! joinerRatchetKey.sharedSecret(with: inviterKeys.key2.publicKey))
        return DoubleRatchet(
            dhSendingSecret: joinerRatchetKey.secretBytes, dhReceiving: inviterKeys.key2.publicKey.bytes, rootKey: rk,
            chainSending: cks, chainReceiving: nil, headerSending: secrets.headerKeyA, headerReceiving: nil,
            nextHeaderSending: nhks, nextHeaderReceiving: secrets.nextHeaderKeyB
        )
    }()

    /// The sender's first frames, numbers 0…5.
    static let joinerFrames: [[UInt8]] = {
        var j = joiner
        return (0..<6).map { i in try! j.encrypt(Array("message \(i)".utf8), associatedData: associatedData) }
    }()

    /// The receiver before any message.
    static let fresh: DoubleRatchet = {
        let secrets = try! X3DH.inviterSecrets(own: inviterKeys, joiner: joinerKeys.publicKeys)
        return DoubleRatchet.inviter(secrets: secrets, ratchetKey: inviterKeys.key2)
    }()

    /// The receiver after frames 0 and 2 (so it holds the skipped key of frame 1).
    static let started: DoubleRatchet = {
        var r = fresh
        _ = try! r.decrypt(joinerFrames[0], associatedData: associatedData)
        _ = try! r.decrypt(joinerFrames[2], associatedData: associatedData)
        return r
    }()

    static func fuzz(_ data: [UInt8]) {
        var input = ByteReader(data)
        let mode = input.byte()
        var state = mode & 2 == 0 ? started : fresh
        for _ in 0..<8 where !input.isAtEnd {
            if mode & 1 == 0 {
                deliver(input.chunk(), expecting: nil, to: &state)
            } else {
                let (frame, body) = forged(&input, for: state)
                deliver(frame, expecting: body, to: &state)
            }
        }
    }

    static func deliver(_ frame: [UInt8], expecting body: [UInt8]?, to state: inout DoubleRatchet) {
        let before = Snapshot(state)
        do {
            let plaintext = try state.decrypt(frame, associatedData: associatedData)
            if let body { fuzzCheck(plaintext == body, "a decrypted frame does not give back its body") }
        } catch {
            fuzzCheck(Snapshot(state) == before, "a failed decrypt changed the ratchet")
        }
        fuzzCheck(state.skipped.count <= DoubleRatchet.maxSkip, "\(state.skipped.count) skipped keys kept")
    }

    /// The parts of the state a decrypt changes.
    struct Snapshot: Equatable {
        var rootKey, dhSendingSecret: [UInt8]
        var chainReceiving, headerReceiving, dhReceiving: [UInt8]?
        var nextHeaderReceiving: [UInt8]
        var receivedInChain, sentInChain, previousChainLength: UInt32
        var skipped: [UInt32]

        init(_ r: DoubleRatchet) {
            rootKey = r.rootKey; dhSendingSecret = r.dhSendingSecret
            chainReceiving = r.chainReceiving; headerReceiving = r.headerReceiving; dhReceiving = r.dhReceiving
            nextHeaderReceiving = r.nextHeaderReceiving
            receivedInChain = r.receivedInChain; sentInChain = r.sentInChain; previousChainLength = r.previousChainLength
            skipped = r.skipped.map(\.number)
        }
    }

    /// Builds a frame from one record; returns the body when it was sealed with the right key.
    static func forged(_ input: inout ByteReader, for state: DoubleRatchet) -> ([UInt8], [UInt8]?) {
        let keyChoice = input.byte() % 3
        let previous = input.uint32()
        let number = input.uint32()
        let ratchetKeyChoice = input.byte() % 3
        let bodyMode = input.byte()
        let body = input.chunk()

        let peer: [UInt8] = switch ratchetKeyChoice {
        case 0: joinerRatchetKey.publicKey.bytes
        case 1: otherKey.publicKey.bytes
        default: [UInt8](repeating: 0, count: 32) // a low-order point: the DH must fail cleanly
        }
        let headerKey: [UInt8]
        var chain: [UInt8]?
        var from: UInt32 = 0
        switch keyChoice {
        case 0 where state.headerReceiving != nil:
            headerKey = state.headerReceiving!
            chain = state.chainReceiving
            from = state.receivedInChain
        case 0, 1:
            // A new chain: the receiver steps its ratchet with `peer`; derive that chain as the sender would.
            headerKey = state.nextHeaderReceiving
            if let own = try? X25519.PrivateKey(secretBytes: state.dhSendingSecret), let pk = try? X25519.PublicKey(bytes: peer),
               let shared = try? own.sharedSecret(with: pk) {
                chain = DoubleRatchet.kdfRoot(state.rootKey, shared).1
            }
        default:
            headerKey = [UInt8](repeating: 0x5A, count: 32)
        }
        let header = peer + DoubleRatchet.bigEndian(previous) + DoubleRatchet.bigEndian(number)
        let nonce = [UInt8](repeating: UInt8(truncatingIfNeeded: number), count: XChaChaPoly.nonceLength)
        let encryptedHeader = nonce + (try! XChaChaPoly.seal(header, key: headerKey, nonce: nonce))

        // The message key for `number`, at most a little past the skip limit away.
        if bodyMode & 1 == 1, var ck = chain, number >= from, number - from <= UInt32(DoubleRatchet.maxSkip + 8) {
            for _ in from..<number { ck = DoubleRatchet.kdfChain(ck).next }
            let (key, bodyNonce) = DoubleRatchet.messageKeyAndNonce(DoubleRatchet.kdfChain(ck).messageKey)
            let sealed = try! XChaChaPoly.seal(body, key: key, nonce: bodyNonce, associatedData: associatedData + encryptedHeader)
            return ([DoubleRatchet.version] + encryptedHeader + sealed, body)
        }
        return ([DoubleRatchet.version] + encryptedHeader + body, nil)
    }

    static func seeds() throws -> [[UInt8]] {
        func raw(_ frames: [[UInt8]], mode: UInt8) -> [UInt8] {
            var out = [mode]
            for f in frames { out += [UInt8(f.count >> 8), UInt8(f.count & 0xFF)] + f }
            return out
        }
        func record(key: UInt8, previous: UInt32, number: UInt32, ratchet: UInt8, bodyMode: UInt8, body: String) -> [UInt8] {
            let b = Array(body.utf8)
            return [key] + DoubleRatchet.bigEndian(previous) + DoubleRatchet.bigEndian(number) + [ratchet, bodyMode, 0, UInt8(b.count)] + b
        }
        return [
            raw([joinerFrames[1], joinerFrames[3], joinerFrames[4]], mode: 0),
            raw([joinerFrames[3], joinerFrames[1], joinerFrames[1]], mode: 0),
            raw([joinerFrames[0], joinerFrames[5], joinerFrames[1]], mode: 2),
            [1] + record(key: 0, previous: 0, number: 3, ratchet: 0, bodyMode: 1, body: "three")
                + record(key: 0, previous: 0, number: 1, ratchet: 0, bodyMode: 1, body: "one")
                + record(key: 0, previous: 0, number: 600, ratchet: 0, bodyMode: 1, body: "far"),
            [1] + record(key: 1, previous: 5, number: 2, ratchet: 1, bodyMode: 1, body: "new chain")
                + record(key: 0, previous: 0, number: 3, ratchet: 1, bodyMode: 1, body: "next"),
            [3] + record(key: 1, previous: 0, number: 0, ratchet: 0, bodyMode: 1, body: "first"),
            [1] + record(key: 2, previous: 0, number: 0, ratchet: 2, bodyMode: 0, body: "wrong key, low-order point"),
        ]
    }
}
