import NIOCore
import SwiftplexCrypto

/// The first block a relay sends on a new connection: the versions it speaks, a fresh random
/// session identifier that every authorised command on this connection must cover, and a fresh
/// X25519 session key for deniable authenticators.
public struct ServerHello: Sendable, Equatable {
    public var minVersion: UInt16
    public var maxVersion: UInt16
    public var sessionId: [UInt8]
    public var sessionKey: X25519.PublicKey

    public init(minVersion: UInt16 = RelayLimits.minimumVersion, maxVersion: UInt16 = RelayLimits.currentVersion,
                sessionId: [UInt8], sessionKey: X25519.PublicKey) {
        self.minVersion = minVersion
        self.maxVersion = maxVersion
        self.sessionId = sessionId
        self.sessionKey = sessionKey
    }

    public func encoded(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var b = allocator.buffer(capacity: 40)
        b.writeString("SPXH")
        b.writeInteger(minVersion)
        b.writeInteger(maxVersion)
        b.writeShortBytes(sessionId)
        b.writeShortBytes(sessionKey.bytes)
        return b
    }

    public static func decode(_ buffer: ByteBuffer) throws(RelayErrorCode) -> ServerHello {
        var b = buffer
        guard b.readString(length: 4) == "SPXH",
              let lo = b.readInteger(as: UInt16.self), let hi = b.readInteger(as: UInt16.self),
              let sid = b.readShortBytes(), sid.count == RelayLimits.sessionIdLength,
              let keyBytes = b.readShortBytes(), let key = try? X25519.PublicKey(bytes: keyBytes),
              lo <= hi, b.readableBytes == 0
        else { throw .session }
        return ServerHello(minVersion: lo, maxVersion: hi, sessionId: sid, sessionKey: key)
    }
}

/// The client's answer to ``ServerHello``: the version it chose.
public struct ClientHello: Sendable, Equatable {
    public var version: UInt16

    public init(version: UInt16) { self.version = version }

    public func encoded(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var b = allocator.buffer(capacity: 8)
        b.writeString("SPXC")
        b.writeInteger(version)
        return b
    }

    public static func decode(_ buffer: ByteBuffer) throws(RelayErrorCode) -> ClientHello {
        var b = buffer
        guard b.readString(length: 4) == "SPXC", let v = b.readInteger(as: UInt16.self), b.readableBytes == 0 else {
            throw .session
        }
        return ClientHello(version: v)
    }
}
