/// What a peer chose (display names, message texts, reactions) made safe to print on a terminal.
///
/// Peers can put anything in those strings: escape sequences that move the cursor, recolour or
/// retitle the terminal, carriage returns and newlines that fake a line of the client's own, and
/// bidirectional overrides that make text read differently from what it is. Every such character
/// is shown as a visible token instead of being sent to the terminal:
///
/// - C0 controls and DEL in caret notation (`ESC` → `^[`, `CR` → `^M`, `DEL` → `^?`); a tab is a space;
/// - C1 controls, bidirectional controls (U+200E/F, U+061C, U+202A–U+202E, U+2066–U+2069) and the
///   Unicode line and paragraph separators as `<U+XXXX>`.
///
/// In a message text, newlines are kept as line breaks, but every continuation line starts with
/// ``continuation``, so no line of a message can pass for a line of the client's own.
enum Sanitize {
    /// Marks the lines after the first of one multi-line text.
    static let continuation = "  | "

    /// A single-line string (names and the like): newlines are shown as `^J`.
    static func line(_ s: String) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(s.unicodeScalars.count)
        for scalar in s.unicodeScalars { append(scalar, to: &out) }
        return out
    }

    /// A message text: each line sanitised, continuation lines marked (CRLF counts as a newline).
    static func text(_ s: String) -> String {
        let normalised = s.replacingOccurrences(of: "\r\n", with: "\n")
        return normalised.split(separator: "\n", omittingEmptySubsequences: false)
            .map { line(String($0)) }
            .joined(separator: "\n" + continuation)
    }

    private static func append(_ scalar: Unicode.Scalar, to out: inout String) {
        let v = scalar.value
        switch v {
        case 0x09:
            out.unicodeScalars.append(" ")
        case 0x00...0x1F:
            out += "^" + String(Character(Unicode.Scalar(UInt8(v + 0x40))))
        case 0x7F:
            out += "^?"
        case 0x80...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029:
            out += "<U+" + String(v, radix: 16, uppercase: true).leftPadded(to: 4) + ">"
        default:
            out.unicodeScalars.append(scalar)
        }
    }
}

private extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
