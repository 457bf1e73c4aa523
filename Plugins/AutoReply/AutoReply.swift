import Foundation
import SwiftplexPluginKit

/// `auto-reply`: answers messages by rules (a keyword or a regular expression → a reply; the
/// first matching rule wins), optionally echoes everything else, and answers `/help` with a list
/// generated from the rules.
public final class AutoReply: Plugin {
    public struct Rule: Decodable, Sendable {
        var keyword: String?
        var regex: String?
        var reply: String
    }

    public struct Config: Decodable, Sendable {
        var echo = false
        var rules: [Rule] = []
        var help = true

        enum CodingKeys: String, CodingKey { case echo, rules, help }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            echo = try c.decodeIfPresent(Bool.self, forKey: .echo) ?? false
            rules = try c.decodeIfPresent([Rule].self, forKey: .rules) ?? []
            help = try c.decodeIfPresent(Bool.self, forKey: .help) ?? true
        }
    }

    public static let name = "auto-reply"
    public static let version = "1.0.0"
    public static let description = "Replies to messages by keyword or regular expression rules, or echoes them"
    public static let configSchema: JSONSchema? = .object([
        "echo": .boolean("Reply to every message no rule matches with the same text", default: false),
        "rules": .array(of: .object([
            "keyword": .string("Matches a message containing this word (case-insensitive)"),
            "regex": .regex("Matches a message this regular expression finds a match in"),
            "reply": .string("The reply"),
        ], required: ["reply"]), "Checked in order; the first match replies", default: []),
        "help": .boolean("Answer /help with the list of rules", default: true),
    ])

    /// A rule ready to test.
    enum Matcher {
        case keyword(String)
        case regex(NSRegularExpression, String)
    }

    let config: Config
    let context: PluginContext
    let matchers: [(Matcher, String)]

    public init(config: Config, context: PluginContext) throws {
        self.config = config
        self.context = context
        matchers = try config.rules.enumerated().map { i, rule in
            switch (rule.keyword, rule.regex) {
            case let (keyword?, nil):
                let k = keyword.trimmingCharacters(in: .whitespaces)
                guard !k.isEmpty else { throw PluginError.config("rules[\(i)].keyword", "must not be empty") }
                return (.keyword(k.lowercased()), rule.reply)
            case let (nil, pattern?):
                do {
                    return (.regex(try NSRegularExpression(pattern: pattern, options: [.caseInsensitive]), pattern), rule.reply)
                } catch {
                    throw PluginError.config("rules[\(i)].regex", "invalid regular expression \(pattern)")
                }
            case (nil, nil): throw PluginError.config("rules[\(i)]", "needs keyword or regex")
            case (_?, _?): throw PluginError.config("rules[\(i)]", "has both keyword and regex; give one")
            }
        }
    }

    public static func routes(_ r: inout Routes<AutoReply>) {
        r.onCommand("help", label: "What this bot answers", enabled: { $0.config.help }) { plugin, command in
            try plugin.context.reply(to: command.message, text: plugin.helpText)
        }
        r.onMessage { plugin, message in try plugin.answer(message) }
    }

    func answer(_ message: Message) throws {
        if let reply = firstReply(to: message.text) {
            try context.reply(to: message, text: reply)
        } else if config.echo, !message.text.isEmpty {
            try context.reply(to: message, text: message.text)
        }
    }

    /// The reply of the first rule that matches `text`.
    func firstReply(to text: String) -> String? {
        let words = Set(text.lowercased().split { !$0.isLetter && !$0.isNumber }.map(String.init))
        let lower = text.lowercased()
        for (matcher, reply) in matchers {
            switch matcher {
            case let .keyword(k):
                // A keyword of one word matches that word; a phrase matches as a substring.
                if k.contains(where: { !$0.isLetter && !$0.isNumber }) ? lower.contains(k) : words.contains(k) { return reply }
            case let .regex(re, _):
                if re.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil { return reply }
            }
        }
        return nil
    }

    /// The `/help` answer, generated from the rules.
    var helpText: String {
        var lines: [String] = []
        if matchers.isEmpty {
            lines.append(config.echo ? "I echo every message back." : "I have no replies configured.")
        } else {
            lines.append("I answer:")
            for (matcher, reply) in matchers {
                switch matcher {
                case let .keyword(k): lines.append("• \(k) → \(reply)")
                case let .regex(_, pattern): lines.append("• /\(pattern)/ → \(reply)")
                }
            }
            if config.echo { lines.append("Anything else I echo back.") }
        }
        return lines.joined(separator: "\n")
    }
}

@_cdecl("swiftplex_plugin_entry")
public func swiftplexPluginEntry() -> UnsafeRawPointer {
    PluginExport.descriptor(for: AutoReply.self)
}
