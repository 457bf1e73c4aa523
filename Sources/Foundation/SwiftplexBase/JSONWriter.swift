/// The one JSON writer: compact RFC 8259 text, UTF-8, keys in stored order.
///
/// Strings escape `"` and `\`, control characters (`\n`, `\r`, `\t`, `\b`, `\f`, other ones and
/// DEL as `\u00XX`) and U+2028/U+2029 (so the text is also safe inside JavaScript); everything else
/// is written as UTF-8. Integers are written as integers; doubles in Swift's shortest
/// round-tripping form, always with a fraction or exponent (`1.0`, `1.5`, `1e-07`, `1e+16`), so
/// they read back as doubles. JSON has no infinity or NaN: those (which `parse` never makes) are
/// written as `null`.
public enum JSONWriter {
    /// `value` as compact JSON text.
    public static func text(_ value: JSONValue) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `value` as compact JSON, UTF-8.
    public static func bytes(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, to: &out)
        return out
    }

    /// A JSON string literal of `s` (with its quotes).
    public static func quote(_ s: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count + 2)
        writeString(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// A double as JSON (`null` when not finite).
    public static func number(_ d: Double) -> String {
        var out: [UInt8] = []
        writeDouble(d, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    public static func write(_ value: JSONValue, to out: inout [UInt8]) {
        switch value {
        case .null: append("null", to: &out)
        case let .bool(b): append(b ? "true" : "false", to: &out)
        case let .int(i): writeInt(i, to: &out)
        case let .double(d): writeDouble(d, to: &out)
        case let .string(s): writeString(s, to: &out)
        case let .array(items):
            out.append(UInt8(ascii: "["))
            var first = true
            for v in items {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                write(v, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .object(pairs):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (k, v) in pairs {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                writeString(k, to: &out)
                out.append(UInt8(ascii: ":"))
                write(v, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    @inline(__always) static func append(_ s: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    static func writeInt(_ i: Int64, to out: inout [UInt8]) {
        if i >= 0, i < 10 { out.append(0x30 + UInt8(i)); return }
        var magnitude = i.magnitude
        if i < 0 { out.append(UInt8(ascii: "-")) }
        // At most 20 digits, written backwards into a fixed buffer.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buf in
            var n = 20
            while magnitude > 0 {
                n -= 1
                buf[n] = 0x30 + UInt8(magnitude % 10)
                magnitude /= 10
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buf[n..<20]))
        }
    }

    static func writeDouble(_ d: Double, to out: inout [UInt8]) {
        guard d.isFinite else { append("null", to: &out); return }
        // Swift's description is the shortest text that reads back as the same double, with a
        // fraction (`1.0`) or an exponent (`1e+16`, `5e-324`): valid JSON either way.
        out.append(contentsOf: d.description.utf8)
    }

    static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            var run = 0
            var i = 0
            let n = bytes.count
            while i < n {
                let b = bytes[i]
                let escape: StaticString?
                switch b {
                case UInt8(ascii: "\""): escape = "\\\""
                case UInt8(ascii: "\\"): escape = "\\\\"
                case 0x0A: escape = "\\n"
                case 0x0D: escape = "\\r"
                case 0x09: escape = "\\t"
                case 0x08: escape = "\\b"
                case 0x0C: escape = "\\f"
                case 0x00..<0x20, 0x7F: escape = nil
                case 0xE2 where i + 2 < n && bytes[i + 1] == 0x80 && (bytes[i + 2] == 0xA8 || bytes[i + 2] == 0xA9):
                    // U+2028 LINE SEPARATOR / U+2029 PARAGRAPH SEPARATOR.
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<i]))
                    append(bytes[i + 2] == 0xA8 ? "\\u2028" : "\\u2029", to: &out)
                    i += 3
                    run = i
                    continue
                default:
                    i += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<i]))
                if let escape {
                    append(escape, to: &out)
                } else {
                    append("\\u00", to: &out)
                    out.append(hexDigit(b >> 4))
                    out.append(hexDigit(b & 0xF))
                }
                i += 1
                run = i
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<n]))
        }
        out.append(UInt8(ascii: "\""))
    }

    @inline(__always) static func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x61 + v - 10 }
}
