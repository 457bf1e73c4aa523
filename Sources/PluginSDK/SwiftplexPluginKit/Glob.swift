/// A name pattern: `*` matches any run of characters, `?` one character; case-insensitive
/// (`auto-accept`'s display-name rules, `group-moderator`'s group names).
public struct Glob: Sendable, Hashable {
    public let pattern: String
    private let chars: [Character]

    public init(_ pattern: String) {
        self.pattern = pattern
        chars = Array(pattern.lowercased())
    }

    public func matches(_ name: String) -> Bool {
        let s = Array(name.lowercased())
        var p = 0, i = 0
        var star = -1, mark = 0
        while i < s.count {
            if p < chars.count, chars[p] == "?" || chars[p] == s[i] {
                p += 1
                i += 1
            } else if p < chars.count, chars[p] == "*" {
                star = p
                mark = i
                p += 1
            } else if star >= 0 {
                p = star + 1
                mark += 1
                i = mark
            } else {
                return false
            }
        }
        while p < chars.count, chars[p] == "*" { p += 1 }
        return p == chars.count
    }
}
