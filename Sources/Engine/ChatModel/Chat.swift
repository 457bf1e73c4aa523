import SwiftplexBase
/// Which chat something belongs to. `group` and `local` (note folders) join with groups.
public enum ChatInfo: Sendable, Hashable, Codable {
    case direct(contact: Contact)
    case contactRequest(contactRequest: UserContactRequest)
    case contactConnection(contactConnection: PendingContactConnection)
    /// A group (`groupChatScope`, member support chats, is not produced yet).
    case group(groupInfo: GroupInfo)

    public static let allTags = ["direct", "contactRequest", "contactConnection", "group"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "direct": self = .direct(contact: try c.decode(Contact.self, forKey: "contact"))
        case "contactRequest": self = .contactRequest(contactRequest: try c.decode(UserContactRequest.self, forKey: "contactRequest"))
        case "contactConnection":
            self = .contactConnection(contactConnection: try c.decode(PendingContactConnection.self, forKey: "contactConnection"))
        case "group": self = .group(groupInfo: try c.decode(GroupInfo.self, forKey: "groupInfo"))
        case let t: throw c.unknown(t, in: "ChatInfo")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .direct(contact): try c.tag("direct"); try c.encode(contact, forKey: "contact")
        case let .contactRequest(r): try c.tag("contactRequest"); try c.encode(r, forKey: "contactRequest")
        case let .contactConnection(p): try c.tag("contactConnection"); try c.encode(p, forKey: "contactConnection")
        case let .group(g): try c.tag("group"); try c.encode(g, forKey: "groupInfo")
        }
    }
}

/// An item with the chat it is in.
public struct AChatItem: Sendable, Hashable, Codable {
    public var chatInfo: ChatInfo
    public var chatItem: ChatItem
    public init(chatInfo: ChatInfo, chatItem: ChatItem) {
        self.chatInfo = chatInfo
        self.chatItem = chatItem
    }
}

/// A chat with some of its items (the last one in `/_get chats`, a page in `/_get chat`).
public struct AChat: Sendable, Hashable, Codable {
    public var chatInfo: ChatInfo
    public var chatItems: [ChatItem]
    public var chatStats: ChatStats
    public init(chatInfo: ChatInfo, chatItems: [ChatItem], chatStats: ChatStats) {
        self.chatInfo = chatInfo
        self.chatItems = chatItems
        self.chatStats = chatStats
    }
}

public struct ChatStats: Sendable, Hashable, Codable {
    public var unreadCount: Int
    public var unreadMentions: Int
    public var reportsCount: Int
    public var minUnreadItemId: Int64
    public var unreadChat: Bool
    public init(unreadCount: Int = 0, unreadMentions: Int = 0, reportsCount: Int = 0, minUnreadItemId: Int64 = 0, unreadChat: Bool = false) {
        self.unreadCount = unreadCount
        self.unreadMentions = unreadMentions
        self.reportsCount = reportsCount
        self.minUnreadItemId = minUnreadItemId
        self.unreadChat = unreadChat
    }
}

/// What connecting through a link would do (`/_connect plan`). `groupLink` joins with groups.
public enum ConnectionPlan: Sendable, Hashable, Codable {
    case invitationLink(InvitationLinkPlan)
    case contactAddress(ContactAddressPlan)
    case groupLink(GroupLinkPlan)
    case error(ChatError)

    public static let allTags = ["invitationLink", "contactAddress", "groupLink", "error"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "invitationLink": self = .invitationLink(try c.decode(InvitationLinkPlan.self, forKey: "invitationLinkPlan"))
        case "contactAddress": self = .contactAddress(try c.decode(ContactAddressPlan.self, forKey: "contactAddressPlan"))
        case "groupLink": self = .groupLink(try c.decode(GroupLinkPlan.self, forKey: "groupLinkPlan"))
        case "error": self = .error(try c.decode(ChatError.self, forKey: "chatError"))
        case let t: throw c.unknown(t, in: "ConnectionPlan")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .invitationLink(p): try c.tag("invitationLink"); try c.encode(p, forKey: "invitationLinkPlan")
        case let .contactAddress(p): try c.tag("contactAddress"); try c.encode(p, forKey: "contactAddressPlan")
        case let .groupLink(p): try c.tag("groupLink"); try c.encode(p, forKey: "groupLinkPlan")
        case let .error(e): try c.tag("error"); try c.encode(e, forKey: "chatError")
        }
    }
}

public enum InvitationLinkPlan: Sendable, Hashable, Codable {
    case ok
    case ownLink
    case connecting(contact: Contact?)
    case known(contact: Contact)

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "ok": self = .ok
        case "ownLink": self = .ownLink
        case "connecting": self = .connecting(contact: try c.decodeIfPresent(Contact.self, forKey: "contact_"))
        case "known": self = .known(contact: try c.decode(Contact.self, forKey: "contact"))
        case let t: throw c.unknown(t, in: "InvitationLinkPlan")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case .ok: try c.tag("ok")
        case .ownLink: try c.tag("ownLink")
        case let .connecting(contact): try c.tag("connecting"); try c.encodeIfPresent(contact, forKey: "contact_")
        case let .known(contact): try c.tag("known"); try c.encode(contact, forKey: "contact")
        }
    }
}

public enum ContactAddressPlan: Sendable, Hashable, Codable {
    case ok
    case ownLink
    case connectingConfirmReconnect
    case connectingProhibit(contact: Contact)
    case known(contact: Contact)
    case contactViaAddress(contact: Contact)

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "ok": self = .ok
        case "ownLink": self = .ownLink
        case "connectingConfirmReconnect": self = .connectingConfirmReconnect
        case "connectingProhibit": self = .connectingProhibit(contact: try c.decode(Contact.self, forKey: "contact"))
        case "known": self = .known(contact: try c.decode(Contact.self, forKey: "contact"))
        case "contactViaAddress": self = .contactViaAddress(contact: try c.decode(Contact.self, forKey: "contact"))
        case let t: throw c.unknown(t, in: "ContactAddressPlan")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case .ok: try c.tag("ok")
        case .ownLink: try c.tag("ownLink")
        case .connectingConfirmReconnect: try c.tag("connectingConfirmReconnect")
        case let .connectingProhibit(contact): try c.tag("connectingProhibit"); try c.encode(contact, forKey: "contact")
        case let .known(contact): try c.tag("known"); try c.encode(contact, forKey: "contact")
        case let .contactViaAddress(contact): try c.tag("contactViaAddress"); try c.encode(contact, forKey: "contact")
        }
    }
}

/// What joining a group link would do (`ConnectionPlan.groupLink`; the 7.0.2 `GroupLinkPlan`).
/// A group link's `ok` carries no link data (Swiftplex group links carry only the full link); a
/// channel link's does (`okChannel`, written as `ok` with `groupSLinkInfo_` and `groupSLinkData_`).
/// `noRelays` and `updateRequired` are not produced.
public enum GroupLinkPlan: Sendable, Hashable, Codable {
    case ok
    case okChannel(groupSLinkInfo: GroupShortLinkInfo, groupSLinkData: JSONValue?)
    case ownLink(groupInfo: GroupInfo)
    case connectingConfirmReconnect
    case connectingProhibit(groupInfo: GroupInfo?)
    case known(groupInfo: GroupInfo)

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "ok":
            if let info = try c.decodeIfPresent(GroupShortLinkInfo.self, forKey: "groupSLinkInfo_") {
                self = .okChannel(groupSLinkInfo: info, groupSLinkData: try c.decodeIfPresent(JSONValue.self, forKey: "groupSLinkData_"))
            } else {
                self = .ok
            }
        case "ownLink": self = .ownLink(groupInfo: try c.decode(GroupInfo.self, forKey: "groupInfo"))
        case "connectingConfirmReconnect": self = .connectingConfirmReconnect
        case "connectingProhibit": self = .connectingProhibit(groupInfo: try c.decodeIfPresent(GroupInfo.self, forKey: "groupInfo_"))
        case "known": self = .known(groupInfo: try c.decode(GroupInfo.self, forKey: "groupInfo"))
        case let t: throw c.unknown(t, in: "GroupLinkPlan")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case .ok: try c.tag("ok")
        case let .okChannel(info, data):
            try c.tag("ok")
            try c.encode(info, forKey: "groupSLinkInfo_")
            try c.encodeIfPresent(data, forKey: "groupSLinkData_")
        case let .ownLink(g): try c.tag("ownLink"); try c.encode(g, forKey: "groupInfo")
        case .connectingConfirmReconnect: try c.tag("connectingConfirmReconnect")
        case let .connectingProhibit(g): try c.tag("connectingProhibit"); try c.encodeIfPresent(g, forKey: "groupInfo_")
        case let .known(g):
            try c.tag("known")
            try c.encode(g, forKey: "groupInfo")
            try c.encode(false, forKey: "groupUpdated")
            try c.encode([String](), forKey: "linkOwners")
        }
    }
}

/// What a channel link's data says about joining it (`GroupShortLinkInfo`): `direct` false, the
/// relays' links, the channel's `publicGroupId`.
public struct GroupShortLinkInfo: Sendable, Hashable, Codable {
    public var direct: Bool
    public var groupRelays: [String]
    public var publicGroupId: String?
    public init(direct: Bool, groupRelays: [String], publicGroupId: String? = nil) {
        self.direct = direct
        self.groupRelays = groupRelays
        self.publicGroupId = publicGroupId
    }
}
