import NIOCore
import SwiftplexCrypto

/// One authorised unit on the wire: `[auth][corrId][entityId][command]`, each of the first three
/// a one-byte-length-prefixed field (empty when absent); the command takes the rest.
///
/// The authorisation — an Ed25519 signature or an X25519 authenticator (see ``AuthPrivateKey``) —
/// covers ``signedBytes(sessionId:)`` = session ID ‖ correlation ID ‖ entity ID ‖ command (each
/// length-prefixed), so a transmission captured from one connection is refused on any other.
public struct Transmission: Sendable {
    /// Signature or authenticator; empty for unauthorised commands.
    public var signature: [UInt8]
    public var correlationId: [UInt8]
    public var entityId: [UInt8]
    public var command: ByteBuffer

    public init(signature: [UInt8] = [], correlationId: [UInt8], entityId: [UInt8], command: ByteBuffer) {
        self.signature = signature
        self.correlationId = correlationId
        self.entityId = entityId
        self.command = command
    }

    public static func signedBytes(sessionId: [UInt8], correlationId: [UInt8], entityId: [UInt8], command: ByteBuffer) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(3 + sessionId.count + correlationId.count + entityId.count + command.readableBytes)
        out.append(UInt8(sessionId.count)); out.append(contentsOf: sessionId)
        out.append(UInt8(correlationId.count)); out.append(contentsOf: correlationId)
        out.append(UInt8(entityId.count)); out.append(contentsOf: entityId)
        command.withUnsafeReadableBytes { out.append(contentsOf: $0) }
        return out
    }

    public func signedBytes(sessionId: [UInt8]) -> [UInt8] {
        Self.signedBytes(sessionId: sessionId, correlationId: correlationId, entityId: entityId, command: command)
    }

    /// Builds a transmission authorised by `key` (if any) for the given session.
    public static func signed(
        command: ByteBuffer, correlationId: [UInt8], entityId: [UInt8],
        key: AuthPrivateKey?, session: SessionKeys
    ) -> Transmission {
        var t = Transmission(correlationId: correlationId, entityId: entityId, command: command)
        if let key {
            t.signature = key.authorization(for: t.signedBytes(sessionId: session.sessionId), correlationId: correlationId, session: session)
        }
        return t
    }

    public func encode(into buffer: inout ByteBuffer) {
        buffer.writeShortBytes(signature)
        buffer.writeShortBytes(correlationId)
        buffer.writeShortBytes(entityId)
        var c = command
        buffer.writeBuffer(&c)
    }

    public func encoded(allocator: ByteBufferAllocator) -> ByteBuffer {
        var b = allocator.buffer(capacity: 3 + signature.count + correlationId.count + entityId.count + command.readableBytes)
        encode(into: &b)
        return b
    }

    /// Splits a transmission into its fields. The signature's length is checked by the receiver,
    /// so that it can answer with the transmission's correlation ID.
    public static func decode(_ buffer: ByteBuffer) throws(RelayErrorCode) -> Transmission {
        var buffer = buffer
        guard let sig = buffer.readShortBytes(),
              let corr = buffer.readShortBytes(),
              let entity = buffer.readShortBytes()
        else { throw .block }
        return Transmission(signature: sig, correlationId: corr, entityId: entity, command: buffer)
    }
}
