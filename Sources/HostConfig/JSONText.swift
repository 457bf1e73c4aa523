/// A JSON value keeping object keys in order: plugin schemas are read with it (so defaults are
/// filled in the order the plugin declares its properties) and plugin configs are written with it.
///
/// The module has its own small reader and writer because it depends on nothing but libyaml and
/// Foundation, and Foundation's `JSONSerialization` loses key order and the integer/number split.
enum JSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    subscript(key: String) -> JSON? {
        guard case let .object(pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }

    static func == (l: JSON, r: JSON) -> Bool {
        switch (l, r) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.integer(a), .integer(b)): a == b
        case let (.number(a), .number(b)): a == b
        case let (.integer(a), .number(b)), let (.number(b), .integer(a)): Double(a) == b
        case let (.string(a), .string(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.object(a), .object(b)): a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: false
        }
    }

    func hash(into h: inout Hasher) { h.combine(text) }

    /// Compact JSON text.
    var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case let .bool(b): out += b ? "true" : "false"
        case let .integer(i): out += String(i)
        case let .number(d): out += JSONText.number(d)
        case let .string(s): out += JSONText.quote(s)
        case let .array(items):
            out += "["
            for (i, v) in items.enumerated() {
                if i > 0 { out += "," }
                v.write(to: &out)
            }
            out += "]"
        case let .object(pairs):
            out += "{"
            for (i, (k, v)) in pairs.enumerated() {
                if i > 0 { out += "," }
                out += JSONText.quote(k)
                out += ":"
                v.write(to: &out)
            }
            out += "}"
        }
    }
}

/// JSON text helpers: string quoting, number formatting and parsing.
enum JSONText {
    /// A JSON string literal: `"` and `\` escaped, control characters as `\n`, `\t`, … or
    /// `\u00XX`, U+2028/U+2029 escaped (so the text is also safe inside JavaScript), everything
    /// else as UTF-8.
    static func quote(_ s: String) -> String {
        var out = "\""
        out.reserveCapacity(s.utf8.count + 2)
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case "\u{2028}": out += "\\u2028"
            case "\u{2029}": out += "\\u2029"
            case let c where c.value < 0x20 || c.value == 0x7F:
                let hex = String(c.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        out += "\""
        return out
    }

    /// A double as JSON: integral values without a fraction, others in Swift's shortest
    /// round-tripping form (`1.5`, `1e-07`), which is valid JSON. JSON has no infinity or NaN:
    /// those (which `parse` never makes) are written as `null`, never as `inf`/`nan`.
    static func number(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        if d == d.rounded(), abs(d) < 1e15 { return String(Int(d)) }
        return "\(d)"
    }

    struct SyntaxError: Error, Sendable {
        let offset: Int
        let reason: String
    }

    static func parse(_ text: String) throws(SyntaxError) -> JSON {
        var p = Parser(bytes: Array(text.utf8))
        let v = try p.value()
        p.skipSpace()
        guard p.i == p.bytes.count else { throw SyntaxError(offset: p.i, reason: "unexpected text after the value") }
        return v
    }

    private struct Parser {
        let bytes: [UInt8]
        var i = 0
        var depth = 0

        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        func fail(_ reason: String) -> SyntaxError { SyntaxError(offset: i, reason: reason) }

        mutating func value() throws(SyntaxError) -> JSON {
            skipSpace()
            guard i < bytes.count else { throw fail("unexpected end of text") }
            switch bytes[i] {
            case UInt8(ascii: "{"): return try object()
            case UInt8(ascii: "["): return try array()
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            default: return try number()
            }
        }

        mutating func literal(_ word: String) throws(SyntaxError) {
            let w = Array(word.utf8)
            guard i + w.count <= bytes.count, Array(bytes[i..<i + w.count]) == w else { throw fail("unknown word") }
            i += w.count
        }

        mutating func enter() throws(SyntaxError) {
            depth += 1
            guard depth <= 100 else { throw fail("nested deeper than 100 levels") }
        }

        mutating func object() throws(SyntaxError) -> JSON {
            try enter()
            defer { depth -= 1 }
            i += 1
            var pairs: [(String, JSON)] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(pairs) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let key = try string()
                if pairs.contains(where: { $0.0 == key }) { throw fail("duplicate key \(JSONText.quote(key))") }
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                i += 1
                pairs.append((key, try value()))
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end of text in an object") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(pairs) }
                throw fail("expected ',' or '}'")
            }
        }

        mutating func array() throws(SyntaxError) -> JSON {
            try enter()
            defer { depth -= 1 }
            i += 1
            var items: [JSON] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                items.append(try value())
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end of text in an array") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
                throw fail("expected ',' or ']'")
            }
        }

        mutating func hex4() throws(SyntaxError) -> UInt32 {
            guard i + 4 <= bytes.count, let v = UInt32(String(decoding: bytes[i..<i + 4], as: UTF8.self), radix: 16) else {
                throw fail("bad \\u escape")
            }
            i += 4
            return v
        }

        mutating func string() throws(SyntaxError) -> String {
            i += 1
            var scalars = String.UnicodeScalarView()
            var run = i
            func flush(_ end: Int) { scalars.append(contentsOf: String(decoding: bytes[run..<end], as: UTF8.self).unicodeScalars) }
            while i < bytes.count {
                let b = bytes[i]
                if b == UInt8(ascii: "\"") {
                    flush(i)
                    i += 1
                    return String(scalars)
                }
                if b < 0x20 { throw fail("control character in a string") }
                guard b == UInt8(ascii: "\\") else { i += 1; continue }
                flush(i)
                i += 1
                guard i < bytes.count else { break }
                let e = bytes[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""): scalars.append("\"")
                case UInt8(ascii: "\\"): scalars.append("\\")
                case UInt8(ascii: "/"): scalars.append("/")
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    var v = try hex4()
                    if (0xD800..<0xDC00).contains(v) {
                        guard i + 2 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else { throw fail("lone surrogate") }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("bad surrogate pair") }
                        v = 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(v) else { throw fail("lone surrogate") }
                    scalars.append(u)
                default: throw fail("bad escape")
                }
                run = i
            }
            throw fail("unterminated string")
        }

        mutating func number() throws(SyntaxError) -> JSON {
            let start = i
            var isInteger = true
            if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
            let digitsStart = i
            while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1 }
            guard i > digitsStart else { throw fail("unexpected character") }
            if bytes[digitsStart] == 0x30, i - digitsStart > 1 { throw fail("leading zero in a number") }
            if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
                isInteger = false
                i += 1
                let f = i
                while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1 }
                guard i > f else { throw fail("digits expected after '.'") }
            }
            if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
                isInteger = false
                i += 1
                if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
                let e = i
                while i < bytes.count, (0x30...0x39).contains(bytes[i]) { i += 1 }
                guard i > e else { throw fail("digits expected in the exponent") }
            }
            let text = String(decoding: bytes[start..<i], as: UTF8.self)
            if isInteger, let n = Int(text) { return .integer(n) }
            guard let d = Double(text), d.isFinite else { throw fail("number out of range") }
            return .number(d)
        }
    }
}
