import CLibYAML
import SwiftplexBase

/// Turns YAML text into a ``ConfigNode`` tree through libyaml's event API (the process's one
/// YAML implementation), keeping a position on every node.
///
/// It accepts one document; refuses anchors, aliases and tags other than `!!str` (a config file
/// that needs them is harder to read than one that repeats itself, and refusing them rules out
/// alias bombs); reports every duplicate key; and turns libyaml's errors into
/// `FILE:LINE:COLUMN: YAML syntax error: …` at libyaml's problem mark.
enum YAMLReader {
    /// Deeper nesting than this is refused, so later recursive walks cannot exhaust the stack.
    static let maxDepth = 200

    static func parse(_ bytes: [UInt8], file: String) throws(ConfigErrors) -> ConfigNode {
        let parser = UnsafeMutablePointer<yaml_parser_t>.allocate(capacity: 1)
        defer { parser.deallocate() }
        guard yaml_parser_initialize(parser) != 0 else {
            throw ConfigErrors([ConfigProblem(file: file, line: 0, column: 0, message: "libyaml could not start (out of memory)")])
        }
        defer { yaml_parser_delete(parser) }

        var builder = TreeBuilder(file: file)
        let outcome: Result<Void, ConfigErrors> = bytes.withUnsafeBufferPointer { buffer in
            yaml_parser_set_input_string(parser, buffer.baseAddress, buffer.count)
            var event = yaml_event_t()
            while true {
                guard yaml_parser_parse(parser, &event) != 0 else {
                    builder.sink.add(contentsOf: [syntaxProblem(parser.pointee, bytes: bytes, file: file)])
                    return .failure(ConfigErrors(builder.sink.problems))
                }
                defer { yaml_event_delete(&event) }
                if event.type == YAML_STREAM_END_EVENT { return .success(()) }
                if let stop = builder.take(event) { return .failure(stop) }
            }
        }
        if case let .failure(errors) = outcome { throw errors }
        guard let root = builder.root else {
            throw ConfigErrors([ConfigProblem(file: file, line: 1, column: 1, message: "the file is empty: it holds no YAML document")])
        }
        guard builder.sink.isEmpty else { throw ConfigErrors(builder.sink.problems) }
        return root
    }

    /// libyaml's error as a problem at its problem mark, with its context when it has one.
    static func syntaxProblem(_ p: yaml_parser_t, bytes: [UInt8], file: String) -> ConfigProblem {
        let problem = p.problem.map { String(cString: $0) } ?? "unknown error"
        if p.error == YAML_MEMORY_ERROR {
            return ConfigProblem(file: file, line: 0, column: 0, message: "libyaml ran out of memory")
        }
        if p.error == YAML_READER_ERROR {
            // The reader reports a byte offset, not a mark: count lines and characters up to it.
            let mark = markOf(offset: p.problem_offset, in: bytes)
            return ConfigProblem(file: file, at: mark, "the file is not valid UTF-8 text: \(problem)")
        }
        var message = "YAML syntax error: \(problem)"
        if let context = p.context.map({ String(cString: $0) }) {
            message += " (\(context) at \(p.context_mark.line + 1):\(p.context_mark.column + 1))"
        }
        return ConfigProblem(file: file, at: mark(p.problem_mark), message)
    }

    static func mark(_ m: yaml_mark_t) -> ConfigMark {
        ConfigMark(line: m.line + 1, column: m.column + 1)
    }

    static func markOf(offset: Int, in bytes: [UInt8]) -> ConfigMark {
        var line = 1, column = 1
        for b in bytes.prefix(offset) {
            if b == 0x0A { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 }
        }
        return ConfigMark(line: line, column: column)
    }
}

/// Builds the tree from events with an explicit stack of open collections.
private struct TreeBuilder {
    enum Frame {
        case sequence(mark: ConfigMark, items: [ConfigNode])
        case mapping(mark: ConfigMark, entries: [ConfigNode.Entry], pendingKey: (String, ConfigMark)?, seen: [String: ConfigMark])
    }

    var sink: ProblemSink
    var stack: [Frame] = []
    var root: ConfigNode?
    var documents = 0

    init(file: String) { sink = ProblemSink(file: file) }

    /// Handles one event; returns errors when parsing must stop.
    mutating func take(_ event: yaml_event_t) -> ConfigErrors? {
        let mark = YAMLReader.mark(event.start_mark)
        switch event.type {
        case YAML_DOCUMENT_START_EVENT:
            documents += 1
            if documents > 1 {
                sink.add(mark, "only one YAML document is allowed; remove the second `---` and what follows")
                return ConfigErrors(sink.problems)
            }
        case YAML_ALIAS_EVENT:
            sink.add(mark, "YAML aliases (*name) are not supported; write the value out")
            return ConfigErrors(sink.problems)
        case YAML_SCALAR_EVENT:
            let s = event.data.scalar
            guard checkProperties(anchor: s.anchor, tag: s.tag, scalar: true, at: mark) else { return ConfigErrors(sink.problems) }
            let text = String(decoding: UnsafeBufferPointer(start: s.value, count: s.length), as: UTF8.self)
            let plain = s.style == YAML_PLAIN_SCALAR_STYLE && s.tag == nil
            attach(ConfigNode(.scalar(text, plain ? .plain : .quoted), mark: mark))
        case YAML_SEQUENCE_START_EVENT:
            let s = event.data.sequence_start
            guard checkProperties(anchor: s.anchor, tag: s.tag, scalar: false, at: mark), checkDepth(mark) else { return ConfigErrors(sink.problems) }
            stack.append(.sequence(mark: mark, items: []))
        case YAML_MAPPING_START_EVENT:
            let m = event.data.mapping_start
            guard checkProperties(anchor: m.anchor, tag: m.tag, scalar: false, at: mark), checkDepth(mark) else { return ConfigErrors(sink.problems) }
            stack.append(.mapping(mark: mark, entries: [], pendingKey: nil, seen: [:]))
        case YAML_SEQUENCE_END_EVENT:
            guard case let .sequence(m, items) = stack.popLast() else { break }
            attach(ConfigNode(.sequence(items), mark: m))
        case YAML_MAPPING_END_EVENT:
            guard case let .mapping(m, entries, _, _) = stack.popLast() else { break }
            attach(ConfigNode(.mapping(entries), mark: m))
        default:
            break
        }
        return nil
    }

    mutating func checkDepth(_ mark: ConfigMark) -> Bool {
        guard stack.count < YAMLReader.maxDepth else {
            sink.add(mark, "nesting deeper than \(YAMLReader.maxDepth) levels is not supported")
            return false
        }
        return true
    }

    /// Anchors are refused outright; of the tags only `!!str` (and the non-specific `!`) on a
    /// scalar is accepted, meaning "this is a string".
    mutating func checkProperties(anchor: UnsafeMutablePointer<yaml_char_t>?, tag: UnsafeMutablePointer<yaml_char_t>?, scalar: Bool, at mark: ConfigMark) -> Bool {
        if anchor != nil {
            sink.add(mark, "YAML anchors (&name) are not supported; write the value out")
            return false
        }
        if let tag {
            let t = String(cString: tag)
            guard scalar, t == "tag:yaml.org,2002:str" || t == "!" else {
                let shown = t.hasPrefix("tag:yaml.org,2002:") ? "!!" + t.dropFirst("tag:yaml.org,2002:".count) : t
                sink.add(mark, "YAML tags are not supported (found \(shown)); only !!str on a scalar is")
                return false
            }
        }
        return true
    }

    mutating func attach(_ node: ConfigNode) {
        guard let top = stack.popLast() else {
            root = node
            return
        }
        switch top {
        case .sequence(let m, var items):
            items.append(node)
            stack.append(.sequence(mark: m, items: items))
        case .mapping(let m, var entries, let pendingKey, var seen):
            if let (key, keyMark) = pendingKey {
                entries.append(ConfigNode.Entry(key: key, keyMark: keyMark, value: node))
                stack.append(.mapping(mark: m, entries: entries, pendingKey: nil, seen: seen))
                return
            }
            guard let key = node.scalar else {
                sink.add(node.mark, "a mapping key must be a scalar, not \(node.kindName)")
                // Keep parsing so later problems are reported too; the entry itself is dropped.
                stack.append(.mapping(mark: m, entries: entries, pendingKey: ("", node.mark), seen: seen))
                return
            }
            if let first = seen[key] {
                sink.add(node.mark, "duplicate key \(JSONWriter.quote(key)) (first defined at \(first))")
            } else {
                seen[key] = node.mark
            }
            stack.append(.mapping(mark: m, entries: entries, pendingKey: (key, node.mark), seen: seen))
        }
    }
}
