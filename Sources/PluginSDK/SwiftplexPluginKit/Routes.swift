import Foundation

/// A condition a message must meet for an `onMessage` handler to run. All filters of a handler
/// must match.
public enum MessageFilter: Sendable, Hashable {
    /// `msgContent.type` is one of these (`text`, `link`, `image`, `file`, …).
    case contentTypes(Set<String>)
    /// The text matches this regular expression (NSRegularExpression syntax, anywhere in the text).
    case text(matching: String)
    /// Only messages in direct chats, or only in groups.
    case chatType(ChatType)
    /// Only messages from this contact id.
    case contactId(Int64)
    /// Only messages from this sender, by the name unique in the bot's database (`localDisplayName`).
    case contactName(String)

    /// `msgContent.type` is one of these.
    public static func contentType(_ types: String...) -> MessageFilter { .contentTypes(Set(types)) }

    public static let direct = MessageFilter.chatType(.direct)
    public static let group = MessageFilter.chatType(.group)
}

/// The handlers of a plugin type, declared in `Plugin.routes`. Handlers get the instance and the
/// event; a handler that throws makes `handle_event` return an error (the host logs it), never a
/// crash.
public struct Routes<P: Plugin> {
    public typealias MessageHandler = (P, Message) throws -> Void
    public typealias CommandHandler = (P, CommandInvocation) throws -> Void
    public typealias EventHandler = (P, ChatEvent) throws -> Void

    struct MessageRoute {
        let filters: [MessageFilter]
        let handler: MessageHandler
    }

    struct CommandRoute {
        let command: BotCommand
        let enabled: (P) -> Bool
        let handler: CommandHandler
    }

    struct EventRoute {
        let type: String
        let handler: EventHandler
    }

    private(set) var messageRoutes: [MessageRoute] = []
    private(set) var commandRoutes: [CommandRoute] = []
    private(set) var eventRoutes: [EventRoute] = []

    init() {}

    /// Runs `handler` for each received message that passes every filter and is not a registered command.
    public mutating func onMessage(_ filters: MessageFilter..., handler: @escaping MessageHandler) {
        messageRoutes.append(MessageRoute(filters: filters, handler: handler))
    }

    /// Runs `handler` for `/keyword args` messages and lists the command in the bot's menu with
    /// `label`. While `enabled` says no for an instance, the command is neither listed nor
    /// handled (the message goes to `onMessage` handlers instead).
    public mutating func onCommand(_ keyword: String, label: String, enabled: @escaping (P) -> Bool = { _ in true },
                                   handler: @escaping CommandHandler) {
        commandRoutes.append(CommandRoute(command: BotCommand(keyword: keyword, label: label), enabled: enabled, handler: handler))
    }

    /// Runs `handler` for every event of this type (`*` for every event).
    public mutating func onEvent(_ type: String, handler: @escaping EventHandler) {
        eventRoutes.append(EventRoute(type: type, handler: handler))
    }

    /// Runs `handler` for every group event (``GroupEvent/types``: invitations, members joining,
    /// connecting, leaving, removed, roles, blocks, …), typed.
    public mutating func onGroupEvent(handler: @escaping (P, GroupEvent) throws -> Void) {
        for type in GroupEvent.types {
            eventRoutes.append(EventRoute(type: type) { plugin, event in
                guard let group = event.groupEvent else { throw PluginError(.event, "\(event.type) without its group or member") }
                try handler(plugin, group)
            })
        }
    }

    /// The event types these handlers need, in order of first registration; `["*"]` if any handler takes all.
    var events: [String] {
        var out: [String] = []
        if !messageRoutes.isEmpty || !commandRoutes.isEmpty { out.append("newChatItems") }
        for r in eventRoutes where !out.contains(r.type) { out.append(r.type) }
        return out.contains("*") ? ["*"] : out
    }

    /// Compiles the regular expressions of the filters, so a bad one stops the start with its position.
    func compileFilters() throws(PluginError) -> [[CompiledFilter]] {
        var out: [[CompiledFilter]] = []
        for (i, route) in messageRoutes.enumerated() {
            var compiled: [CompiledFilter] = []
            for f in route.filters {
                if case let .text(pattern) = f {
                    do {
                        compiled.append(.regex(try NSRegularExpression(pattern: pattern)))
                    } catch {
                        throw PluginError(.plugin, "onMessage handler \(i + 1): invalid regular expression \(pattern)")
                    }
                } else {
                    compiled.append(.plain(f))
                }
            }
            out.append(compiled)
        }
        return out
    }
}

/// A filter ready to test (regular expressions compiled once per instance).
enum CompiledFilter {
    case plain(MessageFilter)
    case regex(NSRegularExpression)

    func matches(_ m: Message) -> Bool {
        switch self {
        case let .regex(re):
            return re.firstMatch(in: m.text, range: NSRange(m.text.startIndex..., in: m.text)) != nil
        case let .plain(f):
            switch f {
            case let .contentTypes(types): return types.contains(m.contentType)
            case .text: return false
            case let .chatType(t): return m.chatType == t
            case let .contactId(id): return m.contactId == id
            case let .contactName(name): return m.localDisplayName == name
            }
        }
    }
}
