// The group responses and events of the bot API (the simplex-chat 7.0.2 package's shapes), kept
// apart from ChatResponse/ChatEvent: those carry them as one case each (`.group(…)`), written
// with the same `"type"` table (``ChatMessageType``). Each payload is a struct with synthesized
// Codable, written into the message's own object after its `type`.

/// `user` and `groupInfo` (`groupCreated`, `leftMemberUser`).
public struct UserGroup: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public init(user: User, groupInfo: GroupInfo) {
        self.user = user
        self.groupInfo = groupInfo
    }
}

/// `user`, `groupInfo` and `member` (`joinedGroupMember`, `leftMember`, `groupDeleted`, `connectedToGroupMember`).
public struct UserGroupMember: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var member: GroupMember
    public init(user: User, groupInfo: GroupInfo, member: GroupMember) {
        self.user = user
        self.groupInfo = groupInfo
        self.member = member
    }
}

/// `user`, `contact`, `groupInfo` and `member`: a group member's contact (`newMemberContact`,
/// `newMemberContactSentInv`, `newMemberContactReceivedInv`).
public struct MemberContact: Sendable, Hashable, Codable {
    public var user: User
    public var contact: Contact
    public var groupInfo: GroupInfo
    public var member: GroupMember
    public init(user: User, contact: Contact, groupInfo: GroupInfo, member: GroupMember) {
        self.user = user
        self.contact = contact
        self.groupInfo = groupInfo
        self.member = member
    }
}

/// `groupMemberUpdated`: a member's profile changed (its `x.info`).
public struct GroupMemberUpdated: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var fromMember: GroupMember
    public var toMember: GroupMember
    public init(user: User, groupInfo: GroupInfo, fromMember: GroupMember, toMember: GroupMember) {
        self.user = user
        self.groupInfo = groupInfo
        self.fromMember = fromMember
        self.toMember = toMember
    }
}

/// `sentGroupInvitation`.
public struct SentGroupInvitation: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var contact: Contact
    public var member: GroupMember
    public init(user: User, groupInfo: GroupInfo, contact: Contact, member: GroupMember) {
        self.user = user
        self.groupInfo = groupInfo
        self.contact = contact
        self.member = member
    }
}

/// `userAcceptedGroupSent`.
public struct UserAcceptedGroupSent: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var hostContact: Contact?
    public init(user: User, groupInfo: GroupInfo, hostContact: Contact? = nil) {
        self.user = user
        self.groupInfo = groupInfo
        self.hostContact = hostContact
    }
}

/// A group with its members (`groupMembers.group`).
public struct Group: Sendable, Hashable, Codable {
    public var groupInfo: GroupInfo
    public var members: [GroupMember]
    public init(groupInfo: GroupInfo, members: [GroupMember]) {
        self.groupInfo = groupInfo
        self.members = members
    }
}

/// `groupMembers`.
public struct GroupMembers: Sendable, Hashable, Codable {
    public var user: User
    public var group: Group
    public init(user: User, group: Group) {
        self.user = user
        self.group = group
    }
}

/// `groupsList`.
public struct GroupsList: Sendable, Hashable, Codable {
    public var user: User
    public var groups: [GroupInfo]
    public init(user: User, groups: [GroupInfo]) {
        self.user = user
        self.groups = groups
    }
}

/// `membersRoleUser`.
public struct MembersRoleUser: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var members: [GroupMember]
    public var toRole: GroupMemberRole
    public var msgSigned: Bool
    public init(user: User, groupInfo: GroupInfo, members: [GroupMember], toRole: GroupMemberRole, msgSigned: Bool = false) {
        self.user = user
        self.groupInfo = groupInfo
        self.members = members
        self.toRole = toRole
        self.msgSigned = msgSigned
    }
}

/// `membersBlockedForAllUser`.
public struct MembersBlockedForAllUser: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var members: [GroupMember]
    public var blocked: Bool
    public var msgSigned: Bool
    public init(user: User, groupInfo: GroupInfo, members: [GroupMember], blocked: Bool, msgSigned: Bool = false) {
        self.user = user
        self.groupInfo = groupInfo
        self.members = members
        self.blocked = blocked
        self.msgSigned = msgSigned
    }
}

/// `userDeletedMembers`.
public struct UserDeletedMembers: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var members: [GroupMember]
    public var withMessages: Bool
    public var msgSigned: Bool
    public init(user: User, groupInfo: GroupInfo, members: [GroupMember], withMessages: Bool, msgSigned: Bool = false) {
        self.user = user
        self.groupInfo = groupInfo
        self.members = members
        self.withMessages = withMessages
        self.msgSigned = msgSigned
    }
}

/// `groupDeletedUser`.
public struct GroupDeletedUser: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var msgSigned: Bool
    public init(user: User, groupInfo: GroupInfo, msgSigned: Bool = false) {
        self.user = user
        self.groupInfo = groupInfo
        self.msgSigned = msgSigned
    }
}

/// `groupUpdated` (a response to `/_group_profile`, and an event when an owner changes it); `member_`
/// is the owner who did, absent for the user's own change.
public struct GroupUpdated: Sendable, Hashable, Codable {
    public var user: User
    public var fromGroup: GroupInfo
    public var toGroup: GroupInfo
    public var member_: GroupMember?
    public var msgSigned: Bool?
    public init(user: User, fromGroup: GroupInfo, toGroup: GroupInfo, member_: GroupMember? = nil, msgSigned: Bool? = nil) {
        self.user = user
        self.fromGroup = fromGroup
        self.toGroup = toGroup
        self.member_ = member_
        self.msgSigned = msgSigned
    }
}

/// `receivedGroupInvitation`.
public struct ReceivedGroupInvitation: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var contact: Contact
    public var fromMemberRole: GroupMemberRole
    public var memberRole: GroupMemberRole
    public init(user: User, groupInfo: GroupInfo, contact: Contact, fromMemberRole: GroupMemberRole, memberRole: GroupMemberRole) {
        self.user = user
        self.groupInfo = groupInfo
        self.contact = contact
        self.fromMemberRole = fromMemberRole
        self.memberRole = memberRole
    }
}

/// `userJoinedGroup`.
public struct UserJoinedGroup: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var hostMember: GroupMember
    public init(user: User, groupInfo: GroupInfo, hostMember: GroupMember) {
        self.user = user
        self.groupInfo = groupInfo
        self.hostMember = hostMember
    }
}

/// `joinedGroupMemberConnecting`.
public struct JoinedGroupMemberConnecting: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var hostMember: GroupMember
    public var member: GroupMember
    public init(user: User, groupInfo: GroupInfo, hostMember: GroupMember, member: GroupMember) {
        self.user = user
        self.groupInfo = groupInfo
        self.hostMember = hostMember
        self.member = member
    }
}

/// `memberRole`.
public struct MemberRoleChanged: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var byMember: GroupMember
    public var member: GroupMember
    public var fromRole: GroupMemberRole
    public var toRole: GroupMemberRole
    public init(user: User, groupInfo: GroupInfo, byMember: GroupMember, member: GroupMember, fromRole: GroupMemberRole, toRole: GroupMemberRole) {
        self.user = user
        self.groupInfo = groupInfo
        self.byMember = byMember
        self.member = member
        self.fromRole = fromRole
        self.toRole = toRole
    }
}

/// `memberBlockedForAll`.
public struct MemberBlockedForAll: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var byMember: GroupMember
    public var member: GroupMember
    public var blocked: Bool
    public init(user: User, groupInfo: GroupInfo, byMember: GroupMember, member: GroupMember, blocked: Bool) {
        self.user = user
        self.groupInfo = groupInfo
        self.byMember = byMember
        self.member = member
        self.blocked = blocked
    }
}

/// `deletedMember`.
public struct DeletedMember: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var byMember: GroupMember
    public var deletedMember: GroupMember
    public var withMessages: Bool
    public init(user: User, groupInfo: GroupInfo, byMember: GroupMember, deletedMember: GroupMember, withMessages: Bool) {
        self.user = user
        self.groupInfo = groupInfo
        self.byMember = byMember
        self.deletedMember = deletedMember
        self.withMessages = withMessages
    }
}

/// `deletedMemberUser`.
public struct DeletedMemberUser: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var member: GroupMember
    public var withMessages: Bool
    public init(user: User, groupInfo: GroupInfo, member: GroupMember, withMessages: Bool) {
        self.user = user
        self.groupInfo = groupInfo
        self.member = member
        self.withMessages = withMessages
    }
}

/// `memberAcceptedByOther`.
public struct MemberAcceptedByOther: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var acceptingMember: GroupMember
    public var member: GroupMember
    public init(user: User, groupInfo: GroupInfo, acceptingMember: GroupMember, member: GroupMember) {
        self.user = user
        self.groupInfo = groupInfo
        self.acceptingMember = acceptingMember
        self.member = member
    }
}

/// `user`, `groupInfo` and `groupLink` (`groupLinkCreated`, `groupLink`).
public struct UserGroupLink: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var groupLink: GroupLink
    public init(user: User, groupInfo: GroupInfo, groupLink: GroupLink) {
        self.user = user
        self.groupInfo = groupInfo
        self.groupLink = groupLink
    }
}

/// The group responses (``ChatResponse/group(_:)``).
public enum GroupResponse: Sendable, Hashable, Codable {
    case groupCreated(UserGroup)
    case sentGroupInvitation(SentGroupInvitation)
    case userAcceptedGroupSent(UserAcceptedGroupSent)
    case groupMembers(GroupMembers)
    case groupsList(GroupsList)
    case membersRoleUser(MembersRoleUser)
    case membersBlockedForAllUser(MembersBlockedForAllUser)
    case userDeletedMembers(UserDeletedMembers)
    case leftMemberUser(UserGroup)
    case groupDeletedUser(GroupDeletedUser)
    case groupUpdated(GroupUpdated)
    case groupLinkCreated(UserGroupLink)
    case groupLink(UserGroupLink)
    case groupLinkDeleted(UserGroup)
    case memberAccepted(UserGroupMember)
    case newMemberContact(MemberContact)
    case newMemberContactSentInv(MemberContact)
    /// `memberContactAccepted {user, contact}`: the user joins a member's invitation (`/_accept member contact`).
    case memberContactAccepted(UserContact)

    public static let types: [ChatMessageType] = [
        .groupCreated, .sentGroupInvitation, .userAcceptedGroupSent, .groupMembers, .groupsList, .membersRoleUser, .membersBlockedForAllUser,
        .userDeletedMembers, .leftMemberUser, .groupDeletedUser, .groupUpdated, .groupLinkCreated, .groupLink, .groupLinkDeleted, .memberAccepted,
        .newMemberContact, .newMemberContactSentInv, .memberContactAccepted,
    ]

    public var type: ChatMessageType {
        switch self {
        case .groupCreated: .groupCreated
        case .sentGroupInvitation: .sentGroupInvitation
        case .userAcceptedGroupSent: .userAcceptedGroupSent
        case .groupMembers: .groupMembers
        case .groupsList: .groupsList
        case .membersRoleUser: .membersRoleUser
        case .membersBlockedForAllUser: .membersBlockedForAllUser
        case .userDeletedMembers: .userDeletedMembers
        case .leftMemberUser: .leftMemberUser
        case .groupDeletedUser: .groupDeletedUser
        case .groupUpdated: .groupUpdated
        case .groupLinkCreated: .groupLinkCreated
        case .groupLink: .groupLink
        case .groupLinkDeleted: .groupLinkDeleted
        case .memberAccepted: .memberAccepted
        case .newMemberContact: .newMemberContact
        case .newMemberContactSentInv: .newMemberContactSentInv
        case .memberContactAccepted: .memberContactAccepted
        }
    }

    /// Reads the payload of the message whose `type` is `type` (the caller read the tag).
    init(type: ChatMessageType, from decoder: any Decoder) throws {
        switch type {
        case .groupLinkCreated: self = .groupLinkCreated(try UserGroupLink(from: decoder))
        case .groupLink: self = .groupLink(try UserGroupLink(from: decoder))
        case .groupLinkDeleted: self = .groupLinkDeleted(try UserGroup(from: decoder))
        case .memberAccepted: self = .memberAccepted(try UserGroupMember(from: decoder))
        case .newMemberContact: self = .newMemberContact(try MemberContact(from: decoder))
        case .newMemberContactSentInv: self = .newMemberContactSentInv(try MemberContact(from: decoder))
        case .memberContactAccepted: self = .memberContactAccepted(try UserContact(from: decoder))
        case .groupCreated: self = .groupCreated(try UserGroup(from: decoder))
        case .sentGroupInvitation: self = .sentGroupInvitation(try SentGroupInvitation(from: decoder))
        case .userAcceptedGroupSent: self = .userAcceptedGroupSent(try UserAcceptedGroupSent(from: decoder))
        case .groupMembers: self = .groupMembers(try GroupMembers(from: decoder))
        case .groupsList: self = .groupsList(try GroupsList(from: decoder))
        case .membersRoleUser: self = .membersRoleUser(try MembersRoleUser(from: decoder))
        case .membersBlockedForAllUser: self = .membersBlockedForAllUser(try MembersBlockedForAllUser(from: decoder))
        case .userDeletedMembers: self = .userDeletedMembers(try UserDeletedMembers(from: decoder))
        case .leftMemberUser: self = .leftMemberUser(try UserGroup(from: decoder))
        case .groupDeletedUser: self = .groupDeletedUser(try GroupDeletedUser(from: decoder))
        case .groupUpdated: self = .groupUpdated(try GroupUpdated(from: decoder))
        default: throw ModelDecodingError(.unknownTag, type: "GroupResponse", value: type.rawValue, path: decoder.codingPath)
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        try self.init(type: try c.messageType(in: "GroupResponse"), from: decoder)
    }

    /// Writes the payload (the caller wrote the tag).
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case let .groupCreated(p), let .leftMemberUser(p), let .groupLinkDeleted(p): try p.encode(to: encoder)
        case let .groupLinkCreated(p), let .groupLink(p): try p.encode(to: encoder)
        case let .memberAccepted(p): try p.encode(to: encoder)
        case let .newMemberContact(p), let .newMemberContactSentInv(p): try p.encode(to: encoder)
        case let .memberContactAccepted(p): try p.encode(to: encoder)
        case let .sentGroupInvitation(p): try p.encode(to: encoder)
        case let .userAcceptedGroupSent(p): try p.encode(to: encoder)
        case let .groupMembers(p): try p.encode(to: encoder)
        case let .groupsList(p): try p.encode(to: encoder)
        case let .membersRoleUser(p): try p.encode(to: encoder)
        case let .membersBlockedForAllUser(p): try p.encode(to: encoder)
        case let .userDeletedMembers(p): try p.encode(to: encoder)
        case let .groupDeletedUser(p): try p.encode(to: encoder)
        case let .groupUpdated(p): try p.encode(to: encoder)
        }
    }
}

/// The group events (``ChatEvent/group(_:)``).
public enum GroupChatEvent: Sendable, Hashable, Codable {
    case receivedGroupInvitation(ReceivedGroupInvitation)
    case userJoinedGroup(UserJoinedGroup)
    case joinedGroupMember(UserGroupMember)
    case joinedGroupMemberConnecting(JoinedGroupMemberConnecting)
    case connectedToGroupMember(UserGroupMember)
    case memberRole(MemberRoleChanged)
    case memberBlockedForAll(MemberBlockedForAll)
    case deletedMember(DeletedMember)
    case deletedMemberUser(DeletedMemberUser)
    case leftMember(UserGroupMember)
    case groupDeleted(UserGroupMember)
    case groupUpdated(GroupUpdated)
    case memberAcceptedByOther(MemberAcceptedByOther)
    /// `groupLinkConnecting {groupInfo, hostMember}`: the same fields as `userJoinedGroup`.
    case groupLinkConnecting(UserJoinedGroup)
    /// A member invited the user to a direct chat (`x.grp.direct.inv`); `contact` is made from it.
    case newMemberContactReceivedInv(MemberContact)
    case groupMemberUpdated(GroupMemberUpdated)

    public static let types: [ChatMessageType] = [
        .receivedGroupInvitation, .userJoinedGroup, .joinedGroupMember, .joinedGroupMemberConnecting, .connectedToGroupMember, .memberRole,
        .memberBlockedForAll, .deletedMember, .deletedMemberUser, .leftMember, .groupDeleted, .groupUpdated, .memberAcceptedByOther,
        .groupLinkConnecting, .newMemberContactReceivedInv, .groupMemberUpdated,
    ]

    public var type: ChatMessageType {
        switch self {
        case .receivedGroupInvitation: .receivedGroupInvitation
        case .userJoinedGroup: .userJoinedGroup
        case .joinedGroupMember: .joinedGroupMember
        case .joinedGroupMemberConnecting: .joinedGroupMemberConnecting
        case .connectedToGroupMember: .connectedToGroupMember
        case .memberRole: .memberRole
        case .memberBlockedForAll: .memberBlockedForAll
        case .deletedMember: .deletedMember
        case .deletedMemberUser: .deletedMemberUser
        case .leftMember: .leftMember
        case .groupDeleted: .groupDeleted
        case .groupUpdated: .groupUpdated
        case .memberAcceptedByOther: .memberAcceptedByOther
        case .groupLinkConnecting: .groupLinkConnecting
        case .newMemberContactReceivedInv: .newMemberContactReceivedInv
        case .groupMemberUpdated: .groupMemberUpdated
        }
    }

    init(type: ChatMessageType, from decoder: any Decoder) throws {
        switch type {
        case .receivedGroupInvitation: self = .receivedGroupInvitation(try ReceivedGroupInvitation(from: decoder))
        case .userJoinedGroup: self = .userJoinedGroup(try UserJoinedGroup(from: decoder))
        case .joinedGroupMember: self = .joinedGroupMember(try UserGroupMember(from: decoder))
        case .joinedGroupMemberConnecting: self = .joinedGroupMemberConnecting(try JoinedGroupMemberConnecting(from: decoder))
        case .connectedToGroupMember: self = .connectedToGroupMember(try UserGroupMember(from: decoder))
        case .memberRole: self = .memberRole(try MemberRoleChanged(from: decoder))
        case .memberBlockedForAll: self = .memberBlockedForAll(try MemberBlockedForAll(from: decoder))
        case .deletedMember: self = .deletedMember(try DeletedMember(from: decoder))
        case .deletedMemberUser: self = .deletedMemberUser(try DeletedMemberUser(from: decoder))
        case .leftMember: self = .leftMember(try UserGroupMember(from: decoder))
        case .groupDeleted: self = .groupDeleted(try UserGroupMember(from: decoder))
        case .groupUpdated: self = .groupUpdated(try GroupUpdated(from: decoder))
        case .memberAcceptedByOther: self = .memberAcceptedByOther(try MemberAcceptedByOther(from: decoder))
        case .groupLinkConnecting: self = .groupLinkConnecting(try UserJoinedGroup(from: decoder))
        case .newMemberContactReceivedInv: self = .newMemberContactReceivedInv(try MemberContact(from: decoder))
        case .groupMemberUpdated: self = .groupMemberUpdated(try GroupMemberUpdated(from: decoder))
        default: throw ModelDecodingError(.unknownTag, type: "GroupChatEvent", value: type.rawValue, path: decoder.codingPath)
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        try self.init(type: try c.messageType(in: "GroupChatEvent"), from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case let .receivedGroupInvitation(p): try p.encode(to: encoder)
        case let .userJoinedGroup(p), let .groupLinkConnecting(p): try p.encode(to: encoder)
        case let .joinedGroupMember(p), let .connectedToGroupMember(p), let .leftMember(p), let .groupDeleted(p): try p.encode(to: encoder)
        case let .joinedGroupMemberConnecting(p): try p.encode(to: encoder)
        case let .memberRole(p): try p.encode(to: encoder)
        case let .memberBlockedForAll(p): try p.encode(to: encoder)
        case let .deletedMember(p): try p.encode(to: encoder)
        case let .deletedMemberUser(p): try p.encode(to: encoder)
        case let .groupUpdated(p): try p.encode(to: encoder)
        case let .memberAcceptedByOther(p): try p.encode(to: encoder)
        case let .newMemberContactReceivedInv(p): try p.encode(to: encoder)
        case let .groupMemberUpdated(p): try p.encode(to: encoder)
        }
    }
}
