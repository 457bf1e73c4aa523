import RelayProtocol
import SwiftplexBase
import SwiftplexCrypto

/// The per-queue end-to-end layer every agent message travels in, inside the double ratchet's
/// frame and outside the relay's own re-encryption: `crypto_box` between the sender's and the
/// recipient's per-queue X25519 keys, over a fixed-size padded plaintext so that what the relay
/// stores has one length whatever the message.
///
/// Wire form (the relay's SEND body): `[version: 1][kind: C|M]([sender key: 32] if C)[nonce: 24][box]`.
/// `C` (confirmation) carries the sender's key, the first message on a queue; `M` does not.
enum Envelope {
    static let version: UInt8 = 1
    /// Every envelope's plaintext is padded to this many bytes (length prefix included).
    static let paddedLength = 15_900
    /// The largest plaintext an envelope carries.
    static let maxPlaintext = paddedLength - 2

    enum Kind: UInt8 {
        case confirmation = 0x43 // "C"
        case message = 0x4D      // "M"
    }

    struct Opened {
        var kind: Kind
        var senderKey: X25519.PublicKey?
        var plaintext: [UInt8]
    }

    static func seal(_ plaintext: [UInt8], kind: Kind, own: X25519.PrivateKey, peer: X25519.PublicKey) throws -> [UInt8] {
        guard plaintext.count <= maxPlaintext else {
            throw AgentError(.messageTooLarge, "message of \(plaintext.count) bytes exceeds \(maxPlaintext)")
        }
        var padded = [UInt8(plaintext.count >> 8), UInt8(plaintext.count & 0xFF)] + plaintext
        padded += [UInt8](repeating: 0, count: paddedLength - padded.count)
        let nonce = Sodium.randomBytes(BoxKey.nonceLength)
        let boxed = try BoxKey(privateKey: own, peer: peer).seal(padded, nonce: nonce)
        var out: [UInt8] = [version, kind.rawValue]
        if kind == .confirmation { out += own.publicKey.bytes }
        return out + nonce + boxed
    }

    /// Opens an envelope; `knownSender` is the peer key learnt from an earlier confirmation.
    static func open(_ bytes: [UInt8], own: X25519.PrivateKey, knownSender: X25519.PublicKey?) throws -> Opened {
        guard bytes.count >= 2, bytes[0] == version, let kind = Kind(rawValue: bytes[1]) else {
            throw AgentError(.badEnvelope, "not a version \(version) envelope")
        }
        var offset = 2
        var sender = knownSender
        if kind == .confirmation {
            guard bytes.count >= offset + 32, let key = try? X25519.PublicKey(bytes: Array(bytes[offset..<offset + 32])) else {
                throw AgentError(.badEnvelope, "confirmation without a sender key")
            }
            sender = key
            offset += 32
        }
        guard let sender else { throw AgentError(.badEnvelope, "message before any confirmation on this queue") }
        guard bytes.count >= offset + BoxKey.nonceLength + BoxKey.macLength else { throw AgentError(.badEnvelope, "envelope too short") }
        let nonce = Array(bytes[offset..<offset + BoxKey.nonceLength])
        let padded: [UInt8]
        do {
            padded = try BoxKey(privateKey: own, peer: sender).open(Array(bytes[(offset + BoxKey.nonceLength)...]), nonce: nonce)
        } catch {
            throw AgentError(.badEnvelope, "envelope failed authentication")
        }
        guard padded.count >= 2 else { throw AgentError(.badEnvelope, "envelope padding corrupt") }
        let n = Int(padded[0]) << 8 | Int(padded[1])
        guard n <= padded.count - 2 else { throw AgentError(.badEnvelope, "envelope padding corrupt") }
        return Opened(kind: kind, senderKey: kind == .confirmation ? sender : nil, plaintext: Array(padded[2..<2 + n]))
    }
}

/// Messages of the agent's own protocol, carried inside the double ratchet.
enum AgentMessage: Equatable {
    /// The joiner's confirmation (with its reply queue) or the inviter's answer (without).
    case connectionInfo(replyQueue: QueueURI?, info: [UInt8])
    /// The joiner's last handshake step; both sides are connected once it arrives.
    case hello
    /// An application message with its integrity fields.
    case message(seq: UInt64, previousHash: [UInt8], body: [UInt8])
    /// A contact request sent to an address: the requester's own invitation and its info.
    case contactRequest(invitation: InvitationLink, info: [UInt8])
    /// Delivery receipt: the receiver processed the sender's messages with these numbers. Not
    /// numbered itself (a receipt is never acknowledged), so it does not disturb the integrity chain.
    case receipt(seqs: [UInt64])

    /// The most sequence numbers one receipt carries (8 bytes each, well inside one envelope).
    static let maxReceiptSeqs = 1_000

    func encoded() -> [UInt8] {
        switch self {
        case let .connectionInfo(q, info):
            let uri = Array((q?.description ?? "").utf8)
            return [UInt8(ascii: "I"), UInt8(uri.count >> 8), UInt8(uri.count & 0xFF)] + uri + info
        case .hello:
            return [UInt8(ascii: "H")]
        case let .message(seq, hash, body):
            var out: [UInt8] = [UInt8(ascii: "M")]
            for i in (0..<8).reversed() { out.append(UInt8((seq >> (UInt64(i) * 8)) & 0xFF)) }
            return out + hash + body
        case let .contactRequest(invitation, info):
            let link = Array(invitation.description.utf8)
            return [UInt8(ascii: "R"), UInt8(link.count >> 8), UInt8(link.count & 0xFF)] + link + info
        case let .receipt(seqs):
            var out: [UInt8] = [UInt8(ascii: "V"), UInt8(seqs.count >> 8), UInt8(seqs.count & 0xFF)]
            for seq in seqs {
                for i in (0..<8).reversed() { out.append(UInt8((seq >> (UInt64(i) * 8)) & 0xFF)) }
            }
            return out
        }
    }

    static func decode(_ b: [UInt8]) throws -> AgentMessage {
        guard let tag = b.first else { throw AgentError(.badEnvelope, "empty agent message") }
        switch tag {
        case UInt8(ascii: "I"):
            guard b.count >= 3 else { break }
            let n = Int(b[1]) << 8 | Int(b[2])
            guard b.count >= 3 + n else { break }
            let uriText = String(decoding: b[3..<3 + n], as: UTF8.self)
            let q = n == 0 ? nil : try? QueueURI(parsing: uriText)
            if n > 0, q == nil { break }
            return .connectionInfo(replyQueue: q, info: Array(b[(3 + n)...]))
        case UInt8(ascii: "R"):
            guard b.count >= 3 else { break }
            let n = Int(b[1]) << 8 | Int(b[2])
            guard b.count >= 3 + n, let link = try? InvitationLink(parsing: String(decoding: b[3..<3 + n], as: UTF8.self)) else { break }
            return .contactRequest(invitation: link, info: Array(b[(3 + n)...]))
        case UInt8(ascii: "V"):
            guard b.count >= 3 else { break }
            let n = Int(b[1]) << 8 | Int(b[2])
            guard n > 0, n <= maxReceiptSeqs, b.count == 3 + 8 * n else { break }
            return .receipt(seqs: (0..<n).map { k in b[(3 + 8 * k)..<(11 + 8 * k)].reduce(UInt64(0)) { ($0 << 8) | UInt64($1) } })
        case UInt8(ascii: "H"):
            guard b.count == 1 else { break }
            return .hello
        case UInt8(ascii: "M"):
            guard b.count >= 1 + 8 + 32 else { break }
            let seq = b[1..<9].reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
            return .message(seq: seq, previousHash: Array(b[9..<41]), body: Array(b[41...]))
        default:
            break
        }
        throw AgentError(.badEnvelope, "malformed agent message")
    }
}

/// Why an agent operation failed.
public struct AgentError: CodedError {
    public enum Code: String, Sendable {
        case noRelay, unknownConnection, wrongState, badEnvelope, messageTooLarge, relay, store, ownLink
        /// A short link the relay does not know (never set, or deleted with its queue).
        case linkNotFound
        /// A short link whose data does not decrypt or is not a link of its kind.
        case badLink
        /// A short link's data over the relay's limit (or over a list's bound).
        case linkDataTooLarge
        /// A peer's relay that the agent's options forbid (not in the allowed list, or at a
        /// private address); refused before any socket is opened.
        case relayRefused
        /// A peer's relay did not answer within ``AgentOptions/peerRelayTimeout``.
        case timeout
        /// A relay that never completed a handshake failed too often and is not dialled for a while.
        case relayUnreachable
    }
    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}
