/// A failure as the API reports it: in `chatCmdError` responses and `chatError` events.
public struct ChatError: Sendable, Hashable, Codable, Error {
    public enum Kind: Sendable, Hashable {
        /// `{"type":"error","errorType":{…}}`
        case error(ChatErrorType)
        /// `{"type":"errorAgent","agentError":{…},"agentConnId":"…"}`
        case errorAgent(AgentErrorType, agentConnId: String)
        /// `{"type":"errorStore","storeError":{…}}`
        case errorStore(StoreError)
    }

    public var kind: Kind
    /// Swiftplex: the contact request an automatic accept failed for (in `chatError` events only).
    public var contactRequestId: Int64?

    public init(_ kind: Kind, contactRequestId: Int64? = nil) {
        self.kind = kind
        self.contactRequestId = contactRequestId
    }

    public static func error(_ type: ChatErrorType) -> ChatError { ChatError(.error(type)) }
    public static func store(_ error: StoreError) -> ChatError { ChatError(.errorStore(error)) }
    public static func agent(_ error: AgentErrorType, connection: String = "") -> ChatError { ChatError(.errorAgent(error, agentConnId: connection)) }

    public static let allTags = ["error", "errorAgent", "errorStore"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        let kind: Kind
        switch try c.tag() {
        case "error": kind = .error(try c.decode(ChatErrorType.self, forKey: "errorType"))
        case "errorAgent": kind = .errorAgent(try c.decode(AgentErrorType.self, forKey: "agentError"), agentConnId: try c.decode(String.self, forKey: "agentConnId"))
        case "errorStore": kind = .errorStore(try c.decode(StoreError.self, forKey: "storeError"))
        case let t: throw c.unknown(t, in: "ChatError")
        }
        self.init(kind, contactRequestId: try c.decodeIfPresent(Int64.self, forKey: "contactRequestId"))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch kind {
        case let .error(e): try c.tag("error"); try c.encode(e, forKey: "errorType")
        case let .errorAgent(e, conn):
            try c.tag("errorAgent")
            try c.encode(e, forKey: "agentError")
            try c.encode(conn, forKey: "agentConnId")
        case let .errorStore(e): try c.tag("errorStore"); try c.encode(e, forKey: "storeError")
        }
        try c.encodeIfPresent(contactRequestId, forKey: "contactRequestId")
    }
}

/// The chat engine's own errors (`errorType`). `userContactLinkExists` is Swiftplex's: SimpleX
/// reports an existing address as a store error.
public enum ChatErrorType: Sendable, Hashable, Codable {
    case noActiveUser
    case userUnknown
    case userExists(contactName: String)
    case cantDeleteActiveUser(userId: Int64)
    case cantDeleteLastUser(userId: Int64)
    case invalidDisplayName(displayName: String, validName: String)
    case chatNotStarted
    case chatNotStopped
    /// The databases were replaced or deleted (`/_db import`, `/_db delete`): every later command
    /// is refused until the store is opened again (`chat_close_store`, `chat_migrate_init`).
    case chatStoreChanged
    case invalidConnReq
    case unsupportedConnReq
    case userContactLinkExists
    case contactNotReady(contact: Contact)
    case contactNotActive(contact: Contact)
    case invalidChatItemUpdate
    case invalidChatItemDelete
    case commandError(message: String)
    case internalError(message: String)
    case exception(message: String)
    // Groups
    case groupUserRole(groupInfo: GroupInfo, requiredRole: GroupMemberRole)
    case groupNotJoined(groupInfo: GroupInfo)
    case groupDuplicateMember(contactName: String)
    case groupMemberNotActive
    case groupMemberUserRemoved
    case groupInternal(message: String)
    case groupMemberInitialRole(groupInfo: GroupInfo, initialRole: GroupMemberRole)
    // Channels
    /// A chat relay with this name or address is given twice (`/relays`).
    case chatRelayExists
    /// Swiftplex: a channel operation refused, with the channel layer's code (`relayAddress`: the
    /// link is a chat relay's address and cannot be used to connect; `notRelayAddress`: `/relays`
    /// was given a link that is not one; `invalidLink`, …) and its message.
    case channelError(code: String, message: String)

    public static let allTags = ["noActiveUser", "userUnknown", "userExists", "cantDeleteActiveUser", "cantDeleteLastUser", "invalidDisplayName",
                                 "chatNotStarted", "chatNotStopped", "chatStoreChanged", "invalidConnReq", "unsupportedConnReq", "userContactLinkExists",
                                 "contactNotReady", "contactNotActive", "invalidChatItemUpdate", "invalidChatItemDelete", "commandError",
                                 "internalError", "exception", "groupUserRole", "groupNotJoined", "groupDuplicateMember",
                                 "groupMemberNotActive", "groupMemberUserRemoved", "groupInternal", "groupMemberInitialRole", "chatRelayExists",
                                 "channelError"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "noActiveUser": self = .noActiveUser
        case "userUnknown": self = .userUnknown
        case "userExists": self = .userExists(contactName: try c.decode(String.self, forKey: "contactName"))
        case "cantDeleteActiveUser": self = .cantDeleteActiveUser(userId: try c.decode(Int64.self, forKey: "userId"))
        case "cantDeleteLastUser": self = .cantDeleteLastUser(userId: try c.decode(Int64.self, forKey: "userId"))
        case "invalidDisplayName":
            self = .invalidDisplayName(displayName: try c.decode(String.self, forKey: "displayName"), validName: try c.decode(String.self, forKey: "validName"))
        case "chatNotStarted": self = .chatNotStarted
        case "chatNotStopped": self = .chatNotStopped
        case "chatStoreChanged": self = .chatStoreChanged
        case "invalidConnReq": self = .invalidConnReq
        case "unsupportedConnReq": self = .unsupportedConnReq
        case "userContactLinkExists": self = .userContactLinkExists
        case "contactNotReady": self = .contactNotReady(contact: try c.decode(Contact.self, forKey: "contact"))
        case "contactNotActive": self = .contactNotActive(contact: try c.decode(Contact.self, forKey: "contact"))
        case "invalidChatItemUpdate": self = .invalidChatItemUpdate
        case "invalidChatItemDelete": self = .invalidChatItemDelete
        case "commandError": self = .commandError(message: try c.decode(String.self, forKey: "message"))
        case "internalError": self = .internalError(message: try c.decode(String.self, forKey: "message"))
        case "exception": self = .exception(message: try c.decode(String.self, forKey: "message"))
        case "groupUserRole":
            self = .groupUserRole(groupInfo: try c.decode(GroupInfo.self, forKey: "groupInfo"), requiredRole: try c.decode(GroupMemberRole.self, forKey: "requiredRole"))
        case "groupNotJoined": self = .groupNotJoined(groupInfo: try c.decode(GroupInfo.self, forKey: "groupInfo"))
        case "groupDuplicateMember": self = .groupDuplicateMember(contactName: try c.decode(String.self, forKey: "contactName"))
        case "groupMemberNotActive": self = .groupMemberNotActive
        case "groupMemberUserRemoved": self = .groupMemberUserRemoved
        case "groupMemberInitialRole":
            self = .groupMemberInitialRole(groupInfo: try c.decode(GroupInfo.self, forKey: "groupInfo"),
                                           initialRole: try c.decode(GroupMemberRole.self, forKey: "initialRole"))
        case "groupInternal": self = .groupInternal(message: try c.decode(String.self, forKey: "message"))
        case "chatRelayExists": self = .chatRelayExists
        case "channelError": self = .channelError(code: try c.decode(String.self, forKey: "code"), message: try c.decode(String.self, forKey: "message"))
        case let t: throw c.unknown(t, in: "ChatErrorType")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case .noActiveUser: try c.tag("noActiveUser")
        case .userUnknown: try c.tag("userUnknown")
        case let .userExists(name): try c.tag("userExists"); try c.encode(name, forKey: "contactName")
        case let .cantDeleteActiveUser(id): try c.tag("cantDeleteActiveUser"); try c.encode(id, forKey: "userId")
        case let .cantDeleteLastUser(id): try c.tag("cantDeleteLastUser"); try c.encode(id, forKey: "userId")
        case let .invalidDisplayName(name, valid):
            try c.tag("invalidDisplayName")
            try c.encode(name, forKey: "displayName")
            try c.encode(valid, forKey: "validName")
        case .chatNotStarted: try c.tag("chatNotStarted")
        case .chatNotStopped: try c.tag("chatNotStopped")
        case .chatStoreChanged: try c.tag("chatStoreChanged")
        case .invalidConnReq: try c.tag("invalidConnReq")
        case .unsupportedConnReq: try c.tag("unsupportedConnReq")
        case .userContactLinkExists: try c.tag("userContactLinkExists")
        case let .contactNotReady(contact): try c.tag("contactNotReady"); try c.encode(contact, forKey: "contact")
        case let .contactNotActive(contact): try c.tag("contactNotActive"); try c.encode(contact, forKey: "contact")
        case .invalidChatItemUpdate: try c.tag("invalidChatItemUpdate")
        case .invalidChatItemDelete: try c.tag("invalidChatItemDelete")
        case let .commandError(m): try c.tag("commandError"); try c.encode(m, forKey: "message")
        case let .internalError(m): try c.tag("internalError"); try c.encode(m, forKey: "message")
        case let .exception(m): try c.tag("exception"); try c.encode(m, forKey: "message")
        case let .groupUserRole(g, role): try c.tag("groupUserRole"); try c.encode(g, forKey: "groupInfo"); try c.encode(role, forKey: "requiredRole")
        case let .groupNotJoined(g): try c.tag("groupNotJoined"); try c.encode(g, forKey: "groupInfo")
        case let .groupDuplicateMember(name): try c.tag("groupDuplicateMember"); try c.encode(name, forKey: "contactName")
        case .groupMemberNotActive: try c.tag("groupMemberNotActive")
        case .groupMemberUserRemoved: try c.tag("groupMemberUserRemoved")
        case let .groupMemberInitialRole(g, role):
            try c.tag("groupMemberInitialRole")
            try c.encode(g, forKey: "groupInfo")
            try c.encode(role, forKey: "initialRole")
        case let .groupInternal(m): try c.tag("groupInternal"); try c.encode(m, forKey: "message")
        case .chatRelayExists: try c.tag("chatRelayExists")
        case let .channelError(code, m): try c.tag("channelError"); try c.encode(code, forKey: "code"); try c.encode(m, forKey: "message")
        }
    }
}

/// Errors of the chat database (`storeError`). `dbError` is Swiftplex's: SQLite refused a write
/// (its result code and message), reported while the engine retries.
public enum StoreError: Sendable, Hashable, Codable {
    case duplicateName
    case userNotFound(userId: Int64)
    case contactNotFound(contactId: Int64)
    case duplicateContactLink
    case userContactLinkNotFound
    case contactRequestNotFound(contactRequestId: Int64)
    case chatItemNotFound(itemId: Int64)
    case invalidQuote
    case dbError(resultCode: String, message: String)
    case groupNotFound(groupId: Int64)
    case groupMemberNotFound(groupMemberId: Int64)
    case groupLinkNotFound(groupInfo: GroupInfo)
    case duplicateGroupLink(groupInfo: GroupInfo)
    case userChatRelayNotFound(chatRelayId: Int64)
    /// A contact that is not a group member's contact (`/_invite member contact`).
    case memberContactGroupMemberNotFound(contactId: Int64)
    /// No contact, group or contact request has this local name (the terminal commands that take
    /// names: `@name`, `/a`, `/ac`, …).
    case contactNotFoundByName(contactName: String)
    case groupNotFoundByName(groupName: String)
    case contactRequestNotFoundByName(contactName: String)

    public static let allTags = ["duplicateName", "userNotFound", "contactNotFound", "duplicateContactLink", "userContactLinkNotFound",
                                 "contactRequestNotFound", "chatItemNotFound", "invalidQuote", "dbError", "groupNotFound", "groupMemberNotFound",
                                 "groupLinkNotFound", "duplicateGroupLink", "userChatRelayNotFound",
                                 "memberContactGroupMemberNotFound", "contactNotFoundByName", "groupNotFoundByName",
                                 "contactRequestNotFoundByName"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "duplicateName": self = .duplicateName
        case "userNotFound": self = .userNotFound(userId: try c.decode(Int64.self, forKey: "userId"))
        case "contactNotFound": self = .contactNotFound(contactId: try c.decode(Int64.self, forKey: "contactId"))
        case "duplicateContactLink": self = .duplicateContactLink
        case "userContactLinkNotFound": self = .userContactLinkNotFound
        case "contactRequestNotFound": self = .contactRequestNotFound(contactRequestId: try c.decode(Int64.self, forKey: "contactRequestId"))
        case "chatItemNotFound": self = .chatItemNotFound(itemId: try c.decode(Int64.self, forKey: "itemId"))
        case "invalidQuote": self = .invalidQuote
        case "dbError": self = .dbError(resultCode: try c.decode(String.self, forKey: "resultCode"), message: try c.decode(String.self, forKey: "message"))
        case "groupNotFound": self = .groupNotFound(groupId: try c.decode(Int64.self, forKey: "groupId"))
        case "groupMemberNotFound": self = .groupMemberNotFound(groupMemberId: try c.decode(Int64.self, forKey: "groupMemberId"))
        case "groupLinkNotFound": self = .groupLinkNotFound(groupInfo: try c.decode(GroupInfo.self, forKey: "groupInfo"))
        case "duplicateGroupLink": self = .duplicateGroupLink(groupInfo: try c.decode(GroupInfo.self, forKey: "groupInfo"))
        case "userChatRelayNotFound": self = .userChatRelayNotFound(chatRelayId: try c.decode(Int64.self, forKey: "chatRelayId"))
        case "memberContactGroupMemberNotFound": self = .memberContactGroupMemberNotFound(contactId: try c.decode(Int64.self, forKey: "contactId"))
        case "contactNotFoundByName": self = .contactNotFoundByName(contactName: try c.decode(String.self, forKey: "contactName"))
        case "groupNotFoundByName": self = .groupNotFoundByName(groupName: try c.decode(String.self, forKey: "groupName"))
        case "contactRequestNotFoundByName": self = .contactRequestNotFoundByName(contactName: try c.decode(String.self, forKey: "contactName"))
        case let t: throw c.unknown(t, in: "StoreError")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case .duplicateName: try c.tag("duplicateName")
        case let .userNotFound(id): try c.tag("userNotFound"); try c.encode(id, forKey: "userId")
        case let .contactNotFound(id): try c.tag("contactNotFound"); try c.encode(id, forKey: "contactId")
        case .duplicateContactLink: try c.tag("duplicateContactLink")
        case .userContactLinkNotFound: try c.tag("userContactLinkNotFound")
        case let .contactRequestNotFound(id): try c.tag("contactRequestNotFound"); try c.encode(id, forKey: "contactRequestId")
        case let .chatItemNotFound(id): try c.tag("chatItemNotFound"); try c.encode(id, forKey: "itemId")
        case .invalidQuote: try c.tag("invalidQuote")
        case let .dbError(code, message):
            try c.tag("dbError")
            try c.encode(code, forKey: "resultCode")
            try c.encode(message, forKey: "message")
        case let .groupNotFound(id): try c.tag("groupNotFound"); try c.encode(id, forKey: "groupId")
        case let .groupMemberNotFound(id): try c.tag("groupMemberNotFound"); try c.encode(id, forKey: "groupMemberId")
        case let .groupLinkNotFound(g): try c.tag("groupLinkNotFound"); try c.encode(g, forKey: "groupInfo")
        case let .duplicateGroupLink(g): try c.tag("duplicateGroupLink"); try c.encode(g, forKey: "groupInfo")
        case let .userChatRelayNotFound(id): try c.tag("userChatRelayNotFound"); try c.encode(id, forKey: "chatRelayId")
        case let .memberContactGroupMemberNotFound(id): try c.tag("memberContactGroupMemberNotFound"); try c.encode(id, forKey: "contactId")
        case let .contactNotFoundByName(name): try c.tag("contactNotFoundByName"); try c.encode(name, forKey: "contactName")
        case let .groupNotFoundByName(name): try c.tag("groupNotFoundByName"); try c.encode(name, forKey: "groupName")
        case let .contactRequestNotFoundByName(name): try c.tag("contactRequestNotFoundByName"); try c.encode(name, forKey: "contactName")
        }
    }
}

/// An agent failure as Swiftplex reports it: `{"type": <code>, "message": "…"}`. These are the
/// Swiftplex agent's codes, not SimpleX's agent error tags (`CMD`, `CONN`, `SMP`, …).
public struct AgentErrorType: Sendable, Hashable, Codable {
    public enum Code: String, StringEnum, CaseIterable {
        case noRelay, unknownConnection, wrongState, badEnvelope, messageTooLarge, relay, store, ownLink, linkNotFound, badLink,
             relayRefused, timeout, relayUnreachable, linkDataTooLarge
    }

    public var code: Code
    public var message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        let t = try c.tag()
        guard let code = Code(rawValue: t) else { throw c.unknown(t, in: "AgentErrorType") }
        self.init(code: code, message: try c.decode(String.self, forKey: "message"))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        try c.tag(code.rawValue)
        try c.encode(message, forKey: "message")
    }
}
