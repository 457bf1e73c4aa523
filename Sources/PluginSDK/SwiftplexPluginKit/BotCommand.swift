/// An entry of the bot's command menu (the profile's `preferences.commands`).
public struct BotCommand: Sendable, Hashable {
    public let keyword: String
    public let label: String

    public init(keyword: String, label: String) {
        self.keyword = keyword
        self.label = label
    }

    var json: JSONValue { ["keyword": .string(keyword), "label": .string(label)] }
}

/// A `/keyword args` message: the keyword without the slash and the arguments split on spaces,
/// where "double" or 'single' quotes keep spaces in one argument and a backslash escapes the
/// next character inside quotes.
public struct CommandInvocation: Sendable {
    public let keyword: String
    public let arguments: [String]
    /// Everything after the keyword, as typed (trimmed).
    public let argumentText: String
    /// The message that carried the command.
    public let message: Message

    /// Splits a message's text into keyword and arguments; nil when it is not a command.
    public static func parse(_ text: String) -> (keyword: String, arguments: [String], argumentText: String)? {
        let trimmed = text.trimmingWhitespace()
        guard trimmed.first == "/", trimmed.count > 1 else { return nil }
        let body = trimmed.dropFirst()
        let keyword = body.prefix { !$0.isWhitespace }
        guard !keyword.isEmpty else { return nil }
        let rest = String(body.dropFirst(keyword.count)).trimmingWhitespace()
        return (String(keyword), splitArguments(rest), rest)
    }

    static func splitArguments(_ text: String) -> [String] {
        var args: [String] = []
        var current = ""
        var inArgument = false
        var quote: Character?
        var escaped = false
        for ch in text {
            if escaped {
                current.append(ch)
                escaped = false
            } else if let q = quote {
                if ch == "\\" { escaped = true } else if ch == q { quote = nil } else { current.append(ch) }
            } else if ch == "\"" || ch == "'" {
                quote = ch
                inArgument = true
            } else if ch.isWhitespace {
                if inArgument { args.append(current) }
                current = ""
                inArgument = false
            } else {
                current.append(ch)
                inArgument = true
            }
        }
        // An unterminated quote takes the rest of the line.
        if inArgument || quote != nil { args.append(current) }
        return args
    }

    init(keyword: String, arguments: [String], argumentText: String, message: Message) {
        self.keyword = keyword
        self.arguments = arguments
        self.argumentText = argumentText
        self.message = message
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s.removeFirst() }
        while let l = s.last, l.isWhitespace { s.removeLast() }
        return String(s)
    }
}
