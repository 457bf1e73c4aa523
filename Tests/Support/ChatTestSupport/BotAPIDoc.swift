import Foundation
import SwiftplexBase
import TestSupport

/// The shapes `docs/simplex-bot-api.md` gives for the bot API's JSON: the fields of each response
/// and event (§6, §7 tables) and of each record type (§8), read from the document itself so that
/// tests check what the engine writes against the reference, not against a copy of it.
public struct BotAPIDoc: Sendable {
    public struct Fields: Sendable, Equatable {
        public var required: Set<String> = []
        public var optional: Set<String> = []
        public var all: Set<String> { required.union(optional) }
    }

    /// Responses and events by `type`.
    public let messages: [String: Fields]
    /// Record types by name (`User`, `Contact`, `CIMeta`, …).
    public let records: [String: Fields]

    public static let path = Repository.path("docs/simplex-bot-api.md")

    public static func load() throws -> BotAPIDoc { try BotAPIDoc(text: String(contentsOf: path, encoding: .utf8)) }

    public init(text: String) {
        var messages: [String: Fields] = [:]
        var records: [String: Fields] = [:]
        var section = 0
        var record: String?
        var pending: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("## ") {
                section = Int(line.dropFirst(3).prefix { $0.isNumber }) ?? 0
                record = nil
                continue
            }
            if section == 8, line.hasPrefix("### ") {
                record = String(line.dropFirst(4)).trimmingCharacters(in: .whitespaces)
                continue
            }
            // §9's types are read too when they are records (their first line says "Record.").
            if section == 9, line.hasPrefix("### ") {
                pending = String(line.dropFirst(4)).trimmingCharacters(in: .whitespaces)
                record = nil
                continue
            }
            if section == 9, let name = pending, line.hasPrefix("Record.") {
                record = name
                pending = nil
                continue
            }
            guard line.hasPrefix("| `") else { continue }
            let cols = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cols.count >= 4, let name = Self.code(cols[1]) else { continue }
            if section == 6 || section == 7 {
                var fields = Fields()
                if cols[2] != "—" {
                    for part in cols[2].components(separatedBy: "; ") {
                        guard let f = Self.code(part) else { continue }
                        if f.hasSuffix("?") { fields.optional.insert(String(f.dropLast())) } else { fields.required.insert(f) }
                    }
                }
                messages[name] = fields
            } else if section == 8 || section == 9, let record {
                if cols[3] == "yes" { records[record, default: Fields()].required.insert(name) } else { records[record, default: Fields()].optional.insert(name) }
            }
        }
        self.messages = messages
        self.records = records
    }

    /// The first backquoted word of `text`.
    static func code(_ text: String) -> String? {
        guard text.hasPrefix("`"), let end = text.dropFirst().firstIndex(of: "`") else { return nil }
        return String(text[text.index(after: text.startIndex)..<end])
    }

    /// How `json` departs from `fields`: required fields it lacks, fields the document does not list
    /// (`type`, the union tag, aside).
    public static func problems(_ json: JSONValue?, _ fields: Fields?, _ what: String) -> [String] {
        guard let fields else { return ["\(what): not in the document"] }
        guard let pairs = json?.objectValue else { return ["\(what): not an object"] }
        let keys = Set(pairs.map(\.0)).subtracting(["type"])
        var out: [String] = []
        for missing in fields.required.subtracting(keys).sorted() { out.append("\(what): lacks \(missing)") }
        for extra in keys.subtracting(fields.all).sorted() { out.append("\(what): has \(extra), which the document does not list") }
        return out
    }
}
