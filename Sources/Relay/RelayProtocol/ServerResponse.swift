import NIOCore
import SwiftplexCrypto

/// A message as the recipient sees it after opening the relay's per-queue encryption.
public struct ReceivedMessage: Sendable, Equatable {
    public var id: [UInt8]
    /// Seconds since 1970 when the relay accepted the message.
    public var timestamp: Int64
    public var flags: MessageFlags
    public var body: [UInt8]

    public init(id: [UInt8], timestamp: Int64, flags: MessageFlags, body: [UInt8]) {
        self.id = id
        self.timestamp = timestamp
        self.flags = flags
        self.body = body
    }

    /// The plaintext the relay seals: `[timestamp: Int64][flags: UInt8][body]`.
    static func envelope(timestamp: Int64, flags: MessageFlags, body: some Collection<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(9 + body.count)
        withUnsafeBytes(of: timestamp.bigEndian) { out.append(contentsOf: $0) }
        out.append(flags.rawValue)
        out.append(contentsOf: body)
        return out
    }

    /// Encrypts a stored message for delivery with the queue's DH secret; the message ID is the nonce.
    public static func seal(id: [UInt8], timestamp: Int64, flags: MessageFlags, body: [UInt8], key: BoxKey) throws -> [UInt8] {
        try key.seal(envelope(timestamp: timestamp, flags: flags, body: body), nonce: id)
    }

    /// Opens a delivered `MSG` with the queue's DH secret.
    public static func open(id: [UInt8], sealed: [UInt8], key: BoxKey) throws -> ReceivedMessage {
        let plain = try key.open(sealed, nonce: id)
        guard plain.count >= 9 else { throw CryptoError(.invalidInput, "delivered envelope too short") }
        var ts: Int64 = 0
        for i in 0..<8 { ts = (ts << 8) | Int64(plain[i]) }
        return ReceivedMessage(id: id, timestamp: ts, flags: MessageFlags(rawValue: plain[8]), body: Array(plain[9...]))
    }
}

/// Responses and server-initiated events a relay sends.
public enum ServerResponse: Sendable, Equatable {
    /// Answer to NEW: the recipient ID, the sender ID and the relay's per-queue DH key.
    case ids(recipientId: [UInt8], senderId: [UInt8], serverDhKey: X25519.PublicKey)
    case ok
    /// A delivered message: its ID and the sealed envelope (see ``ReceivedMessage``).
    case message(id: [UInt8], sealed: [UInt8])
    /// Another connection subscribed to this queue; this one will receive nothing more from it.
    case end
    case error(RelayErrorCode)
    case pong
    /// Answer to LSET: the short-link ID under which the data can be read.
    case linkId([UInt8])
    /// Answer to LGET.
    case linkData([UInt8])

    public func encode(into b: inout ByteBuffer) {
        switch self {
        case let .ids(r, s, dh):
            b.writeString("IDS ")
            b.writeShortBytes(r)
            b.writeShortBytes(s)
            b.writeShortBytes(dh.bytes)
        case .ok: b.writeString("OK")
        case let .message(id, sealed):
            b.writeString("MSG ")
            b.writeShortBytes(id)
            b.writeLongBytes(sealed)
        case .end: b.writeString("END")
        case let .error(code):
            b.writeString("ERR ")
            b.writeString(code.rawValue)
        case .pong: b.writeString("PONG")
        case let .linkId(id):
            b.writeString("LINK ")
            b.writeShortBytes(id)
        case let .linkData(d):
            b.writeString("LNK ")
            b.writeLongBytes(d)
        }
    }

    public func encoded(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var b = allocator.buffer(capacity: 16)
        encode(into: &b)
        return b
    }

    public static func decode(_ buffer: ByteBuffer) throws(RelayErrorCode) -> ServerResponse {
        var b = buffer
        let tag = ClientCommand.readTag(&b)
        let response: ServerResponse
        switch tag {
        case "IDS":
            guard let r = b.readShortBytes(), let s = b.readShortBytes(), let dh = b.readShortBytes(),
                  let key = try? X25519.PublicKey(bytes: dh) else { throw .syntax }
            response = .ids(recipientId: r, senderId: s, serverDhKey: key)
        case "OK": response = .ok
        case "MSG":
            guard let id = b.readShortBytes(), let sealed = b.readLongBytes() else { throw .syntax }
            response = .message(id: id, sealed: sealed)
        case "END": response = .end
        case "ERR":
            guard let s = b.readString(length: b.readableBytes), let code = RelayErrorCode(rawValue: s) else { throw .syntax }
            response = .error(code)
        case "PONG": response = .pong
        case "LINK":
            guard let id = b.readShortBytes() else { throw .syntax }
            response = .linkId(id)
        case "LNK":
            guard let d = b.readLongBytes() else { throw .syntax }
            response = .linkData(d)
        default: throw .syntax
        }
        guard b.readableBytes == 0 else { throw .syntax }
        return response
    }
}
