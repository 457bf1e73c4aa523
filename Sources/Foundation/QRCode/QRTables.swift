/// The standard's capacity tables and the data/error-correction codeword stream.
enum QRTables {
    /// Error-correction codewords per block, indexed by level (L, M, Q, H) and version (1…40).
    static let eccPerBlock: [[Int]] = [
        [7, 10, 15, 20, 26, 18, 20, 24, 30, 18, 20, 24, 26, 30, 22, 24, 28, 30, 28, 28, 28, 28, 30, 30, 26, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30],
        [10, 16, 26, 18, 24, 16, 18, 22, 22, 26, 30, 22, 22, 24, 24, 28, 28, 26, 26, 26, 26, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28],
        [13, 22, 18, 26, 18, 24, 18, 22, 20, 24, 28, 26, 24, 20, 30, 24, 28, 28, 26, 30, 28, 30, 30, 30, 30, 28, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30],
        [17, 28, 22, 16, 22, 28, 26, 26, 24, 28, 24, 28, 22, 24, 24, 30, 28, 28, 26, 28, 30, 24, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30],
    ]

    /// Error-correction blocks, indexed like `eccPerBlock`.
    static let blockCount: [[Int]] = [
        [1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4, 6, 6, 6, 6, 7, 8, 8, 9, 9, 10, 12, 12, 12, 13, 14, 15, 16, 17, 18, 19, 19, 20, 21, 22, 24, 25],
        [1, 1, 1, 2, 2, 4, 4, 4, 5, 5, 5, 8, 9, 9, 10, 10, 11, 13, 14, 16, 17, 17, 18, 20, 21, 23, 25, 26, 28, 29, 31, 33, 35, 37, 38, 40, 43, 45, 47, 49],
        [1, 1, 2, 2, 4, 4, 6, 6, 8, 8, 8, 10, 12, 16, 12, 17, 16, 18, 21, 20, 23, 23, 25, 27, 29, 34, 34, 35, 38, 40, 43, 45, 48, 51, 53, 56, 59, 62, 65, 68],
        [1, 1, 2, 4, 4, 4, 5, 6, 8, 8, 11, 11, 16, 16, 18, 16, 19, 21, 25, 25, 25, 34, 30, 32, 35, 37, 40, 42, 45, 48, 51, 54, 57, 60, 63, 66, 70, 74, 77, 81],
    ]

    /// Modules left for data and error correction once the function patterns, format and
    /// version information are drawn (a multiple of 8 plus 0, 3, 4 or 7 remainder bits).
    static func rawDataModules(version v: Int) -> Int {
        let size = 17 + 4 * v
        var n = size * size
        n -= 3 * 64 + 2 * (size - 16)          // finders with separators, timing patterns
        n -= 31                                 // format information (2 × 15) and the dark module
        if v >= 2 {
            let k = v / 7 + 2                   // alignment positions per axis
            n -= (k * k - 3) * 25               // alignment patterns not on finders
            n += 2 * (k - 2) * 5                // …minus their overlap with the timing patterns
        }
        if v >= 7 { n -= 2 * 18 }               // version information
        return n
    }

    static func totalCodewords(version: Int) -> Int { rawDataModules(version: version) / 8 }

    static func dataCodewordCount(version: Int, ecc: QRCode.ErrorCorrection) -> Int {
        totalCodewords(version: version) - eccPerBlock[ecc.rawValue][version - 1] * blockCount[ecc.rawValue][version - 1]
    }

    /// Width of the byte-mode character count field.
    static func countBits(version: Int) -> Int { version <= 9 ? 8 : 16 }

    /// Mode indicator, count, bytes, terminator and padding, as data codewords.
    static func dataCodewords(_ bytes: [UInt8], version: Int, ecc: QRCode.ErrorCorrection) -> [UInt8] {
        let capacityBits = dataCodewordCount(version: version, ecc: ecc) * 8
        var bits = BitBuffer()
        bits.append(0b0100, count: 4)
        bits.append(bytes.count, count: countBits(version: version))
        for b in bytes { bits.append(Int(b), count: 8) }
        bits.append(0, count: min(4, capacityBits - bits.count))
        bits.append(0, count: (8 - bits.count % 8) % 8)
        var out = bits.bytes
        var pad: UInt8 = 0xEC
        while out.count * 8 < capacityBits {
            out.append(pad)
            pad = pad == 0xEC ? 0x11 : 0xEC
        }
        return out
    }

    /// Splits the data into blocks, adds Reed–Solomon codewords to each and interleaves them.
    static func interleaveWithErrorCorrection(_ data: [UInt8], version: Int, ecc: QRCode.ErrorCorrection) -> [UInt8] {
        let blocks = blockCount[ecc.rawValue][version - 1]
        let eccLength = eccPerBlock[ecc.rawValue][version - 1]
        let total = totalCodewords(version: version)
        let shortBlocks = blocks - total % blocks
        let shortDataLength = total / blocks - eccLength
        let generator = ReedSolomon.generator(degree: eccLength)

        var dataBlocks: [[UInt8]] = []
        var eccBlocks: [[UInt8]] = []
        var offset = 0
        for i in 0..<blocks {
            let length = shortDataLength + (i < shortBlocks ? 0 : 1)
            let block = Array(data[offset..<offset + length])
            offset += length
            dataBlocks.append(block)
            eccBlocks.append(ReedSolomon.remainder(block, generator: generator))
        }
        var out: [UInt8] = []
        out.reserveCapacity(total)
        for i in 0...shortDataLength {
            for block in dataBlocks where i < block.count { out.append(block[i]) }
        }
        for i in 0..<eccLength {
            for block in eccBlocks { out.append(block[i]) }
        }
        return out
    }
}

/// Bits appended most significant first.
struct BitBuffer {
    private(set) var bytes: [UInt8] = []
    private(set) var count = 0

    mutating func append(_ value: Int, count n: Int) {
        for i in stride(from: n - 1, through: 0, by: -1) {
            if count % 8 == 0 { bytes.append(0) }
            if (value >> i) & 1 == 1 { bytes[count / 8] |= 0x80 >> UInt8(count % 8) }
            count += 1
        }
    }
}
