import RelayProtocol
import SwiftplexCrypto
import Testing
@testable import Agent

@Suite struct LinkTests {
    func sampleLink() -> InvitationLink {
        let relay = RelayAddress(fingerprint: Sodium.randomBytes(32), host: "relay.example.org", port: 5223)
        let queue = QueueURI(relay: relay, senderId: Sodium.randomBytes(24), recipientDhKey: X25519.PrivateKey().publicKey)
        return InvitationLink(queue: queue, keys: X3DH.PrivateKeys().publicKeys)
    }

    @Test func invitationLinksRoundTrip() throws {
        let link = sampleLink()
        let text = link.description
        #expect(text.hasPrefix("simplex:/invitation#/?v=1&smp=smp%3A%2F%2F"))
        #expect(try InvitationLink(parsing: text) == link)
    }

    @Test func malformedLinksGiveTypedErrors() {
        let good = sampleLink().description
        let cases: [(String, LinkError.Code)] = [
            ("https://example.org", .scheme),
            ("simplex:/contact#/?v=1&smp=x", .kind),
            ("simplex:/invitation", .parameters),
            ("simplex:/invitation#/?v=1", .parameters),
            ("simplex:/invitation#/?v=1&smp=%ZZ", .queue),
            ("simplex:/invitation#/?v=1&smp=smp%3A%2F%2Fbad", .queue),
            (good.replacingOccurrences(of: "x3dh%3D", with: "x3dh%3Dzz"), .keys),
            (good.components(separatedBy: "&e2e=")[0], .parameters),
        ]
        for (text, code) in cases {
            #expect(throws: LinkError(code, "")) { try InvitationLink(parsing: text) }
        }
    }

    /// A group link is a contact address with SimpleX's client data `{"type":"group","groupLinkId":…}`.
    @Test func groupLinksCarryTheirIdAsClientData() throws {
        let queue = sampleLink().queue
        let link = ContactAddressLink(queue: queue, groupLinkId: "AbC-_123")
        let text = link.description
        #expect(text.hasSuffix("&data=%7B%22type%22%3A%22group%22%2C%22groupLinkId%22%3A%22AbC-_123%22%7D"), "\(text)")
        #expect(try ContactAddressLink(parsing: text) == link)
        #expect(try AgentLink(parsing: text) == .contact(link))
        #expect(try ContactAddressLink(parsing: ContactAddressLink(queue: queue).description).groupLinkId == nil)
        let base = ContactAddressLink(queue: queue).description
        for bad in ["%7B%7D", "%7B%22type%22%3A%22contact%22%2C%22groupLinkId%22%3A%22x%22%7D", "%7B%22type%22%3A%22group%22%2C%22groupLinkId%22%3A%22a%2Fb%22%7D",
                    "%ZZ", "%7B%22type%22%3A%22group%22%2C%22groupLinkId%22%3A%22%22%7D", String(repeating: "A", count: 2000)] {
            #expect(throws: LinkError(.parameters, "")) { try ContactAddressLink(parsing: base + "&data=" + bad) }
        }
    }
}

@Suite struct EnvelopeTests {
    @Test func envelopesHaveOneSizeAndOpenOnlyForTheirRecipient() throws {
        let sender = X25519.PrivateKey()
        let recipient = X25519.PrivateKey()
        let short = try Envelope.seal([1], kind: .confirmation, own: sender, peer: recipient.publicKey)
        let long = try Envelope.seal([UInt8](repeating: 7, count: 9000), kind: .confirmation, own: sender, peer: recipient.publicKey)
        #expect(short.count == long.count)
        #expect(short.count <= RelayLimits.maxMessageBodyLength)
        let opened = try Envelope.open(long, own: recipient, knownSender: nil)
        #expect(opened.plaintext == [UInt8](repeating: 7, count: 9000) && opened.senderKey == sender.publicKey)

        let message = try Envelope.seal([2, 3], kind: .message, own: sender, peer: recipient.publicKey)
        #expect(try Envelope.open(message, own: recipient, knownSender: sender.publicKey).plaintext == [2, 3])
        #expect(throws: AgentError(.badEnvelope, "")) { try Envelope.open(message, own: recipient, knownSender: nil) }
        #expect(throws: AgentError(.badEnvelope, "")) { try Envelope.open(message, own: X25519.PrivateKey(), knownSender: sender.publicKey) }
        var tampered = message
        tampered[tampered.count - 3] ^= 1
        #expect(throws: AgentError(.badEnvelope, "")) { try Envelope.open(tampered, own: recipient, knownSender: sender.publicKey) }
        #expect(throws: AgentError(.messageTooLarge, "")) {
            try Envelope.seal([UInt8](repeating: 0, count: Envelope.maxPlaintext + 1), kind: .message, own: sender, peer: recipient.publicKey)
        }
    }

    @Test func agentMessagesRoundTrip() throws {
        let relay = RelayAddress(fingerprint: Sodium.randomBytes(32), host: "127.0.0.1", port: 7000)
        let q = QueueURI(relay: relay, senderId: Sodium.randomBytes(24), recipientDhKey: X25519.PrivateKey().publicKey)
        for m in [AgentMessage.connectionInfo(replyQueue: q, info: [1, 2]), .connectionInfo(replyQueue: nil, info: []), .hello,
                  .message(seq: 1 << 40, previousHash: Sodium.randomBytes(32), body: [9, 9, 9])] {
            #expect(try AgentMessage.decode(m.encoded()) == m)
        }
        #expect(throws: AgentError(.badEnvelope, "")) { try AgentMessage.decode([UInt8(ascii: "M"), 1, 2]) }
        #expect(throws: AgentError(.badEnvelope, "")) { try AgentMessage.decode([]) }
    }
}

@Suite struct ShortLinkTests {
    let relay = RelayAddress(fingerprint: Sodium.randomBytes(32), host: "relay.example.org", port: 5224)

    @Test func shortLinksRoundTripAndKeepTheKeyInTheFragment() throws {
        let link = ShortLink(kind: .invitation, relay: relay, linkId: Sodium.randomBytes(24), key: XChaChaPoly.randomKey())
        let text = link.description
        #expect(text.hasPrefix("https://relay.example.org:5224/i?c="))
        let fragment = try #require(text.split(separator: "#").last)
        #expect(fragment == "\(Base64URL.encode(link.linkId))/\(Base64URL.encode(link.key))")
        #expect(try ShortLink(parsing: text) == link)
        let group = ShortLink(kind: .group, relay: relay, linkId: [4, 5, 6], key: link.key)
        #expect(group.description.hasPrefix("https://relay.example.org:5224/g?c="))
        #expect(try ShortLink(parsing: group.description) == group)
        let address = ShortLink(kind: .contact, relay: RelayAddress(fingerprint: relay.fingerprint, host: "relay.example.org"), linkId: [1, 2, 3], key: link.key)
        #expect(address.description.hasPrefix("https://relay.example.org/a?c="))
        #expect(try ShortLink(parsing: address.description) == address)
    }

    @Test func malformedShortLinksGiveTypedErrors() {
        let good = ShortLink(kind: .contact, relay: relay, linkId: [9, 9, 9], key: XChaChaPoly.randomKey()).description
        let cases: [(String, LinkError.Code)] = [
            ("simplex:/contact#/?v=1", .scheme),
            ("https://relay.example.org/a", .parameters),
            (good.replacingOccurrences(of: "/a?", with: "/x?"), .kind),
            (good.replacingOccurrences(of: "?c=", with: "?d="), .parameters),
            (good.components(separatedBy: "/").dropLast().joined(separator: "/") + "/AAAA", .keys),
            (good.replacingOccurrences(of: "#", with: "#x/"), .keys),
        ]
        for (text, code) in cases {
            #expect(throws: LinkError(code, "")) { try ShortLink(parsing: text) }
        }
    }

    @Test func linkDataOpensOnlyWithItsKeyAndKind() throws {
        let key = XChaChaPoly.randomKey()
        let data = try ShortLink.seal("simplex:/contact#/?v=1&smp=x", kind: .contact, key: key)
        #expect(!String(decoding: data, as: UTF8.self).contains("simplex:/"))
        let right = ShortLink(kind: .contact, relay: relay, linkId: [1], key: key)
        #expect(try right.open(data) == "simplex:/contact#/?v=1&smp=x")
        var wrongKey = right
        wrongKey.key = XChaChaPoly.randomKey()
        #expect(throws: AgentError(.badLink, "")) { try wrongKey.open(data) }
        var wrongKind = right
        wrongKind.kind = .invitation
        #expect(throws: AgentError(.badLink, "")) { try wrongKind.open(data) }
        var tampered = data
        tampered[tampered.count - 1] ^= 1
        #expect(throws: AgentError(.badLink, "")) { try right.open(tampered) }
    }

    @Test func receiptsCarryManySequenceNumbers() throws {
        let seqs: [UInt64] = [1, 2, 3, 1 << 40]
        #expect(try AgentMessage.decode(AgentMessage.receipt(seqs: seqs).encoded()) == .receipt(seqs: seqs))
        #expect(throws: AgentError(.badEnvelope, "")) { try AgentMessage.decode([UInt8(ascii: "V"), 0, 2, 1, 2, 3]) }
        #expect(throws: AgentError(.badEnvelope, "")) { try AgentMessage.decode([UInt8(ascii: "V"), 0, 0]) }
    }
}
