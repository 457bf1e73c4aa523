import SwiftplexBase
import Foundation

/// A stored state that does not read: truncated, a wrong version, a length past the end.
public struct BinaryStateError: CodedError {
    public enum Code: Sendable, Hashable { case unreadable }
    public var code: Code { .unreadable }
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// Writes a compact binary form of stored state (the ratchet, the agent's connection records),
/// which the message path saves on every message: fields in a fixed order, integers big-endian,
/// byte strings and text behind a 32-bit length, optional values behind a presence byte. Read
/// back with ``BinaryStateReader`` in the same order. (JSON, even with keys as base64, cost a
/// keyed container, a string per key and a base64 pass per field on every save.)
public struct BinaryStateWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func bool(_ v: Bool) { bytes.append(v ? 1 : 0) }

    public mutating func u32(_ v: UInt32) {
        bytes.append(UInt8(v >> 24)); bytes.append(UInt8((v >> 16) & 0xFF))
        bytes.append(UInt8((v >> 8) & 0xFF)); bytes.append(UInt8(v & 0xFF))
    }

    public mutating func u64(_ v: UInt64) {
        u32(UInt32(v >> 32))
        u32(UInt32(v & 0xFFFF_FFFF))
    }

    public mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }

    public mutating func bytes<C: Collection>(_ v: C) where C.Element == UInt8 {
        u32(UInt32(v.count))
        bytes.append(contentsOf: v)
    }

    public mutating func optionalBytes<C: Collection>(_ v: C?) where C.Element == UInt8 {
        guard let v else { return u8(0) }
        u8(1)
        bytes(v)
    }

    public mutating func string(_ v: String) { bytes(Array(v.utf8)) }

    public mutating func optionalString(_ v: String?) {
        guard let v else { return u8(0) }
        u8(1)
        string(v)
    }

    public mutating func optionalU64(_ v: UInt64?) {
        guard let v else { return u8(0) }
        u8(1)
        u64(v)
    }

    public mutating func optionalI64(_ v: Int64?) {
        guard let v else { return u8(0) }
        u8(1)
        i64(v)
    }
}

/// Reads what ``BinaryStateWriter`` wrote; every read checks the length left.
public struct BinaryStateReader: Sendable {
    let buffer: [UInt8]
    var at: Int

    public init(_ bytes: [UInt8], from start: Int = 0) {
        buffer = bytes
        at = start
    }

    public var isAtEnd: Bool { at == buffer.count }

    mutating func take(_ n: Int) throws -> ArraySlice<UInt8> {
        guard n >= 0, buffer.count - at >= n else { throw BinaryStateError("stored state ends early (\(n) bytes wanted at \(at) of \(buffer.count))") }
        defer { at += n }
        return buffer[at..<(at + n)]
    }

    public mutating func u8() throws -> UInt8 { try take(1).first! }

    public mutating func bool() throws -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        case let b: throw BinaryStateError("stored state has \(b) for a flag")
        }
    }

    public mutating func u32() throws -> UInt32 { try take(4).reduce(0) { ($0 << 8) | UInt32($1) } }
    public mutating func u64() throws -> UInt64 { try take(8).reduce(0) { ($0 << 8) | UInt64($1) } }
    public mutating func i64() throws -> Int64 { Int64(bitPattern: try u64()) }

    public mutating func bytes() throws -> [UInt8] { Array(try take(Int(try u32()))) }

    public mutating func optionalBytes() throws -> [UInt8]? { try present() ? try bytes() : nil }

    public mutating func string() throws -> String {
        let b = try bytes()
        guard let s = String(validating: b, as: UTF8.self) else { throw BinaryStateError("stored text is not UTF-8") }
        return s
    }

    public mutating func optionalString() throws -> String? { try present() ? try string() : nil }
    public mutating func optionalU64() throws -> UInt64? { try present() ? try u64() : nil }
    public mutating func optionalI64() throws -> Int64? { try present() ? try i64() : nil }

    mutating func present() throws -> Bool { try bool() }
}

// MARK: - The ratchet's binary form

extension DoubleRatchet {
    /// Version of ``write(to:)``'s layout.
    static let binaryVersion: UInt8 = 1

    /// Writes the state (what JSON's ``encode(to:)`` holds, in a fixed order).
    public func write(to w: inout BinaryStateWriter) {
        w.u8(Self.binaryVersion)
        w.bytes(dhSendingSecret)
        w.optionalBytes(dhReceiving)
        w.bytes(rootKey)
        w.optionalBytes(chainSending)
        w.optionalBytes(chainReceiving)
        w.optionalBytes(headerSending)
        w.optionalBytes(headerReceiving)
        w.bytes(nextHeaderSending)
        w.bytes(nextHeaderReceiving)
        w.u32(sentInChain)
        w.u32(receivedInChain)
        w.u32(previousChainLength)
        w.u32(UInt32(skipped.count))
        for k in skipped {
            w.bytes(k.headerKey)
            w.u32(k.number)
            w.bytes(k.messageKey)
            w.optionalI64(k.skippedAt)
            w.optionalU64(k.receivedBefore)
        }
        w.optionalU64(received)
    }

    /// Reads a state written by ``write(to:)``.
    public init(from r: inout BinaryStateReader) throws {
        let version = try r.u8()
        guard version == Self.binaryVersion else { throw BinaryStateError("ratchet state version \(version) is not known") }
        let dhSendingSecret = try r.bytes()
        let dhReceiving = try r.optionalBytes()
        let rootKey = try r.bytes()
        let chainSending = try r.optionalBytes()
        let chainReceiving = try r.optionalBytes()
        let headerSending = try r.optionalBytes()
        let headerReceiving = try r.optionalBytes()
        let nextHeaderSending = try r.bytes()
        let nextHeaderReceiving = try r.bytes()
        let sentInChain = try r.u32()
        let receivedInChain = try r.u32()
        let previousChainLength = try r.u32()
        let count = Int(try r.u32())
        guard count <= Self.maxSkip else { throw BinaryStateError("ratchet state holds \(count) skipped keys") }
        var skipped: [SkippedKey] = []
        skipped.reserveCapacity(count)
        for _ in 0..<count {
            skipped.append(SkippedKey(headerKey: try r.bytes(), number: try r.u32(), messageKey: try r.bytes(),
                                      skippedAt: try r.optionalI64(), receivedBefore: try r.optionalU64()))
        }
        self.init(dhSendingSecret: dhSendingSecret, dhReceiving: dhReceiving, rootKey: rootKey,
                  chainSending: chainSending, chainReceiving: chainReceiving, headerSending: headerSending, headerReceiving: headerReceiving,
                  nextHeaderSending: nextHeaderSending, nextHeaderReceiving: nextHeaderReceiving,
                  sentInChain: sentInChain, receivedInChain: receivedInChain, previousChainLength: previousChainLength,
                  skipped: skipped, received: try r.optionalU64())
    }
}
