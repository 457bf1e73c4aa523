import ChatModel
import Foundation
import SwiftplexBase

/// Limits the engine applies to what peers send it. The defaults suit a public bot; an operator
/// changes them where the controller is made (`ChatController(…, limits:)`).
public struct ChatLimits: Sendable, Hashable {
    /// Contact requests taken per address in each `contactRequestWindow`; more are refused (the
    /// agent's record deleted, no event, counted in ``ChatController/refusedContactRequests``).
    public var contactRequestsPerWindow: Int
    public var contactRequestWindow: Duration
    /// Requests waiting for an answer per user; a request beyond is refused the same way.
    public var maxPendingContactRequests: Int
    /// A request not answered within this time is rejected and forgotten (swept every
    /// `contactRequestSweepInterval` and when a request arrives).
    public var contactRequestTTL: Duration
    public var contactRequestSweepInterval: Duration
    /// Reactions one side (the user, or the contact) may have on one item, as SimpleX's
    /// `maxMsgReactions`; a further one is refused (sending) or ignored (receiving).
    public var maxReactionsPerMember: Int
    /// Reactions on one item in all.
    public var maxReactionsPerItem: Int
    /// Members a group the user hosts takes (the user included); adding or admitting one more is
    /// refused (`commandError` naming the limit). A host forwards between members still being
    /// introduced and sends each message to every member itself, so its work grows with the group.
    public var maxGroupMembers: Int
    /// A chat relay's bounds where its operator's policy (`/_relay policy`) sets none: channels
    /// served, subscribers and joins still connecting per channel, new channels per hour, joins
    /// per channel per minute (``ChannelRelayPolicy/defaults``).
    public var relayPolicyDefaults: ChannelRelayPolicy
    /// A chat relay forgets a subscriber whose join never connected, or who left or was removed,
    /// this long after it joined or left (swept with the contact requests): its connection and
    /// rows go.
    public var relaySubscriberCleanupAfter: Duration

    public init(contactRequestsPerWindow: Int = 30, contactRequestWindow: Duration = .seconds(60),
                maxPendingContactRequests: Int = 1_000, contactRequestTTL: Duration = .seconds(7 * 24 * 3600),
                contactRequestSweepInterval: Duration = .seconds(3600),
                maxReactionsPerMember: Int = 3, maxReactionsPerItem: Int = 16, maxGroupMembers: Int = 1_000,
                relayPolicyDefaults: ChannelRelayPolicy = .defaults, relaySubscriberCleanupAfter: Duration = .seconds(24 * 3600)) {
        self.contactRequestsPerWindow = contactRequestsPerWindow
        self.contactRequestWindow = contactRequestWindow
        self.maxPendingContactRequests = maxPendingContactRequests
        self.contactRequestTTL = contactRequestTTL
        self.contactRequestSweepInterval = contactRequestSweepInterval
        self.maxReactionsPerMember = maxReactionsPerMember
        self.maxReactionsPerItem = maxReactionsPerItem
        self.maxGroupMembers = maxGroupMembers
        self.relayPolicyDefaults = relayPolicyDefaults
        self.relaySubscriberCleanupAfter = relaySubscriberCleanupAfter
    }
}

/// The reactions SimpleX accepts (`MREmoji`): `{"type": "emoji", "emoji": <one of these>}`.
public enum Reactions {
    public static let allowedEmoji: Set<String> = ["👍", "👎", "😀", "😂", "😢", "❤", "🚀", "✅"]

    /// The reaction in its canonical form, or nil when it is not an allowed one. A heart with
    /// the emoji variation selector (`❤️`, as keyboards type it) is taken as `❤`.
    static func canonical(_ reaction: JSONValue) -> MsgReaction? {
        guard case let .object(pairs) = reaction, pairs.count == 2, reaction["type"]?.stringValue == "emoji",
              var emoji = reaction["emoji"]?.stringValue else { return nil }
        if emoji == "❤\u{FE0F}" { emoji = "❤" }
        guard allowedEmoji.contains(emoji) else { return nil }
        return .emoji(emoji)
    }

    /// A reaction as the chat protocol carries it and the store keys it: `{"type":"emoji","emoji":"👍"}`.
    static func json(_ reaction: MsgReaction) -> JSONValue {
        switch reaction {
        case .emoji: (try? JSONValueEncoder().encode(reaction)) ?? .null
        case let .unknown(_, json): json
        }
    }
}
