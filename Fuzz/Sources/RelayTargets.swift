import NIOCore
import RelayProtocol
import SwiftplexCrypto

private let allocator = ByteBufferAllocator()

private func buffer(_ bytes: [UInt8]) -> ByteBuffer {
    var b = allocator.buffer(capacity: bytes.count)
    b.writeBytes(bytes)
    return b
}

/// Decodes one transmission and its command both ways (a relay reads commands, a client reads
/// responses); whatever decodes must re-encode to the same value.
private func checkTransmission(_ t: ByteBuffer) {
    guard let transmission = try? Transmission.decode(t) else { return }
    var again = allocator.buffer(capacity: t.readableBytes)
    transmission.encode(into: &again)
    fuzzCheck(again == t, "transmission does not re-encode to its bytes")
    checkCommand(transmission.command)
}

private func checkCommand(_ command: ByteBuffer) {
    if let c = try? ClientCommand.decode(command) {
        fuzzCheck((try? ClientCommand.decode(c.encoded())) == c, "command \(c.tag) does not round-trip")
    }
    if let r = try? ServerResponse.decode(command) {
        fuzzCheck((try? ServerResponse.decode(r.encoded())) == r, "response does not round-trip")
    }
}

/// A block as it comes off the TLS stream: the framing (`BlockCodec.decode`), then every
/// transmission in it and every command or response in those.
enum RelayBlockTarget: FuzzTarget {
    static let name = "relay-block"
    static let summary = "RelayProtocol BlockCodec.decode (16 KiB block framing) → Transmission → ClientCommand / ServerResponse"

    static func fuzz(_ data: [UInt8]) {
        // The input as it is, then cut or padded with `#` to a whole block (only whole blocks get
        // past the length check, and libFuzzer's inputs are shorter by default).
        _ = try? BlockCodec.decode(buffer(data))
        var whole = Array(data.prefix(RelayLimits.blockSize))
        whole += [UInt8](repeating: BlockCodec.paddingByte, count: RelayLimits.blockSize - whole.count)
        guard let transmissions = try? BlockCodec.decode(buffer(whole)) else { return }
        fuzzCheck(transmissions.count <= 255, "more than 255 transmissions in a block")
        for t in transmissions {
            fuzzCheck(t.readableBytes <= RelayLimits.maxTransmissionLength, "transmission longer than a block can carry")
            checkTransmission(t)
        }
        // The decoded transmissions pack into one block again, which decodes to them.
        guard !transmissions.isEmpty else { return }
        let blocks = BlockCodec.encode(transmissions, allocator: allocator)
        fuzzCheck(blocks.count == 1, "\(transmissions.count) transmissions from one block need \(blocks.count) blocks")
        fuzzCheck((try? BlockCodec.decode(blocks[0])) == transmissions, "block does not round-trip")
    }

    static func seeds() throws -> [[UInt8]] {
        let session = SessionKeys(sessionId: Sodium.randomBytes(RelayLimits.sessionIdLength), relaySessionKey: X25519.PrivateKey().publicKey)
        let transmissions = try RelayTransmissionTarget.seedTransmissions(session: session)
        // One block per transmission, then all of them packed together.
        var out = transmissions.map { BlockCodec.encode([$0], allocator: allocator)[0] }
        out += BlockCodec.encode(transmissions, allocator: allocator)
        // Seeds are stored without the padding (the target pads), so they stay small.
        return out.map { block in
            var b = block
            let length = Int(b.readInteger(as: UInt16.self)!)
            return Array(block.readableBytesView.prefix(2 + length))
        }
    }
}

/// One transmission (`[auth][corrId][entityId][command]`), its command or response, and the
/// handshake messages, from raw bytes.
enum RelayTransmissionTarget: FuzzTarget {
    static let name = "relay-transmission"
    static let summary = "RelayProtocol Transmission.decode, ClientCommand.decode, ServerResponse.decode, ServerHello/ClientHello.decode"

    static func fuzz(_ data: [UInt8]) {
        let b = buffer(data)
        checkTransmission(b)
        checkCommand(b)
        if let hello = try? ServerHello.decode(b) {
            fuzzCheck((try? ServerHello.decode(hello.encoded())) == hello, "server hello does not round-trip")
        }
        if let hello = try? ClientHello.decode(b) {
            fuzzCheck((try? ClientHello.decode(hello.encoded())) == hello, "client hello does not round-trip")
        }
    }

    static func seedTransmissions(session: SessionKeys) throws -> [ByteBuffer] {
        let ed = AuthPrivateKey.newEd25519()
        let x = AuthPrivateKey.newX25519()
        let id = Sodium.randomBytes(RelayLimits.entityIdLength)
        let commands: [(ClientCommand, AuthPrivateKey?)] = [
            (.new(recipientKey: ed.publicKey, recipientDhKey: X25519.PrivateKey().publicKey), ed),
            (.key(senderKey: x.publicKey), ed),
            (.secureBySender(senderKey: ed.publicKey), ed),
            (.subscribe, x),
            (.ack(messageId: Sodium.randomBytes(RelayLimits.entityIdLength)), ed),
            (.get, ed), (.off, ed), (.delete, ed),
            (.send(flags: .notification, body: Array("hello".utf8)), nil),
            (.send(flags: [], body: Sodium.randomBytes(200)), x),
            (.ping, nil),
            (.linkSet(data: Sodium.randomBytes(64)), ed), (.linkGet, nil), (.linkDelete, ed),
        ]
        var out = commands.map { command, key in
            Transmission.signed(command: command.encoded(), correlationId: Sodium.randomBytes(RelayLimits.correlationIdLength),
                                entityId: command.party == .anyone ? [] : id, key: key, session: session).encoded(allocator: allocator)
        }
        let responses: [ServerResponse] = [
            .ids(recipientId: id, senderId: Sodium.randomBytes(RelayLimits.entityIdLength), serverDhKey: X25519.PrivateKey().publicKey),
            .ok, .message(id: Sodium.randomBytes(RelayLimits.entityIdLength), sealed: Sodium.randomBytes(120)),
            .end, .error(.auth), .error(.syntax), .pong, .linkId(Sodium.randomBytes(RelayLimits.entityIdLength)), .linkData(Sodium.randomBytes(48)),
        ]
        out += responses.map {
            Transmission(correlationId: Sodium.randomBytes(RelayLimits.correlationIdLength), entityId: id, command: $0.encoded())
                .encoded(allocator: allocator)
        }
        return out
    }

    static func seeds() throws -> [[UInt8]] {
        let relayKey = X25519.PrivateKey()
        let session = SessionKeys(sessionId: Sodium.randomBytes(RelayLimits.sessionIdLength), relaySessionKey: relayKey.publicKey)
        var out = try seedTransmissions(session: session).map { Array($0.readableBytesView) }
        out.append(Array(ServerHello(sessionId: session.sessionId, sessionKey: relayKey.publicKey).encoded().readableBytesView))
        out.append(Array(ClientHello(version: RelayLimits.currentVersion).encoded().readableBytesView))
        return out
    }
}
