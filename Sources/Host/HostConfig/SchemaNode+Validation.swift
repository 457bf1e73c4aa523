import Foundation
import SwiftplexBase

extension SchemaNode {
    /// Decodes a YAML node as this schema directs (a plain `123` is the string "123" where a
    /// string is wanted; only `true`/`false` are booleans), recording problems in `d`.
    func decode(_ node: ConfigNode, _ path: String, _ d: inout NodeDecoder) -> JSONValue? {
        let value: JSONValue
        switch type {
        case nil:
            value = node.untypedJSON
        case .string:
            guard let s = node.scalar, !node.isNull else { d.expected("a string", node, path); return nil }
            value = .string(s)
        case .integer:
            guard let i = node.intValue else { d.expected("an integer", node, path); return nil }
            value = .int(Int64(i))
        case .number:
            if let i = node.intValue { value = .int(Int64(i)) } else if let n = node.doubleValue { value = .double(n) } else {
                d.expected("a number", node, path)
                return nil
            }
        case .boolean:
            guard let b = node.boolValue else { d.expected("a boolean (true or false)", node, path); return nil }
            value = .bool(b)
        case .array:
            guard let items = node.sequence else { d.expected("a list", node, path); return nil }
            var out: [JSONValue] = []
            var ok = true
            for (i, item) in items.enumerated() {
                if let v = self.items.map({ $0.decode(item, "\(path)[\(i)]", &d) }) ?? item.untypedJSON {
                    out.append(v)
                } else {
                    ok = false
                }
            }
            guard ok else { return nil }
            value = .array(out)
        case .object:
            guard let v = decodeObject(node, path, &d) else { return nil }
            value = v
        }
        if let why = constraintProblem(value) {
            var message = "\(why), got \(node.shown)"
            if enumValues != nil, case let .string(s) = value, node.substitutedVariables.isEmpty {
                message += Suggestion.hint(for: s, in: (enumValues ?? []).compactMap { if case let .string(e) = $0 { e } else { nil } })
            }
            d.problem(node, path, message)
            return nil
        }
        return value
    }

    private func decodeObject(_ node: ConfigNode, _ path: String, _ d: inout NodeDecoder) -> JSONValue? {
        guard let entries = node.isNull ? [] : node.entries else {
            d.expected("a mapping", node, path)
            return nil
        }
        var out: [(String, JSONValue)] = []
        var ok = true
        var nulls: Set<String> = []
        for e in entries {
            let childPath = Self.join(path, e.key)
            let schema: SchemaNode?
            if let s = self[e.key] {
                schema = s
            } else {
                switch additional {
                case .forbidden:
                    let place = path.isEmpty ? "" : " in \(path)"
                    d.sink.add(e.keyMark, "unknown key \(JSONWriter.quote(e.key))\(place)\(Suggestion.hint(for: e.key, in: properties.map(\.0)))")
                    ok = false
                    continue
                case .allowed: schema = nil
                case let .schema(s): schema = s
                }
            }
            // A null value means "not set": the default applies, as for an absent key.
            if e.value.isNull, schema?.type != nil {
                nulls.insert(e.key)
                continue
            }
            if let v = schema.map({ $0.decode(e.value, childPath, &d) }) ?? e.value.untypedJSON {
                out.append((e.key, v))
            } else {
                ok = false
            }
        }
        for name in required where !out.contains(where: { $0.0 == name }) {
            let why = nulls.contains(name) ? "required key \(JSONWriter.quote(name)) is null" : "missing required key \(JSONWriter.quote(name))"
            d.problem(node, path, why)
            ok = false
        }
        for (name, sub) in properties where !out.contains(where: { $0.0 == name }) {
            if let dv = sub.defaultValue { out.append((name, dv)) }
        }
        return ok ? .object(out) : nil
    }

    /// `a.b`, or `a["odd key"]` when the key is not a plain word.
    static func join(_ path: String, _ key: String) -> String {
        let plain = !key.isEmpty && key.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }
        if plain { return path.isEmpty ? key : "\(path).\(key)" }
        return "\(path)[\(JSONWriter.quote(key))]"
    }

    /// The first constraint (enum, range, length, pattern, regex format, item count) that `value` breaks,
    /// phrased as "must …"; its type is already right.
    func constraintProblem(_ value: JSONValue) -> String? {
        if let allowed = enumValues, !allowed.contains(value) {
            return "must be one of \(enumText)"
        }
        switch value {
        case let .int(i):
            return rangeProblem(Double(i))
        case let .double(n):
            return rangeProblem(n)
        case let .string(s):
            if let lo = minLength, s.count < lo { return "must have at least \(lo) character\(lo == 1 ? "" : "s")" }
            if let hi = maxLength, s.count > hi { return "must have at most \(hi) character\(hi == 1 ? "" : "s")" }
            if let pattern, let re = try? NSRegularExpression(pattern: pattern),
               re.firstMatch(in: s, range: NSRange(s.startIndex..., in: s)) == nil {
                return "must match the pattern \(pattern)"
            }
            if format == "regex", (try? NSRegularExpression(pattern: s)) == nil {
                return "must be a valid regular expression"
            }
        case let .array(items):
            if let lo = minItems, items.count < lo { return "must have at least \(lo) item\(lo == 1 ? "" : "s")" }
            if let hi = maxItems, items.count > hi { return "must have at most \(hi) item\(hi == 1 ? "" : "s")" }
        default:
            break
        }
        return nil
    }

    private func rangeProblem(_ n: Double) -> String? {
        if let lo = minimum, n < lo { return "must be at least \(Self.shown(lo))" }
        if let hi = maximum, n > hi { return "must be at most \(Self.shown(hi))" }
        return nil
    }

    /// A bound in a message: `3`, not `3.0`.
    static func shown(_ d: Double) -> String {
        if let i = Int64(exactly: d) { return String(i) }
        return JSONWriter.number(d)
    }

    /// Why a JSON value (a schema's `default` or `enum` entry) does not fit this schema, or nil.
    func problem(with value: JSONValue) -> String? {
        if let type {
            let fits: Bool
            switch (type, value) {
            case (.string, .string), (.integer, .int), (.number, .int), (.number, .double),
                 (.boolean, .bool), (.array, .array), (.object, .object): fits = true
            default: fits = false
            }
            guard fits else { return "\(value.text) is not of type \(type.rawValue)" }
        }
        if let why = constraintProblem(value) { return why }
        if let items, case let .array(values) = value {
            for (i, v) in values.enumerated() {
                if let why = items.problem(with: v) { return "item \(i): \(why)" }
            }
        }
        if case let .object(pairs) = value {
            for (key, v) in pairs {
                if let sub = self[key] {
                    if let why = sub.problem(with: v) { return "\(key): \(why)" }
                } else if case .forbidden = additional, type == .object {
                    return "\(JSONWriter.quote(key)) is not a known property"
                } else if case let .schema(s) = additional, let why = s.problem(with: v) {
                    return "\(key): \(why)"
                }
            }
            for name in required where !pairs.contains(where: { $0.0 == name }) {
                return "missing required property \(JSONWriter.quote(name))"
            }
        }
        return nil
    }
}
