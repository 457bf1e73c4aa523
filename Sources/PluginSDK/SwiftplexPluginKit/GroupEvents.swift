import Foundation

/// A member's role in a group, lowest first (SimpleX's `GroupMemberRole` order): a role name
/// this SDK does not know is `.unknown`, below every other.
public enum GroupRole: String, Sendable, Hashable, Comparable, CaseIterable {
    case unknown, relay, observer, author, member, moderator, admin, owner

    public init(name: String?) { self = name.flatMap(GroupRole.init(rawValue:)) ?? .unknown }

    var rank: Int { Self.allCases.firstIndex(of: self) ?? 0 }

    public static func < (l: GroupRole, r: GroupRole) -> Bool { l.rank < r.rank }
}

/// A group as events and messages carry it (`groupInfo`).
public struct GroupRef: Sendable, Hashable {
    /// The id commands take (`#<groupId>`).
    public let groupId: Int64
    /// The name the group's owner chose (`groupProfile.displayName`).
    public let displayName: String
    /// The group's name unique in the bot's database.
    public let localDisplayName: String
    /// The bot's own role in the group (`membership.memberRole`), when the event carries it.
    public let userRole: GroupRole?
    /// When the bot's membership was recorded (`membership.createdAt`: the invitation, or the
    /// group's creation), when the event carries it.
    public let userJoinedAt: Date?

    public init?(json: JSONValue) {
        guard let id = json["groupId"]?.int64Value else { return nil }
        groupId = id
        localDisplayName = json["localDisplayName"]?.stringValue ?? ""
        displayName = json["groupProfile"]?["displayName"]?.stringValue ?? localDisplayName
        userRole = json["membership"]?["memberRole"]?.stringValue.map { GroupRole(name: $0) }
        userJoinedAt = json["membership"]?["createdAt"]?.stringValue.flatMap(GroupMemberInfo.parseTimestamp)
    }
}

/// A member of a group (`GroupMember`), as the bot's database knows it.
public struct GroupMemberInfo: Sendable, Hashable {
    /// The bot's id of this member: what `/_block`, `/_remove` and `/_member role` take.
    public let groupMemberId: Int64
    /// The member's id in the group protocol (the same in every member's database).
    public let memberId: String
    /// The name the member chose (`memberProfile.displayName`).
    public let displayName: String
    /// The member's name unique in the bot's database.
    public let localDisplayName: String
    public let role: GroupRole
    /// `memberStatus`: `introduced`, `connected`, `complete`, `left`, `removed`, ….
    public let status: String
    /// `memberCategory`: `user` (the bot), `invitee` (the bot invited it), `host` (it invited the
    /// bot), `pre` (in the group before the bot joined), `post` (joined after the bot).
    public let category: String
    /// The member's contact in the bot's database, if it has one.
    public let contactId: Int64?
    /// Blocked for all by a moderator (`blockedByAdmin`).
    public let blockedByAdmin: Bool
    /// When the bot's database first recorded this member (`createdAt`): for `post` and `invitee`
    /// members, about when they joined.
    public let createdAt: Date?

    public init?(json: JSONValue) {
        guard let id = json["groupMemberId"]?.int64Value else { return nil }
        groupMemberId = id
        memberId = json["memberId"]?.stringValue ?? ""
        localDisplayName = json["localDisplayName"]?.stringValue ?? ""
        displayName = json["memberProfile"]?["displayName"]?.stringValue ?? localDisplayName
        role = GroupRole(name: json["memberRole"]?.stringValue)
        status = json["memberStatus"]?.stringValue ?? ""
        category = json["memberCategory"]?.stringValue ?? ""
        contactId = json["memberContactId"]?.int64Value
        blockedByAdmin = json["blockedByAdmin"]?.boolValue ?? false
        createdAt = json["createdAt"]?.stringValue.flatMap(GroupMemberInfo.parseTimestamp)
    }

    /// True for members who joined after the bot (`post`) or whom the bot invited (`invitee`).
    public var joinedAfterBot: Bool { category == "post" || category == "invitee" }

    /// `2026-01-01T10:20:30[.123456]Z` (the Chat API's timestamps) as a date.
    static func parseTimestamp(_ text: String) -> Date? {
        let scalars = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= scalars.count else { return nil }
            var n = 0
            for b in scalars[from..<(from + count)] {
                guard b >= 48, b <= 57 else { return nil }
                n = n * 10 + Int(b - 48)
            }
            return n
        }
        guard scalars.count >= 20, let y = number(0, 4), let mo = number(5, 2), let d = number(8, 2),
              let h = number(11, 2), let mi = number(14, 2), let s = number(17, 2) else { return nil }
        var fraction = 0.0
        var i = 19
        if i < scalars.count, scalars[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            while i < scalars.count, scalars[i] >= 48, scalars[i] <= 57 {
                fraction += Double(scalars[i] - 48) * scale
                scale /= 10
                i += 1
            }
        }
        guard i < scalars.count, scalars[i] == UInt8(ascii: "Z") else { return nil }
        let c = DateComponents(year: y, month: mo, day: d, hour: h, minute: mi, second: s)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: c).map { $0.addingTimeInterval(fraction) }
    }
}

/// An invitation to a group (`receivedGroupInvitation`): join it with `/_join #<groupId>`
/// (``PluginContext/join(groupId:)``).
public struct GroupInvitation: Sendable, Hashable {
    public let group: GroupRef
    /// The contact who invited the bot.
    public let contactId: Int64
    /// The inviting member's role.
    public let fromRole: GroupRole
    /// The role the bot is offered.
    public let role: GroupRole
}

/// The group events of the Chat API, typed (``ChatEvent/groupEvent``). Each names the group and
/// the member concerned; `by` is the member who did it.
public enum GroupEvent: Sendable, Hashable {
    /// `receivedGroupInvitation`: a contact invites the bot.
    case invitation(GroupInvitation)
    /// `userJoinedGroup`: the bot is in the group (connected to the member who invited it).
    case joined(GroupRef, host: GroupMemberInfo)
    /// `joinedGroupMember`: a member the bot invited has joined (the bot is its host).
    case memberJoined(GroupRef, GroupMemberInfo)
    /// `joinedGroupMemberConnecting`: another member announced a newcomer, who is now connecting to the bot.
    case memberAnnounced(GroupRef, GroupMemberInfo, by: GroupMemberInfo)
    /// `connectedToGroupMember`: the bot's connection with a member is up — a newcomer
    /// (`joinedAfterBot`), or, right after the bot joined, a member who was there before.
    case memberConnected(GroupRef, GroupMemberInfo)
    /// `leftMember`.
    case memberLeft(GroupRef, GroupMemberInfo)
    /// `deletedMember`: a member was removed by another.
    case memberRemoved(GroupRef, GroupMemberInfo, by: GroupMemberInfo)
    /// `deletedMemberUser`: the bot was removed.
    case removedFromGroup(GroupRef, by: GroupMemberInfo)
    /// `memberRole`.
    case roleChanged(GroupRef, GroupMemberInfo, from: GroupRole, to: GroupRole, by: GroupMemberInfo)
    /// `memberBlockedForAll`.
    case memberBlocked(GroupRef, GroupMemberInfo, blocked: Bool, by: GroupMemberInfo)
    /// `groupDeleted`: the owner deleted the group.
    case groupDeleted(GroupRef, by: GroupMemberInfo)
    /// `groupUpdated`: the group's profile changed (`by` is nil for the bot's own change).
    case groupUpdated(GroupRef, by: GroupMemberInfo?)

    /// The event types this enum covers.
    public static let types: [String] = [
        "receivedGroupInvitation", "userJoinedGroup", "joinedGroupMember", "joinedGroupMemberConnecting", "connectedToGroupMember",
        "leftMember", "deletedMember", "deletedMemberUser", "memberRole", "memberBlockedForAll", "groupDeleted", "groupUpdated",
    ]

    /// The group the event is about.
    public var group: GroupRef {
        switch self {
        case let .invitation(i): i.group
        case let .joined(g, _), let .memberJoined(g, _), let .memberAnnounced(g, _, _), let .memberConnected(g, _),
             let .memberLeft(g, _), let .memberRemoved(g, _, _), let .removedFromGroup(g, _), let .roleChanged(g, _, _, _, _),
             let .memberBlocked(g, _, _, _), let .groupDeleted(g, _), let .groupUpdated(g, _): g
        }
    }

    /// Reads a group event; nil for other events and for group events missing a required part.
    init?(type: String, json: JSONValue) {
        func member(_ key: String) -> GroupMemberInfo? { json[key].flatMap(GroupMemberInfo.init(json:)) }
        let groupKey = type == "groupUpdated" ? "toGroup" : "groupInfo"
        guard let group = json[groupKey].flatMap(GroupRef.init(json:)) else { return nil }
        switch type {
        case "receivedGroupInvitation":
            guard let contactId = json["contact"]?["contactId"]?.int64Value else { return nil }
            self = .invitation(GroupInvitation(group: group, contactId: contactId,
                                               fromRole: GroupRole(name: json["fromMemberRole"]?.stringValue),
                                               role: GroupRole(name: json["memberRole"]?.stringValue)))
        case "userJoinedGroup":
            guard let host = member("hostMember") else { return nil }
            self = .joined(group, host: host)
        case "joinedGroupMember":
            guard let m = member("member") else { return nil }
            self = .memberJoined(group, m)
        case "joinedGroupMemberConnecting":
            guard let m = member("member"), let host = member("hostMember") else { return nil }
            self = .memberAnnounced(group, m, by: host)
        case "connectedToGroupMember":
            guard let m = member("member") else { return nil }
            self = .memberConnected(group, m)
        case "leftMember":
            guard let m = member("member") else { return nil }
            self = .memberLeft(group, m)
        case "deletedMember":
            guard let m = member("deletedMember"), let by = member("byMember") else { return nil }
            self = .memberRemoved(group, m, by: by)
        case "deletedMemberUser":
            guard let by = member("member") else { return nil }
            self = .removedFromGroup(group, by: by)
        case "memberRole":
            guard let m = member("member"), let by = member("byMember") else { return nil }
            self = .roleChanged(group, m, from: GroupRole(name: json["fromRole"]?.stringValue),
                                to: GroupRole(name: json["toRole"]?.stringValue), by: by)
        case "memberBlockedForAll":
            guard let m = member("member"), let by = member("byMember") else { return nil }
            self = .memberBlocked(group, m, blocked: json["blocked"]?.boolValue ?? true, by: by)
        case "groupDeleted":
            guard let by = member("member") else { return nil }
            self = .groupDeleted(group, by: by)
        case "groupUpdated":
            self = .groupUpdated(group, by: member("member_"))
        default:
            return nil
        }
    }
}
