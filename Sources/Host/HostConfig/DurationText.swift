/// Durations as people write them in config files: `250ms`, `5s`, `2m`, `1h`, or a sum of such
/// parts (`1m30s`).
public enum DurationText {
    /// Parses a duration; nil when the text is not one (a bare number has no unit and is refused,
    /// because "5" could mean seconds or milliseconds).
    public static func parse(_ text: String) -> Duration? {
        var rest = Substring(text)
        guard !rest.isEmpty else { return nil }
        var total = Duration.zero
        while !rest.isEmpty {
            let digits = rest.prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty, digits.count <= 9, let n = Int64(digits) else { return nil }
            rest = rest.dropFirst(digits.count)
            let unit = rest.prefix { $0.isASCII && $0.isLetter }
            rest = rest.dropFirst(unit.count)
            switch unit {
            case "ms": total += .milliseconds(n)
            case "s": total += .seconds(n)
            case "m": total += .seconds(n * 60)
            case "h": total += .seconds(n * 3600)
            default: return nil
            }
        }
        return total
    }

    /// The shortest way to write a duration in the units above (`1m30s`, `250ms`), for messages.
    public static func format(_ d: Duration) -> String {
        var ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        if ms == 0 { return "0s" }
        var out = ""
        for (unit, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000), ("ms", 1)] where ms >= size {
            out += "\(ms / size)\(unit)"
            ms %= size
        }
        return out
    }
}
