/// Malformed JSON: what is wrong and the byte offset (from 0, in the UTF-8 text) where it was found.
public struct JSONError: CodedError {
    public enum Code: Sendable, Hashable {
        /// Not JSON's grammar (RFC 8259): a stray character, a trailing comma, a bad escape, a
        /// lone surrogate, a control character inside a string, text after the value…
        case syntax
        /// A number too large for a double (`1e999`): JSON has no infinity.
        case nonFiniteNumber
        /// An object names the same key twice (readers disagree on which one wins).
        case duplicateKey
        /// Arrays and objects nested deeper than the parser's limit.
        case tooDeep
        /// The text is longer than the parser's limit.
        case tooLong
    }

    public let code: Code
    /// Byte offset into the UTF-8 text.
    public let offset: Int
    /// What is wrong, in a few words (never the text itself beyond a key name).
    public let reason: String
    public var message: String { "invalid JSON at byte \(offset): \(reason)" }

    public init(_ code: Code, offset: Int, reason: String) {
        self.code = code
        self.offset = offset
        self.reason = reason
    }
}

extension JSONValue {
    /// The nesting limit of `parse` unless told otherwise.
    public static let defaultMaxDepth = 128

    /// Parses JSON text strictly (RFC 8259): no trailing commas, comments, `NaN`, leading zeros or
    /// single quotes; an object naming a key twice, a number beyond a double's range and nesting
    /// deeper than `maxDepth` are refused too. Integers that fit `Int64` become `.int`, other
    /// numbers `.double`. Objects keep their key order.
    public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth, maxBytes: Int = .max) throws(JSONError) -> JSONValue {
        var text = text
        var result: Result<JSONValue, JSONError> = .success(.null)
        text.withUTF8 { bytes in
            result = Result { () throws(JSONError) -> JSONValue in try parse(utf8: bytes, maxDepth: maxDepth, maxBytes: maxBytes) }
        }
        return try result.get()
    }

    /// Parses JSON from UTF-8 bytes (see `parse(_:maxDepth:maxBytes:)`); invalid UTF-8 inside
    /// strings is replaced by U+FFFD.
    public static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int = defaultMaxDepth, maxBytes: Int = .max) throws(JSONError) -> JSONValue {
        guard bytes.count <= maxBytes else { throw JSONError(.tooLong, offset: maxBytes, reason: "longer than \(maxBytes) bytes") }
        var parser = JSONParser(bytes: bytes, maxDepth: maxDepth)
        let value = try parser.value()
        parser.skipSpace()
        guard parser.i == bytes.count else { throw parser.fail("unexpected text after the value") }
        return value
    }

    /// Parses JSON from UTF-8 bytes (see `parse(_:maxDepth:maxBytes:)`).
    public static func parse(utf8 bytes: [UInt8], maxDepth: Int = defaultMaxDepth, maxBytes: Int = .max) throws(JSONError) -> JSONValue {
        var result: Result<JSONValue, JSONError> = .success(.null)
        bytes.withUnsafeBufferPointer { b in
            result = Result { () throws(JSONError) -> JSONValue in try parse(utf8: b, maxDepth: maxDepth, maxBytes: maxBytes) }
        }
        return try result.get()
    }
}

/// A recursive-descent reader over UTF-8 bytes, straight into `JSONValue`.
struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var i = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func fail(_ reason: String, _ code: JSONError.Code = .syntax, at offset: Int? = nil) -> JSONError {
        JSONError(code, offset: offset ?? i, reason: reason)
    }

    @inline(__always) mutating func skipSpace() {
        while i < bytes.count {
            let b = bytes[i]
            guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
            i += 1
        }
    }

    mutating func value() throws(JSONError) -> JSONValue {
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

    mutating func literal(_ word: StaticString) throws(JSONError) {
        let n = word.utf8CodeUnitCount
        guard i + n <= bytes.count else { throw fail("unknown word") }
        for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw fail("unknown word") }
        i += n
    }

    mutating func enter() throws(JSONError) {
        depth += 1
        guard depth <= maxDepth else { throw fail("nested deeper than \(maxDepth) levels", .tooDeep) }
    }

    mutating func object() throws(JSONError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        i += 1
        var pairs: [(String, JSONValue)] = []
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(pairs) }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let keyAt = i
            let key = try string()
            if pairs.contains(where: { $0.0 == key }) {
                throw fail("duplicate key \(JSONWriter.quote(key))", .duplicateKey, at: keyAt)
            }
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

    mutating func array() throws(JSONError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        i += 1
        var items: [JSONValue] = []
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

    mutating func hex4() throws(JSONError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("bad \\u escape") }
        var v: UInt32 = 0
        for k in 0..<4 {
            let b = bytes[i + k]
            let d: UInt8
            switch b {
            case 0x30...0x39: d = b - 0x30
            case 0x41...0x46: d = b - 0x41 + 10
            case 0x61...0x66: d = b - 0x61 + 10
            default: throw fail("bad \\u escape")
            }
            v = v << 4 | UInt32(d)
        }
        i += 4
        return v
    }

    mutating func string() throws(JSONError) -> String {
        i += 1
        let start = i
        // Fast path: no escapes.
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw fail("control character in a string") }
            i += 1
        }
        guard i < bytes.count else { throw fail("unterminated string") }
        if bytes[i] == UInt8(ascii: "\"") {
            defer { i += 1 }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
        }
        var out: [UInt8] = []
        out.reserveCapacity(i - start + 16)
        out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<i]))
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") {
                i += 1
                return String(decoding: out, as: UTF8.self)
            }
            if b < 0x20 { throw fail("control character in a string") }
            guard b == UInt8(ascii: "\\") else { out.append(b); i += 1; continue }
            i += 1
            guard i < bytes.count else { break }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
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
                out.append(contentsOf: UTF8.encode(u)!)
            default: throw fail("bad escape")
            }
        }
        throw fail("unterminated string")
    }

    /// A number in JSON's grammar: `-`? (`0` | [1-9][0-9]*) (`.` [0-9]+)? ([eE] [+-]? [0-9]+)?, finite.
    mutating func number() throws(JSONError) -> JSONValue {
        let start = i
        var negative = false
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { negative = true; i += 1 }
        let digitsStart = i
        // Accumulate the integer part as a magnitude; overflow only means "not an Int64".
        var magnitude: UInt64 = 0
        var overflow = false
        while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 {
            if !overflow {
                let (m1, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (m2, o2) = m1.addingReportingOverflow(UInt64(bytes[i] - 0x30))
                if o1 || o2 { overflow = true } else { magnitude = m2 }
            }
            i += 1
        }
        guard i > digitsStart else { throw fail("unexpected character") }
        if bytes[digitsStart] == 0x30, i - digitsStart > 1 { throw fail("leading zero in a number", at: digitsStart) }
        var isInteger = true
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            let f = i
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { i += 1 }
            guard i > f else { throw fail("digits expected after '.'") }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            isInteger = false
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            let e = i
            while i < bytes.count, bytes[i] >= 0x30, bytes[i] <= 0x39 { i += 1 }
            guard i > e else { throw fail("digits expected in the exponent") }
        }
        if isInteger, !overflow {
            if negative {
                if magnitude <= UInt64(Int64.max) { return .int(-Int64(magnitude)) }
                if magnitude == UInt64(Int64.max) + 1 { return .int(.min) }
            } else if magnitude <= UInt64(Int64.max) {
                return .int(Int64(magnitude))
            }
        }
        // A fraction, an exponent or an integer beyond Int64: a double (as other JSON readers do).
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
        guard let d = Double(text), d.isFinite else {
            throw fail("number out of range (JSON has no infinity)", .nonFiniteNumber, at: start)
        }
        return .double(d)
    }
}
