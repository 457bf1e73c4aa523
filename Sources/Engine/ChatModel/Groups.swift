import SwiftplexBase

// Group and channel types, declared ahead of groups: the engine produces none of them yet. They
// follow the simplex-chat 7.0.2 package's definitions; fields whose types the engine has no
// model of yet (keys, themes, prepared groups, support chats) are kept as ``JSONValue``.

/// A group (or channel) as the user sees it. Not produced by the engine yet.
public struct GroupInfo: Sendable, Hashable, Codable {
    public var groupId: Int64
    public var useRelays: Bool
    public var relayOwnStatus: RelayStatus?
    public var localDisplayName: String
    public var groupProfile: GroupProfile
    public var localAlias: String
    public var businessChat: BusinessChatInfo?
    public var fullGroupPreferences: FullGroupPreferences
    /// The user's own membership.
    public var membership: GroupMember
    public var chatSettings: ChatSettings
    public var createdAt: ChatTimestamp
    public var updatedAt: ChatTimestamp
    public var chatTs: ChatTimestamp?
    public var userMemberProfileSentAt: ChatTimestamp?
    public var preparedGroup: JSONValue?
    public var chatTags: [Int64]
    public var chatItemTTL: Int64?
    public var uiThemes: JSONValue?
    public var customData: JSONValue?
    public var groupSummary: GroupSummary
    public var rosterVersion: Int64?
    public var membersRequireAttention: Int
    public var viaGroupLinkUri: String?
    public var groupKeys: JSONValue?
    public var groupDomainVerified: Bool?

    public init(groupId: Int64, useRelays: Bool = false, relayOwnStatus: RelayStatus? = nil, localDisplayName: String, groupProfile: GroupProfile,
                localAlias: String = "", businessChat: BusinessChatInfo? = nil, fullGroupPreferences: FullGroupPreferences, membership: GroupMember,
                chatSettings: ChatSettings = ChatSettings(), createdAt: ChatTimestamp, updatedAt: ChatTimestamp, chatTs: ChatTimestamp? = nil,
                userMemberProfileSentAt: ChatTimestamp? = nil, preparedGroup: JSONValue? = nil, chatTags: [Int64] = [], chatItemTTL: Int64? = nil,
                uiThemes: JSONValue? = nil, customData: JSONValue? = nil, groupSummary: GroupSummary, rosterVersion: Int64? = nil,
                membersRequireAttention: Int = 0, viaGroupLinkUri: String? = nil, groupKeys: JSONValue? = nil, groupDomainVerified: Bool? = nil) {
        self.groupId = groupId
        self.useRelays = useRelays
        self.relayOwnStatus = relayOwnStatus
        self.localDisplayName = localDisplayName
        self.groupProfile = groupProfile
        self.localAlias = localAlias
        self.businessChat = businessChat
        self.fullGroupPreferences = fullGroupPreferences
        self.membership = membership
        self.chatSettings = chatSettings
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.chatTs = chatTs
        self.userMemberProfileSentAt = userMemberProfileSentAt
        self.preparedGroup = preparedGroup
        self.chatTags = chatTags
        self.chatItemTTL = chatItemTTL
        self.uiThemes = uiThemes
        self.customData = customData
        self.groupSummary = groupSummary
        self.rosterVersion = rosterVersion
        self.membersRequireAttention = membersRequireAttention
        self.viaGroupLinkUri = viaGroupLinkUri
        self.groupKeys = groupKeys
        self.groupDomainVerified = groupDomainVerified
    }
}

/// A group's profile as members share it. Not produced by the engine yet.
public struct GroupProfile: Sendable, Hashable, Codable {
    public var displayName: String
    public var fullName: String
    public var shortDescr: String?
    public var description: String?
    public var image: String?
    public var publicGroup: PublicGroupProfile?
    public var groupPreferences: GroupPreferences?
    public var memberAdmission: GroupMemberAdmission?

    public init(displayName: String, fullName: String = "", shortDescr: String? = nil, description: String? = nil, image: String? = nil,
                publicGroup: PublicGroupProfile? = nil, groupPreferences: GroupPreferences? = nil, memberAdmission: GroupMemberAdmission? = nil) {
        self.displayName = displayName
        self.fullName = fullName
        self.shortDescr = shortDescr
        self.description = description
        self.image = image
        self.publicGroup = publicGroup
        self.groupPreferences = groupPreferences
        self.memberAdmission = memberAdmission
    }
}

/// What makes a group a channel: its type, link and public id.
public struct PublicGroupProfile: Sendable, Hashable, Codable {
    public var groupType: GroupType
    public var groupLink: String
    public var publicGroupId: String
    public var publicGroupAccess: JSONValue?
    public init(groupType: GroupType, groupLink: String, publicGroupId: String, publicGroupAccess: JSONValue? = nil) {
        self.groupType = groupType
        self.groupLink = groupLink
        self.publicGroupId = publicGroupId
        self.publicGroupAccess = publicGroupAccess
    }
}

public enum GroupType: String, StringEnum { case channel, group }

public struct GroupMemberAdmission: Sendable, Hashable, Codable {
    public var review: MemberCriteria?
    public init(review: MemberCriteria? = nil) { self.review = review }
}

public enum MemberCriteria: String, StringEnum { case all }

public enum GroupFeatureEnabled: String, StringEnum { case on, off }

public struct GroupPreference: Sendable, Hashable, Codable {
    public var enable: GroupFeatureEnabled
    public init(enable: GroupFeatureEnabled) { self.enable = enable }
}

/// A group feature that may be limited to members of a role and above.
public struct RoleGroupPreference: Sendable, Hashable, Codable {
    public var enable: GroupFeatureEnabled
    public var role: GroupMemberRole?
    public init(enable: GroupFeatureEnabled, role: GroupMemberRole? = nil) {
        self.enable = enable
        self.role = role
    }
}

public struct TimedMessagesGroupPreference: Sendable, Hashable, Codable {
    public var enable: GroupFeatureEnabled
    public var ttl: Int?
    public init(enable: GroupFeatureEnabled, ttl: Int? = nil) {
        self.enable = enable
        self.ttl = ttl
    }
}

public struct CommentsGroupPreference: Sendable, Hashable, Codable {
    public var enable: GroupFeatureEnabled
    public var duration: Int?
    public init(enable: GroupFeatureEnabled, duration: Int? = nil) {
        self.enable = enable
        self.duration = duration
    }
}

/// The group preferences a profile sets, all optional.
public struct GroupPreferences: Sendable, Hashable, Codable {
    public var timedMessages: TimedMessagesGroupPreference?
    public var directMessages: RoleGroupPreference?
    public var fullDelete: GroupPreference?
    public var reactions: GroupPreference?
    public var voice: RoleGroupPreference?
    public var files: RoleGroupPreference?
    public var simplexLinks: RoleGroupPreference?
    public var reports: GroupPreference?
    public var history: GroupPreference?
    public var support: GroupPreference?
    public var sessions: RoleGroupPreference?
    public var comments: CommentsGroupPreference?
    public var signMessages: GroupPreference?
    public var commands: [ChatBotCommand]?

    public init(timedMessages: TimedMessagesGroupPreference? = nil, directMessages: RoleGroupPreference? = nil, fullDelete: GroupPreference? = nil,
                reactions: GroupPreference? = nil, voice: RoleGroupPreference? = nil, files: RoleGroupPreference? = nil,
                simplexLinks: RoleGroupPreference? = nil, reports: GroupPreference? = nil, history: GroupPreference? = nil,
                support: GroupPreference? = nil, sessions: RoleGroupPreference? = nil, comments: CommentsGroupPreference? = nil,
                signMessages: GroupPreference? = nil, commands: [ChatBotCommand]? = nil) {
        self.timedMessages = timedMessages
        self.directMessages = directMessages
        self.fullDelete = fullDelete
        self.reactions = reactions
        self.voice = voice
        self.files = files
        self.simplexLinks = simplexLinks
        self.reports = reports
        self.history = history
        self.support = support
        self.sessions = sessions
        self.comments = comments
        self.signMessages = signMessages
        self.commands = commands
    }
}

/// Group preferences with every feature filled in (`GroupInfo.fullGroupPreferences`).
public struct FullGroupPreferences: Sendable, Hashable, Codable {
    public var timedMessages: TimedMessagesGroupPreference
    public var directMessages: RoleGroupPreference
    public var fullDelete: GroupPreference
    public var reactions: GroupPreference
    public var voice: RoleGroupPreference
    public var files: RoleGroupPreference
    public var simplexLinks: RoleGroupPreference
    public var reports: GroupPreference
    public var history: GroupPreference
    public var support: GroupPreference
    public var sessions: RoleGroupPreference
    public var comments: CommentsGroupPreference
    public var signMessages: GroupPreference
    public var commands: [ChatBotCommand]

    public init(timedMessages: TimedMessagesGroupPreference, directMessages: RoleGroupPreference, fullDelete: GroupPreference,
                reactions: GroupPreference, voice: RoleGroupPreference, files: RoleGroupPreference, simplexLinks: RoleGroupPreference,
                reports: GroupPreference, history: GroupPreference, support: GroupPreference, sessions: RoleGroupPreference,
                comments: CommentsGroupPreference, signMessages: GroupPreference, commands: [ChatBotCommand] = []) {
        self.timedMessages = timedMessages
        self.directMessages = directMessages
        self.fullDelete = fullDelete
        self.reactions = reactions
        self.voice = voice
        self.files = files
        self.simplexLinks = simplexLinks
        self.reports = reports
        self.history = history
        self.support = support
        self.sessions = sessions
        self.comments = comments
        self.signMessages = signMessages
        self.commands = commands
    }
}

public struct GroupSummary: Sendable, Hashable, Codable {
    public var currentMembers: Int64
    public var publicMemberCount: Int64?
    public init(currentMembers: Int64, publicMemberCount: Int64? = nil) {
        self.currentMembers = currentMembers
        self.publicMemberCount = publicMemberCount
    }
}

public struct BusinessChatInfo: Sendable, Hashable, Codable {
    public var chatType: BusinessChatType
    public var businessId: String
    public var customerId: String
    public var businessDomain: JSONValue?
    public init(chatType: BusinessChatType, businessId: String, customerId: String, businessDomain: JSONValue? = nil) {
        self.chatType = chatType
        self.businessId = businessId
        self.customerId = customerId
        self.businessDomain = businessDomain
    }
}

public enum BusinessChatType: String, StringEnum { case business, customer }

/// A member of a group (the user's own membership too). Not produced by the engine yet.
public struct GroupMember: Sendable, Hashable, Codable {
    public var groupMemberId: Int64
    public var groupId: Int64
    public var indexInGroup: Int64
    public var memberId: String
    public var memberRole: GroupMemberRole
    public var memberCategory: GroupMemberCategory
    public var memberStatus: GroupMemberStatus
    public var memberSettings: GroupMemberSettings
    public var blockedByAdmin: Bool
    public var invitedBy: InvitedBy
    public var invitedByGroupMemberId: Int64?
    public var localDisplayName: String
    public var memberProfile: LocalProfile
    public var memberContactId: Int64?
    public var memberContactProfileId: Int64
    public var activeConn: Connection?
    public var memberChatVRange: VersionRange
    public var createdAt: ChatTimestamp
    public var updatedAt: ChatTimestamp
    public var supportChat: JSONValue?
    public var memberPubKey: String?
    public var relayLink: String?
    public var memberVerifiedCode: JSONValue?

    public init(groupMemberId: Int64, groupId: Int64, indexInGroup: Int64, memberId: String, memberRole: GroupMemberRole,
                memberCategory: GroupMemberCategory, memberStatus: GroupMemberStatus, memberSettings: GroupMemberSettings = GroupMemberSettings(),
                blockedByAdmin: Bool = false, invitedBy: InvitedBy, invitedByGroupMemberId: Int64? = nil, localDisplayName: String,
                memberProfile: LocalProfile, memberContactId: Int64? = nil, memberContactProfileId: Int64, activeConn: Connection? = nil,
                memberChatVRange: VersionRange = VersionRange(minVersion: 1, maxVersion: 1), createdAt: ChatTimestamp, updatedAt: ChatTimestamp,
                supportChat: JSONValue? = nil, memberPubKey: String? = nil, relayLink: String? = nil, memberVerifiedCode: JSONValue? = nil) {
        self.groupMemberId = groupMemberId
        self.groupId = groupId
        self.indexInGroup = indexInGroup
        self.memberId = memberId
        self.memberRole = memberRole
        self.memberCategory = memberCategory
        self.memberStatus = memberStatus
        self.memberSettings = memberSettings
        self.blockedByAdmin = blockedByAdmin
        self.invitedBy = invitedBy
        self.invitedByGroupMemberId = invitedByGroupMemberId
        self.localDisplayName = localDisplayName
        self.memberProfile = memberProfile
        self.memberContactId = memberContactId
        self.memberContactProfileId = memberContactProfileId
        self.activeConn = activeConn
        self.memberChatVRange = memberChatVRange
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.supportChat = supportChat
        self.memberPubKey = memberPubKey
        self.relayLink = relayLink
        self.memberVerifiedCode = memberVerifiedCode
    }
}

public enum GroupMemberCategory: String, StringEnum { case user, invitee, host, pre, post }

/// Where a member is in joining (or leaving). Some spellings are SimpleX's own: `pending_approval`, `intro-inv`.
public enum GroupMemberStatus: String, StringEnum {
    case rejected, removed, left, deleted, unknown, invited
    case pendingApproval = "pending_approval"
    case pendingReview = "pending_review"
    case introduced
    case introInvited = "intro-inv"
    case accepted, announced, connected, complete, creator
}

public struct GroupMemberSettings: Sendable, Hashable, Codable {
    public var showMessages: Bool
    public init(showMessages: Bool = true) { self.showMessages = showMessages }
}

/// Who brought a member in.
public enum InvitedBy: Sendable, Hashable, Codable {
    case contact(byContactId: Int64)
    case user
    case unknown

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "contact": self = .contact(byContactId: try c.decode(Int64.self, forKey: "byContactId"))
        case "user": self = .user
        case "unknown": self = .unknown
        case let t: throw c.unknown(t, in: "InvitedBy")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .contact(id): try c.tag("contact"); try c.encode(id, forKey: "byContactId")
        case .user: try c.tag("user")
        case .unknown: try c.tag("unknown")
        }
    }
}

/// A group's link (its contact address). Not produced by the engine yet.
public struct GroupLink: Sendable, Hashable, Codable {
    public var userContactLinkId: Int64
    public var connLinkContact: CreatedConnLink
    public var shortLinkDataSet: Bool
    public var shortLinkLargeDataSet: Bool
    public var groupLinkId: String
    public var acceptMemberRole: GroupMemberRole
    public init(userContactLinkId: Int64, connLinkContact: CreatedConnLink, shortLinkDataSet: Bool, shortLinkLargeDataSet: Bool = false,
                groupLinkId: String, acceptMemberRole: GroupMemberRole) {
        self.userContactLinkId = userContactLinkId
        self.connLinkContact = connLinkContact
        self.shortLinkDataSet = shortLinkDataSet
        self.shortLinkLargeDataSet = shortLinkLargeDataSet
        self.groupLinkId = groupLinkId
        self.acceptMemberRole = acceptMemberRole
    }
}

/// A chat relay serving a channel, as its owner sees it.
public struct GroupRelay: Sendable, Hashable, Codable {
    public var groupRelayId: Int64
    public var groupMemberId: Int64
    public var userChatRelay: UserChatRelay
    public var relayStatus: RelayStatus
    public var relayLink: String?
    public var relayCap: RelayCapabilities
    /// **Swiftplex**: a subscriber's counters for this relay (``RelayStats``); absent at the owner.
    public var relayStats: RelayStats?
    public init(groupRelayId: Int64, groupMemberId: Int64, userChatRelay: UserChatRelay, relayStatus: RelayStatus, relayLink: String? = nil,
                relayCap: RelayCapabilities = RelayCapabilities(), relayStats: RelayStats? = nil) {
        self.groupRelayId = groupRelayId
        self.groupMemberId = groupMemberId
        self.userChatRelay = userChatRelay
        self.relayStatus = relayStatus
        self.relayLink = relayLink
        self.relayCap = relayCap
        self.relayStats = relayStats
    }
}

public enum RelayStatus: String, StringEnum, CaseIterable { case new, invited, accepted, acknowledgedRoster, active, inactive, rejected }

/// A chat relay the user has configured (`/relays`); `relayProfile` is a ``RelayProfile``.
public struct UserChatRelay: Sendable, Hashable, Codable {
    public var chatRelayId: Int64
    public var address: String
    public var relayProfile: JSONValue
    public var domains: [String]
    public var preset: Bool
    public var tested: Bool?
    public var enabled: Bool
    public var deleted: Bool
    public init(chatRelayId: Int64, address: String, relayProfile: JSONValue, domains: [String] = [], preset: Bool = false, tested: Bool? = nil,
                enabled: Bool = true, deleted: Bool = false) {
        self.chatRelayId = chatRelayId
        self.address = address
        self.relayProfile = relayProfile
        self.domains = domains
        self.preset = preset
        self.tested = tested
        self.enabled = enabled
        self.deleted = deleted
    }
}

public struct RelayCapabilities: Sendable, Hashable, Codable {
    public var webDomain: String?
    public init(webDomain: String? = nil) { self.webDomain = webDomain }
}
