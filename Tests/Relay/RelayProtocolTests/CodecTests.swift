import NIOCore
import NIOEmbedded
import SwiftplexCrypto
import Testing
@testable import RelayProtocol

@Suite struct BlockCodecTests {
    let allocator = ByteBufferAllocator()

    func transmission(_ size: Int, fill: UInt8) -> ByteBuffer {
        allocator.buffer(bytes: [UInt8](repeating: fill, count: size))
    }

    @Test func packsSeveralTransmissionsPerBlockAndSplitsWhenFull() throws {
        let ts = (0..<10).map { transmission(3000, fill: UInt8($0)) }
        let blocks = BlockCodec.encode(ts, allocator: allocator)
        #expect(blocks.count == 2) // five 3000-byte transmissions fit in 16 KiB, not six
        #expect(blocks.allSatisfy { $0.readableBytes == RelayLimits.blockSize })
        let decoded = try blocks.flatMap { try BlockCodec.decode($0) }
        #expect(decoded == ts)
    }

    @Test func largestTransmissionFitsExactly() throws {
        let t = transmission(RelayLimits.maxTransmissionLength, fill: 7)
        let blocks = BlockCodec.encode([t], allocator: allocator)
        #expect(blocks.count == 1)
        #expect(try BlockCodec.decode(blocks[0]) == [t])
    }

    @Test func rejectsMalformedBlocks() throws {
        var good = BlockCodec.encode([transmission(10, fill: 1)], allocator: allocator)[0]
        // Content length larger than the block.
        var bad = good
        bad.setInteger(UInt16(20_000), at: 0)
        #expect(throws: RelayErrorCode.block) { try BlockCodec.decode(bad) }
        // Count claims more transmissions than present.
        bad = good
        bad.setInteger(UInt8(2), at: 2)
        #expect(throws: RelayErrorCode.block) { try BlockCodec.decode(bad) }
        // Trailing bytes inside the declared content.
        bad = good
        bad.setInteger(UInt16(good.getInteger(at: 0, as: UInt16.self)! + 1), at: 0)
        #expect(throws: RelayErrorCode.block) { try BlockCodec.decode(bad) }
        // Wrong size.
        let short = good.readSlice(length: 100)!
        #expect(throws: RelayErrorCode.block) { try BlockCodec.decode(short) }
        // Zero content length.
        bad = good
        bad.setInteger(UInt16(0), at: 0)
        #expect(throws: RelayErrorCode.block) { try BlockCodec.decode(bad) }
    }

    @Test func decoderCutsStreamIntoBlocksWhateverTheChunking() throws {
        let blocks = BlockCodec.encode((0..<12).map { transmission(2000, fill: UInt8($0)) }, allocator: allocator)
        var stream = allocator.buffer(capacity: blocks.count * RelayLimits.blockSize)
        for var b in blocks { stream.writeBuffer(&b) }

        for chunk in [1, 7, 1000, RelayLimits.blockSize, stream.readableBytes] {
            let channel = EmbeddedChannel(handler: ByteToMessageHandler(BlockDecoder()))
            var copy = stream
            while copy.readableBytes > 0 {
                let piece = copy.readSlice(length: min(chunk, copy.readableBytes))!
                try channel.writeInbound(piece)
            }
            var received: [ByteBuffer] = []
            while let b = try channel.readInbound(as: ByteBuffer.self) { received.append(b) }
            #expect(received == blocks, "chunk size \(chunk)")
            _ = try channel.finish()
        }
    }
}

@Suite struct CommandCodecTests {
    @Test func everyCommandRoundTrips() throws {
        let ek = AuthPublicKey.ed25519(Ed25519.PrivateKey().publicKey)
        let xk = AuthPublicKey.x25519(X25519.PrivateKey().publicKey)
        let dh = X25519.PrivateKey().publicKey
        let commands: [ClientCommand] = [
            .new(recipientKey: ek, recipientDhKey: dh), .new(recipientKey: xk, recipientDhKey: dh),
            .key(senderKey: ek), .key(senderKey: xk), .secureBySender(senderKey: xk),
            .subscribe, .ack(messageId: Sodium.randomBytes(24)), .get, .off, .delete,
            .send(flags: .notification, body: Array("hi".utf8)), .send(flags: [], body: []),
            .send(flags: [], body: [UInt8](repeating: 1, count: RelayLimits.maxMessageBodyLength)),
            .ping, .linkSet(data: [1, 2, 3]), .linkGet, .linkDelete,
        ]
        for c in commands {
            #expect(try ClientCommand.decode(c.encoded()) == c, "\(c.tag)")
        }
    }

    @Test func malformedCommandsAreTypedErrors() throws {
        let a = ByteBufferAllocator()
        #expect(throws: RelayErrorCode.syntax) { try ClientCommand.decode(a.buffer(string: "NOPE")) }
        #expect(throws: RelayErrorCode.syntax) { try ClientCommand.decode(a.buffer(string: "")) }
        #expect(throws: RelayErrorCode.syntax) { try ClientCommand.decode(a.buffer(string: "PING extra")) }
        #expect(throws: RelayErrorCode.syntax) { try ClientCommand.decode(a.buffer(string: "KEY ")) }
        var shortKey = a.buffer(string: "KEY ")
        shortKey.writeShortBytes([1, 2, 3])
        #expect(throws: RelayErrorCode.syntax) { try ClientCommand.decode(shortKey) }
        var truncated = a.buffer(string: "SEND ")
        truncated.writeInteger(UInt8(0))
        truncated.writeInteger(UInt16(100))
        truncated.writeBytes([1, 2, 3])
        #expect(throws: RelayErrorCode.syntax) { try ClientCommand.decode(truncated) }
        let huge = ClientCommand.send(flags: [], body: [UInt8](repeating: 0, count: RelayLimits.maxMessageBodyLength + 1))
        #expect(throws: RelayErrorCode.largeMessage) { try ClientCommand.decode(huge.encoded()) }
    }

    @Test func everyResponseRoundTrips() throws {
        let responses: [ServerResponse] = [
            .ids(recipientId: Sodium.randomBytes(24), senderId: Sodium.randomBytes(24), serverDhKey: X25519.PrivateKey().publicKey),
            .ok, .message(id: Sodium.randomBytes(24), sealed: [9, 9]), .end, .pong,
            .linkId(Sodium.randomBytes(24)), .linkData([1, 2]),
        ] + RelayErrorCode.allCases.map { .error($0) }
        for r in responses {
            #expect(try ServerResponse.decode(r.encoded()) == r)
        }
    }

    @Test(arguments: [AuthPrivateKey.newEd25519(), AuthPrivateKey.newX25519()])
    func authorisedTransmissionsBindTheSession(key: AuthPrivateKey) throws {
        let relayKey = X25519.PrivateKey()
        let sessionId = Sodium.randomBytes(32)
        let relaySide = SessionKeys(sessionId: sessionId, relayKey: relayKey)
        let clientSide = SessionKeys(sessionId: sessionId, relaySessionKey: relayKey.publicKey)
        let t = Transmission.signed(command: ClientCommand.subscribe.encoded(), correlationId: Sodium.randomBytes(24),
                                    entityId: Sodium.randomBytes(24), key: key, session: clientSide)
        #expect(t.signature.count == key.publicKey.authorizationLength)
        let d = try Transmission.decode(t.encoded(allocator: ByteBufferAllocator()))
        #expect(d.signature == t.signature)
        #expect(relaySide.verify(d.signature, signedBytes: d.signedBytes(sessionId: sessionId), correlationId: d.correlationId, key: key.publicKey))
        // Another session (other ID and, for X25519, other relay key) does not accept it.
        let otherRelayKey = X25519.PrivateKey()
        let other = SessionKeys(sessionId: Sodium.randomBytes(32), relayKey: otherRelayKey)
        #expect(!other.verify(d.signature, signedBytes: d.signedBytes(sessionId: other.sessionId), correlationId: d.correlationId, key: key.publicKey))
        // Changing any covered field breaks it.
        var changed = d
        changed.entityId = Sodium.randomBytes(24)
        #expect(!relaySide.verify(changed.signature, signedBytes: changed.signedBytes(sessionId: sessionId), correlationId: changed.correlationId, key: key.publicKey))
        // Another key of the same kind does not verify it.
        let otherKey: AuthPrivateKey = key.publicKey.authorizationLength == 64 ? .newEd25519() : .newX25519()
        #expect(!relaySide.verify(d.signature, signedBytes: d.signedBytes(sessionId: sessionId), correlationId: d.correlationId, key: otherKey.publicKey))
    }

    @Test func authKeysRoundTripAndRejectJunk() throws {
        for key in [AuthPrivateKey.newEd25519(), .newX25519()] {
            #expect(try AuthPublicKey(wireBytes: key.publicKey.wireBytes) == key.publicKey)
            #expect(try AuthPrivateKey(secretBytes: key.secretBytes).publicKey == key.publicKey)
            #expect(!"\(key)".contains(Base64URL.encode(key.secretBytes)))
        }
        #expect(throws: RelayErrorCode.syntax) { try AuthPublicKey(wireBytes: [UInt8(ascii: "Q")] + Sodium.randomBytes(32)) }
        #expect(throws: RelayErrorCode.syntax) { try AuthPublicKey(wireBytes: [UInt8(ascii: "E")] + Sodium.randomBytes(31)) }
    }

    @Test func sealedDeliveriesDifferFromWhatWasSent() throws {
        let relaySide = X25519.PrivateKey()
        let recipientSide = X25519.PrivateKey()
        let body = Array("the same body".utf8)
        let id = Sodium.randomBytes(24)
        let sealed = try ReceivedMessage.seal(id: id, timestamp: 1_700_000_000, flags: .notification, body: body,
                                              key: try BoxKey(privateKey: relaySide, peer: recipientSide.publicKey))
        #expect(!sealed.contains(subsequence: body))
        let opened = try ReceivedMessage.open(id: id, sealed: sealed, key: try BoxKey(privateKey: recipientSide, peer: relaySide.publicKey))
        #expect(opened == ReceivedMessage(id: id, timestamp: 1_700_000_000, flags: .notification, body: body))
    }

    @Test func handshakeRoundTrips() throws {
        let hello = ServerHello(sessionId: Sodium.randomBytes(32), sessionKey: X25519.PrivateKey().publicKey)
        #expect(try ServerHello.decode(hello.encoded()) == hello)
        #expect(try ClientHello.decode(ClientHello(version: 1).encoded()) == ClientHello(version: 1))
        #expect(throws: RelayErrorCode.session) { try ServerHello.decode(ByteBufferAllocator().buffer(string: "SPXH")) }
    }
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        for i in 0...(count - subsequence.count) where Array(self[i..<i + subsequence.count]) == subsequence { return true }
        return false
    }
}

@Suite struct AddressTests {
    let fp = Base64URL.encode([UInt8](repeating: 7, count: 32))

    @Test func parsesAndPrintsRelayAddresses() throws {
        let a = try RelayAddress(parsing: "smp://\(fp)@relay.example.org")
        #expect(a.host == "relay.example.org" && a.port == 5223)
        #expect(a.description == "smp://\(fp)@relay.example.org")
        let b = try RelayAddress(parsing: "smp://\(fp)@127.0.0.1:6000")
        #expect(b.port == 6000 && b.description == "smp://\(fp)@127.0.0.1:6000")
        let c = try RelayAddress(parsing: "smp://\(fp)@[::1]:7000")
        #expect(c.host == "::1" && c.port == 7000 && c.description == "smp://\(fp)@[::1]:7000")
    }

    @Test func refusesMalformedRelayAddresses() {
        let cases: [(String, AddressError.Code)] = [
            ("http://\(fp)@host", .scheme),
            ("smp://host", .fingerprint),
            ("smp://abc@host", .fingerprint),
            ("smp://\(fp)@host:notaport", .port),
            ("smp://\(fp)@host:70000", .port),
            ("smp://\(fp)@", .host),
            ("smp://\(fp)@ho st", .host),
        ]
        for (text, code) in cases {
            #expect(throws: AddressError(code, "")) { try RelayAddress(parsing: text) }
        }
    }

    @Test func queueURIsRoundTrip() throws {
        let relay = try RelayAddress(parsing: "smp://\(fp)@localhost:5224")
        let uri = QueueURI(relay: relay, senderId: Sodium.randomBytes(24), recipientDhKey: X25519.PrivateKey().publicKey)
        #expect(try QueueURI(parsing: uri.description) == uri)
        #expect(throws: AddressError(.queueId, "")) { try QueueURI(parsing: "smp://\(fp)@localhost:5224/short#/?v=1&dh=x") }
        #expect(throws: AddressError(.parameters, "")) {
            try QueueURI(parsing: "smp://\(fp)@localhost/\(Base64URL.encode(Sodium.randomBytes(24)))#/?v=1")
        }
    }
}
