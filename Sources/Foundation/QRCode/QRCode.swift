import SwiftplexBase

/// A QR code symbol (ISO/IEC 18004, model 2) holding bytes in byte mode.
///
/// Swiftplex prints links as QR codes in the terminal so that a phone can scan them; that needs
/// only byte mode, so the encoder has no numeric, alphanumeric or kanji segments. It picks the
/// smallest version (1–40) that holds the data at the requested error-correction level and the
/// mask with the lowest penalty score, as the standard prescribes.
public struct QRCode: Sendable, Equatable {
    /// How much of the symbol may be damaged and still decode: about 7, 15, 25 or 30 %.
    public enum ErrorCorrection: Int, Sendable, CaseIterable {
        case low, medium, quartile, high

        /// The two bits that stand for the level in the format information.
        var formatBits: Int {
            switch self {
            case .low: 1
            case .medium: 0
            case .quartile: 3
            case .high: 2
            }
        }
    }

    /// 1…40; the symbol is `17 + 4 × version` modules wide.
    public let version: Int
    public let errorCorrection: ErrorCorrection
    /// The data mask (0…7) chosen by penalty score.
    public let mask: Int
    /// Modules per side.
    public let size: Int
    /// Row-major, `true` for a dark module.
    private let modules: [Bool]

    /// Whether the module in column `x`, row `y` is dark; modules outside the symbol are light.
    public subscript(x: Int, y: Int) -> Bool {
        guard x >= 0, y >= 0, x < size, y < size else { return false }
        return modules[y * size + x]
    }

    /// Encodes `bytes` in the smallest version that holds them at `ecc`.
    /// - Throws: `QRCodeError` with `.dataTooLong` when even version 40 cannot hold them.
    public static func encode(_ bytes: [UInt8], ecc: ErrorCorrection = .medium) throws(QRCodeError) -> QRCode {
        guard let version = (1...40).first(where: { bytes.count <= byteCapacity(version: $0, ecc: ecc) }) else {
            throw QRCodeError(.dataTooLong, "\(bytes.count) bytes do not fit in a QR code at error correction \(ecc) (at most \(byteCapacity(version: 40, ecc: ecc)))")
        }
        return try encode(bytes, version: version, ecc: ecc)
    }

    /// Encodes `text` as UTF-8 bytes.
    public static func encode(_ text: String, ecc: ErrorCorrection = .medium) throws(QRCodeError) -> QRCode {
        try encode(Array(text.utf8), ecc: ecc)
    }

    /// Encodes `bytes` in exactly `version`; `mask` forces a data mask instead of choosing by
    /// penalty (tests use it to check every mask).
    public static func encode(_ bytes: [UInt8], version: Int, ecc: ErrorCorrection, mask: Int? = nil) throws(QRCodeError) -> QRCode {
        guard (1...40).contains(version) else { throw QRCodeError(.invalidVersion, "QR code versions are 1…40, not \(version)") }
        if let mask, !(0...7).contains(mask) { throw QRCodeError(.invalidMask, "QR code masks are 0…7, not \(mask)") }
        let capacity = byteCapacity(version: version, ecc: ecc)
        guard bytes.count <= capacity else {
            throw QRCodeError(.dataTooLong, "\(bytes.count) bytes do not fit in version \(version) at error correction \(ecc) (at most \(capacity))")
        }
        let data = QRTables.dataCodewords(bytes, version: version, ecc: ecc)
        let codewords = QRTables.interleaveWithErrorCorrection(data, version: version, ecc: ecc)
        var matrix = QRMatrix(version: version)
        matrix.drawFunctionPatterns()
        matrix.placeCodewords(codewords)
        let candidates = mask.map { [$0] } ?? Array(0...7)
        let scored = candidates.map { m -> (mask: Int, matrix: QRMatrix, penalty: Int) in
            let masked = matrix.masked(m, ecc: ecc)
            return (m, masked, candidates.count == 1 ? 0 : masked.penalty())
        }
        // The first of the lowest scores, as the standard picks.
        let best = scored.min { $0.penalty < $1.penalty }!
        let chosen = best.mask
        let final = best.matrix
        return QRCode(version: version, errorCorrection: ecc, mask: chosen, size: final.size, modules: final.dark)
    }

    /// The most bytes that `version` holds at `ecc` in one byte-mode segment.
    public static func byteCapacity(version: Int, ecc: ErrorCorrection) -> Int {
        let bits = QRTables.dataCodewordCount(version: version, ecc: ecc) * 8 - 4 - QRTables.countBits(version: version)
        return max(0, bits / 8)
    }
}

/// Why a QR code could not be made.
public struct QRCodeError: CodedError {
    public enum Code: Hashable, Sendable {
        /// More bytes than the largest version holds at the requested level.
        case dataTooLong
        /// A version outside 1…40 was asked for.
        case invalidVersion
        /// A mask outside 0…7 was asked for.
        case invalidMask
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

}
