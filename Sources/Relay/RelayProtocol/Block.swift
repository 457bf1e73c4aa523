import NIOCore

/// Framing of transmissions into fixed-size blocks.
///
/// A block is `[content length: UInt16][count: UInt8]([length: UInt16][transmission])*` followed
/// by `#` padding up to ``RelayLimits/blockSize``. The content length counts everything after
/// itself up to the padding. Several transmissions share a block whenever they fit.
public enum BlockCodec {
    public static let paddingByte = UInt8(ascii: "#")

    /// Packs transmissions into as few blocks as possible, at most `maxPerBlock` (≤ 255) in each,
    /// keeping their order. Precondition: each transmission is at most
    /// ``RelayLimits/maxTransmissionLength`` bytes.
    public static func encode(_ transmissions: [ByteBuffer], maxPerBlock: Int = 255, allocator: ByteBufferAllocator) -> [ByteBuffer] {
        let maxPerBlock = min(max(maxPerBlock, 1), 255)
        var blocks: [ByteBuffer] = []
        var index = 0
        while index < transmissions.count {
            var block = allocator.buffer(capacity: RelayLimits.blockSize)
            block.writeInteger(UInt16(0)) // content length, patched below
            block.writeInteger(UInt8(0))  // count, patched below
            var count = 0
            while index < transmissions.count, count < maxPerBlock {
                let t = transmissions[index]
                precondition(t.readableBytes <= RelayLimits.maxTransmissionLength, "transmission too large for a block")
                if block.writerIndex + 2 + t.readableBytes > RelayLimits.blockSize { break }
                block.writeInteger(UInt16(t.readableBytes))
                var copy = t
                block.writeBuffer(&copy)
                count += 1
                index += 1
            }
            let contentLength = block.writerIndex - 2
            block.setInteger(UInt16(contentLength), at: 0)
            block.setInteger(UInt8(count), at: 2)
            block.writeRepeatingByte(paddingByte, count: RelayLimits.blockSize - block.writerIndex)
            blocks.append(block)
        }
        return blocks
    }

    /// Splits a block into its transmissions (slices of the block, no copies).
    public static func decode(_ block: ByteBuffer) throws(RelayErrorCode) -> [ByteBuffer] {
        var block = block
        guard block.readableBytes == RelayLimits.blockSize,
              let contentLength = block.readInteger(as: UInt16.self),
              Int(contentLength) >= 1, Int(contentLength) <= RelayLimits.blockSize - 2,
              let count = block.readInteger(as: UInt8.self)
        else { throw .block }
        var content = block.readSlice(length: Int(contentLength) - 1)!
        var out: [ByteBuffer] = []
        out.reserveCapacity(Int(count))
        for _ in 0..<count {
            guard let n = content.readInteger(as: UInt16.self), let t = content.readSlice(length: Int(n)) else {
                throw .block
            }
            out.append(t)
        }
        guard content.readableBytes == 0 else { throw .block }
        return out
    }
}

/// Cuts the TLS byte stream into whole blocks.
public struct BlockDecoder: ByteToMessageDecoder, Sendable {
    public typealias InboundOut = ByteBuffer

    public init() {}

    public mutating func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        guard let block = buffer.readSlice(length: RelayLimits.blockSize) else { return .needMoreData }
        context.fireChannelRead(Self.wrapInboundOut(block))
        return .continue
    }

    public mutating func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        // A trailing partial block is discarded: it can never be a valid transmission.
        while try decode(context: context, buffer: &buffer) == .continue {}
        buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
        return .needMoreData
    }
}
