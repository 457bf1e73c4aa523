@testable import Agent
import RelayProtocol
import SwiftplexCrypto

/// Fixed keys, so that a seed sealed by one process opens in another (a reproducer stays one).
enum FixedKeys {
    static func x25519(_ n: UInt8) -> X25519.PrivateKey {
        // Clamping makes any 32 bytes a valid X25519 secret.
        try! X25519.PrivateKey(secretBytes: [UInt8](repeating: n, count: 32))
    }

    static let recipient = x25519(1)
    static let sender = x25519(2)
    static let relayFingerprint = [UInt8](repeating: 7, count: 32)

    static func queue(host: String = "relay.example", port: Int = 5223, id: UInt8 = 9) -> QueueURI {
        QueueURI(relay: RelayAddress(fingerprint: relayFingerprint, host: host, port: port),
                 senderId: [UInt8](repeating: id, count: RelayLimits.entityIdLength), recipientDhKey: x25519(3).publicKey)
    }

    static var invitation: InvitationLink {
        InvitationLink(queue: queue(), keys: X3DH.PublicKeys(key1: x25519(4).publicKey, key2: x25519(5).publicKey))
    }
}

/// The agent's end-to-end envelope (`Envelope.open`) and the agent message inside it
/// (`AgentMessage.decode`).
///
/// Input: `[mode][rest]`. Mode 0: `rest` is an envelope as a relay delivers it, opened with the
/// recipient's fixed key (both before and after a confirmation). Otherwise `rest` is a plaintext:
/// sealed with the real `Envelope.seal`, opened (it must come back unchanged) and decoded as an
/// agent message, whose re-encoding must decode to the same message.
enum AgentEnvelopeTarget: FuzzTarget {
    static let name = "agent-envelope"
    static let summary = "Agent Envelope.open (crypto_box envelope, padding) and AgentMessage.decode (I/H/M/R/V messages)"

    static func fuzz(_ data: [UInt8]) {
        var r = ByteReader(data)
        let mode = r.byte()
        let rest = r.rest()
        if mode == 0 {
            _ = try? Envelope.open(rest, own: FixedKeys.recipient, knownSender: nil)
            if let opened = try? Envelope.open(rest, own: FixedKeys.recipient, knownSender: FixedKeys.sender.publicKey) {
                checkMessage(opened.plaintext)
            }
            checkMessage(rest)
            return
        }
        let kind: Envelope.Kind = mode & 1 == 0 ? .message : .confirmation
        guard let sealed = try? Envelope.seal(rest, kind: kind, own: FixedKeys.sender, peer: FixedKeys.recipient.publicKey) else {
            fuzzCheck(rest.count > Envelope.maxPlaintext, "seal refused \(rest.count) bytes")
            return
        }
        let known: X25519.PublicKey? = kind == .confirmation ? nil : FixedKeys.sender.publicKey
        let opened = try? Envelope.open(sealed, own: FixedKeys.recipient, knownSender: known)
        fuzzCheck(opened?.plaintext == rest, "a sealed envelope does not open to its plaintext")
        checkMessage(rest)
    }

    static func checkMessage(_ bytes: [UInt8]) {
        guard let m = try? AgentMessage.decode(bytes) else { return }
        fuzzCheck((try? AgentMessage.decode(m.encoded())) == m, "agent message does not round-trip")
    }

    static func seeds() throws -> [[UInt8]] {
        let messages: [AgentMessage] = [
            .connectionInfo(replyQueue: FixedKeys.queue(), info: Array(#"{"profile":{"displayName":"alice"}}"#.utf8)),
            .connectionInfo(replyQueue: nil, info: Array("info".utf8)),
            .hello,
            .message(seq: 1, previousHash: [UInt8](repeating: 0, count: 32), body: Array("hello".utf8)),
            .message(seq: 42, previousHash: [UInt8](repeating: 0xAB, count: 32), body: []),
            .contactRequest(invitation: FixedKeys.invitation, info: Array("request".utf8)),
            .receipt(seqs: [1, 2, 3]),
        ]
        var out: [[UInt8]] = messages.map { [1] + $0.encoded() }
        out.append([2] + AgentMessage.hello.encoded())
        // Real envelopes (mode 0): a confirmation and a message from the fixed sender.
        out.append([0] + (try Envelope.seal(AgentMessage.hello.encoded(), kind: .confirmation, own: FixedKeys.sender, peer: FixedKeys.recipient.publicKey)))
        out.append([0] + (try Envelope.seal(messages[3].encoded(), kind: .message, own: FixedKeys.sender, peer: FixedKeys.recipient.publicKey)))
        return out
    }
}

/// Every link parser: full links (`simplex:/invitation`, `simplex:/contact`), short links
/// (`https://…/i|a?c=…#id/key`) and the relay and queue addresses inside them; what parses must
/// print to text that parses to the same value. Mode byte ≥ 0x80: the rest is short-link data
/// opened with a fixed key (`ShortLink.open`), then sealed and opened again; mode byte 0x7F: the
/// rest is a version 2 link-data body (`LinkDataCodec.decodeBody`: link, owners, relay links, user
/// data), which must encode and decode to the same value, and is then sealed under a fixed root key
/// and opened again (`LinkDataCodec.seal`/`open`); sealed v2 data that opens is checked the same way.
enum LinksTarget: FuzzTarget {
    static let name = "links"
    static let summary = "Agent AgentLink/InvitationLink/ContactAddressLink/ShortLink parsing and ShortLink.open; RelayAddress, QueueURI"

    static let shortLink = ShortLink(kind: .invitation, relay: RelayAddress(fingerprint: FixedKeys.relayFingerprint, host: "relay.example"),
                                     linkId: [UInt8](repeating: 3, count: 24), key: [UInt8](repeating: 4, count: 32))

    static let root = try! Ed25519.PrivateKey(secretBytes: [UInt8](repeating: 6, count: 32))
    static let channelLink = ShortLink(kind: .channel, relay: shortLink.relay, linkId: [UInt8](repeating: 3, count: 24),
                                       key: LinkDataCodec.linkKey(rootKey: root.publicKey, salt: LinkDataCodec.salt(root)))

    static func fuzz(_ data: [UInt8]) {
        if data.first == 0x7F {
            let rest = Array(data.dropFirst())
            if let opened = try? LinkDataCodec.open(rest, short: channelLink) { roundTrip(opened.link, opened.data) }
            if let decoded = try? LinkDataCodec.decodeBody(rest) {
                let again = try? LinkDataCodec.decodeBody(LinkDataCodec.encodeBody(link: decoded.link, data: decoded.data))
                fuzzCheck(again?.link == decoded.link && again?.data == decoded.data, "link data body does not round-trip")
                roundTrip(decoded.link, decoded.data)
            }
            return
        }
        if data.first.map({ $0 >= 0x80 }) == true {
            let rest = Array(data.dropFirst())
            if let opened = try? shortLink.open(rest) { _ = try? AgentLink(parsing: opened) }
            let linkText = text(rest)
            if let sealed = try? ShortLink.seal(linkText, kind: shortLink.kind, key: shortLink.key) {
                fuzzCheck((try? shortLink.open(sealed)) == linkText, "sealed short-link data does not open to its text")
            }
            return
        }
        let s = text(data)
        if let l = try? AgentLink(parsing: s) {
            fuzzCheck((try? AgentLink(parsing: l.description)) == l, "link does not round-trip")
        }
        if let l = try? InvitationLink(parsing: s) {
            fuzzCheck((try? InvitationLink(parsing: l.description)) == l, "invitation does not round-trip")
        }
        if let l = try? ContactAddressLink(parsing: s) {
            fuzzCheck((try? ContactAddressLink(parsing: l.description)) == l, "contact address does not round-trip")
        }
        if let l = try? ShortLink(parsing: s) {
            fuzzCheck((try? ShortLink(parsing: l.description)) == l, "short link does not round-trip")
        }
        if let q = try? QueueURI(parsing: s) {
            fuzzCheck((try? QueueURI(parsing: q.description)) == q, "queue URI does not round-trip")
        }
        if let a = try? RelayAddress(parsing: s) {
            fuzzCheck((try? RelayAddress(parsing: a.description)) == a, "relay address does not round-trip")
        }
    }

    /// Seals `link` and `data` under the fixed root key (when they fit) and opens them again.
    static func roundTrip(_ link: String, _ data: ShortLinkData) {
        guard let sealed = try? LinkDataCodec.seal(link: link, data: data, kind: .channel, root: root) else { return }
        fuzzCheck(sealed.key == channelLink.key, "link data from the fixed root key does not seal under the link's key")
        let reopened = try? LinkDataCodec.open(sealed.sealed, short: channelLink)
        fuzzCheck(reopened?.link == link && reopened?.data == data, "sealed link data does not open to itself")
    }

    static func seeds() throws -> [[UInt8]] {
        let v6 = FixedKeys.queue(host: "::1", port: 5224)
        let links: [String] = [
            FixedKeys.invitation.description,
            ContactAddressLink(queue: FixedKeys.queue()).description,
            ContactAddressLink(queue: v6).description,
            shortLink.description,
            ShortLink(kind: .contact, relay: v6.relay, linkId: [1, 2, 3], key: [UInt8](repeating: 5, count: 32)).description,
            FixedKeys.queue().description,
            v6.relay.description,
            "  " + FixedKeys.invitation.description + "\n",
        ]
        var out = links.map { Array($0.utf8) }
        out.append([0x80] + (try ShortLink.seal(FixedKeys.invitation.description, kind: .invitation, key: shortLink.key)))
        let relayLink = ShortLink(kind: .group, relay: v6.relay, linkId: [1, 2, 3], key: [UInt8](repeating: 5, count: 32))
        let owner = LinkOwner.authorized(ownerId: [1, 2, 3, 4], key: root, senderId: FixedKeys.queue().senderId, by: root)
        let linkData = ShortLinkData(direct: false, owners: [owner], relays: [relayLink],
                                     userData: Array(#"{"groupProfile":{"displayName":"news","fullName":""}}"#.utf8))
        out.append([0x7F] + (try LinkDataCodec.encodeBody(link: ContactAddressLink(queue: FixedKeys.queue()).description, data: linkData)))
        out.append(Array(channelLink.description.utf8))
        return out
    }
}
