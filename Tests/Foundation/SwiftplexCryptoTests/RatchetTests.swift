import Foundation
import Testing
@testable import SwiftplexCrypto

func hex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = s.startIndex
    while i < s.endIndex {
        let j = s.index(i, offsetBy: 2)
        out.append(UInt8(s[i..<j], radix: 16)!)
        i = j
    }
    return out
}

@Suite struct KDFTests {
    @Test func hmacSHA512MatchesRFC4231() {
        #expect(HKDF.hmacSHA512(key: [UInt8](repeating: 0x0B, count: 20), message: Array("Hi There".utf8)) ==
            hex("87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854"))
        #expect(HKDF.hmacSHA512(key: [UInt8](repeating: 0xAA, count: 131), message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)) ==
            hex("80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f3526b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"))
    }

    @Test func hkdfSHA512MatchesAnIndependentImplementation() {
        // Expected values computed with the `cryptography` Python package's HKDF(SHA512).
        #expect(HKDF.sha512(inputKeyMaterial: [UInt8](repeating: 0x0B, count: 22), salt: Array(0..<13), info: Array(0xF0..<0xFA), length: 42) ==
            hex("832390086cda71fb47625bb5ceb168e4c8e26a1a16ed34d9fc7fe92c1481579338da362cb8d9f925d7cb"))
        #expect(HKDF.sha512(inputKeyMaterial: Array("abc".utf8), salt: [], info: [], length: 100) ==
            hex("e6eb98ebade8f084c4e2c5c09b30b2509d66cf31fbc16a0320959316f0cc71cf12bc6595947151856dcc93de4f078a1d66e6c73d3863e5dd9a534a7d5bec1c7a1723ed92d64efe3ca8e182fa4cf7d9210105b61ddb7a8a04792c3422f5ccfa276165215e"))
    }
}

/// A joiner and an inviter that completed X3DH.
func ratchetPair() throws -> (joiner: DoubleRatchet, inviter: DoubleRatchet) {
    let inviterKeys = X3DH.PrivateKeys()
    let joinerKeys = X3DH.PrivateKeys()
    let js = try X3DH.joinerSecrets(own: joinerKeys, inviter: inviterKeys.publicKeys)
    let ins = try X3DH.inviterSecrets(own: inviterKeys, joiner: joinerKeys.publicKeys)
    #expect(js == ins)
    return (try DoubleRatchet.joiner(secrets: js, inviterRatchetKey: inviterKeys.key2.publicKey),
            DoubleRatchet.inviter(secrets: ins, ratchetKey: inviterKeys.key2))
}

@Suite struct DoubleRatchetTests {
    let ad = Array("conn-1".utf8)

    @Test func conversationBothWaysWithBursts() throws {
        var (a, b) = try ratchetPair()
        #expect(a.canSend && !b.canSend)
        #expect(throws: RatchetError(.notReadyToSend, "")) { try b.encrypt([1], associatedData: ad) }
        for round in 0..<6 {
            for i in 0..<(round + 1) {
                let text = Array("a\(round).\(i)".utf8)
                #expect(try b.decrypt(try a.encrypt(text, associatedData: ad), associatedData: ad) == text)
            }
            for i in 0..<(round % 3 + 1) {
                let text = Array("b\(round).\(i)".utf8)
                #expect(try a.decrypt(try b.encrypt(text, associatedData: ad), associatedData: ad) == text)
            }
        }
    }

    @Test func sameTextNeverGivesTheSameFrame() throws {
        var (a, _) = try ratchetPair()
        let one = try a.encrypt(Array("hello".utf8), associatedData: ad)
        let two = try a.encrypt(Array("hello".utf8), associatedData: ad)
        #expect(one != two)
        #expect(!one.contains(subsequence: Array("hello".utf8)))
    }

    @Test func outOfOrderMessagesAllDecryptOnce() throws {
        var (a, b) = try ratchetPair()
        // Prime both directions so that both chains have ratcheted.
        _ = try b.decrypt(try a.encrypt([0], associatedData: ad), associatedData: ad)
        _ = try a.decrypt(try b.encrypt([0], associatedData: ad), associatedData: ad)
        let frames = try (1...20).map { try a.encrypt([UInt8($0)], associatedData: ad) }
        // A reply from b in between starts a new chain on a's side.
        let reply = try b.encrypt([99], associatedData: ad)
        let later = try a.decrypt(reply, associatedData: ad)
        #expect(later == [99])
        let newChain = try a.encrypt([100], associatedData: ad)
        #expect(try b.decrypt(newChain, associatedData: ad) == [100])
        for i in [5, 1, 20, 2, 19, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18] {
            #expect(try b.decrypt(frames[i - 1], associatedData: ad) == [UInt8(i)])
        }
        // Each key works once: a duplicate is refused and changes nothing.
        #expect(throws: RatchetError(.duplicate, "")) { try b.decrypt(frames[4], associatedData: ad) }
        #expect(throws: RatchetError(.duplicate, "")) { try b.decrypt(newChain, associatedData: ad) }
        // A frame from a chain the receiver has moved past no longer opens at all.
        _ = try a.decrypt(try b.encrypt([7], associatedData: ad), associatedData: ad)
        _ = try b.decrypt(try a.encrypt([8], associatedData: ad), associatedData: ad)
        _ = try a.decrypt(try b.encrypt([9], associatedData: ad), associatedData: ad)
        _ = try b.decrypt(try a.encrypt([10], associatedData: ad), associatedData: ad)
        #expect(throws: RatchetError(.badHeader, "")) { try b.decrypt(frames[4], associatedData: ad) }
        #expect(try b.decrypt(try a.encrypt([101], associatedData: ad), associatedData: ad) == [101])
    }

    @Test func tamperedFramesAreRefusedAndLeaveTheRatchetIntact() throws {
        var (a, b) = try ratchetPair()
        let frame = try a.encrypt(Array("pay 10".utf8), associatedData: ad)
        for index in [0, 5, 40, frame.count - 1] {
            var bad = frame
            bad[index] ^= 0x01
            #expect(throws: RatchetError.self) { try b.decrypt(bad, associatedData: ad) }
        }
        #expect(throws: RatchetError(.badMessage, "")) { try b.decrypt(frame, associatedData: Array("conn-2".utf8)) }
        #expect(throws: RatchetError(.malformed, "")) { try b.decrypt(Array(frame.prefix(50)), associatedData: ad) }
        #expect(try b.decrypt(frame, associatedData: ad) == Array("pay 10".utf8))
    }

    @Test func aFrameForAnotherConnectionIsRefused() throws {
        var (a, _) = try ratchetPair()
        var (_, other) = try ratchetPair()
        let frame = try a.encrypt([1, 2, 3], associatedData: ad)
        #expect(throws: RatchetError(.badHeader, "")) { try other.decrypt(frame, associatedData: ad) }
    }

    @Test func atMost512KeysAreSkipped() throws {
        var (a, b) = try ratchetPair()
        var frames: [[UInt8]] = []
        for i in 0...(DoubleRatchet.maxSkip + 1) { frames.append(try a.encrypt([UInt8(i & 0xFF)], associatedData: ad)) }
        #expect(throws: RatchetError(.tooManySkipped, "")) { try b.decrypt(frames.last!, associatedData: ad) }
        // Exactly maxSkip ahead is still fine.
        #expect(try b.decrypt(frames[DoubleRatchet.maxSkip], associatedData: ad) == [UInt8(DoubleRatchet.maxSkip & 0xFF)])
        #expect(try b.decrypt(frames[0], associatedData: ad) == [0])
    }

    @Test func skippedKeysExpireByAge() throws {
        var (a, b) = try ratchetPair()
        let start = Date(timeIntervalSince1970: 1_700_000_000)
        let limits = DoubleRatchet.SkippedKeyLimits(maxAge: .seconds(3600), maxLaterMessages: 1000)
        let early = try a.encrypt([0], associatedData: ad)
        let late = try a.encrypt([1], associatedData: ad)
        let third = try a.encrypt([2], associatedData: ad)
        let fourth = try a.encrypt([3], associatedData: ad)
        #expect(try b.decrypt(third, associatedData: ad, now: start, limits: limits) == [2])
        #expect(b.skippedKeyCount == 2)
        // Within the age: the skipped key still opens its message.
        #expect(try b.decrypt(late, associatedData: ad, now: start + 3600, limits: limits) == [1])
        // Past it: the key is gone (a later message triggers the expiry), the message is refused.
        #expect(try b.decrypt(fourth, associatedData: ad, now: start + 3601, limits: limits) == [3])
        #expect(b.skippedKeyCount == 0)
        #expect(throws: RatchetError(.duplicate, "")) { try b.decrypt(early, associatedData: ad, now: start + 3601, limits: limits) }
    }

    @Test func skippedKeysExpireAfterSoManyLaterMessages() throws {
        var (a, b) = try ratchetPair()
        let limits = DoubleRatchet.SkippedKeyLimits(maxAge: .seconds(1_000_000), maxLaterMessages: 3)
        let skippedFrame = try a.encrypt([0], associatedData: ad)
        for i in 1...3 { #expect(try b.decrypt(try a.encrypt([UInt8(i)], associatedData: ad), associatedData: ad, limits: limits) == [UInt8(i)]) }
        #expect(b.skippedKeyCount == 1)
        // Still within the count (3 later messages): it opens, on a copy of the state.
        var copy = b
        #expect(try copy.decrypt(skippedFrame, associatedData: ad, limits: limits) == [0])
        // One more later message, and across a ratchet step: the key is dropped.
        #expect(try a.decrypt(try b.encrypt([9], associatedData: ad), associatedData: ad) == [9])
        #expect(try b.decrypt(try a.encrypt([4], associatedData: ad), associatedData: ad, limits: limits) == [4])
        #expect(b.skippedKeyCount == 0)
        #expect(throws: RatchetError.self) { try b.decrypt(skippedFrame, associatedData: ad, limits: limits) }
    }

    @Test func skippedKeysOfAStateSavedBeforeExpiryAreStampedAndKept() throws {
        var (a, b) = try ratchetPair()
        let skippedFrame = try a.encrypt([0], associatedData: ad)
        _ = try b.decrypt(try a.encrypt([1], associatedData: ad), associatedData: ad)
        // Strip the new fields, as a state saved by the previous version would lack them.
        var json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(b)) as! [String: Any]
        json["received"] = nil
        json["skipped"] = (json["skipped"] as! [[String: Any]]).map { k in k.filter { $0.key != "skippedAt" && $0.key != "receivedBefore" } }
        var old = try JSONDecoder().decode(DoubleRatchet.self, from: JSONSerialization.data(withJSONObject: json))
        #expect(old.skippedKeyCount == 1)
        #expect(try old.decrypt(skippedFrame, associatedData: ad) == [0])
    }

    /// Keys are stored as base64 strings; a state stored by an earlier version, with keys as arrays
    /// of numbers, still reads and goes on decrypting.
    @Test func keysAreStoredAsBase64AndOldArrayStatesStillRead() throws {
        var (a, b) = try ratchetPair()
        let skippedFrame = try a.encrypt([0], associatedData: ad)
        _ = try b.decrypt(try a.encrypt([1], associatedData: ad), associatedData: ad)
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(b)) as! [String: Any]
        let rootKey = try #require(json["rootKey"] as? String)
        #expect(Data(base64Encoded: rootKey)?.count == 32)
        let skipped = try #require((json["skipped"] as? [[String: Any]])?.first)
        #expect(skipped["messageKey"] is String)
        // The earlier form: every byte a number.
        func arrays(_ value: Any) -> Any {
            if let dict = value as? [String: Any] { return dict.mapValues(arrays) }
            if let list = value as? [Any] { return list.map(arrays) }
            if let text = value as? String, let data = Data(base64Encoded: text) { return [UInt8](data).map { Int($0) } }
            return value
        }
        let oldForm = try JSONSerialization.data(withJSONObject: arrays(json))
        #expect(String(decoding: oldForm, as: UTF8.self).contains("\"rootKey\":["))
        var old = try JSONDecoder().decode(DoubleRatchet.self, from: oldForm)
        #expect(try old.decrypt(skippedFrame, associatedData: ad) == [0])
        #expect(try old.decrypt(try a.encrypt([2], associatedData: ad), associatedData: ad) == [2])
        #expect(try a.decrypt(try old.encrypt([3], associatedData: ad), associatedData: ad) == [3])
    }

    /// The binary form (what the agent stores) keeps everything, skipped keys and their stamps
    /// included: a state read back from it opens what the original would, in any order.
    @Test func binaryStateKeepsSkippedKeysAndGoesOn() throws {
        var (a, b) = try ratchetPair()
        _ = try b.decrypt(try a.encrypt([1], associatedData: ad), associatedData: ad)
        _ = try a.decrypt(try b.encrypt([2], associatedData: ad), associatedData: ad)
        let late = try a.encrypt([3], associatedData: ad)
        _ = try b.decrypt(try a.encrypt([4], associatedData: ad), associatedData: ad)  // skips 3
        #expect(b.skippedKeyCount == 1)
        var w = BinaryStateWriter()
        b.write(to: &w)
        var r = BinaryStateReader(w.bytes)
        var restored = try DoubleRatchet(from: &r)
        #expect(r.isAtEnd && restored.skippedKeyCount == 1)
        let sorted = JSONEncoder()
        sorted.outputFormatting = .sortedKeys
        #expect(try sorted.encode(restored) == sorted.encode(b))
        #expect(try restored.decrypt(late, associatedData: ad) == [3])
        #expect(try restored.decrypt(try a.encrypt([5], associatedData: ad), associatedData: ad) == [5])
        #expect(try a.decrypt(try restored.encrypt([6], associatedData: ad), associatedData: ad) == [6])
        // Cut short or of an unknown version: an error, never a partial state.
        for cut in [0, 1, w.bytes.count / 2, w.bytes.count - 1] {
            var short = BinaryStateReader(Array(w.bytes.prefix(cut)))
            #expect(throws: BinaryStateError.self) { try DoubleRatchet(from: &short) }
        }
        var other = BinaryStateReader([9] + w.bytes.dropFirst())
        #expect(throws: BinaryStateError.self) { try DoubleRatchet(from: &other) }
    }

    @Test func wipeZeroesAnOwnedBuffer() {
        var key = Sodium.randomBytes(32)
        Sodium.wipe(&key)
        #expect(key == [UInt8](repeating: 0, count: 32))
        let secret = SecretBytes([1, 2, 3])
        #expect(secret.bytes == [1, 2, 3] && secret.count == 3)
    }

    @Test func stateSurvivesSerialisationMidConversation() throws {
        var (a, b) = try ratchetPair()
        _ = try b.decrypt(try a.encrypt([1], associatedData: ad), associatedData: ad)
        let pending = try a.encrypt([2], associatedData: ad)
        let skippedOver = try a.encrypt([3], associatedData: ad)
        _ = skippedOver
        let stored = try JSONEncoder().encode(b)
        var restored = try JSONDecoder().decode(DoubleRatchet.self, from: stored)
        #expect(try restored.decrypt(try a.encrypt([4], associatedData: ad), associatedData: ad) == [4])
        #expect(try restored.decrypt(pending, associatedData: ad) == [2])
        #expect(try b.decrypt(pending, associatedData: ad) == [2])
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        for i in 0...(count - subsequence.count) where Array(self[i..<i + subsequence.count]) == subsequence { return true }
        return false
    }
}
