import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

/// What a signature binds a message to (SimpleX `ChatBinding`): `G` a member of a channel
/// (`publicGroupId`, the author's member id), `C` the channel itself (a post `asGroup`, only
/// `publicGroupId`) — so a signature from one channel or one member is worthless in another.
public enum ChatBinding: UInt8, Sendable, Hashable {
    case group = 0x47 // "G"
    case channel = 0x43 // "C"
}

/// One element of a channel's binary batch (CPROTO "Binary batch format", `Protocol.hs`
/// `parseChatMessages` `elementP`): a plain JSON message (`{…`), or a signed one
/// (`/ binding sigCount (keyRef 'M' ‖ len ‖ 64-byte Ed25519 signature)+ json`). The signed body is
/// kept byte for byte: a relay forwards it verbatim, so the signature still verifies at
/// subscribers, and any change to it does not.
public enum ChannelElement: Sendable, Hashable {
    case plain(body: [UInt8])
    case signed(binding: ChatBinding, signatures: [[UInt8]], body: [UInt8])

    public var body: [UInt8] {
        switch self {
        case let .plain(b), let .signed(_, _, b): b
        }
    }

    public var isSigned: Bool { if case .signed = self { true } else { false } }

    /// The message the body holds (``GroupMessage/decodeEnvelope(_:asConnInfo:)``'s checks and limit).
    public func envelope() throws(GroupMessageError) -> GroupEnvelope { try GroupMessage.decodeEnvelope(body) }

    /// Signs `envelope` (its JSON as sent) with the author's member key.
    public static func sign(_ envelope: GroupEnvelope, binding: ChatBinding, publicGroupId: [UInt8], author: MemberId,
                            key: Ed25519.PrivateKey) throws(GroupMessageError) -> ChannelElement {
        let body = try GroupMessage.encode(envelope)
        let prefix = ChannelSigning.bindingPrefix(binding, publicGroupId: publicGroupId, member: author)
        return .signed(binding: binding, signatures: [key.signature(for: prefix + body)], body: body)
    }

    public static func plain(_ envelope: GroupEnvelope) throws(GroupMessageError) -> ChannelElement {
        .plain(body: try GroupMessage.encode(envelope))
    }

    public var bytes: [UInt8] {
        switch self {
        case let .plain(body): return body
        case let .signed(binding, signatures, body):
            var out: [UInt8] = [UInt8(ascii: "/"), binding.rawValue, UInt8(signatures.count)]
            for s in signatures { out += [UInt8(ascii: "M"), UInt8(s.count)] + s }
            return out + body
        }
    }

    /// Strict decoding: a plain element must be a JSON object; a signed one has a known binding,
    /// 1…255 member signatures of exactly 64 bytes and a JSON body. Nothing else is accepted
    /// (file chunks and nested forwards are not elements of this kind).
    public init(decoding bytes: [UInt8]) throws(GroupMessageError) {
        var r = ByteReader(bytes)
        self = try Self.read(&r)
    }

    static func read(_ r: inout ByteReader) throws(GroupMessageError) -> ChannelElement {
        guard let first = r.peek() else { throw GroupMessageError(.missingField, "element: empty") }
        switch first {
        case UInt8(ascii: "{"):
            return .plain(body: r.rest())
        case UInt8(ascii: "/"):
            r.skip()
            guard let b = r.byte(), let binding = ChatBinding(rawValue: b) else { throw GroupMessageError(.invalidValue, "element: unknown chat binding") }
            guard let n = r.byte(), n > 0 else { throw GroupMessageError(.invalidValue, "element: a signed element needs 1…255 signatures") }
            var sigs: [[UInt8]] = []
            for _ in 0 ..< n {
                guard r.byte() == UInt8(ascii: "M") else { throw GroupMessageError(.invalidValue, "element: unknown signature key reference") }
                guard let len = r.byte(), Int(len) == Ed25519.signatureLength, let sig = r.bytes(Int(len)) else {
                    throw GroupMessageError(.invalidValue, "element: a signature is not 64 bytes")
                }
                sigs.append(sig)
            }
            let body = r.rest()
            guard body.first == UInt8(ascii: "{") else { throw GroupMessageError(.wrongType, "element: signed body is not a JSON object") }
            return .signed(binding: binding, signatures: sigs, body: body)
        default:
            throw GroupMessageError(.invalidValue, "element: unknown element prefix")
        }
    }
}

/// SimpleX `FwdSender`: whom a relay attributes a forwarded message to.
public enum ForwardSender: Sendable, Hashable {
    /// `M memberId memberName`: an owner (or moderator) by member id.
    case member(MemberId, name: String)
    /// `C`: the channel itself (`asGroup` posts) — the relay does not reveal which owner posted.
    case channel
}

/// A forward element (`'>' fwdSender brokerTs element`): a message a relay passes on, with the
/// time its SMP server received it (seconds since the epoch, SimpleX `SystemTime`), and the
/// author's element verbatim.
public struct ForwardedElement: Sendable, Hashable {
    public var sender: ForwardSender
    public var brokerTs: Int64
    public var element: ChannelElement

    public init(sender: ForwardSender, brokerTs: Int64, element: ChannelElement) {
        self.sender = sender
        self.brokerTs = brokerTs
        self.element = element
    }

    public var bytes: [UInt8] {
        var out: [UInt8] = [UInt8(ascii: ">")]
        switch sender {
        case let .member(id, name):
            out.append(UInt8(ascii: "M"))
            let raw = ChannelSigning.memberIdBytes(id)
            out += [UInt8(raw.count)] + raw
            let n = Self.nameBytes(name)
            out += [UInt8(n.count)] + n
        case .channel:
            out.append(UInt8(ascii: "C"))
        }
        withUnsafeBytes(of: brokerTs.bigEndian) { out += $0 }
        return out + element.bytes
    }

    /// A name's UTF-8, cut to 255 bytes at a character boundary (a one-byte length).
    static func nameBytes(_ name: String) -> [UInt8] {
        var out: [UInt8] = []
        for ch in name {
            let b = Array(String(ch).utf8)
            if out.count + b.count > 255 { break }
            out += b
        }
        return out
    }

    public init(decoding bytes: [UInt8]) throws(GroupMessageError) {
        var r = ByteReader(bytes)
        self = try Self.read(&r)
    }

    static func read(_ r: inout ByteReader) throws(GroupMessageError) -> ForwardedElement {
        guard r.byte() == UInt8(ascii: ">") else { throw GroupMessageError(.invalidValue, "forward: not a forward element") }
        let sender: ForwardSender
        switch r.byte() {
        case UInt8(ascii: "M"):
            guard let n = r.byte(), n > 0, let raw = r.bytes(Int(n)) else { throw GroupMessageError(.invalidValue, "forward: member id is missing") }
            guard let id = MemberId(Base64URL.encode(raw)) else { throw GroupMessageError(.invalidValue, "forward: member id is too long") }
            guard let m = r.byte(), let nameBytes = r.bytes(Int(m)) else { throw GroupMessageError(.invalidValue, "forward: member name is cut") }
            guard let name = String(validating: nameBytes, as: UTF8.self) else { throw GroupMessageError(.invalidValue, "forward: member name is not UTF-8") }
            sender = .member(id, name: name)
        case UInt8(ascii: "C"):
            sender = .channel
        default:
            throw GroupMessageError(.invalidValue, "forward: unknown sender tag")
        }
        guard let ts = r.bytes(8) else { throw GroupMessageError(.invalidValue, "forward: broker time is cut") }
        let brokerTs = ts.reduce(Int64(0)) { ($0 << 8) | Int64($1) }
        guard r.peek() != UInt8(ascii: ">") else { throw GroupMessageError(.notForwardable, "forward: a forward cannot carry a forward") }
        return ForwardedElement(sender: sender, brokerTs: brokerTs, element: try ChannelElement.read(&r))
    }
}

/// One item of a binary batch: the author's own element, or a relay's forward.
public enum BatchItem: Sendable, Hashable {
    case element(ChannelElement)
    case forward(ForwardedElement)

    public var bytes: [UInt8] {
        switch self {
        case let .element(e): e.bytes
        case let .forward(f): f.bytes
        }
    }

    public init(decoding bytes: [UInt8]) throws(GroupMessageError) {
        if bytes.first == UInt8(ascii: ">") {
            self = .forward(try ForwardedElement(decoding: bytes))
        } else {
            self = .element(try ChannelElement(decoding: bytes))
        }
    }
}

/// A binary batch (`'=' count (len:2 BE ‖ element)*`, `Protocol.hs` `decodeBinaryBatch`): how
/// owners send to relays and relays deliver to subscribers.
public enum ChannelBatch {
    public static func encode(_ items: [BatchItem]) throws(GroupMessageError) -> [UInt8] {
        guard !items.isEmpty, items.count <= ChannelLimits.maxBatchElements else {
            throw GroupMessageError(.tooLarge, "batch: 1…\(ChannelLimits.maxBatchElements) elements")
        }
        var out: [UInt8] = [UInt8(ascii: "="), UInt8(items.count)]
        for item in items {
            let b = item.bytes
            guard b.count <= 0xFFFF else { throw GroupMessageError(.tooLarge, "batch: an element is over 65535 bytes") }
            out += [UInt8(b.count >> 8), UInt8(b.count & 0xFF)] + b
        }
        guard out.count <= ChannelLimits.maxBatchBytes else { throw GroupMessageError(.tooLarge, "batch: over \(ChannelLimits.maxBatchBytes) bytes") }
        return out
    }

    /// Decodes a whole batch; one malformed element fails the batch (as SimpleX's `parseAll`
    /// fails the list), so that nothing of a corrupted batch is used.
    public static func decode(_ bytes: [UInt8]) throws(GroupMessageError) -> [BatchItem] {
        guard bytes.count <= ChannelLimits.maxBatchBytes else { throw GroupMessageError(.tooLarge, "batch: over \(ChannelLimits.maxBatchBytes) bytes") }
        var r = ByteReader(bytes)
        guard r.byte() == UInt8(ascii: "=") else { throw GroupMessageError(.invalidValue, "batch: not a binary batch") }
        guard let n = r.byte(), n > 0 else { throw GroupMessageError(.invalidValue, "batch: no elements") }
        var items: [BatchItem] = []
        for _ in 0 ..< n {
            guard let hi = r.byte(), let lo = r.byte(), let el = r.bytes(Int(hi) << 8 | Int(lo)) else {
                throw GroupMessageError(.invalidValue, "batch: an element is cut")
            }
            items.append(try BatchItem(decoding: el))
        }
        guard r.isAtEnd else { throw GroupMessageError(.invalidValue, "batch: bytes after the last element") }
        return items
    }
}

/// Signing and verification (CPROTO "Message signing").
public enum ChannelSigning {
    /// `smpEncode binding ‖ smpEncode (publicGroupId[, memberId])`: one-byte lengths before each.
    public static func bindingPrefix(_ binding: ChatBinding, publicGroupId: [UInt8], member: MemberId?) -> [UInt8] {
        var out: [UInt8] = [binding.rawValue, UInt8(min(publicGroupId.count, 255))] + publicGroupId.prefix(255)
        if binding == .group, let member {
            let raw = memberIdBytes(member)
            out += [UInt8(raw.count)] + raw
        }
        return out
    }

    /// The member id's bytes (its base64url decoded; the text itself if it does not decode).
    static func memberIdBytes(_ id: MemberId) -> [UInt8] {
        Array((Base64URL.decode(id.text) ?? Array(id.text.utf8)).prefix(255))
    }

    /// Whether every signature of `element` verifies with `key` for `author` (group binding) or for
    /// the channel (channel binding). A plain element never verifies.
    public static func verify(_ element: ChannelElement, publicGroupId: [UInt8], author: MemberId, key: MemberKey) -> Bool {
        guard case let .signed(binding, signatures, body) = element, !signatures.isEmpty else { return false }
        let prefix = bindingPrefix(binding, publicGroupId: publicGroupId, member: author)
        let signed = prefix + body
        return signatures.allSatisfy { key.publicKey.isValidSignature($0, for: signed) }
    }
}

/// A cursor over bytes.
struct ByteReader {
    let bytes: [UInt8]
    var i = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var isAtEnd: Bool { i >= bytes.count }
    func peek() -> UInt8? { i < bytes.count ? bytes[i] : nil }
    mutating func skip() { i += 1 }
    mutating func byte() -> UInt8? {
        guard i < bytes.count else { return nil }
        defer { i += 1 }
        return bytes[i]
    }
    mutating func bytes(_ n: Int) -> [UInt8]? {
        guard n >= 0, i + n <= bytes.count else { return nil }
        defer { i += n }
        return Array(bytes[i ..< i + n])
    }
    mutating func rest() -> [UInt8] {
        defer { i = bytes.count }
        return Array(bytes[i...])
    }
}
