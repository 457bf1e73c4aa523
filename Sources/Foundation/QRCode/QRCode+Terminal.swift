extension QRCode {
    /// The symbol as text for a terminal, two module rows per line with the half blocks `▀▄█`.
    ///
    /// Scanners need dark modules on a light background. With `ansiColors` (the default) every
    /// line sets black on white itself, so the code reads the same on dark and light terminal
    /// themes; without it the blocks are the dark modules, which suits a light background and
    /// plain files.
    /// - Parameter quietZone: light modules around the symbol; the standard asks for 4.
    public func terminalString(quietZone: Int = 4, ansiColors: Bool = true) -> String {
        let q = max(0, quietZone)
        let span = -q..<(size + q)
        var lines: [String] = []
        for y in stride(from: -q, to: size + q, by: 2) {
            var line = ansiColors ? "\u{1B}[30;47m" : ""
            for x in span {
                switch (self[x, y], self[x, y + 1] && y + 1 < size + q) {
                case (true, true): line += "█"
                case (true, false): line += "▀"
                case (false, true): line += "▄"
                case (false, false): line += " "
                }
            }
            if ansiColors { line += "\u{1B}[0m" }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }
}
