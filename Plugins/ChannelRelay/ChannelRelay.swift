import SwiftplexPluginKit

/// `channel-relay`: the operator's policy of a bot in relay mode (`chat_relay:`) — which channels
/// it serves and how many subscribers each may have. Without it (or with an empty config) the
/// relay serves every channel that invites it. The plugin hands the policy to the engine at start
/// (`/_relay policy <json>`), where the relay consults it on each owner's invitation
/// (`x.grp.relay.inv`: refused ones are answered with `x.grp.relay.reject {reason: relay_policy}`
/// and nothing is kept) and on each subscriber's join (`x.member`: refused unseen). The engine
/// keeps the policy across restarts and reloads (in force from its start, until this plugin sets
/// its own again); the host clears it when the plugin is no longer configured, putting the relay
/// back to serving every channel. It logs the channels it starts serving and the subscribers that
/// join.
public final class ChannelRelay: Plugin {
    public struct Config: Decodable, Sendable {
        var allow: [String]?
        var max_channels: Int?
        var max_subscribers_per_channel: Int?
        var channels_per_hour: Int?
        var joins_per_minute: Int?
        var max_pending_joins: Int?
    }

    public static let name = "channel-relay"
    public static let version = "1.0.0"
    public static let description = "A chat relay's policy: which channels it serves (allow-list, caps, rate limits)"
    public static let configSchema: JSONSchema? = .object([
        "allow": .array(of: .string(), "Serve only channels whose link (/c#…), or whose inviting owner's contact link, is listed (default: every channel)"),
        "max_channels": .integer("Channels served at most", minimum: 1),
        "max_subscribers_per_channel": .integer("Subscribers per channel at most (through this relay)", minimum: 1),
        "channels_per_hour": .integer("New channels taken per hour at most", minimum: 1),
        "joins_per_minute": .integer("Subscriber joins per channel per minute at most", minimum: 1),
        "max_pending_joins": .integer("Joins per channel accepted but not yet connected at most", minimum: 1),
    ])

    let context: PluginContext

    public init(config: Config, context: PluginContext) throws {
        self.context = context
        let user = try context.command("/user", expecting: "activeUser")
        guard user.json["user"]?["userChatRelay"]?.boolValue == true else {
            throw PluginError.config("", "channel-relay runs only in a bot in relay mode (chat_relay: in the host's configuration); this bot is no chat relay")
        }
        var policy: [String: JSONValue] = [:]
        if let allow = config.allow {
            for (i, link) in allow.enumerated() where link.isEmpty { throw PluginError.config("allow[\(i)]", "an empty link") }
            policy["allow"] = .array(allow.map { .string($0) })
        }
        if let n = config.max_channels { policy["maxChannels"] = .int(Int64(n)) }
        if let n = config.max_subscribers_per_channel { policy["maxSubscribersPerChannel"] = .int(Int64(n)) }
        if let n = config.channels_per_hour { policy["channelsPerHour"] = .int(Int64(n)) }
        if let n = config.joins_per_minute { policy["joinsPerMinute"] = .int(Int64(n)) }
        if let n = config.max_pending_joins { policy["maxPendingJoins"] = .int(Int64(n)) }
        try context.command("/_relay policy \(JSONValue.sorted(policy).text)", expecting: "cmdOk")
        context.log.info(policy.isEmpty ? "serving every channel within the engine's default bounds" : "relay policy: \(Self.summary(config))")
    }

    static func summary(_ c: Config) -> String {
        var parts: [String] = []
        if let a = c.allow { parts.append("\(a.count) allowed link\(a.count == 1 ? "" : "s")") }
        if let n = c.max_channels { parts.append("at most \(n) channels") }
        if let n = c.max_subscribers_per_channel { parts.append("at most \(n) subscribers per channel") }
        if let n = c.channels_per_hour { parts.append("\(n) new channels per hour") }
        if let n = c.joins_per_minute { parts.append("\(n) joins per channel per minute") }
        if let n = c.max_pending_joins { parts.append("at most \(n) joins per channel still connecting") }
        return parts.joined(separator: ", ")
    }

    public static func routes(_ r: inout Routes<ChannelRelay>) {
        // At the relay, the owner's connection up is `userJoinedGroup` (the owner as host), a
        // subscriber's is `joinedGroupMember`.
        r.onEvent("userJoinedGroup") { plugin, event in
            plugin.context.log.info("serving channel #\(event.json["groupInfo"]?["groupId"]?.int64Value ?? 0)")
        }
        r.onEvent("joinedGroupMember") { plugin, event in
            plugin.context.log.info("a subscriber joined channel #\(event.json["groupInfo"]?["groupId"]?.int64Value ?? 0)")
        }
    }

    // No `stop()`: the policy stays in force while the plugin restarts (a reload, the host's
    // restart); the host clears it when the plugin is removed (HostedBot.reload).
}

@_cdecl("swiftplex_plugin_entry")
public func swiftplexPluginEntry() -> UnsafeRawPointer {
    PluginExport.descriptor(for: ChannelRelay.self)
}
