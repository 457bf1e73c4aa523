import SwiftplexBase

/// `${NAME}` substitution in scalar values, so secrets stay out of config files.
///
/// - `${NAME}`: the variable's value; unset is an error at the scalar's position.
/// - `${NAME:-default}`: the default when the variable is unset or empty.
/// - `$${`: a literal `${`. A `$` not followed by `{` is kept as it is.
///
/// Keys are never interpolated. A scalar that received a substitution remembers the variable
/// names (``ConfigNode/substitutedVariables``), so messages about it name the variables and
/// never show the value.
enum Interpolation {
    /// Returns the tree with every scalar value substituted, and the problems found.
    static func apply(to node: ConfigNode, environment: [String: String], file: String) -> (ConfigNode, [ConfigProblem]) {
        var sink = ProblemSink(file: file)
        let out = walk(node, environment, &sink)
        return (out, sink.problems)
    }

    private static func walk(_ node: ConfigNode, _ env: [String: String], _ sink: inout ProblemSink) -> ConfigNode {
        var node = node
        switch node.value {
        case let .scalar(text, style):
            guard text.contains("$") else { return node }
            switch substitute(text, env) {
            case let .success((value, names)):
                node.value = .scalar(value, style)
                node.substitutedVariables = names
            case let .failure(problem):
                sink.add(node.mark, problem.message)
            }
        case let .sequence(items):
            node.value = .sequence(items.map { walk($0, env, &sink) })
        case let .mapping(entries):
            node.value = .mapping(entries.map { ConfigNode.Entry(key: $0.key, keyMark: $0.keyMark, value: walk($0.value, env, &sink)) })
        }
        return node
    }

    struct Problem: Error {
        let message: String
    }

    /// Substitutes one string; returns the text and the names of the variables it used.
    static func substitute(_ text: String, _ env: [String: String]) -> Result<(String, [String]), Problem> {
        var out = ""
        var names: [String] = []
        var rest = Substring(text)
        while let dollar = rest.firstIndex(of: "$") {
            out += rest[..<dollar]
            let after = rest[rest.index(after: dollar)...]
            if after.hasPrefix("${") {
                out += "${"
                rest = after.dropFirst(2)
                continue
            }
            guard after.hasPrefix("{") else {
                out += "$"
                rest = after
                continue
            }
            let body = after.dropFirst()
            guard let close = body.firstIndex(of: "}") else {
                return .failure(Problem(message: "unclosed ${ in a value (write $${ for a literal ${)"))
            }
            let inner = body[..<close]
            let name: Substring
            var fallback: Substring?
            if let sep = inner.range(of: ":-") {
                name = inner[..<sep.lowerBound]
                fallback = inner[sep.upperBound...]
            } else {
                name = inner
            }
            guard isVariableName(name) else {
                let shown = name.count > 40 ? String(name.prefix(37)) + "..." : String(name)
                return .failure(Problem(message: "\(JSONWriter.quote("${" + shown + "}")) is not a variable reference: a name is letters, digits and _, not starting with a digit (write $${ for a literal ${)"))
            }
            let value = env[String(name)]
            if let fallback, value?.isEmpty ?? true {
                out += fallback
            } else if let value {
                out += value
                names.append(String(name))
            } else {
                return .failure(Problem(message: "environment variable \(name) is not set (use ${\(name):-default} for a default)"))
            }
            rest = body[body.index(after: close)...]
        }
        out += rest
        return .success((out, names))
    }

    static func isVariableName(_ s: Substring) -> Bool {
        guard let first = s.first, first.isASCII, first.isLetter || first == "_" else { return false }
        return s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
    }
}
