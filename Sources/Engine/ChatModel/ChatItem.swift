import SwiftplexBase

/// One item of a chat: a message sent or received (or what is left of a deleted one).
/// `meta.itemId` is the id used for quoting, editing, deleting and reacting.
public struct ChatItem: Sendable, Hashable, Codable {
    public var chatDir: CIDirection
    public var meta: CIMeta
    public var content: CIContent
    /// Mentioned members by display name (group chats; `{}` in direct chats).
    public var mentions: [String: CIMention]
    public var quotedItem: CIQuote?
    public var reactions: [CIReactionCount]

    public init(chatDir: CIDirection, meta: CIMeta, content: CIContent, mentions: [String: CIMention] = [:], quotedItem: CIQuote? = nil,
                reactions: [CIReactionCount] = []) {
        self.chatDir = chatDir
        self.meta = meta
        self.content = content
        self.mentions = mentions
        self.quotedItem = quotedItem
        self.reactions = reactions
    }
}

/// Who sent an item; `groupRcv` carries the member who sent it.
public enum CIDirection: Sendable, Hashable, Codable {
    case directSnd, directRcv, groupSnd, channelRcv, localSnd, localRcv
    case groupRcv(groupMember: GroupMember)

    public static let allTags = ["directSnd", "directRcv", "groupSnd", "groupRcv", "channelRcv", "localSnd", "localRcv"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "directSnd": self = .directSnd
        case "directRcv": self = .directRcv
        case "groupSnd": self = .groupSnd
        case "groupRcv": self = .groupRcv(groupMember: try c.decode(GroupMember.self, forKey: "groupMember"))
        case "channelRcv": self = .channelRcv
        case "localSnd": self = .localSnd
        case "localRcv": self = .localRcv
        case let t: throw c.unknown(t, in: "CIDirection")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case .directSnd: try c.tag("directSnd")
        case .directRcv: try c.tag("directRcv")
        case .groupSnd: try c.tag("groupSnd")
        case let .groupRcv(m): try c.tag("groupRcv"); try c.encode(m, forKey: "groupMember")
        case .channelRcv: try c.tag("channelRcv")
        case .localSnd: try c.tag("localSnd")
        case .localRcv: try c.tag("localRcv")
        }
    }
}

public struct CIMeta: Sendable, Hashable, Codable {
    public var itemId: Int64
    public var itemTs: ChatTimestamp
    public var itemText: String
    public var itemStatus: CIStatus
    public var sentViaProxy: Bool?
    public var itemSharedMsgId: String?
    /// Why the item shows deleted (group items: by its author, by a moderator, a blocked member's).
    public var itemDeleted: CIDeleted?
    public var itemEdited: Bool
    public var itemLive: Bool?
    public var userMention: Bool
    public var hasLink: Bool
    public var deletable: Bool
    public var editable: Bool
    public var forwardedByMember: Int64?
    public var showGroupAsSender: Bool
    public var createdAt: ChatTimestamp
    public var updatedAt: ChatTimestamp
    /// A signed message's check (SimpleX `MsgVerified`); absent for messages that are not
    /// checked (channel posts are).
    public var msgVerified: MsgVerified?

    public init(itemId: Int64, itemTs: ChatTimestamp, itemText: String, itemStatus: CIStatus, sentViaProxy: Bool? = nil, itemSharedMsgId: String? = nil,
                itemDeleted: CIDeleted? = nil, itemEdited: Bool = false, itemLive: Bool? = nil, userMention: Bool = false, hasLink: Bool = false,
                deletable: Bool, editable: Bool, forwardedByMember: Int64? = nil, showGroupAsSender: Bool = false, createdAt: ChatTimestamp,
                updatedAt: ChatTimestamp, msgVerified: MsgVerified? = nil) {
        self.msgVerified = msgVerified
        self.itemId = itemId
        self.itemTs = itemTs
        self.itemText = itemText
        self.itemStatus = itemStatus
        self.sentViaProxy = sentViaProxy
        self.itemSharedMsgId = itemSharedMsgId
        self.itemDeleted = itemDeleted
        self.itemEdited = itemEdited
        self.itemLive = itemLive
        self.userMention = userMention
        self.hasLink = hasLink
        self.deletable = deletable
        self.editable = editable
        self.forwardedByMember = forwardedByMember
        self.showGroupAsSender = showGroupAsSender
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// Why an item shows deleted (`meta.itemDeleted`): by its author (`deleted`, with the chat's
/// type), hidden by the user (`blocked`), a member blocked by an admin (`blockedByAdmin`), or
/// deleted by a moderator (`moderated`, with the moderator).
public enum CIDeleted: Sendable, Hashable, Codable {
    case deleted(deletedTs: ChatTimestamp?, chatType: String)
    case blocked(deletedTs: ChatTimestamp?)
    case blockedByAdmin(deletedTs: ChatTimestamp?)
    case moderated(deletedTs: ChatTimestamp?, byGroupMember: GroupMember)

    public static let allTags = ["deleted", "blocked", "blockedByAdmin", "moderated"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        let ts = try c.decodeIfPresent(ChatTimestamp.self, forKey: "deletedTs")
        switch try c.tag() {
        case "deleted": self = .deleted(deletedTs: ts, chatType: try c.decode(String.self, forKey: "chatType"))
        case "blocked": self = .blocked(deletedTs: ts)
        case "blockedByAdmin": self = .blockedByAdmin(deletedTs: ts)
        case "moderated": self = .moderated(deletedTs: ts, byGroupMember: try c.decode(GroupMember.self, forKey: "byGroupMember"))
        case let t: throw c.unknown(t, in: "CIDeleted")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .deleted(ts, chatType):
            try c.tag("deleted")
            try c.encodeIfPresent(ts, forKey: "deletedTs")
            try c.encode(chatType, forKey: "chatType")
        case let .blocked(ts):
            try c.tag("blocked")
            try c.encodeIfPresent(ts, forKey: "deletedTs")
        case let .blockedByAdmin(ts):
            try c.tag("blockedByAdmin")
            try c.encodeIfPresent(ts, forKey: "deletedTs")
        case let .moderated(ts, member):
            try c.tag("moderated")
            try c.encodeIfPresent(ts, forKey: "deletedTs")
            try c.encode(member, forKey: "byGroupMember")
        }
    }
}

/// The signature status of a signed message (SimpleX `MsgSigStatus`).
public enum MsgSigStatus: String, StringEnum { case verified, signedNoKey }

/// A message's signature check (SimpleX `MsgVerified`, `meta.msgVerified`): `{"type": "signed",
/// "sigStatus"}` or `{"type": "sigMissing"}`.
public enum MsgVerified: Sendable, Hashable, Codable {
    case signed(sigStatus: MsgSigStatus)
    case sigMissing

    public static let allTags = ["signed", "sigMissing"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "signed": self = .signed(sigStatus: try c.decode(MsgSigStatus.self, forKey: "sigStatus"))
        case "sigMissing": self = .sigMissing
        case let t: throw c.unknown(t, in: "MsgVerified")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .signed(status):
            try c.tag("signed")
            try c.encode(status, forKey: "sigStatus")
        case .sigMissing:
            try c.tag("sigMissing")
        }
    }
}

/// The delivery status of an item.
public enum CIStatus: Sendable, Hashable, Codable {
    case sndNew
    case sndSent(sndProgress: SndCIStatusProgress)
    case sndRcvd(msgRcptStatus: MsgReceiptStatus, sndProgress: SndCIStatusProgress)
    case sndErrorAuth
    case rcvNew
    case rcvRead
    case invalid(text: String)

    public static let allTags = ["sndNew", "sndSent", "sndRcvd", "sndErrorAuth", "rcvNew", "rcvRead", "invalid"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "sndNew": self = .sndNew
        case "sndSent": self = .sndSent(sndProgress: try c.decode(SndCIStatusProgress.self, forKey: "sndProgress"))
        case "sndRcvd":
            self = .sndRcvd(msgRcptStatus: try c.decode(MsgReceiptStatus.self, forKey: "msgRcptStatus"),
                            sndProgress: try c.decode(SndCIStatusProgress.self, forKey: "sndProgress"))
        case "sndErrorAuth": self = .sndErrorAuth
        case "rcvNew": self = .rcvNew
        case "rcvRead": self = .rcvRead
        case "invalid": self = .invalid(text: try c.decode(String.self, forKey: "text"))
        case let t: throw c.unknown(t, in: "CIStatus")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case .sndNew: try c.tag("sndNew")
        case let .sndSent(progress):
            try c.tag("sndSent")
            try c.encode(progress, forKey: "sndProgress")
        case let .sndRcvd(status, progress):
            try c.tag("sndRcvd")
            try c.encode(status, forKey: "msgRcptStatus")
            try c.encode(progress, forKey: "sndProgress")
        case .sndErrorAuth: try c.tag("sndErrorAuth")
        case .rcvNew: try c.tag("rcvNew")
        case .rcvRead: try c.tag("rcvRead")
        case let .invalid(text):
            try c.tag("invalid")
            try c.encode(text, forKey: "text")
        }
    }
}

public enum SndCIStatusProgress: String, StringEnum { case partial, complete }
public enum MsgReceiptStatus: String, StringEnum { case ok, badMsgHash }

/// What an item holds. Only `sndMsgContent` and `rcvMsgContent` carry messages.
public enum CIContent: Sendable, Hashable, Codable {
    case sndMsgContent(MsgContent)
    case rcvMsgContent(MsgContent)
    case sndDeleted(deleteMode: CIDeleteMode)
    case rcvDeleted(deleteMode: CIDeleteMode)
    case sndModerated
    case rcvModerated
    case rcvBlocked
    case chatBanner

    public static let allTags = ["sndMsgContent", "rcvMsgContent", "sndDeleted", "rcvDeleted", "sndModerated", "rcvModerated", "rcvBlocked", "chatBanner"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "sndMsgContent": self = .sndMsgContent(try c.decode(MsgContent.self, forKey: "msgContent"))
        case "rcvMsgContent": self = .rcvMsgContent(try c.decode(MsgContent.self, forKey: "msgContent"))
        case "sndDeleted": self = .sndDeleted(deleteMode: try c.decode(CIDeleteMode.self, forKey: "deleteMode"))
        case "rcvDeleted": self = .rcvDeleted(deleteMode: try c.decode(CIDeleteMode.self, forKey: "deleteMode"))
        case "sndModerated": self = .sndModerated
        case "rcvModerated": self = .rcvModerated
        case "rcvBlocked": self = .rcvBlocked
        case "chatBanner": self = .chatBanner
        case let t: throw c.unknown(t, in: "CIContent")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .sndMsgContent(m): try c.tag("sndMsgContent"); try c.encode(m, forKey: "msgContent")
        case let .rcvMsgContent(m): try c.tag("rcvMsgContent"); try c.encode(m, forKey: "msgContent")
        case let .sndDeleted(mode): try c.tag("sndDeleted"); try c.encode(mode, forKey: "deleteMode")
        case let .rcvDeleted(mode): try c.tag("rcvDeleted"); try c.encode(mode, forKey: "deleteMode")
        case .sndModerated: try c.tag("sndModerated")
        case .rcvModerated: try c.tag("rcvModerated")
        case .rcvBlocked: try c.tag("rcvBlocked")
        case .chatBanner: try c.tag("chatBanner")
        }
    }
}

public enum CIDeleteMode: String, StringEnum { case broadcast, `internal`, internalMark, history }

/// The item a message replies to, as the reply carries it.
public struct CIQuote: Sendable, Hashable, Codable {
    public var chatDir: CIDirection?
    /// The quoted item's id on this side, when this side has it.
    public var itemId: Int64?
    public var sharedMsgId: String?
    public var sentAt: ChatTimestamp
    public var content: MsgContent

    public init(chatDir: CIDirection?, itemId: Int64? = nil, sharedMsgId: String? = nil, sentAt: ChatTimestamp, content: MsgContent) {
        self.chatDir = chatDir
        self.itemId = itemId
        self.sharedMsgId = sharedMsgId
        self.sentAt = sentAt
        self.content = content
    }
}

public struct CIMention: Sendable, Hashable, Codable {
    public var memberId: String
    public var memberRef: CIMentionMember?
    public init(memberId: String, memberRef: CIMentionMember? = nil) {
        self.memberId = memberId
        self.memberRef = memberRef
    }
}

public struct CIMentionMember: Sendable, Hashable, Codable {
    public var groupMemberId: Int64
    public var displayName: String
    public var localAlias: String?
    public var memberRole: GroupMemberRole
    public init(groupMemberId: Int64, displayName: String, localAlias: String? = nil, memberRole: GroupMemberRole) {
        self.groupMemberId = groupMemberId
        self.displayName = displayName
        self.localAlias = localAlias
        self.memberRole = memberRole
    }
}

public enum GroupMemberRole: String, StringEnum { case relay, observer, author, member, moderator, admin, owner }

/// How many reacted with one reaction, and whether the user did.
public struct CIReactionCount: Sendable, Hashable, Codable {
    public var reaction: MsgReaction
    public var userReacted: Bool
    public var totalReacted: Int
    public init(reaction: MsgReaction, userReacted: Bool, totalReacted: Int) {
        self.reaction = reaction
        self.userReacted = userReacted
        self.totalReacted = totalReacted
    }
}

/// A reaction added or removed, with the item it is on.
public struct CIReaction: Sendable, Hashable, Codable {
    public var chatDir: CIDirection
    public var chatItem: ChatItem
    public var sentAt: ChatTimestamp
    public var reaction: MsgReaction
    public init(chatDir: CIDirection, chatItem: ChatItem, sentAt: ChatTimestamp, reaction: MsgReaction) {
        self.chatDir = chatDir
        self.chatItem = chatItem
        self.sentAt = sentAt
        self.reaction = reaction
    }
}

public struct ACIReaction: Sendable, Hashable, Codable {
    public var chatInfo: ChatInfo
    public var chatReaction: CIReaction
    public init(chatInfo: ChatInfo, chatReaction: CIReaction) {
        self.chatInfo = chatInfo
        self.chatReaction = chatReaction
    }
}

/// One item deleted: as it was and, when it was only marked deleted, as it is now.
public struct ChatItemDeletion: Sendable, Hashable, Codable {
    public var deletedChatItem: AChatItem
    public var toChatItem: AChatItem?
    public init(deletedChatItem: AChatItem, toChatItem: AChatItem? = nil) {
        self.deletedChatItem = deletedChatItem
        self.toChatItem = toChatItem
    }
}
