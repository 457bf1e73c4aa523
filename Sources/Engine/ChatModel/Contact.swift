import SwiftplexBase

/// A contact of a user: the peer's profile, the connection to it and the preferences in force.
public struct Contact: Sendable, Hashable, Codable {
    public var contactId: Int64
    public var localDisplayName: String
    public var profile: LocalProfile
    public var activeConn: Connection?
    public var contactUsed: Bool
    public var contactStatus: ContactStatus
    public var chatSettings: ChatSettings
    public var userPreferences: Preferences
    public var mergedPreferences: ContactUserPreferences
    public var createdAt: ChatTimestamp
    public var updatedAt: ChatTimestamp
    public var chatTs: ChatTimestamp?
    public var contactRequestId: Int64?
    public var contactGroupMemberId: Int64?
    public var contactGrpInvSent: Bool
    /// A group member's invitation to a direct chat (`x.grp.direct.inv`), for a contact made from it.
    public var groupDirectInv: GroupDirectInvitation?
    public var chatTags: [Int64]
    public var chatItemTTL: Int64?
    public var chatDeleted: Bool
    /// The application's own JSON (`/_set custom`).
    public var customData: JSONValue?

    public init(contactId: Int64, localDisplayName: String, profile: LocalProfile, activeConn: Connection?, contactUsed: Bool = true,
                contactStatus: ContactStatus, chatSettings: ChatSettings = ChatSettings(), userPreferences: Preferences = Preferences(),
                mergedPreferences: ContactUserPreferences, createdAt: ChatTimestamp, updatedAt: ChatTimestamp, chatTs: ChatTimestamp? = nil,
                contactRequestId: Int64? = nil, contactGroupMemberId: Int64? = nil, contactGrpInvSent: Bool = false, groupDirectInv: GroupDirectInvitation? = nil,
                chatTags: [Int64] = [], chatItemTTL: Int64? = nil, chatDeleted: Bool = false, customData: JSONValue? = nil) {
        self.contactId = contactId
        self.localDisplayName = localDisplayName
        self.profile = profile
        self.activeConn = activeConn
        self.contactUsed = contactUsed
        self.contactStatus = contactStatus
        self.chatSettings = chatSettings
        self.userPreferences = userPreferences
        self.mergedPreferences = mergedPreferences
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.chatTs = chatTs
        self.contactRequestId = contactRequestId
        self.contactGroupMemberId = contactGroupMemberId
        self.contactGrpInvSent = contactGrpInvSent
        self.groupDirectInv = groupDirectInv
        self.chatTags = chatTags
        self.chatItemTTL = chatItemTTL
        self.chatDeleted = chatDeleted
        self.customData = customData
    }
}

/// Where a member contact came from (`Contact.groupDirectInv`): the member's invitation link and
/// whether this side has started joining it.
public struct GroupDirectInvitation: Sendable, Hashable, Codable {
    public var groupDirectInvLink: String
    public var fromGroupId_: Int64?
    public var fromGroupMemberId_: Int64?
    public var fromGroupMemberConnId_: Int64?
    public var groupDirectInvStartedConnection: Bool

    public init(groupDirectInvLink: String, fromGroupId_: Int64? = nil, fromGroupMemberId_: Int64? = nil, fromGroupMemberConnId_: Int64? = nil,
                groupDirectInvStartedConnection: Bool) {
        self.groupDirectInvLink = groupDirectInvLink
        self.fromGroupId_ = fromGroupId_
        self.fromGroupMemberId_ = fromGroupMemberId_
        self.fromGroupMemberConnId_ = fromGroupMemberConnId_
        self.groupDirectInvStartedConnection = groupDirectInvStartedConnection
    }
}

public enum ContactStatus: String, StringEnum { case active, deleted, deletedByUser }

public struct ChatSettings: Sendable, Hashable, Codable {
    public var enableNtfs: MsgFilter
    public var sendRcpts: Bool?
    public var favorite: Bool
    public init(enableNtfs: MsgFilter = .all, sendRcpts: Bool? = nil, favorite: Bool = false) {
        self.enableNtfs = enableNtfs
        self.sendRcpts = sendRcpts
        self.favorite = favorite
    }
}

public enum MsgFilter: String, StringEnum { case none, all, mentions }

/// For each feature: whether it is on for either side, what this user set and what the contact set.
public struct ContactUserPreferences: Sendable, Hashable, Codable {
    public var timedMessages: ContactUserPreference<TimedMessagesPreference>
    public var fullDelete: ContactUserPreference<SimplePreference>
    public var reactions: ContactUserPreference<SimplePreference>
    public var voice: ContactUserPreference<SimplePreference>
    public var files: ContactUserPreference<SimplePreference>
    public var calls: ContactUserPreference<SimplePreference>
    public var sessions: ContactUserPreference<SimplePreference>
    public var commands: [ChatBotCommand]?

    public init(timedMessages: ContactUserPreference<TimedMessagesPreference>, fullDelete: ContactUserPreference<SimplePreference>,
                reactions: ContactUserPreference<SimplePreference>, voice: ContactUserPreference<SimplePreference>,
                files: ContactUserPreference<SimplePreference>, calls: ContactUserPreference<SimplePreference>,
                sessions: ContactUserPreference<SimplePreference>, commands: [ChatBotCommand]? = nil) {
        self.timedMessages = timedMessages
        self.fullDelete = fullDelete
        self.reactions = reactions
        self.voice = voice
        self.files = files
        self.calls = calls
        self.sessions = sessions
        self.commands = commands
    }
}

public struct ContactUserPreference<Pref: Sendable & Hashable & Codable>: Sendable, Hashable, Codable {
    public var enabled: PrefEnabled
    public var userPreference: ContactUserPref<Pref>
    public var contactPreference: Pref
    public init(enabled: PrefEnabled, userPreference: ContactUserPref<Pref>, contactPreference: Pref) {
        self.enabled = enabled
        self.userPreference = userPreference
        self.contactPreference = contactPreference
    }
}

/// This user's preference for a contact: set for this contact alone (`contact`) or the user's own (`user`).
public enum ContactUserPref<Pref: Sendable & Hashable & Codable>: Sendable, Hashable, Codable {
    case contact(preference: Pref)
    case user(preference: Pref)

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "contact": self = .contact(preference: try c.decode(Pref.self, forKey: "preference"))
        case "user": self = .user(preference: try c.decode(Pref.self, forKey: "preference"))
        case let t: throw c.unknown(t, in: "ContactUserPref")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .contact(p): try c.tag("contact"); try c.encode(p, forKey: "preference")
        case let .user(p): try c.tag("user"); try c.encode(p, forKey: "preference")
        }
    }
}

public struct PrefEnabled: Sendable, Hashable, Codable {
    public var forUser: Bool
    public var forContact: Bool
    public init(forUser: Bool, forContact: Bool) {
        self.forUser = forUser
        self.forContact = forContact
    }
}
