/// The answer to one command: every response type the engine produces, each written as a JSON
/// object whose `"type"` names the case (`{"type":"activeUser","user":{…}}`, tags from
/// ``ChatMessageType``). Failures are ``chatCmdError(_:)``. Payloads shared with ``ChatEvent``
/// are one struct each (``UserChatItems``, ``UserContact``, …); a static function with the
/// payload's labels builds each such case (`.newChatItems(user:chatItems:)`).
public enum ChatResponse: Sendable, Hashable, Codable {
    // Users
    case activeUser(user: User)
    case usersList(users: [UserInfo])
    case userProfileNoChange(user: User)
    case userProfileUpdated(user: User, fromProfile: Profile, toProfile: Profile, updateSummary: UserProfileUpdateSummary)
    /// `user_` is the user the command ran as, when there is one.
    case cmdOk(user: User?)
    /// Swiftplex: a user's relays (`/_relays`).
    case userRelays(user: User, relays: [String])
    // Lifecycle
    case chatStarted
    case chatRunning
    case chatStopped
    // Database archives (`/_db export`, `/_db import`)
    case archiveExported(archiveErrors: [ArchiveError])
    case archiveImported(archiveErrors: [ArchiveError])
    // Address
    case userContactLinkCreated(user: User, connLinkContact: CreatedConnLink)
    case userContactLink(user: User, contactLink: UserContactLink)
    case userContactLinkUpdated(user: User, contactLink: UserContactLink)
    case userContactLinkDeleted(user: User)
    // Connections and requests
    case invitation(user: User, connLinkInvitation: CreatedConnLink, connection: PendingContactConnection)
    case connectionPlan(user: User, connLink: CreatedConnLink, connectionPlan: ConnectionPlan)
    case sentConfirmation(user: User, connection: PendingContactConnection, customUserProfile: Profile?)
    case sentInvitation(user: User, connection: PendingContactConnection, customUserProfile: Profile?)
    case acceptingContactRequest(UserContact)
    case contactRequestRejected(user: User, contactRequest: UserContactRequest, contact: Contact?)
    // Contacts and chats
    case contactsList(user: User, contacts: [Contact])
    case contactPrefsUpdated(ContactChange)
    case contactDeleted(UserContact)
    case contactConnectionDeleted(user: User, connection: PendingContactConnection)
    case chatCleared(user: User, chatInfo: ChatInfo)
    case apiChats(user: User, chats: [AChat])
    case apiChat(user: User, chat: AChat)
    // Items
    case newChatItems(UserChatItems)
    case chatItemUpdated(UserChatItem)
    case chatItemNotChanged(UserChatItem)
    case chatItemsDeleted(ChatItemsDeleted)
    case chatItemReaction(ChatItemReactionChange)
    // Failure
    case chatCmdError(ChatError)
    /// `/help` (a terminal command, SimpleX's `CRChatHelp`): which help section was asked for
    /// (`main`, `groups`, `contacts`, …); the text itself is the terminal's.
    case chatHelp(helpSection: String)
    // Groups
    case group(GroupResponse)
    // Channels
    case channel(ChannelResponse)

    public static func acceptingContactRequest(user: User, contact: Contact) -> ChatResponse { .acceptingContactRequest(UserContact(user: user, contact: contact)) }
    public static func contactPrefsUpdated(user: User, fromContact: Contact, toContact: Contact) -> ChatResponse {
        .contactPrefsUpdated(ContactChange(user: user, fromContact: fromContact, toContact: toContact))
    }
    public static func contactDeleted(user: User, contact: Contact) -> ChatResponse { .contactDeleted(UserContact(user: user, contact: contact)) }
    public static func newChatItems(user: User, chatItems: [AChatItem]) -> ChatResponse { .newChatItems(UserChatItems(user: user, chatItems: chatItems)) }
    public static func chatItemUpdated(user: User, chatItem: AChatItem) -> ChatResponse { .chatItemUpdated(UserChatItem(user: user, chatItem: chatItem)) }
    public static func chatItemNotChanged(user: User, chatItem: AChatItem) -> ChatResponse { .chatItemNotChanged(UserChatItem(user: user, chatItem: chatItem)) }
    public static func chatItemsDeleted(user: User, chatItemDeletions: [ChatItemDeletion], byUser: Bool, timed: Bool) -> ChatResponse {
        .chatItemsDeleted(ChatItemsDeleted(user: user, chatItemDeletions: chatItemDeletions, byUser: byUser, timed: timed))
    }
    public static func chatItemReaction(user: User, added: Bool, reaction: ACIReaction) -> ChatResponse {
        .chatItemReaction(ChatItemReactionChange(user: user, added: added, reaction: reaction))
    }

    /// The message types this enum reads and writes.
    public static let types: [ChatMessageType] = [
        .activeUser, .usersList, .userProfileNoChange, .userProfileUpdated, .cmdOk, .userRelays, .chatStarted, .chatRunning, .chatStopped,
        .archiveExported, .archiveImported, .userContactLinkCreated, .userContactLink, .userContactLinkUpdated, .userContactLinkDeleted, .invitation, .connectionPlan,
        .sentConfirmation, .sentInvitation, .acceptingContactRequest, .contactRequestRejected, .contactsList, .contactPrefsUpdated,
        .contactDeleted, .contactConnectionDeleted, .chatCleared, .apiChats, .apiChat, .newChatItems, .chatItemUpdated,
        .chatItemNotChanged, .chatItemsDeleted, .chatItemReaction, .chatCmdError, .chatHelp,
    ]

    /// Every `type` this enum reads and writes.
    public static let allTags = types.map(\.rawValue)

    /// The group responses' types (``GroupResponse``), read and written as well.
    public static let groupTypes = GroupResponse.types

    /// The channel responses' types (``ChannelResponse``), read and written as well.
    public static let channelTypes = ChannelResponse.types

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        func user() throws -> User { try c.decode(User.self, forKey: "user") }
        func field<T: Decodable>(_ key: FieldKey, _ type: T.Type = T.self) throws -> T { try c.decode(T.self, forKey: key) }
        switch try c.messageType(in: "ChatResponse") {
        case .activeUser: self = .activeUser(user: try user())
        case .usersList: self = .usersList(users: try field("users"))
        case .userProfileNoChange: self = .userProfileNoChange(user: try user())
        case .userProfileUpdated:
            self = .userProfileUpdated(user: try user(), fromProfile: try field("fromProfile"), toProfile: try field("toProfile"),
                                       updateSummary: try field("updateSummary"))
        case .cmdOk: self = .cmdOk(user: try c.decodeIfPresent(User.self, forKey: "user_"))
        case .userRelays: self = .userRelays(user: try user(), relays: try field("relays"))
        case .chatStarted: self = .chatStarted
        case .chatRunning: self = .chatRunning
        case .chatStopped: self = .chatStopped
        case .archiveExported: self = .archiveExported(archiveErrors: try field("archiveErrors"))
        case .archiveImported: self = .archiveImported(archiveErrors: try field("archiveErrors"))
        case .userContactLinkCreated: self = .userContactLinkCreated(user: try user(), connLinkContact: try field("connLinkContact"))
        case .userContactLink: self = .userContactLink(user: try user(), contactLink: try field("contactLink"))
        case .userContactLinkUpdated: self = .userContactLinkUpdated(user: try user(), contactLink: try field("contactLink"))
        case .userContactLinkDeleted: self = .userContactLinkDeleted(user: try user())
        case .invitation: self = .invitation(user: try user(), connLinkInvitation: try field("connLinkInvitation"), connection: try field("connection"))
        case .connectionPlan: self = .connectionPlan(user: try user(), connLink: try field("connLink"), connectionPlan: try field("connectionPlan"))
        case .sentConfirmation:
            self = .sentConfirmation(user: try user(), connection: try field("connection"),
                                     customUserProfile: try c.decodeIfPresent(Profile.self, forKey: "customUserProfile"))
        case .sentInvitation:
            self = .sentInvitation(user: try user(), connection: try field("connection"),
                                   customUserProfile: try c.decodeIfPresent(Profile.self, forKey: "customUserProfile"))
        case .acceptingContactRequest: self = .acceptingContactRequest(try UserContact(from: decoder))
        case .contactRequestRejected:
            self = .contactRequestRejected(user: try user(), contactRequest: try field("contactRequest"),
                                           contact: try c.decodeIfPresent(Contact.self, forKey: "contact_"))
        case .contactsList: self = .contactsList(user: try user(), contacts: try field("contacts"))
        case .contactPrefsUpdated: self = .contactPrefsUpdated(try ContactChange(from: decoder))
        case .contactDeleted: self = .contactDeleted(try UserContact(from: decoder))
        case .contactConnectionDeleted: self = .contactConnectionDeleted(user: try user(), connection: try field("connection"))
        case .chatCleared: self = .chatCleared(user: try user(), chatInfo: try field("chatInfo"))
        case .apiChats: self = .apiChats(user: try user(), chats: try field("chats"))
        case .apiChat: self = .apiChat(user: try user(), chat: try field("chat"))
        case .newChatItems: self = .newChatItems(try UserChatItems(from: decoder))
        case .chatItemUpdated: self = .chatItemUpdated(try UserChatItem(from: decoder))
        case .chatItemNotChanged: self = .chatItemNotChanged(try UserChatItem(from: decoder))
        case .chatItemsDeleted: self = .chatItemsDeleted(try ChatItemsDeleted(from: decoder))
        case .chatItemReaction: self = .chatItemReaction(try ChatItemReactionChange(from: decoder))
        case .chatCmdError: self = .chatCmdError(try field("chatError"))
        case .chatHelp: self = .chatHelp(helpSection: try field("helpSection"))
        case let t where GroupResponse.types.contains(t): self = .group(try GroupResponse(type: t, from: decoder))
        case let t where ChannelResponse.types.contains(t): self = .channel(try ChannelResponse(type: t, from: decoder))
        case let t: throw c.unknown(t.rawValue, in: "ChatResponse")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        try c.tag(tag)
        switch self {
        case let .activeUser(user), let .userProfileNoChange(user), let .userContactLinkDeleted(user):
            try c.encode(user, forKey: "user")
        case let .usersList(users): try c.encode(users, forKey: "users")
        case let .userProfileUpdated(user, from, to, summary):
            try c.encode(user, forKey: "user")
            try c.encode(from, forKey: "fromProfile")
            try c.encode(to, forKey: "toProfile")
            try c.encode(summary, forKey: "updateSummary")
        case let .cmdOk(user): try c.encodeIfPresent(user, forKey: "user_")
        case let .userRelays(user, relays):
            try c.encode(user, forKey: "user")
            try c.encode(relays, forKey: "relays")
        case .chatStarted, .chatRunning, .chatStopped: break
        case let .archiveExported(errors), let .archiveImported(errors): try c.encode(errors, forKey: "archiveErrors")
        case let .userContactLinkCreated(user, link):
            try c.encode(user, forKey: "user")
            try c.encode(link, forKey: "connLinkContact")
        case let .userContactLink(user, link), let .userContactLinkUpdated(user, link):
            try c.encode(user, forKey: "user")
            try c.encode(link, forKey: "contactLink")
        case let .invitation(user, link, connection):
            try c.encode(user, forKey: "user")
            try c.encode(link, forKey: "connLinkInvitation")
            try c.encode(connection, forKey: "connection")
        case let .connectionPlan(user, link, plan):
            try c.encode(user, forKey: "user")
            try c.encode(link, forKey: "connLink")
            try c.encode(plan, forKey: "connectionPlan")
        case let .sentConfirmation(user, connection, custom), let .sentInvitation(user, connection, custom):
            try c.encode(user, forKey: "user")
            try c.encode(connection, forKey: "connection")
            try c.encodeIfPresent(custom, forKey: "customUserProfile")
        case let .acceptingContactRequest(p), let .contactDeleted(p): try p.encode(to: encoder)
        case let .contactRequestRejected(user, request, contact):
            try c.encode(user, forKey: "user")
            try c.encode(request, forKey: "contactRequest")
            try c.encodeIfPresent(contact, forKey: "contact_")
        case let .contactsList(user, contacts):
            try c.encode(user, forKey: "user")
            try c.encode(contacts, forKey: "contacts")
        case let .contactPrefsUpdated(p): try p.encode(to: encoder)
        case let .contactConnectionDeleted(user, connection):
            try c.encode(user, forKey: "user")
            try c.encode(connection, forKey: "connection")
        case let .chatCleared(user, info):
            try c.encode(user, forKey: "user")
            try c.encode(info, forKey: "chatInfo")
        case let .apiChats(user, chats):
            try c.encode(user, forKey: "user")
            try c.encode(chats, forKey: "chats")
        case let .apiChat(user, chat):
            try c.encode(user, forKey: "user")
            try c.encode(chat, forKey: "chat")
        case let .newChatItems(p): try p.encode(to: encoder)
        case let .chatItemUpdated(p), let .chatItemNotChanged(p): try p.encode(to: encoder)
        case let .chatItemsDeleted(p): try p.encode(to: encoder)
        case let .chatItemReaction(p): try p.encode(to: encoder)
        case let .chatCmdError(error): try c.encode(error, forKey: "chatError")
        case let .chatHelp(section): try c.encode(section, forKey: "helpSection")
        case let .group(g): try g.encode(to: encoder)
        case let .channel(p): try p.encode(to: encoder)
        }
    }

    /// The message type this response is written as.
    public var type: ChatMessageType {
        switch self {
        case .activeUser: .activeUser
        case .usersList: .usersList
        case .userProfileNoChange: .userProfileNoChange
        case .userProfileUpdated: .userProfileUpdated
        case .cmdOk: .cmdOk
        case .userRelays: .userRelays
        case .chatStarted: .chatStarted
        case .chatRunning: .chatRunning
        case .chatStopped: .chatStopped
        case .archiveExported: .archiveExported
        case .archiveImported: .archiveImported
        case .userContactLinkCreated: .userContactLinkCreated
        case .userContactLink: .userContactLink
        case .userContactLinkUpdated: .userContactLinkUpdated
        case .userContactLinkDeleted: .userContactLinkDeleted
        case .invitation: .invitation
        case .connectionPlan: .connectionPlan
        case .sentConfirmation: .sentConfirmation
        case .sentInvitation: .sentInvitation
        case .acceptingContactRequest: .acceptingContactRequest
        case .contactRequestRejected: .contactRequestRejected
        case .contactsList: .contactsList
        case .contactPrefsUpdated: .contactPrefsUpdated
        case .contactDeleted: .contactDeleted
        case .contactConnectionDeleted: .contactConnectionDeleted
        case .chatCleared: .chatCleared
        case .apiChats: .apiChats
        case .apiChat: .apiChat
        case .newChatItems: .newChatItems
        case .chatItemUpdated: .chatItemUpdated
        case .chatItemNotChanged: .chatItemNotChanged
        case .chatItemsDeleted: .chatItemsDeleted
        case .chatItemReaction: .chatItemReaction
        case .chatCmdError: .chatCmdError
        case .chatHelp: .chatHelp
        case let .group(g): g.type
        case let .channel(p): p.type
        }
    }

    /// The `type` this response is written with.
    public var tag: String { type.rawValue }
}

/// What an export or an import left out or could not do (SimpleX's `ArchiveError`): `import`
/// (`importError`) or `fileError` (`file`, `fileError`).
public enum ArchiveError: Sendable, Hashable, Codable {
    case `import`(importError: String)
    case fileError(file: String, fileError: String)

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "import": self = .import(importError: try c.decode(String.self, forKey: "importError"))
        case "fileError": self = .fileError(file: try c.decode(String.self, forKey: "file"), fileError: try c.decode(String.self, forKey: "fileError"))
        case let t: throw c.unknown(t, in: "ArchiveError")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .import(e): try c.tag("import"); try c.encode(e, forKey: "importError")
        case let .fileError(file, e): try c.tag("fileError"); try c.encode(file, forKey: "file"); try c.encode(e, forKey: "fileError")
        }
    }
}
