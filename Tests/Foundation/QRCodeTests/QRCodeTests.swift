import Foundation
import Testing
@testable import QRCode

/// Text of exactly `count` bytes from the characters links are made of.
func linkLikeText(_ count: Int, seed: Int) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_%=&?/:.#@")
    var state = UInt64(truncatingIfNeeded: seed) &* 0x9E37_79B9_7F4A_7C15 | 1
    return String((0..<count).map { _ in
        state ^= state << 13; state ^= state >> 7; state ^= state << 17
        return alphabet[Int(state % UInt64(alphabet.count))]
    })
}

/// A link shaped like the engine's one-time invitations (about 600 bytes).
func invitationLink(seed: Int) -> String {
    "simplex:/invitation#/?v=1&smp=" + linkLikeText(180, seed: seed) + "&e2e=v%3D1%26x3dh%3D" + linkLikeText(380, seed: seed + 1)
}

@Suite struct QRCodeTests {
    @Test func formatAndVersionInformationMatchTheStandardsTables() {
        // Values from the tables in ISO/IEC 18004 annexes C and D.
        #expect(QRMatrix.formatBits(QRCode.ErrorCorrection.medium.formatBits << 3 | 0) == 0b101010000010010)
        #expect(QRMatrix.formatBits(QRCode.ErrorCorrection.low.formatBits << 3 | 0) == 0b111011111000100)
        #expect(QRMatrix.formatBits(QRCode.ErrorCorrection.high.formatBits << 3 | 7) == 0b000100000111011)
        #expect(QRMatrix.versionBits(7) == 0x07C94)
        #expect(QRMatrix.versionBits(40) == 0x28C69)
        #expect(QRMatrix.alignmentPositions(version: 2) == [6, 18])
        #expect(QRMatrix.alignmentPositions(version: 12) == [6, 32, 58])
        #expect(QRMatrix.alignmentPositions(version: 32) == [6, 34, 60, 86, 112, 138])
        #expect(QRMatrix.alignmentPositions(version: 40) == [6, 30, 58, 86, 114, 142, 170])
    }

    @Test func capacitiesMatchTheStandardsTable() {
        // Byte-mode capacities from ISO/IEC 18004 table 7.
        #expect(QRCode.byteCapacity(version: 1, ecc: .low) == 17)
        #expect(QRCode.byteCapacity(version: 1, ecc: .high) == 7)
        #expect(QRCode.byteCapacity(version: 10, ecc: .medium) == 213)
        #expect(QRCode.byteCapacity(version: 20, ecc: .quartile) == 482)
        #expect(QRCode.byteCapacity(version: 40, ecc: .low) == 2953)
        #expect(QRCode.byteCapacity(version: 40, ecc: .high) == 1273)
    }

    @Test func reedSolomonMatchesAKnownCodeword() {
        // "HELLO WORLD" at 1-M (the standard's worked example): its 16 data codewords and
        // the 10 error-correction codewords the standard lists.
        let data: [UInt8] = [32, 91, 11, 120, 209, 114, 220, 77, 67, 64, 236, 17, 236, 17, 236, 17]
        #expect(ReedSolomon.remainder(data, generator: ReedSolomon.generator(degree: 10)) == [196, 35, 39, 119, 235, 215, 231, 226, 93, 23])
    }

    @Test func everyVersionAtEveryLevelDecodesWithZbar() throws {
        var codes: [QRCode] = []
        var texts: [String] = []
        for version in 1...40 {
            for ecc in QRCode.ErrorCorrection.allCases {
                // Full to the last byte, so that the smallest version that holds it is this one.
                let text = linkLikeText(QRCode.byteCapacity(version: version, ecc: ecc), seed: version * 4 + ecc.rawValue)
                let qr = try QRCode.encode(text, ecc: ecc)
                #expect(qr.version == version && qr.size == 17 + 4 * version)
                codes.append(qr)
                texts.append(text)
            }
        }
        let decoded = try ZBar.decode(codes)
        for (i, qr) in codes.enumerated() {
            #expect(decoded[i] == texts[i], "version \(qr.version) \(qr.errorCorrection) mask \(qr.mask)")
        }
    }

    @Test func everyMaskDecodesWithZbar() throws {
        let text = "https://example.org/" + linkLikeText(60, seed: 9)
        let codes = try (0...7).map { try QRCode.encode(Array(text.utf8), version: 8, ecc: .quartile, mask: $0) }
        #expect(codes.map(\.mask) == Array(0...7))
        #expect(try ZBar.decode(codes) == Array(repeating: text, count: 8))
    }

    @Test func invitationLinksDecodeAtEveryLevel() throws {
        for seed in 0..<3 {
            let link = invitationLink(seed: seed)
            #expect((550...700).contains(link.utf8.count))
            let codes = try QRCode.ErrorCorrection.allCases.map { try QRCode.encode(link, ecc: $0) }
            #expect(try ZBar.decode(codes) == Array(repeating: link, count: 4))
        }
        let emptyish = try QRCode.encode("", ecc: .medium)
        #expect(emptyish.version == 1)
        #expect(try ZBar.decode([try QRCode.encode("x", ecc: .high)]) == ["x"])
    }

    @Test func tooMuchDataAndBadParametersAreTypedErrors() {
        #expect(throws: QRCodeError(.dataTooLong, "")) { try QRCode.encode([UInt8](repeating: 65, count: 2954), ecc: .low) }
        #expect(throws: QRCodeError(.dataTooLong, "")) { try QRCode.encode([UInt8](repeating: 65, count: 1274), ecc: .high) }
        #expect(throws: QRCodeError(.dataTooLong, "")) { try QRCode.encode([UInt8](repeating: 65, count: 18), version: 1, ecc: .low) }
        #expect(throws: QRCodeError(.invalidVersion, "")) { try QRCode.encode([1], version: 41, ecc: .low) }
        #expect(throws: QRCodeError(.invalidMask, "")) { try QRCode.encode([1], version: 1, ecc: .low, mask: 8) }
        #expect((try? QRCode.encode([UInt8](repeating: 65, count: 2953), ecc: .low))?.version == 40)
    }

    @Test func terminalRenderingHoldsEveryModule() throws {
        let qr = try QRCode.encode(invitationLink(seed: 5), ecc: .low)
        for ansi in [false, true] {
            for quiet in [0, 2, 4] {
                let text = qr.terminalString(quietZone: quiet, ansiColors: ansi)
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> [Character] in
                    var l = String(line)
                    if ansi {
                        #expect(l.hasPrefix("\u{1B}[30;47m") && l.hasSuffix("\u{1B}[0m"))
                        l = String(l.dropFirst("\u{1B}[30;47m".count).dropLast("\u{1B}[0m".count))
                    } else {
                        #expect(!l.contains("\u{1B}"))
                    }
                    return Array(l)
                }
                let side = qr.size + 2 * quiet
                #expect(lines.count == (side + 1) / 2)
                for (row, chars) in lines.enumerated() {
                    #expect(chars.count == side)
                    for (col, ch) in chars.enumerated() {
                        let top = ch == "█" || ch == "▀"
                        let bottom = ch == "█" || ch == "▄"
                        #expect(top == qr[col - quiet, 2 * row - quiet])
                        #expect(bottom == qr[col - quiet, 2 * row + 1 - quiet])
                    }
                }
            }
        }
    }
}
