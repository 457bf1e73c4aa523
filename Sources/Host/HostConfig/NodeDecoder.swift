import SwiftplexBase

/// Reads typed values out of ``ConfigNode``s, recording a problem — at the node's position and
/// naming the key path — for each value that does not fit, and carrying on.
struct NodeDecoder {
    var sink: ProblemSink

    init(file: String) { sink = ProblemSink(file: file) }

    mutating func problem(_ node: ConfigNode, _ path: String, _ message: String) {
        sink.add(node.mark, path.isEmpty ? message : "\(path): \(message)")
    }

    mutating func expected(_ what: String, _ node: ConfigNode, _ path: String) {
        problem(node, path, "expected \(what), got \(node.shown)")
    }

    /// The keys of a mapping, marking each as read, so that what is left over is reported as
    /// unknown with a suggestion.
    struct Fields {
        let node: ConfigNode
        let path: String
        let known: [String]

        /// The value of `key`, or nil when absent or null (null means "use the default").
        func callAsFunction(_ key: String) -> ConfigNode? {
            precondition(known.contains(key), "\(key) is not declared for \(path)")
            guard let v = node[key], !v.isNull else { return nil }
            return v
        }

        func path(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
    }

    /// Opens a mapping with its allowed keys, reporting unknown keys now. Returns nil (after
    /// recording a problem) when the node is not a mapping; a null node reads as an empty mapping.
    mutating func fields(_ node: ConfigNode, _ path: String, known: [String]) -> Fields? {
        if node.isNull { return Fields(node: .emptyMapping(at: node.mark), path: path, known: known) }
        guard let entries = node.entries else {
            expected("a mapping", node, path)
            return nil
        }
        for e in entries where !known.contains(e.key) {
            let place = path.isEmpty ? "" : " in \(path)"
            sink.add(e.keyMark, "unknown key \(JSONWriter.quote(e.key))\(place)\(Suggestion.hint(for: e.key, in: known))")
        }
        return Fields(node: node, path: path, known: known)
    }

    mutating func string(_ node: ConfigNode, _ path: String) -> String? {
        guard let s = node.scalar else {
            expected("a string", node, path)
            return nil
        }
        return s
    }

    mutating func bool(_ node: ConfigNode, _ path: String) -> Bool? {
        guard let b = node.boolValue else {
            expected("a boolean (true or false)", node, path)
            return nil
        }
        return b
    }

    mutating func integer(_ node: ConfigNode, _ path: String, in range: ClosedRange<Int>) -> Int? {
        let what = "an integer in \(range.lowerBound)...\(range.upperBound)"
        guard let i = node.intValue else {
            expected(what, node, path)
            return nil
        }
        guard range.contains(i) else {
            expected(what, node, path)
            return nil
        }
        return i
    }

    /// One of a fixed set of words; the message lists them all and suggests the nearest.
    mutating func choice<E: RawRepresentable & CaseIterable>(_ node: ConfigNode, _ path: String, as: E.Type) -> E? where E.RawValue == String {
        let allowed = E.allCases.map(\.rawValue)
        guard let s = node.scalar, let v = E(rawValue: s) else {
            let hint = node.scalar.map { node.substitutedVariables.isEmpty ? Suggestion.hint(for: $0, in: allowed) : "" } ?? ""
            problem(node, path, "expected one of \(allowed.joined(separator: ", ")); got \(node.shown)\(hint)")
            return nil
        }
        return v
    }

    /// A positive duration like `250ms`, `5s`, `2m`, `1h`.
    mutating func duration(_ node: ConfigNode, _ path: String) -> Duration? {
        guard let s = node.scalar, let d = DurationText.parse(s) else {
            expected("a duration like 250ms, 5s, 2m or 1h", node, path)
            return nil
        }
        guard d > .zero else {
            problem(node, path, "the duration must be more than 0")
            return nil
        }
        return d
    }

    mutating func list(_ node: ConfigNode, _ path: String) -> [ConfigNode]? {
        guard let items = node.sequence else {
            expected("a list", node, path)
            return nil
        }
        return items
    }
}
