import Foundation
import SwiftplexPluginKit

/// `group-moderator`: keeps the groups the bot is in by per-group rules — blocked words and
/// regular expressions, no links or media from new members for a while after they join, a
/// message rate per member. A message that breaks a rule is deleted for every member, its
/// author gets a strike (and a notice in the group); after `block_after` strikes the member is
/// blocked for all, after `remove_after` removed. New members get a welcome. Invitations to
/// groups are accepted when `accept_invitations` is on.
///
/// The bot needs the moderator role to delete and block, admin to remove; members of the
/// moderator role and above are never moderated (SimpleX lets a moderator act only on lower
/// or equal roles, and a bot policing its peers would be a surprise).
public final class GroupModerator: Plugin {
    public struct RateLimit: Decodable, Sendable {
        var messages: Int
        var seconds: Int
    }

    public struct GroupRules: Decodable, Sendable {
        var match = "*"
        var welcome: String?
        var blockedWords: [String] = []
        var blockedPatterns: [String] = []
        var newMemberSeconds = 0
        var newMembersNoLinks = false
        var newMembersNoMedia = false
        var rateLimit: RateLimit?
        var notice = GroupModerator.defaultNotice
        var blockAfter = 0
        var removeAfter = 3

        enum CodingKeys: String, CodingKey {
            case match, welcome, notice
            case blockedWords = "blocked_words"
            case blockedPatterns = "blocked_patterns"
            case newMemberSeconds = "new_member_seconds"
            case newMembersNoLinks = "new_members_no_links"
            case newMembersNoMedia = "new_members_no_media"
            case rateLimit = "rate_limit"
            case blockAfter = "block_after"
            case removeAfter = "remove_after"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            match = try c.decodeIfPresent(String.self, forKey: .match) ?? "*"
            welcome = try c.decodeIfPresent(String.self, forKey: .welcome)
            blockedWords = try c.decodeIfPresent([String].self, forKey: .blockedWords) ?? []
            blockedPatterns = try c.decodeIfPresent([String].self, forKey: .blockedPatterns) ?? []
            newMemberSeconds = try c.decodeIfPresent(Int.self, forKey: .newMemberSeconds) ?? 0
            newMembersNoLinks = try c.decodeIfPresent(Bool.self, forKey: .newMembersNoLinks) ?? false
            newMembersNoMedia = try c.decodeIfPresent(Bool.self, forKey: .newMembersNoMedia) ?? false
            rateLimit = try c.decodeIfPresent(RateLimit.self, forKey: .rateLimit)
            notice = try c.decodeIfPresent(String.self, forKey: .notice) ?? GroupModerator.defaultNotice
            blockAfter = try c.decodeIfPresent(Int.self, forKey: .blockAfter) ?? 0
            removeAfter = try c.decodeIfPresent(Int.self, forKey: .removeAfter) ?? 3
        }
    }

    public struct Config: Decodable, Sendable {
        var acceptInvitations = true
        var groups: [GroupRules] = []

        enum CodingKeys: String, CodingKey {
            case groups
            case acceptInvitations = "accept_invitations"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            acceptInvitations = try c.decodeIfPresent(Bool.self, forKey: .acceptInvitations) ?? true
            groups = try c.decodeIfPresent([GroupRules].self, forKey: .groups) ?? []
        }
    }

    static let defaultNotice = "{name}: your message was removed ({reason}). Strike {strikes} of {max}."

    public static let name = "group-moderator"
    public static let version = "1.0.0"
    public static let description = "Moderates groups: blocked words, new-member limits, rate limits, strikes, welcomes"
    public static let configSchema: JSONSchema? = .object([
        "accept_invitations": .boolean("Join every group the bot is invited to", default: true),
        "groups": .array(of: .object([
            "match": .string("Group display-name pattern (* and ?); the first entry that matches a group applies", default: "*"),
            "welcome": .string("Sent to the group when a member joins; {name} is the member, {group} the group"),
            "blocked_words": .array(of: .string(), "Words (or phrases) a message must not contain; case-insensitive", default: []),
            "blocked_patterns": .array(of: .regex(), "Regular expressions a message must not match; case-insensitive", default: []),
            "new_member_seconds": .integer("How long after joining a member counts as new", minimum: 0, default: 0),
            "new_members_no_links": .boolean("New members may not post links", default: false),
            "new_members_no_media": .boolean("New members may not post images, videos, voice messages or files", default: false),
            "rate_limit": .object([
                "messages": .integer("Messages allowed per member", minimum: 1),
                "seconds": .integer("In this many seconds (a sliding window)", minimum: 1),
            ], required: ["messages", "seconds"], "More messages than this in the window are removed"),
            "notice": .string("Posted when a message is removed: {name}, {reason}, {strikes}, {max}", default: defaultNotice),
            "block_after": .integer("Strikes after which the member is blocked for all; 0 = never", minimum: 0, default: 0),
            "remove_after": .integer("Strikes after which the member is removed; 0 = never", minimum: 0, default: 3),
        ]), "Per-group rules", default: []),
    ])

    /// Why a message was removed (its text goes into the notice).
    enum Violation: String {
        case blockedWord = "blocked word"
        case blockedPattern = "blocked content"
        case link = "links are not allowed for new members"
        case media = "media are not allowed for new members"
        case rate = "too many messages"
    }

    /// A group entry ready to apply.
    struct Rules {
        let entry: GroupRules
        let glob: Glob
        let words: Set<String>
        let phrases: [String]
        let patterns: [NSRegularExpression]
    }

    enum Key {
        static let strikes = "strikes"
        static let welcomed = "welcomed"
    }

    static let maxWelcomed = 10_000
    static let mediaTypes: Set<String> = ["image", "video", "voice", "file"]

    let config: Config
    let context: PluginContext
    let rules: [Rules]
    /// Recent message times per `group:member` (for the rate limit; not kept across restarts).
    var recent: [String: [Double]] = [:]
    /// Groups where the bot lacks the role to moderate, already logged.
    var warnedGroups: Set<Int64> = []

    public init(config: Config, context: PluginContext) throws {
        self.config = config
        self.context = context
        rules = try config.groups.enumerated().map { i, g in
            guard !g.match.isEmpty else { throw PluginError.config("groups[\(i)].match", "must not be empty") }
            var words: Set<String> = []
            var phrases: [String] = []
            for (j, w) in g.blockedWords.enumerated() {
                let k = w.trimmingCharacters(in: .whitespaces).lowercased()
                guard !k.isEmpty else { throw PluginError.config("groups[\(i)].blocked_words[\(j)]", "must not be empty") }
                if k.contains(where: { !$0.isLetter && !$0.isNumber }) { phrases.append(k) } else { words.insert(k) }
            }
            let patterns = try g.blockedPatterns.enumerated().map { j, p in
                do { return try NSRegularExpression(pattern: p, options: [.caseInsensitive]) } catch {
                    throw PluginError.config("groups[\(i)].blocked_patterns[\(j)]", "invalid regular expression \(p)")
                }
            }
            if g.newMembersNoLinks || g.newMembersNoMedia, g.newMemberSeconds <= 0 {
                throw PluginError.config("groups[\(i)].new_member_seconds", "must be more than 0 when new members have limits")
            }
            if let r = g.rateLimit {
                guard r.messages >= 1 else { throw PluginError.config("groups[\(i)].rate_limit.messages", "must be 1 or more") }
                guard r.seconds >= 1 else { throw PluginError.config("groups[\(i)].rate_limit.seconds", "must be 1 or more") }
            }
            guard g.blockAfter >= 0 else { throw PluginError.config("groups[\(i)].block_after", "must be 0 or more") }
            guard g.removeAfter >= 0 else { throw PluginError.config("groups[\(i)].remove_after", "must be 0 or more") }
            return Rules(entry: g, glob: Glob(g.match), words: words, phrases: phrases, patterns: patterns)
        }
    }

    public static func routes(_ r: inout Routes<GroupModerator>) {
        r.onMessage(.group) { plugin, message in try plugin.moderate(message) }
        r.onGroupEvent { plugin, event in try plugin.handle(event) }
    }

    /// The rules of the first entry matching the group's name.
    func rules(for group: GroupRef) -> Rules? {
        rules.first { $0.glob.matches(group.displayName) }
    }

    // MARK: Group events

    func handle(_ event: GroupEvent) throws {
        switch event {
        case let .invitation(invitation):
            guard config.acceptInvitations else {
                context.log.info("group \(invitation.group.groupId): invitation not accepted (accept_invitations is off)")
                return
            }
            try context.join(groupId: invitation.group.groupId)
            context.log.info("group \(invitation.group.groupId): joining as \(invitation.role.rawValue)")
        case let .memberJoined(group, member):
            try welcome(member, in: group)
        case let .memberConnected(group, member) where member.joinedAfterBot:
            try welcome(member, in: group)
        case let .memberRemoved(group, member, _), let .memberLeft(group, member):
            try forget(member, in: group)
        default:
            break
        }
    }

    /// Posts the group's welcome for a newcomer, once per member.
    func welcome(_ member: GroupMemberInfo, in group: GroupRef) throws {
        guard let text = rules(for: group)?.entry.welcome else { return }
        let key = "\(group.groupId):\(member.memberId)"
        var welcomed = try context.storage.value([String].self, forKey: Key.welcomed) ?? []
        guard !welcomed.contains(key) else { return }
        welcomed.append(key)
        if welcomed.count > Self.maxWelcomed { welcomed.removeFirst(welcomed.count - Self.maxWelcomed) }
        try context.storage.set(welcomed, forKey: Key.welcomed)
        try context.send(groupId: group.groupId, text: Self.fill(text, ["name": member.displayName, "group": group.displayName]))
    }

    /// A member who left or was removed starts afresh if it comes back.
    func forget(_ member: GroupMemberInfo, in group: GroupRef) throws {
        let key = "\(group.groupId):\(member.memberId)"
        recent[key] = nil
        var strikes = try context.storage.value([String: Int].self, forKey: Key.strikes) ?? [:]
        if strikes.removeValue(forKey: key) != nil { try context.storage.set(strikes, forKey: Key.strikes) }
    }

    // MARK: Messages

    func moderate(_ message: Message) throws {
        guard let group = message.group, let member = message.member, let rules = rules(for: group) else { return }
        // The group's history, sent to the bot when it joins, is not judged: those messages were
        // written before the bot was there (and would all count at once against the rate).
        if let sent = message.sentAt, let joined = group.userJoinedAt, sent < joined { return }
        // Moderators and above are not moderated; a message from an unknown role is.
        if member.role >= .moderator { return }
        guard let violation = check(message, member: member, rules: rules, key: "\(group.groupId):\(member.memberId)") else { return }
        if let role = group.userRole, role < .moderator {
            if warnedGroups.insert(group.groupId).inserted {
                context.log.warning("group \(group.groupId): the bot is \(role.rawValue), it needs moderator to delete messages")
            }
            return
        }
        try punish(message, member: member, group: group, rules: rules.entry, violation: violation)
    }

    /// The first rule the message breaks (the rate is counted for every message).
    func check(_ message: Message, member: GroupMemberInfo, rules: Rules, key: String) -> Violation? {
        var violation: Violation?
        if let limit = rules.entry.rateLimit {
            let t = Date().timeIntervalSince1970
            var times = (recent[key] ?? []).filter { t - $0 < Double(limit.seconds) }
            times.append(t)
            recent[key] = times
            if times.count > limit.messages { violation = .rate }
        }
        let text = message.text
        if violation == nil, !text.isEmpty {
            let lower = text.lowercased()
            let words = Set(lower.split { !$0.isLetter && !$0.isNumber }.map(String.init))
            if !rules.words.isDisjoint(with: words) || rules.phrases.contains(where: { lower.contains($0) }) {
                violation = .blockedWord
            } else if rules.patterns.contains(where: { $0.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)) != nil }) {
                violation = .blockedPattern
            }
        }
        if violation == nil, rules.entry.newMemberSeconds > 0, isNew(member, within: rules.entry.newMemberSeconds) {
            if rules.entry.newMembersNoLinks, message.hasLink { violation = .link }
            else if rules.entry.newMembersNoMedia, Self.mediaTypes.contains(message.contentType) { violation = .media }
        }
        return violation
    }

    /// Joined after the bot, less than `seconds` ago. Members who were there before the bot are
    /// not new, nor is a member without a readable join time (no punishment on a guess).
    func isNew(_ member: GroupMemberInfo, within seconds: Int) -> Bool {
        guard member.joinedAfterBot, let since = member.createdAt else { return false }
        return Date().timeIntervalSince(since) < Double(seconds)
    }

    /// Deletes the message for all, counts a strike, posts the notice, then blocks or removes.
    /// A deletion the engine refuses (the item already gone, say) does not spare the member the
    /// strike; it is reported as the handler's error after the rest is done.
    func punish(_ message: Message, member: GroupMemberInfo, group: GroupRef, rules: GroupRules, violation: Violation) throws {
        var deletionError: PluginError?
        do { try context.deleteForAll(message) } catch { deletionError = error }
        let key = "\(group.groupId):\(member.memberId)"
        var strikes = try context.storage.value([String: Int].self, forKey: Key.strikes) ?? [:]
        let count = (strikes[key] ?? 0) + 1
        strikes[key] = count
        try context.storage.set(strikes, forKey: Key.strikes)
        context.log.info("group \(group.groupId): member \(member.groupMemberId) strike \(count): \(violation)")
        let limit = rules.removeAfter > 0 ? rules.removeAfter : (rules.blockAfter > 0 ? rules.blockAfter : 0)
        let notice = Self.fill(rules.notice, ["name": member.displayName, "reason": violation.rawValue, "strikes": "\(count)",
                                              "max": limit > 0 ? "\(limit)" : "∞"])
        try context.send(groupId: group.groupId, text: notice)
        if rules.removeAfter > 0, count >= rules.removeAfter {
            try context.remove(groupId: group.groupId, groupMemberId: member.groupMemberId)
            context.log.info("group \(group.groupId): member \(member.groupMemberId) removed after \(count) strikes")
            strikes[key] = nil
            try context.storage.set(strikes, forKey: Key.strikes)
            recent[key] = nil
        } else if rules.blockAfter > 0, count >= rules.blockAfter, !member.blockedByAdmin {
            try context.block(groupId: group.groupId, groupMemberId: member.groupMemberId)
            context.log.info("group \(group.groupId): member \(member.groupMemberId) blocked after \(count) strikes")
        }
        if let deletionError { throw deletionError }
    }

    /// `text` with each `{key}` replaced, in one pass (a member named `{reason}` stays a name).
    static func fill(_ text: String, _ values: [String: String]) -> String {
        var out = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            out += rest[..<open]
            let after = rest[rest.index(after: open)...]
            if let close = after.firstIndex(of: "}"), let value = values[String(after[..<close])] {
                out += value
                rest = after[after.index(after: close)...]
            } else {
                out += "{"
                rest = after
            }
        }
        return out + rest
    }
}

@_cdecl("swiftplex_plugin_entry")
public func swiftplexPluginEntry() -> UnsafeRawPointer {
    PluginExport.descriptor(for: GroupModerator.self)
}
