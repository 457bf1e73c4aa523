/// The module grid while a symbol is built: function patterns, the codeword zigzag, masks and
/// the penalty score that picks a mask.
struct QRMatrix {
    let version: Int
    let size: Int
    /// Row-major module colours.
    var dark: [Bool]
    /// Modules that belong to function patterns (finders, timing, alignment, format, version);
    /// masks and data never touch them.
    var reserved: [Bool]

    init(version: Int) {
        self.version = version
        size = 17 + 4 * version
        dark = [Bool](repeating: false, count: size * size)
        reserved = [Bool](repeating: false, count: size * size)
    }

    private mutating func setFunction(_ x: Int, _ y: Int, _ isDark: Bool) {
        dark[y * size + x] = isDark
        reserved[y * size + x] = true
    }

    /// Centres of the alignment patterns along one axis (the same for rows and columns).
    static func alignmentPositions(version: Int) -> [Int] {
        guard version > 1 else { return [] }
        let count = version / 7 + 2
        let last = 4 * version + 10
        // Evenly spaced back from the last one with an even step that leaves the first gap
        // (after 6) no wider than the others; this reproduces the standard's table, whose one
        // exception is version 32.
        let step = version == 32 ? 26 : 2 * ((4 * version + 2 * count + 1) / (2 * count - 2))
        var positions = [6]
        for i in stride(from: count - 2, through: 0, by: -1) { positions.append(last - i * step) }
        return positions
    }

    mutating func drawFunctionPatterns() {
        // Timing patterns along row 6 and column 6.
        for i in 0..<size {
            setFunction(6, i, i % 2 == 0)
            setFunction(i, 6, i % 2 == 0)
        }
        // Finders with their light separators.
        for (cx, cy) in [(3, 3), (size - 4, 3), (3, size - 4)] {
            for dy in -4...4 {
                for dx in -4...4 {
                    let x = cx + dx, y = cy + dy
                    guard x >= 0, y >= 0, x < size, y < size else { continue }
                    let ring = max(abs(dx), abs(dy))
                    setFunction(x, y, ring != 2 && ring != 4)
                }
            }
        }
        // Alignment patterns, except where they would overlap a finder.
        let positions = Self.alignmentPositions(version: version)
        for (i, cy) in positions.enumerated() {
            for (j, cx) in positions.enumerated() {
                let last = positions.count - 1
                if (i == 0 && j == 0) || (i == 0 && j == last) || (i == last && j == 0) { continue }
                for dy in -2...2 {
                    for dx in -2...2 { setFunction(cx + dx, cy + dy, max(abs(dx), abs(dy)) != 1) }
                }
            }
        }
        // Reserve the format areas (drawn with the mask) and draw the version information.
        drawFormat(0)
        if version >= 7 {
            let bits = Self.versionBits(version)
            for i in 0..<18 {
                let bit = (bits >> i) & 1 == 1
                let a = size - 11 + i % 3, b = i / 3
                setFunction(a, b, bit)
                setFunction(b, a, bit)
            }
        }
    }

    /// The 18-bit version information: version and its BCH(18,6) remainder.
    static func versionBits(_ version: Int) -> Int {
        var rem = version
        for _ in 0..<12 { rem = (rem << 1) ^ ((rem >> 11) * 0x1F25) }
        return version << 12 | rem
    }

    /// The 15-bit format information: level and mask, BCH(15,5), XOR 0x5412.
    static func formatBits(_ data: Int) -> Int {
        var rem = data
        for _ in 0..<10 { rem = (rem << 1) ^ ((rem >> 9) * 0x537) }
        return (data << 10 | rem) ^ 0x5412
    }

    /// Draws both copies of the format information (all light when `bits` is 0) and the dark module.
    private mutating func drawFormat(_ bits: Int) {
        func bit(_ i: Int) -> Bool { (bits >> i) & 1 == 1 }
        for i in 0...5 { setFunction(8, i, bit(i)) }
        setFunction(8, 7, bit(6))
        setFunction(8, 8, bit(7))
        setFunction(7, 8, bit(8))
        for i in 9..<15 { setFunction(14 - i, 8, bit(i)) }
        for i in 0..<8 { setFunction(size - 1 - i, 8, bit(i)) }
        for i in 8..<15 { setFunction(8, size - 15 + i, bit(i)) }
        setFunction(8, size - 8, true)
    }

    /// Places codeword bits in the two-column zigzag from the bottom right, skipping the
    /// vertical timing column and every reserved module; remainder bits stay light.
    mutating func placeCodewords(_ codewords: [UInt8]) {
        var bitIndex = 0
        let totalBits = codewords.count * 8
        var right = size - 1
        var upward = true
        while right >= 1 {
            if right == 6 { right = 5 }
            for step in 0..<size {
                let y = upward ? size - 1 - step : step
                for x in [right, right - 1] where !reserved[y * size + x] {
                    if bitIndex < totalBits {
                        dark[y * size + x] = (codewords[bitIndex / 8] >> (7 - UInt8(bitIndex % 8))) & 1 == 1
                        bitIndex += 1
                    }
                }
            }
            upward.toggle()
            right -= 2
        }
    }

    static func maskApplies(_ mask: Int, x: Int, y: Int) -> Bool {
        switch mask {
        case 0: (x + y) % 2 == 0
        case 1: y % 2 == 0
        case 2: x % 3 == 0
        case 3: (x + y) % 3 == 0
        case 4: (x / 3 + y / 2) % 2 == 0
        case 5: x * y % 2 + x * y % 3 == 0
        case 6: (x * y % 2 + x * y % 3) % 2 == 0
        default: ((x + y) % 2 + x * y % 3) % 2 == 0
        }
    }

    /// A copy with `mask` applied to the data modules and its format information drawn.
    func masked(_ mask: Int, ecc: QRCode.ErrorCorrection) -> QRMatrix {
        var m = self
        for y in 0..<size {
            for x in 0..<size where !reserved[y * size + x] && Self.maskApplies(mask, x: x, y: y) {
                m.dark[y * size + x].toggle()
            }
        }
        m.drawFormat(Self.formatBits(ecc.formatBits << 3 | mask))
        return m
    }

    /// The standard's penalty: long runs (N1 = 3), 2×2 blocks (N2 = 3), finder-like patterns
    /// (N3 = 40) and imbalance of dark and light (N4 = 10).
    func penalty() -> Int {
        var score = 0
        let n = size
        dark.withUnsafeBufferPointer { m in
            for columns in [false, true] {
                for line in 0..<n {
                    // Index of module i of this row (or column).
                    let start = columns ? line : line * n
                    let stride = columns ? n : 1
                    var run = 0
                    var previous = false
                    // The last 11 modules as bits; four light modules pad each end, since the
                    // area around the symbol is light.
                    var window = 0
                    for i in -4..<(n + 4) {
                        let isDark = i >= 0 && i < n && m[start + i * stride]
                        if i >= 0 && i < n {
                            if i > 0 && isDark == previous {
                                run += 1
                            } else {
                                if run >= 5 { score += 3 + run - 5 }
                                run = 1
                            }
                            previous = isDark
                        }
                        window = (window << 1 | (isDark ? 1 : 0)) & 0x7FF
                        // 1:1:3:1:1 with four light modules after it, or before it.
                        if i >= 6 && (window == 0b1011101_0000 || window == 0b0000_1011101) { score += 40 }
                    }
                    if run >= 5 { score += 3 + run - 5 }
                }
            }
            for y in 0..<n - 1 {
                for x in 0..<n - 1 {
                    let c = m[y * n + x]
                    if m[y * n + x + 1] == c && m[(y + 1) * n + x] == c && m[(y + 1) * n + x + 1] == c { score += 3 }
                }
            }
            var darkCount = 0
            for d in m where d { darkCount += 1 }
            score += abs(darkCount * 100 / (n * n) - 50) / 5 * 10
        }
        return score
    }
}
