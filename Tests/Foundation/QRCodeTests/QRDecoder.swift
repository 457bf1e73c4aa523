import Foundation
import TestSupport
@testable import QRCode

/// Decodes symbols with a real, independent decoder: `zbarimg` from Debian's zbar-tools (the
/// Makefile's `deps` target installs it), reading PBM images written here.
enum ZBar {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A binary PBM (P4) of the symbol with a 4-module quiet zone, `scale` pixels per module.
    static func pbm(_ qr: QRCode, scale: Int = 2) -> Data {
        let quiet = 4
        let side = (qr.size + 2 * quiet) * scale
        var data = Data("P4\n\(side) \(side)\n".utf8)
        let rowBytes = (side + 7) / 8
        for py in 0..<side {
            var row = [UInt8](repeating: 0, count: rowBytes)
            for px in 0..<side where qr[px / scale - quiet, py / scale - quiet] {
                row[px / 8] |= 0x80 >> UInt8(px % 8)
            }
            data.append(contentsOf: row)
        }
        return data
    }

    /// Decodes each symbol and returns its text (nil when zbar found no code in that image).
    static func decode(_ codes: [QRCode]) throws -> [String?] {
        let temp = TemporaryDirectory(prefix: "swiftplex-qr")
        defer { temp.cleanup() }
        let dir = temp.url
        var results: [String?] = []
        for (i, qr) in codes.enumerated() {
            let file = dir.appendingPathComponent("qr\(i).pbm")
            try pbm(qr).write(to: file)
            results.append(try decodeFile(file))
        }
        return results
    }

    /// One image per zbarimg run, so that an image without a code cannot shift the others.
    private static func decodeFile(_ file: URL) throws -> String? {
        let candidates = ["/usr/bin/zbarimg", "/usr/local/bin/zbarimg"]
        guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Failure(description: "zbarimg is not installed (make deps installs zbar-tools)")
        }
        let result = try runProgram(path, ["--quiet", "--raw", "-Sdisable", "-Sqrcode.enable", "-Sbinary", file.path])
        // Exit status 4 means no symbol was found.
        if result.termination == .exit(4) { return nil }
        guard result.termination == .exit(0) else { throw Failure(description: "zbarimg ended with \(result.termination)") }
        var text = result.output
        if text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}
