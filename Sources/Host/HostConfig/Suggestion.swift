import SwiftplexBase

/// "Did you mean …?" for misspelt keys and enum values, by edit distance.
enum Suggestion {
    /// The closest candidate within a distance that still looks like a typo (at most 2 edits, or
    /// a third of the word for long words), or nil.
    static func closest(to word: String, in candidates: some Sequence<String>) -> String? {
        let limit = max(2, word.count / 3)
        var best: (String, Int)?
        for c in candidates {
            let d = distance(word.lowercased(), c.lowercased())
            if d <= limit, d < (best?.1 ?? .max) { best = (c, d) }
        }
        return best?.0
    }

    /// `; did you mean "x"?` or "".
    static func hint(for word: String, in candidates: some Sequence<String>) -> String {
        closest(to: word, in: candidates).map { "; did you mean \(JSONWriter.quote($0))?" } ?? ""
    }

    /// Damerau–Levenshtein distance (optimal string alignment): insertions, deletions,
    /// substitutions and swaps of neighbours each cost one, since swapped letters are the
    /// commonest typo.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var before = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                var d = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d = min(d, before[j - 2] + 1) }
                current[j] = d
            }
            (before, previous, current) = (previous, current, before)
        }
        return previous[b.count]
    }
}
