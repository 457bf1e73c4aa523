/// Reed–Solomon error correction over GF(256) with the QR polynomial x⁸+x⁴+x³+x²+1.
enum ReedSolomon {
    /// α^i for i in 0..<255, and log for 1…255.
    private static let (exp, log): ([UInt8], [Int]) = {
        var exp = [UInt8](repeating: 0, count: 255)
        var log = [Int](repeating: 0, count: 256)
        var x = 1
        for i in 0..<255 {
            exp[i] = UInt8(x)
            log[x] = i
            x <<= 1
            if x & 0x100 != 0 { x ^= 0x11D }
        }
        return (exp, log)
    }()

    static func multiply(_ a: UInt8, _ b: UInt8) -> UInt8 {
        if a == 0 || b == 0 { return 0 }
        return exp[(log[Int(a)] + log[Int(b)]) % 255]
    }

    /// The coefficients (highest power first, leading 1 omitted) of ∏ (x − αⁱ) for i < degree.
    static func generator(degree: Int) -> [UInt8] {
        var poly: [UInt8] = [1]                 // highest power first, leading 1 included
        for i in 0..<degree {
            var next = [UInt8](repeating: 0, count: poly.count + 1)
            for (j, c) in poly.enumerated() {
                next[j] ^= c                    // c·x
                next[j + 1] ^= multiply(c, exp[i])  // c·αⁱ (minus is plus in GF(2⁸))
            }
            poly = next
        }
        return Array(poly.dropFirst())
    }

    /// The remainder of data·x^degree divided by the generator: the error-correction codewords.
    static func remainder(_ data: [UInt8], generator: [UInt8]) -> [UInt8] {
        var r = [UInt8](repeating: 0, count: generator.count)
        for byte in data {
            let factor = byte ^ r[0]
            r.removeFirst()
            r.append(0)
            for i in 0..<r.count { r[i] ^= multiply(generator[i], factor) }
        }
        return r
    }
}
