import SwiftplexBase

/// A position in a configuration file, 1-based, as a person counts lines and characters.
public struct ConfigMark: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var line: Int
    public var column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    public static func < (l: ConfigMark, r: ConfigMark) -> Bool {
        (l.line, l.column) < (r.line, r.column)
    }

    public var description: String { "\(line):\(column)" }
}

/// One node of a parsed YAML document, with the position it came from, so that every later
/// check (the host's schema, a plugin's schema) can point at the offending text.
///
/// Anchors, aliases and tags other than `!!str` are refused by the parser, so a tree is always
/// a plain tree: no node is shared and none needs a resolver beyond the YAML 1.2 core schema.
public struct ConfigNode: Sendable, Hashable {
    /// How a scalar was written. Anything but a plain scalar (single- or double-quoted, `|`, `>`
    /// or tagged `!!str`) is always a string; a plain scalar may be null, a boolean or a number.
    public enum ScalarStyle: Sendable, Hashable {
        case plain
        case quoted
    }

    /// A mapping entry; keys are scalars and keep their own position for "unknown key" errors.
    public struct Entry: Sendable, Hashable {
        public var key: String
        public var keyMark: ConfigMark
        public var value: ConfigNode

        public init(key: String, keyMark: ConfigMark, value: ConfigNode) {
            self.key = key
            self.keyMark = keyMark
            self.value = value
        }
    }

    public enum Value: Sendable, Hashable {
        case scalar(String, ScalarStyle)
        case sequence([ConfigNode])
        /// Entries in file order; duplicate keys are refused by the parser.
        case mapping([Entry])
    }

    public var value: Value
    public var mark: ConfigMark
    /// Names of the environment variables substituted into this scalar. When non-empty, its text
    /// may hold a secret, so messages describe it by these names, never by its text.
    public var substitutedVariables: [String]

    public init(_ value: Value, mark: ConfigMark, substitutedVariables: [String] = []) {
        self.value = value
        self.mark = mark
        self.substitutedVariables = substitutedVariables
    }

    /// An empty mapping at `mark`: what an absent or null `config:` stands for.
    public static func emptyMapping(at mark: ConfigMark) -> ConfigNode {
        ConfigNode(.mapping([]), mark: mark)
    }

    // MARK: Access

    public var scalar: String? { if case let .scalar(s, _) = value { s } else { nil } }
    public var isPlain: Bool { if case .scalar(_, .plain) = value { true } else { false } }
    public var sequence: [ConfigNode]? { if case let .sequence(a) = value { a } else { nil } }
    public var entries: [Entry]? { if case let .mapping(e) = value { e } else { nil } }

    public subscript(key: String) -> ConfigNode? {
        entries?.first { $0.key == key }?.value
    }

    // MARK: YAML 1.2 core schema, for plain scalars

    /// `null`, `Null`, `NULL`, `~` or nothing at all, written plain.
    public var isNull: Bool {
        guard case let .scalar(s, .plain) = value else { return false }
        return s.isEmpty || s == "~" || s == "null" || s == "Null" || s == "NULL"
    }

    /// `true`/`True`/`TRUE`/`false`/`False`/`FALSE` written plain; `yes`, `no`, `on`, `off` are
    /// strings, as in YAML 1.2.
    public var boolValue: Bool? {
        guard case let .scalar(s, .plain) = value else { return nil }
        switch s {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: return nil
        }
    }

    /// A plain decimal (`-12`, `+3`), octal (`0o17`) or hexadecimal (`0x1F`) integer that fits
    /// in `Int`.
    public var intValue: Int? {
        guard case let .scalar(s, .plain) = value else { return nil }
        return Self.coreInteger(s)
    }

    /// A plain integer or YAML 1.2 core float (`1.5`, `-2e3`, `.5`); infinities and NaN are left
    /// out because JSON cannot carry them.
    public var doubleValue: Double? {
        guard case let .scalar(s, .plain) = value else { return nil }
        if let i = Self.coreInteger(s) { return Double(i) }
        return Self.coreFloat(s)
    }

    static func coreInteger(_ s: String) -> Int? {
        if s.hasPrefix("0x") { return Int(s.dropFirst(2), radix: 16) }
        if s.hasPrefix("0o") { return Int(s.dropFirst(2), radix: 8) }
        var digits = Substring(s)
        if digits.first == "+" || digits.first == "-" { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(s.hasPrefix("+") ? String(s.dropFirst()) : s)
    }

    /// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`, checked by hand.
    static func coreFloat(_ s: String) -> Double? {
        var u = Substring(s).utf8[...]
        func digits() -> Int {
            var n = 0
            while let c = u.first, c >= 0x30, c <= 0x39 { u = u.dropFirst(); n += 1 }
            return n
        }
        if u.first == UInt8(ascii: "+") || u.first == UInt8(ascii: "-") { u = u.dropFirst() }
        var mantissa = digits()
        if u.first == UInt8(ascii: ".") { u = u.dropFirst(); mantissa += digits() }
        guard mantissa > 0 else { return nil }
        if u.first == UInt8(ascii: "e") || u.first == UInt8(ascii: "E") {
            u = u.dropFirst()
            if u.first == UInt8(ascii: "+") || u.first == UInt8(ascii: "-") { u = u.dropFirst() }
            guard digits() > 0 else { return nil }
        }
        guard u.isEmpty, let d = Double(s), d.isFinite else { return nil }
        return d
    }

    // MARK: Describing a node in a message

    /// The node's kind and, for scalars that hold no substituted variable, its text — for "got …"
    /// in messages. A scalar made from `${VAR}` is named by its variables only, so a secret in the
    /// environment never reaches an error message or a log.
    public var shown: String {
        switch value {
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        case let .scalar(s, style):
            if !substitutedVariables.isEmpty {
                let names = substitutedVariables.map { "${\($0)}" }.joined(separator: ", ")
                return "the value substituted from \(names)"
            }
            if style == .plain, isNull { return "null" }
            let clipped = s.count > 60 ? String(s.prefix(57)) + "..." : s
            return JSONWriter.quote(clipped)
        }
    }

    /// The kind of the node in a word, for type errors.
    var kindName: String {
        switch value {
        case .sequence: return "a list"
        case .mapping: return "a mapping"
        case .scalar(_, .quoted): return "a string"
        case .scalar:
            if isNull { return "null" }
            if boolValue != nil { return "a boolean" }
            if intValue != nil { return "an integer" }
            if doubleValue != nil { return "a number" }
            return "a string"
        }
    }
}
