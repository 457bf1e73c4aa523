import Foundation
import QRCode

/// Prints the bot's address as a QR code in the terminal, for a phone to scan.
enum AddressPrinter {
    static func printQR(_ link: String) {
        do {
            // Low error correction keeps a ~600-byte invitation link small enough for a terminal.
            let qr = try QRCode.encode(link, ecc: .low)
            print(qr.terminalString(ansiColors: isatty(STDOUT_FILENO) == 1))
        } catch {
            print("(the address is too long for a QR code: \(error))")
        }
    }
}
