import SwiftplexPluginKit

/// `channel`: the bot owns a channel (a group with chat relays) and posts to it. At start it
/// registers the configured chat relays (`/relays name=<name> <address> …`) and creates the
/// channel with them (`/_public group`), or reuses the one it created before (its group id kept
/// in the plugin's storage). Then it posts, as the channel:
/// - what admin contacts send to the bot (admins named as the `broadcast` plugin names them,
///   `"<contact id>:<local display name>"`, ``AdminContact``); others get `notice`, if set;
/// - the scheduled posts of `schedule` (plugin timers).
/// It logs the channel's link (`/c#…`, the link subscribers join) at start.
public final class Channel: Plugin {
    public struct Config: Decodable, Sendable {
        struct Relay: Decodable, Sendable {
            var name: String
            var address: String
        }

        struct Scheduled: Decodable, Sendable {
            var every_seconds: Int
            var text: String
        }

        var name: String
        var description: String?
        var relays: [Relay]
        var admins: [String]?
        var notice: String?
        var schedule: [Scheduled]?
    }

    public static let name = "channel"
    public static let version = "1.0.0"
    public static let description = "Owns a channel with chat relays and posts admins' messages and scheduled posts to it"
    public static let configSchema: JSONSchema? = .object([
        "name": .string("The channel's display name (its profile, created once)"),
        "description": .string("The channel's full name / description", default: ""),
        "relays": .array(of: .object(["name": .string("A name for the relay, without spaces"),
                                      "address": .string("The relay's address (…/r#…), as the relay host prints it")],
                                     required: ["name", "address"]),
                         "The chat relays the channel is created with"),
        "admins": .array(of: .string(), "Contacts whose messages are posted, each as \"<contact id>:<local display name>\" (e.g. \"1:alice\")"),
        "notice": .string("The answer to messages from anyone else (default: none)"),
        "schedule": .array(of: .object(["every_seconds": .integer("Post every this many seconds", minimum: 1),
                                        "text": .string("The text posted")],
                                       required: ["every_seconds", "text"]),
                           "Posts made by timers"),
    ], required: ["name", "relays"])

    static let groupKey = "channel.groupId"
    static let linkKey = "channel.link"

    let config: Config
    let admins: Set<AdminContact>
    let context: PluginContext
    /// The channel's group id, once created or found.
    private(set) var channelId: Int64?
    private var retry: TimerID?

    public init(config: Config, context: PluginContext) throws {
        guard !config.relays.isEmpty else { throw PluginError.config("relays", "needs at least one chat relay {name, address}") }
        for (i, r) in config.relays.enumerated() {
            if r.name.isEmpty || r.name.contains(" ") { throw PluginError.config("relays[\(i)].name", "a relay name is one word, got \"\(r.name)\"") }
            if r.address.isEmpty || r.address.contains(" ") { throw PluginError.config("relays[\(i)].address", "not a relay address") }
        }
        self.config = config
        self.admins = try AdminContact.list(config.admins ?? [])
        self.context = context
        for (i, s) in (config.schedule ?? []).enumerated() {
            try context.every(.seconds(s.every_seconds), name: "post-\(i)") { [weak self] in self?.scheduled(s.text) }
        }
        do {
            try ensureChannel()
        } catch {
            // The relays may not be reachable yet: try again until the channel exists.
            context.log.warning("the channel is not ready: \(error); trying again in 5 s")
            retry = try context.every(.seconds(5), name: "create-channel") { [weak self] in self?.retryChannel() }
        }
    }

    private func retryChannel() {
        do {
            try ensureChannel()
            if let retry { _ = context.cancel(retry) }
            retry = nil
        } catch {
            context.log.warning("the channel is not ready: \(error)")
        }
    }

    /// Registers the relays and reuses or creates the channel.
    func ensureChannel() throws {
        let userId = try context.userId()
        let line = config.relays.map { "name=\($0.name) \($0.address)" }.joined(separator: " ")
        let relays = try context.command("/relays \(line)", expecting: "userChatRelays")
        var ids: [Int64] = []
        for r in config.relays {
            guard let id = relays.json["chatRelays"]?.arrayValue?.first(where: { $0["address"]?.stringValue == r.address })?["chatRelayId"]?.int64Value else {
                throw PluginError(.command, "/relays: relay \(r.name) is not in the answer")
            }
            ids.append(id)
        }
        if let text = context.storage[Self.groupKey], let stored = Int64(text) {
            if let answer = try? context.command("/_get relays #\(stored)", expecting: "groupRelays"),
               answer.json["groupInfo"]?["membership"]?["memberRole"]?.stringValue == "owner" {
                channelId = stored
                context.log.info("channel \(config.name) (#\(stored)) reused; link: \(context.storage[Self.linkKey] ?? "?")")
                return
            }
            context.log.warning("the stored channel #\(stored) is gone; creating it again")
        }
        let profile = JSONValue.sorted(["displayName": .string(config.name), "fullName": .string(config.description ?? "")])
        let created = try context.command("/_public group \(userId) \(ids.map(String.init).joined(separator: ",")) \(profile.text)")
        guard created.type == "publicGroupCreated", let id = created.json["groupInfo"]?["groupId"]?.int64Value else {
            throw PluginError(.command, "/_public group: \(created.type) (a relay's address cannot be reached?)")
        }
        let link = created.json["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue
            ?? created.json["groupLink"]?["connLinkContact"]?["connFullLink"]?.stringValue ?? ""
        try context.storage.set(string: String(id), forKey: Self.groupKey)
        try context.storage.set(string: link, forKey: Self.linkKey)
        channelId = id
        context.log.info("channel \(config.name) (#\(id)) created with \(ids.count) relay\(ids.count == 1 ? "" : "s"); link: \(link)")
    }

    private func scheduled(_ text: String) {
        guard let channelId else {
            context.log.warning("a scheduled post was skipped: the channel is not ready")
            return
        }
        do {
            try context.post(toChannel: channelId, text: text)
        } catch {
            context.log.warning("a scheduled post failed: \(error)")
        }
    }

    public static func routes(_ r: inout Routes<Channel>) {
        r.onMessage(.direct) { plugin, message in try plugin.handle(message) }
        // The relays' progress (invited → accepted → active), as the engine reports it.
        r.onEvent("groupRelayUpdated") { plugin, event in
            guard let id = event.json["groupInfo"]?["groupId"]?.int64Value, id == plugin.channelId else { return }
            let relay = event.json["groupRelay"]
            let name = relay?["userChatRelay"]?["relayProfile"]?["displayName"]?.stringValue ?? "?"
            plugin.context.log.info("relay \(name) is \(relay?["relayStatus"]?.stringValue ?? "?")")
        }
    }

    static let postable: Set<String> = ["text", "link"]

    func handle(_ message: Message) throws {
        guard AdminContact.isAdmin(message, in: admins) else {
            if let id = message.contactId { context.log.info("contact \(id) is not an admin of the channel") }
            if let notice = config.notice { try context.reply(to: message, text: notice) }
            return
        }
        guard let channelId else {
            try context.reply(to: message, text: "The channel is not ready yet; try again soon.")
            return
        }
        guard Self.postable.contains(message.contentType) else {
            try context.reply(to: message, text: "Only text messages can be posted.")
            return
        }
        do {
            try context.post(toChannel: channelId, content: message.content)
        } catch {
            context.log.warning("a post from contact \(message.contactId ?? 0) failed: \(error)")
            try context.reply(to: message, text: "Not posted: the channel has no active relay yet.")
            return
        }
        context.log.info("posted to channel #\(channelId) for contact \(message.contactId ?? 0)")
        try context.reply(to: message, text: "Posted to \(config.name).")
    }
}

@_cdecl("swiftplex_plugin_entry")
public func swiftplexPluginEntry() -> UnsafeRawPointer {
    PluginExport.descriptor(for: Channel.self)
}
