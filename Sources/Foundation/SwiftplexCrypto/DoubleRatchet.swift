import Foundation
import SwiftplexBase

/// Why a ratchet message was refused. Decryption failures leave the ratchet unchanged.
public struct RatchetError: CodedError {
    public enum Code: String, Sendable {
        /// Neither the current nor the next header key opens the header: not for this
        /// connection, tampered, or a message whose key was already used (a duplicate).
        case badHeader
        /// The header opened but the body did not authenticate (tampered, or wrong associated data).
        case badMessage
        /// The message is further ahead than ``DoubleRatchet/maxSkip`` keys.
        case tooManySkipped
        /// The header opened with the current chain's key but its message key was already used:
        /// the same message arrived again.
        case duplicate
        /// The frame is not a ratchet message of a known version.
        case malformed
        /// This side cannot send yet (an inviter sends only after its first message arrives).
        case notReadyToSend
    }

    public let code: Code
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "ratchet error (\(code.rawValue)): \(message)" }
}

/// The Double Ratchet with header encryption (Signal's "DR-HE"), over X25519, HKDF-SHA512 and
/// XChaCha20-Poly1305.
///
/// A value type: `encrypt` and `decrypt` mutate the ratchet only when they succeed, so a caller
/// persists the new state together with the effect of the message. At most ``maxSkip`` message
/// keys are kept for messages that arrive out of order, and each only for as long as
/// ``SkippedKeyLimits`` allow (an age and a number of later messages, as Signal and SimpleX
/// expire theirs): a peer cannot pin skipped keys in the state for ever.
///
/// Frame: `[version: UInt8 = 1][encrypted header: 80 bytes][body ciphertext]`, where the header
/// (`[ratchet public key: 32][previous chain length: UInt32][number: UInt32]`) is sealed with the
/// header key and a random nonce, and the body with a key from the message chain; the body's
/// associated data is the caller's associated data followed by the encrypted header.
public struct DoubleRatchet: Sendable, Codable {
    public static let maxSkip = 512
    public static let version: UInt8 = 1
    static let headerLength = 32 + 4 + 4
    static let encryptedHeaderLength = XChaChaPoly.nonceLength + headerLength + XChaChaPoly.tagLength

    /// How long a key skipped over (for a message that may still arrive out of order) is kept.
    public struct SkippedKeyLimits: Sendable, Equatable {
        /// A skipped key older than this is dropped.
        public var maxAge: Duration
        /// A skipped key is dropped once this many later messages have been received.
        public var maxLaterMessages: UInt64

        public init(maxAge: Duration = .seconds(14 * 24 * 3600), maxLaterMessages: UInt64 = 2000) {
            self.maxAge = maxAge
            self.maxLaterMessages = maxLaterMessages
        }

        public static let `default` = SkippedKeyLimits()
    }

    struct SkippedKey: Sendable, Codable {
        var headerKey: [UInt8]
        var number: UInt32
        var messageKey: [UInt8]
        /// When the key was skipped, in whole seconds since 1970 (absent in states saved before
        /// keys expired: such a key is stamped on the next decryption).
        var skippedAt: Int64?
        /// ``DoubleRatchet/received`` when the key was skipped.
        var receivedBefore: UInt64?

        enum CodingKeys: String, CodingKey { case headerKey, number, messageKey, skippedAt, receivedBefore }

        init(headerKey: [UInt8], number: UInt32, messageKey: [UInt8], skippedAt: Int64?, receivedBefore: UInt64?) {
            (self.headerKey, self.number, self.messageKey, self.skippedAt, self.receivedBefore) = (headerKey, number, messageKey, skippedAt, receivedBefore)
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            headerKey = try c.decodeBytes(.headerKey)
            number = try c.decode(UInt32.self, forKey: .number)
            messageKey = try c.decodeBytes(.messageKey)
            skippedAt = try c.decodeIfPresent(Int64.self, forKey: .skippedAt)
            receivedBefore = try c.decodeIfPresent(UInt64.self, forKey: .receivedBefore)
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(Data(headerKey), forKey: .headerKey)
            try c.encode(number, forKey: .number)
            try c.encode(Data(messageKey), forKey: .messageKey)
            try c.encodeIfPresent(skippedAt, forKey: .skippedAt)
            try c.encodeIfPresent(receivedBefore, forKey: .receivedBefore)
        }
    }

    var dhSendingSecret: [UInt8]
    var dhReceiving: [UInt8]?
    var rootKey: [UInt8]
    var chainSending: [UInt8]?
    var chainReceiving: [UInt8]?
    var headerSending: [UInt8]?
    var headerReceiving: [UInt8]?
    var nextHeaderSending: [UInt8]
    var nextHeaderReceiving: [UInt8]
    var sentInChain: UInt32 = 0
    var receivedInChain: UInt32 = 0
    var previousChainLength: UInt32 = 0
    var skipped: [SkippedKey] = []
    /// Messages decrypted in all chains so far (optional: states saved before it existed lack it).
    var received: UInt64?

    /// How many skipped message keys the state holds.
    public var skippedKeyCount: Int { skipped.count }

    /// The joining party, which sends the first message, to the inviter's ratchet key (its second X3DH key).
    public static func joiner(secrets: X3DH.SharedSecrets, inviterRatchetKey: X25519.PublicKey) throws -> DoubleRatchet {
        let dh = X25519.PrivateKey()
        let (rk, cks, nhks) = kdfRoot(secrets.rootKey, try dh.sharedSecret(with: inviterRatchetKey))
        return DoubleRatchet(
            dhSendingSecret: dh.secretBytes, dhReceiving: inviterRatchetKey.bytes, rootKey: rk,
            chainSending: cks, chainReceiving: nil, headerSending: secrets.headerKeyA, headerReceiving: nil,
            nextHeaderSending: nhks, nextHeaderReceiving: secrets.nextHeaderKeyB
        )
    }

    /// The inviting party, whose ratchet key is its second X3DH key; it can send once it has received.
    public static func inviter(secrets: X3DH.SharedSecrets, ratchetKey: X25519.PrivateKey) -> DoubleRatchet {
        DoubleRatchet(
            dhSendingSecret: ratchetKey.secretBytes, dhReceiving: nil, rootKey: secrets.rootKey,
            chainSending: nil, chainReceiving: nil, headerSending: nil, headerReceiving: nil,
            nextHeaderSending: secrets.nextHeaderKeyB, nextHeaderReceiving: secrets.headerKeyA
        )
    }

    /// True once this side may send (always for the joiner; after the first received message for the inviter).
    public var canSend: Bool { chainSending != nil && headerSending != nil }

    // MARK: - Encrypt

    public mutating func encrypt(_ plaintext: [UInt8], associatedData: [UInt8]) throws -> [UInt8] {
        guard let ck = chainSending, let hk = headerSending else {
            throw RatchetError(.notReadyToSend, "no sending chain yet")
        }
        var chain = Self.kdfChain(ck)
        defer { Sodium.wipe(&chain.messageKey) }
        let dhPublic = try X25519.PrivateKey(secretBytes: dhSendingSecret).publicKey
        var header = dhPublic.bytes
        header += Self.bigEndian(previousChainLength)
        header += Self.bigEndian(sentInChain)
        let headerNonce = XChaChaPoly.randomNonce()
        let encryptedHeader = headerNonce + (try XChaChaPoly.seal(header, key: hk, nonce: headerNonce))
        var derived = Self.messageKeyAndNonce(chain.messageKey)
        defer { Sodium.wipe(&derived.key) }
        let body = try XChaChaPoly.seal(plaintext, key: derived.key, nonce: derived.nonce, associatedData: associatedData + encryptedHeader)
        chainSending = chain.next
        sentInChain += 1
        return [Self.version] + encryptedHeader + body
    }

    // MARK: - Decrypt

    /// Decrypts a frame; on any failure the ratchet is left as it was. Skipped keys past
    /// `limits` at `now` are dropped first (a message that needed one is refused as a duplicate
    /// or a bad header).
    public mutating func decrypt(_ frame: [UInt8], associatedData: [UInt8], now: Date = Date(),
                                 limits: SkippedKeyLimits = .default) throws -> [UInt8] {
        var next = self
        let stamp = Int64(now.timeIntervalSince1970.rounded(.down))
        next.expireSkippedKeys(now: stamp, limits: limits)
        let plaintext = try next.decryptInPlace(frame, associatedData: associatedData, now: stamp)
        next.received = (next.received ?? 0) &+ 1
        next.expireSkippedKeys(now: stamp, limits: limits)
        self = next
        return plaintext
    }

    /// Drops the skipped keys that are too old or that too many later messages have passed.
    private mutating func expireSkippedKeys(now: Int64, limits: SkippedKeyLimits) {
        guard !skipped.isEmpty else { return }
        let received = self.received ?? 0
        let maxAge = limits.maxAge.components.seconds
        var kept: [SkippedKey] = []
        kept.reserveCapacity(skipped.count)
        for var key in skipped {
            let at = key.skippedAt ?? now
            let before = key.receivedBefore ?? received
            if now - at > maxAge || received &- before > limits.maxLaterMessages {
                Sodium.wipe(&key.messageKey)
                continue
            }
            key.skippedAt = at
            key.receivedBefore = before
            kept.append(key)
        }
        skipped = kept
    }

    private mutating func decryptInPlace(_ frame: [UInt8], associatedData: [UInt8], now: Int64) throws -> [UInt8] {
        guard frame.count >= 1 + Self.encryptedHeaderLength + XChaChaPoly.tagLength, frame[0] == Self.version else {
            throw RatchetError(.malformed, "not a version \(Self.version) ratchet frame")
        }
        let encryptedHeader = Array(frame[1...Self.encryptedHeaderLength])
        let body = Array(frame[(1 + Self.encryptedHeaderLength)...])
        let ad = associatedData + encryptedHeader

        // A message from a chain position that was skipped earlier (one header trial per chain).
        var tried: [[UInt8]] = []
        for s in skipped where !tried.contains(s.headerKey) {
            tried.append(s.headerKey)
            guard let header = Self.openHeader(encryptedHeader, key: s.headerKey),
                  let i = skipped.firstIndex(where: { $0.headerKey == s.headerKey && $0.number == header.number })
            else { continue }
            let (key, nonce) = Self.messageKeyAndNonce(skipped[i].messageKey)
            guard let plaintext = try? XChaChaPoly.open(body, key: key, nonce: nonce, associatedData: ad) else {
                throw RatchetError(.badMessage, "message body failed authentication")
            }
            var used = skipped.remove(at: i)
            Sodium.wipe(&used.messageKey)
            return plaintext
        }

        let header: Header
        if let hk = headerReceiving, let h = Self.openHeader(encryptedHeader, key: hk) {
            header = h
        } else if let h = Self.openHeader(encryptedHeader, key: nextHeaderReceiving) {
            header = h
            try skipMessageKeys(until: h.previousChainLength, now: now)
            try ratchetStep(peerKey: h.ratchetKey)
        } else {
            throw RatchetError(.badHeader, "header does not open with this connection's keys")
        }
        try skipMessageKeys(until: header.number, now: now)
        guard let ck = chainReceiving else { throw RatchetError(.badHeader, "no receiving chain") }
        var chain = Self.kdfChain(ck)
        var derived = Self.messageKeyAndNonce(chain.messageKey)
        defer {
            Sodium.wipe(&chain.messageKey)
            Sodium.wipe(&derived.key)
        }
        guard let plaintext = try? XChaChaPoly.open(body, key: derived.key, nonce: derived.nonce, associatedData: ad) else {
            Sodium.wipe(&chain.next)
            throw RatchetError(.badMessage, "message body failed authentication")
        }
        chainReceiving = chain.next
        receivedInChain += 1
        return plaintext
    }

    private mutating func skipMessageKeys(until: UInt32, now: Int64) throws {
        guard until >= receivedInChain else {
            // An earlier number in the current chain whose key is gone: a duplicate or replay.
            throw RatchetError(.duplicate, "message number already used")
        }
        guard Int(until - receivedInChain) <= Self.maxSkip else {
            throw RatchetError(.tooManySkipped, "message is \(until - receivedInChain) ahead; at most \(Self.maxSkip) may be skipped")
        }
        guard var ck = chainReceiving, let hk = headerReceiving else { return }
        while receivedInChain < until {
            let (nextCK, mk) = Self.kdfChain(ck)
            skipped.append(SkippedKey(headerKey: hk, number: receivedInChain, messageKey: mk, skippedAt: now, receivedBefore: received ?? 0))
            ck = nextCK
            receivedInChain += 1
        }
        chainReceiving = ck
        if skipped.count > Self.maxSkip {
            for i in 0..<(skipped.count - Self.maxSkip) { Sodium.wipe(&skipped[i].messageKey) }
            skipped.removeFirst(skipped.count - Self.maxSkip)
        }
    }

    private mutating func ratchetStep(peerKey: X25519.PublicKey) throws {
        previousChainLength = sentInChain
        sentInChain = 0
        receivedInChain = 0
        headerSending = nextHeaderSending
        headerReceiving = nextHeaderReceiving
        dhReceiving = peerKey.bytes
        let own = try X25519.PrivateKey(secretBytes: dhSendingSecret)
        (rootKey, chainReceiving, nextHeaderReceiving) = Self.kdfRoot(rootKey, try own.sharedSecret(with: peerKey))
        let fresh = X25519.PrivateKey()
        dhSendingSecret = fresh.secretBytes
        (rootKey, chainSending, nextHeaderSending) = Self.kdfRoot(rootKey, try fresh.sharedSecret(with: peerKey))
    }

    // MARK: - Primitives

    struct Header {
        var ratchetKey: X25519.PublicKey
        var previousChainLength: UInt32
        var number: UInt32
    }

    static func openHeader(_ encrypted: [UInt8], key: [UInt8]) -> Header? {
        let nonce = Array(encrypted.prefix(XChaChaPoly.nonceLength))
        guard let plain = try? XChaChaPoly.open(Array(encrypted.dropFirst(XChaChaPoly.nonceLength)), key: key, nonce: nonce),
              plain.count == headerLength, let dh = try? X25519.PublicKey(bytes: Array(plain[0..<32]))
        else { return nil }
        return Header(ratchetKey: dh, previousChainLength: readBigEndian(plain[32..<36]), number: readBigEndian(plain[36..<40]))
    }

    static func kdfRoot(_ rootKey: [UInt8], _ dhOut: [UInt8]) -> ([UInt8], [UInt8], [UInt8]) {
        let okm = HKDF.sha512(inputKeyMaterial: dhOut, salt: rootKey, info: Array("Swiftplex ratchet root".utf8), length: 96)
        return (Array(okm[0..<32]), Array(okm[32..<64]), Array(okm[64..<96]))
    }

    static func kdfChain(_ chainKey: [UInt8]) -> (next: [UInt8], messageKey: [UInt8]) {
        (Array(HKDF.hmacSHA512(key: chainKey, message: [2]).prefix(32)), Array(HKDF.hmacSHA512(key: chainKey, message: [1]).prefix(32)))
    }

    static func messageKeyAndNonce(_ mk: [UInt8]) -> (key: [UInt8], nonce: [UInt8]) {
        let okm = HKDF.sha512(inputKeyMaterial: mk, salt: [], info: Array("Swiftplex message key".utf8), length: 32 + XChaChaPoly.nonceLength)
        return (Array(okm[0..<32]), Array(okm[32...]))
    }

    static func bigEndian(_ v: UInt32) -> [UInt8] {
        [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
    }

    static func readBigEndian(_ b: ArraySlice<UInt8>) -> UInt32 {
        b.reduce(0) { ($0 << 8) | UInt32($1) }
    }
}

// MARK: - Stored form

/// A state is stored as JSON by the agent on every message sent and received: its keys are
/// written as base64 strings (`Data`), not as arrays of numbers, which cost a JSON number per byte
/// to write and to read. States saved as arrays by earlier versions still read.
extension DoubleRatchet {
    enum CodingKeys: String, CodingKey {
        case dhSendingSecret, dhReceiving, rootKey, chainSending, chainReceiving, headerSending, headerReceiving
        case nextHeaderSending, nextHeaderReceiving, sentInChain, receivedInChain, previousChainLength, skipped, received
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            dhSendingSecret: try c.decodeBytes(.dhSendingSecret), dhReceiving: try c.decodeBytesIfPresent(.dhReceiving),
            rootKey: try c.decodeBytes(.rootKey),
            chainSending: try c.decodeBytesIfPresent(.chainSending), chainReceiving: try c.decodeBytesIfPresent(.chainReceiving),
            headerSending: try c.decodeBytesIfPresent(.headerSending), headerReceiving: try c.decodeBytesIfPresent(.headerReceiving),
            nextHeaderSending: try c.decodeBytes(.nextHeaderSending), nextHeaderReceiving: try c.decodeBytes(.nextHeaderReceiving),
            sentInChain: try c.decodeIfPresent(UInt32.self, forKey: .sentInChain) ?? 0,
            receivedInChain: try c.decodeIfPresent(UInt32.self, forKey: .receivedInChain) ?? 0,
            previousChainLength: try c.decodeIfPresent(UInt32.self, forKey: .previousChainLength) ?? 0,
            skipped: try c.decodeIfPresent([SkippedKey].self, forKey: .skipped) ?? [],
            received: try c.decodeIfPresent(UInt64.self, forKey: .received))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(Data(dhSendingSecret), forKey: .dhSendingSecret)
        try c.encodeIfPresent(dhReceiving.map { Data($0) }, forKey: .dhReceiving)
        try c.encode(Data(rootKey), forKey: .rootKey)
        try c.encodeIfPresent(chainSending.map { Data($0) }, forKey: .chainSending)
        try c.encodeIfPresent(chainReceiving.map { Data($0) }, forKey: .chainReceiving)
        try c.encodeIfPresent(headerSending.map { Data($0) }, forKey: .headerSending)
        try c.encodeIfPresent(headerReceiving.map { Data($0) }, forKey: .headerReceiving)
        try c.encode(Data(nextHeaderSending), forKey: .nextHeaderSending)
        try c.encode(Data(nextHeaderReceiving), forKey: .nextHeaderReceiving)
        try c.encode(sentInChain, forKey: .sentInChain)
        try c.encode(receivedInChain, forKey: .receivedInChain)
        try c.encode(previousChainLength, forKey: .previousChainLength)
        try c.encode(skipped, forKey: .skipped)
        try c.encodeIfPresent(received, forKey: .received)
    }
}

extension KeyedDecodingContainer {
    /// Bytes stored as base64 (`Data`) or, by earlier versions, as an array of numbers.
    func decodeBytes(_ key: Key) throws -> [UInt8] {
        if let data = try? decode(Data.self, forKey: key) { return [UInt8](data) }
        return try decode([UInt8].self, forKey: key)
    }

    func decodeBytesIfPresent(_ key: Key) throws -> [UInt8]? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        return try decodeBytes(key)
    }
}
