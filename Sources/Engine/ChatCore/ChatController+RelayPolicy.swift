import ChannelProtocol
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase

// The chat relay's operator policy: which channels a relay user serves and how many subscribers
// each may have. A relay serves every channel that invites it unless a policy is set
// (`/_relay policy <json>`, what the bot host's channel-relay plugin sends at start). The policy
// is kept in the chat database (`relay_policy`) and read before the first request it judges, so
// a restarted engine applies the last one from its first moment — not only once the plugin has
// set it again. The policy
// is consulted at two points only, each a single call in the relay's request handlers
// (+Channels `relayAddressRequest`, +ChannelMembers `channelLinkRequest`); the channel machines
// themselves are not changed by it.

/// What an operator allows (every field optional; absent = no limit).
public struct ChannelRelayPolicy: Sendable, Hashable {
    /// Channel links (`/c#…`) or owners' contact links (the `contactLink` of the inviting owner's
    /// profile) whose invitations are served; nil serves every channel.
    public var allow: [String]?
    /// Channels served at most (those not yet refused, left or removed).
    public var maxChannels: Int?
    /// Subscribers per channel at most (accepted and connected ones).
    public var maxSubscribersPerChannel: Int?
    /// New channels (invitations taken) per hour at most.
    public var channelsPerHour: Int?
    /// Subscriber joins per channel per minute at most.
    public var joinsPerMinute: Int?
    /// Joins per channel accepted but not yet connected at most (a flood of joins that never
    /// complete holds no more rows than this; the engine forgets them after a while).
    public var maxPendingJoins: Int?

    public init(allow: [String]? = nil, maxChannels: Int? = nil, maxSubscribersPerChannel: Int? = nil,
                channelsPerHour: Int? = nil, joinsPerMinute: Int? = nil, maxPendingJoins: Int? = nil) {
        self.allow = allow
        self.maxChannels = maxChannels
        self.maxSubscribersPerChannel = maxSubscribersPerChannel
        self.channelsPerHour = channelsPerHour
        self.joinsPerMinute = joinsPerMinute
        self.maxPendingJoins = maxPendingJoins
    }

    /// The bounds a chat relay keeps when its operator's policy sets none (``ChatLimits/relayPolicyDefaults``).
    public static let defaults = ChannelRelayPolicy(maxChannels: 1_000, maxSubscribersPerChannel: 100_000, channelsPerHour: 60,
                                                    joinsPerMinute: 600, maxPendingJoins: 1_000)

    /// This policy with each bound it leaves out taken from `defaults` (the allow-list is the
    /// operator's alone: none means every channel).
    public func filled(by defaults: ChannelRelayPolicy) -> ChannelRelayPolicy {
        ChannelRelayPolicy(allow: allow, maxChannels: maxChannels ?? defaults.maxChannels,
                           maxSubscribersPerChannel: maxSubscribersPerChannel ?? defaults.maxSubscribersPerChannel,
                           channelsPerHour: channelsPerHour ?? defaults.channelsPerHour, joinsPerMinute: joinsPerMinute ?? defaults.joinsPerMinute,
                           maxPendingJoins: maxPendingJoins ?? defaults.maxPendingJoins)
    }

    /// `{"allow": [link…], "maxChannels": n, "maxSubscribersPerChannel": n, "channelsPerHour": n,
    /// "joinsPerMinute": n}`; unknown keys, wrong types and numbers below 1 are refused.
    public init(json: JSONValue) throws(ChatFailure) {
        guard case let .object(fields) = json else { throw ChatFailure(commandError: "a relay policy is a JSON object") }
        func count(_ key: String, _ v: JSONValue) throws(ChatFailure) -> Int? {
            if v == .null { return nil }
            guard let n = v.intValue, n >= 1 else { throw ChatFailure(commandError: "relay policy: \(key) must be a whole number of at least 1") }
            return n
        }
        for (key, value) in fields {
            switch key {
            case "allow":
                if value == .null { allow = nil; continue }
                guard let list = value.arrayValue else { throw ChatFailure(commandError: "relay policy: allow must be a list of links") }
                var links: [String] = []
                for item in list {
                    guard let s = item.stringValue, !s.isEmpty else { throw ChatFailure(commandError: "relay policy: allow must be a list of links") }
                    links.append(s)
                }
                allow = links
            case "maxChannels": maxChannels = try count(key, value)
            case "maxSubscribersPerChannel": maxSubscribersPerChannel = try count(key, value)
            case "channelsPerHour": channelsPerHour = try count(key, value)
            case "joinsPerMinute": joinsPerMinute = try count(key, value)
            case "maxPendingJoins": maxPendingJoins = try count(key, value)
            default: throw ChatFailure(commandError: "relay policy: unknown key \(key)")
            }
        }
    }
}

/// The policy and what it counts, in the controller.
struct RelayPolicyState {
    var policy = ChannelRelayPolicy()
    /// Whether `policy` was read from the store (or set since the start).
    var loaded = false
    var channelArrivals: [ContinuousClock.Instant] = []
    var joinArrivals: [Int64: [ContinuousClock.Instant]] = [:]
    /// Refusals since the controller started: channel invitations and subscriber joins.
    var refusedChannels = 0
    var refusedJoins = 0
}

/// One channel a relay user serves, with its counters (the bot host's status).
public struct RelayChannelCounters: Sendable, Equatable {
    public var groupId: Int64
    public var name: String
    public var channelLink: String
    public var relayStatus: String
    /// Subscribers accepted or connected.
    public var subscribers: Int
    /// Owner events forwarded since the engine started.
    public var forwarded: Int
    /// Deliveries (one forward to one subscriber) still waiting in the channel's delivery jobs.
    public var deliveriesPending: Int

    public var json: JSONValue {
        .object([("groupId", .int(groupId)), ("name", .string(name)), ("channelLink", .string(channelLink)),
                 ("relayStatus", .string(relayStatus)), ("subscribers", .int(Int64(subscribers))),
                 ("forwarded", .int(Int64(forwarded))), ("deliveriesPending", .int(Int64(deliveriesPending)))])
    }
}

extension ChatController {
    /// `/_relay policy <json>`: replaces the relay policy (``ChannelRelayPolicy``), stored so that
    /// it holds from the engine's next start on; `cmdOk`. `{}`: no policy.
    public func setRelayPolicy(_ json: JSONValue) async throws -> ChatResponse {
        let policy = try ChannelRelayPolicy(json: json)
        let text = json.description
        try await dbWrite { db in
            try db.execute(sql: "DELETE FROM relay_policy WHERE id = 1")
            try db.execute(sql: "INSERT INTO relay_policy (id, policy) VALUES (1, ?)", arguments: [text])
        }
        relayPolicy.policy = policy
        relayPolicy.loaded = true
        logger.info("chat relay policy set", metadata: ["policy": "\(text)"])
        return .cmdOk(user: nil)
    }

    /// The policy in force (read from the store on first use).
    public var currentRelayPolicy: ChannelRelayPolicy {
        get async {
            await loadRelayPolicy()
            return relayPolicy.policy
        }
    }

    /// Reads the stored policy once. One that no longer reads (a newer engine's key) is logged
    /// and ignored: the relay then serves every channel, as without a policy.
    func loadRelayPolicy() async {
        guard !relayPolicy.loaded else { return }
        let text = try? await dbRead { db in try String.fetchOne(db, sql: "SELECT policy FROM relay_policy WHERE id = 1") }
        guard !relayPolicy.loaded else { return } // set meanwhile: that one holds
        relayPolicy.loaded = true
        guard let text else { return }
        do {
            guard let json = Stored.json(text) else { throw ChatFailure(commandError: "not JSON") }
            relayPolicy.policy = try ChannelRelayPolicy(json: json)
            logger.info("chat relay policy restored", metadata: ["policy": "\(text)"])
        } catch {
            logger.error("the stored chat relay policy is not used", metadata: ["error": "\(error)"])
        }
    }
    /// Invitations and joins the relay policy refused since the controller started.
    public var relayPolicyRefusals: (channels: Int, joins: Int) { (relayPolicy.refusedChannels, relayPolicy.refusedJoins) }

    /// Why the policy refuses an owner's invitation, or nil to serve it. Counts it when served.
    func relayPolicyRefusal(invitation inv: GroupRelayInvitation, userId: Int64) async -> String? {
        await loadRelayPolicy()
        let p = relayPolicy.policy.filled(by: limits.relayPolicyDefaults)
        var why: String?
        if let allow = p.allow {
            let ownerLink = inv.fromMemberProfile.json["contactLink"]?.stringValue
            if !allow.contains(inv.groupLink) && !(ownerLink.map(allow.contains) ?? false) { why = "the channel and its owner are not on the allow list" }
        }
        if why == nil, let cap = p.maxChannels {
            let served = (try? await dbRead { db in
                try Int.fetchOne(db, sql: """
                    SELECT COUNT(*) FROM channel c JOIN chat_group g ON g.id = c.group_id
                    WHERE g.user_id = ? AND c.role = ? AND c.relay_status NOT IN ('inactive', 'rejected')
                    """, arguments: [userId, ChannelRecord.Role.relay.rawValue])
            }) ?? 0
            if served >= cap { why = "the relay serves \(served) channels, its cap" }
        }
        let now = ContinuousClock.now
        if why == nil, let perHour = p.channelsPerHour {
            relayPolicy.channelArrivals.removeAll { now - $0 > .seconds(3600) }
            if relayPolicy.channelArrivals.count >= perHour { why = "more than \(perHour) new channels this hour" }
        }
        if let why {
            relayPolicy.refusedChannels += 1
            logger.info("a channel invitation was refused by the relay policy", metadata: ["reason": "\(why)"])
            return why
        }
        relayPolicy.channelArrivals.append(now)
        return nil
    }

    /// Why the policy refuses a subscriber's join to a channel, or nil to take it.
    func relayPolicyRefusal(joinTo groupId: Int64) async -> String? {
        await loadRelayPolicy()
        let p = relayPolicy.policy.filled(by: limits.relayPolicyDefaults)
        var why: String?
        if let state = try? await relayState(groupId) {
            let pending = state.subscribers.values.filter { $0.status == .accepted }.count
            let connected = state.subscribers.values.filter { $0.status == .connected }.count
            if let cap = p.maxSubscribersPerChannel, pending + connected >= cap {
                why = "the channel has \(pending + connected) subscribers at this relay, its cap"
            } else if let cap = p.maxPendingJoins, pending >= cap {
                why = "the channel has \(pending) joins at this relay still connecting, its cap"
            }
        }
        let now = ContinuousClock.now
        if why == nil, let perMinute = p.joinsPerMinute {
            relayPolicy.joinArrivals[groupId, default: []].removeAll { now - $0 > .seconds(60) }
            if relayPolicy.joinArrivals[groupId, default: []].count >= perMinute { why = "more than \(perMinute) joins this minute" }
        }
        if let why {
            relayPolicy.refusedJoins += 1
            logger.info("a subscriber's join was refused by the relay policy", metadata: ["group": "\(groupId)", "reason": "\(why)"])
            return why
        }
        if p.joinsPerMinute != nil { relayPolicy.joinArrivals[groupId, default: []].append(now) }
        return nil
    }

    /// Every channel the relay users of this engine serve, with its counters.
    public func relayChannelCounters() async throws -> [RelayChannelCounters] {
        let rows = try await dbRead { db in
            try Row.fetchAll(db, sql: """
                SELECT c.group_id, c.channel_link, c.relay_status, g.local_display_name FROM channel c JOIN chat_group g ON g.id = c.group_id
                WHERE c.role = ? ORDER BY c.group_id
                """, arguments: [ChannelRecord.Role.relay.rawValue]).map { r -> (Int64, String, String, String) in
                (r["group_id"], r["channel_link"], (r["relay_status"] as String?) ?? "", r["local_display_name"])
            }
        }
        let pending = try await dbRead { db -> [Int64: Int] in
            var pending: [Int64: Int] = [:]
            for j in try Row.fetchAll(db, sql: "SELECT group_id, recipients FROM channel_delivery") {
                let gid: Int64 = j["group_id"]
                let text: String = j["recipients"]
                pending[gid, default: 0] += Stored.json(text)?.arrayValue?.count ?? 0
            }
            return pending
        }
        var out: [RelayChannelCounters] = []
        for (gid, link, status, name) in rows {
            let state = try? await relayState(gid)
            // A relay that left (`rejected`) or was removed (`inactive`) serves nobody, whatever
            // its machine last knew of the subscribers.
            let serving = status != ChatModel.RelayStatus.rejected.rawValue && status != ChatModel.RelayStatus.inactive.rawValue
            let subs = !serving ? 0 : state?.subscribers.values.filter { $0.status == .accepted || $0.status == .connected }.count ?? 0
            out.append(RelayChannelCounters(groupId: gid, name: name, channelLink: link, relayStatus: status, subscribers: subs,
                                            forwarded: state?.forwardedCount ?? 0, deliveriesPending: pending[gid] ?? 0))
        }
        return out
    }
}

extension ChatController {
    /// A chat relay's clean-up: forgets the subscribers of the channels it serves whose join was
    /// accepted more than `age` ago and never connected, and those who left or were removed more
    /// than `age` ago — their agent connection first, then (through the relay's machine,
    /// ``ChannelRelayInput/dropSubscriber(_:)``) their rows. Returns how many were forgotten.
    @discardableResult
    func forgetStaleRelaySubscribers(olderThan age: Duration, now: Date = Date()) async -> Int {
        let cutoff = Timestamp.before(age, now: now)
        let stale: [(Int64, MemberId)]
        do {
            stale = try await dbRead { db in
                try Row.fetchAll(db, sql: """
                    SELECT cm.group_id, cm.member_id FROM channel_member cm
                    JOIN channel c ON c.group_id = cm.group_id
                    JOIN group_member gm ON gm.group_id = cm.group_id AND gm.member_id = cm.member_id
                    WHERE c.role = ? AND cm.kind = 'subscriber'
                      AND ((cm.status = 'accepted' AND gm.created_at < ?) OR (cm.status IN ('left', 'removed') AND gm.updated_at < ?))
                    ORDER BY cm.group_id, cm.id
                    """, arguments: [ChannelRecord.Role.relay.rawValue, cutoff, cutoff])
                    .compactMap { row in MemberId(row[1] as String).map { (row[0] as Int64, $0) } }
            }
        } catch {
            logger.error("the stale chat relay subscribers could not be read", metadata: ["error": "\(error)"])
            return 0
        }
        var forgotten = 0
        for (groupId, member) in stale {
            do {
                // The connection goes first: the machine's drop deletes the row that names it.
                try await deleteChannelConnection(groupId, member: member)
                let effects = try await runRelay(groupId, .dropSubscriber(member))
                await performRelayEffects(groupId, effects)
                forgotten += 1
            } catch {
                logger.warning("a stale chat relay subscriber was not forgotten", metadata: ["group": "\(groupId)", "error": "\(error)"])
            }
        }
        if forgotten > 0 { logger.info("chat relay subscribers forgotten (joins never connected, or left)", metadata: ["count": "\(forgotten)"]) }
        return forgotten
    }
}
