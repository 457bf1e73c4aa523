import NIOCore

extension ByteBuffer {
    /// Writes `bytes` prefixed with a one-byte length. Precondition: at most 255 bytes.
    @inlinable
    package mutating func writeShortBytes(_ bytes: some Collection<UInt8>) {
        precondition(bytes.count <= 255, "short field too long")
        writeInteger(UInt8(bytes.count))
        writeBytes(bytes)
    }

    /// Writes `bytes` prefixed with a two-byte big-endian length. Precondition: at most 65535 bytes.
    @inlinable
    package mutating func writeLongBytes(_ bytes: some Collection<UInt8>) {
        precondition(bytes.count <= 65_535, "long field too long")
        writeInteger(UInt16(bytes.count))
        writeBytes(bytes)
    }

    /// Reads a one-byte-length-prefixed field, or nil if the buffer is too short.
    @inlinable
    package mutating func readShortBytes() -> [UInt8]? {
        let save = readerIndex
        guard let n = readInteger(as: UInt8.self), let bytes = readBytes(length: Int(n)) else {
            moveReaderIndex(to: save)
            return nil
        }
        return bytes
    }

    /// Reads a two-byte-length-prefixed field, or nil if the buffer is too short.
    @inlinable
    package mutating func readLongBytes() -> [UInt8]? {
        let save = readerIndex
        guard let n = readInteger(as: UInt16.self), let bytes = readBytes(length: Int(n)) else {
            moveReaderIndex(to: save)
            return nil
        }
        return bytes
    }
}
