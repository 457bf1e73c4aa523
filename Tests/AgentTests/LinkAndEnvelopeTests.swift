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
