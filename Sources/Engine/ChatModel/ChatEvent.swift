/// What the engine reports by itself, on its event stream: every event type it produces, written
/// as a JSON object whose `"type"` names the case (tags from ``ChatMessageType``). Payloads shared
/// with ``ChatResponse`` are the same structs.
public enum ChatEvent: Sendable, Hashable, Codable {
    // Contacts
    case contactConnected(user: User, contact: Contact, userCustomProfile: Profile?)
    case contactUpdated(ContactChange)
    case contactDeletedByContact(UserContact)
    case receivedContactRequest(user: User, contactRequest: UserContactRequest, chat: AChat?)
    /// A request the address accepted by itself (`autoAccept`).
    case acceptingContactRequest(UserContact)
    // Items
    case newChatItems(UserChatItems)
    case chatItemUpdated(UserChatItem)
    case chatItemsDeleted(ChatItemsDeleted)
    case chatItemReaction(ChatItemReactionChange)
    case chatItemsStatusesUpdated(UserChatItems)
    // Network
    case hostConnected(protocol: String, transportHost: String)
    case hostDisconnected(protocol: String, transportHost: String)
    /// Queues on `server` (the relay's address) changed subscription state: `connections` are
    /// agent connection ids (SimpleX's shape).
    case subscriptionStatus(server: String, subscriptionStatus: SubscriptionStatus, connections: [String])
    // Failure
    case chatError(ChatError)
    // Groups
    case group(GroupChatEvent)
    // Channels
    case channel(ChannelChatEvent)

    public static func contactUpdated(user: User, fromContact: Contact, toContact: Contact) -> ChatEvent {
        .contactUpdated(ContactChange(user: user, fromContact: fromContact, toContact: toContact))
    }
    public static func contactDeletedByContact(user: User, contact: Contact) -> ChatEvent { .contactDeletedByContact(UserContact(user: user, contact: contact)) }
    public static func acceptingContactRequest(user: User, contact: Contact) -> ChatEvent { .acceptingContactRequest(UserContact(user: user, contact: contact)) }
    public static func newChatItems(user: User, chatItems: [AChatItem]) -> ChatEvent { .newChatItems(UserChatItems(user: user, chatItems: chatItems)) }
    public static func chatItemUpdated(user: User, chatItem: AChatItem) -> ChatEvent { .chatItemUpdated(UserChatItem(user: user, chatItem: chatItem)) }
    public static func chatItemsDeleted(user: User, chatItemDeletions: [ChatItemDeletion], byUser: Bool, timed: Bool) -> ChatEvent {
        .chatItemsDeleted(ChatItemsDeleted(user: user, chatItemDeletions: chatItemDeletions, byUser: byUser, timed: timed))
    }
    public static func chatItemReaction(user: User, added: Bool, reaction: ACIReaction) -> ChatEvent {
        .chatItemReaction(ChatItemReactionChange(user: user, added: added, reaction: reaction))
    }
    public static func chatItemsStatusesUpdated(user: User, chatItems: [AChatItem]) -> ChatEvent {
        .chatItemsStatusesUpdated(UserChatItems(user: user, chatItems: chatItems))
    }

    /// The message types this enum reads and writes.
    public static let types: [ChatMessageType] = [
        .contactConnected, .contactUpdated, .contactDeletedByContact, .receivedContactRequest, .acceptingContactRequest, .newChatItems,
        .chatItemUpdated, .chatItemsDeleted, .chatItemReaction, .chatItemsStatusesUpdated, .hostConnected, .hostDisconnected, .subscriptionStatus, .chatError,
    ]

    /// Every `type` this enum reads and writes.
    public static let allTags = types.map(\.rawValue)

    /// The group events' types (``GroupChatEvent``), read and written as well.
    public static let groupTypes = GroupChatEvent.types

    /// The channel events' types (``ChannelChatEvent``), read and written as well.
    public static let channelTypes = ChannelChatEvent.types

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        func user() throws -> User { try c.decode(User.self, forKey: "user") }
        func field<T: Decodable>(_ key: FieldKey, _ type: T.Type = T.self) throws -> T { try c.decode(T.self, forKey: key) }
        switch try c.messageType(in: "ChatEvent") {
        case .contactConnected:
            self = .contactConnected(user: try user(), contact: try field("contact"),
                                     userCustomProfile: try c.decodeIfPresent(Profile.self, forKey: "userCustomProfile"))
        case .contactUpdated: self = .contactUpdated(try ContactChange(from: decoder))
        case .contactDeletedByContact: self = .contactDeletedByContact(try UserContact(from: decoder))
        case .receivedContactRequest:
            self = .receivedContactRequest(user: try user(), contactRequest: try field("contactRequest"), chat: try c.decodeIfPresent(AChat.self, forKey: "chat_"))
        case .acceptingContactRequest: self = .acceptingContactRequest(try UserContact(from: decoder))
        case .newChatItems: self = .newChatItems(try UserChatItems(from: decoder))
        case .chatItemUpdated: self = .chatItemUpdated(try UserChatItem(from: decoder))
        case .chatItemsDeleted: self = .chatItemsDeleted(try ChatItemsDeleted(from: decoder))
        case .chatItemReaction: self = .chatItemReaction(try ChatItemReactionChange(from: decoder))
        case .chatItemsStatusesUpdated: self = .chatItemsStatusesUpdated(try UserChatItems(from: decoder))
        case .hostConnected: self = .hostConnected(protocol: try field("protocol"), transportHost: try field("transportHost"))
        case .hostDisconnected: self = .hostDisconnected(protocol: try field("protocol"), transportHost: try field("transportHost"))
        case .subscriptionStatus:
            self = .subscriptionStatus(server: try field("server"), subscriptionStatus: try field("subscriptionStatus"), connections: try field("connections"))
        case .chatError: self = .chatError(try field("chatError"))
        case let t where GroupChatEvent.types.contains(t): self = .group(try GroupChatEvent(type: t, from: decoder))
        case let t where ChannelChatEvent.types.contains(t): self = .channel(try ChannelChatEvent(type: t, from: decoder))
        case let t: throw c.unknown(t.rawValue, in: "ChatEvent")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        try c.tag(tag)
        switch self {
        case let .contactConnected(user, contact, custom):
            try c.encode(user, forKey: "user")
            try c.encode(contact, forKey: "contact")
            try c.encodeIfPresent(custom, forKey: "userCustomProfile")
        case let .contactUpdated(p): try p.encode(to: encoder)
        case let .contactDeletedByContact(p), let .acceptingContactRequest(p): try p.encode(to: encoder)
        case let .receivedContactRequest(user, request, chat):
            try c.encode(user, forKey: "user")
            try c.encode(request, forKey: "contactRequest")
            try c.encodeIfPresent(chat, forKey: "chat_")
        case let .newChatItems(p), let .chatItemsStatusesUpdated(p): try p.encode(to: encoder)
        case let .chatItemUpdated(p): try p.encode(to: encoder)
        case let .chatItemsDeleted(p): try p.encode(to: encoder)
        case let .chatItemReaction(p): try p.encode(to: encoder)
        case let .hostConnected(proto, host), let .hostDisconnected(proto, host):
            try c.encode(proto, forKey: "protocol")
            try c.encode(host, forKey: "transportHost")
        case let .subscriptionStatus(server, status, connections):
            try c.encode(server, forKey: "server")
            try c.encode(status, forKey: "subscriptionStatus")
            try c.encode(connections, forKey: "connections")
        case let .chatError(error): try c.encode(error, forKey: "chatError")
        case let .group(g): try g.encode(to: encoder)
        case let .channel(e): try e.encode(to: encoder)
        }
    }

    /// The message type this event is written as.
    public var type: ChatMessageType {
        switch self {
        case .contactConnected: .contactConnected
        case .contactUpdated: .contactUpdated
        case .contactDeletedByContact: .contactDeletedByContact
        case .receivedContactRequest: .receivedContactRequest
        case .acceptingContactRequest: .acceptingContactRequest
        case .newChatItems: .newChatItems
        case .chatItemUpdated: .chatItemUpdated
        case .chatItemsDeleted: .chatItemsDeleted
        case .chatItemReaction: .chatItemReaction
        case .chatItemsStatusesUpdated: .chatItemsStatusesUpdated
        case .hostConnected: .hostConnected
        case .hostDisconnected: .hostDisconnected
        case .subscriptionStatus: .subscriptionStatus
        case .chatError: .chatError
        case let .group(g): g.type
        case let .channel(e): e.type
        }
    }

    /// The `type` this event is written with.
    public var tag: String { type.rawValue }
}

/// A queue's subscription at its relay (`subscriptionStatus` events): receiving (`active`), being
/// subscribed (`pending`), refused by the relay (`removed`, with its error), or not subscribed.
public enum SubscriptionStatus: Sendable, Hashable, Codable {
    case active
    case pending
    case removed(subError: String)
    case noSub

    public static let allTags = ["active", "pending", "removed", "noSub"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "active": self = .active
        case "pending": self = .pending
        case "removed": self = .removed(subError: try c.decode(String.self, forKey: "subError"))
        case "noSub": self = .noSub
        case let t: throw c.unknown(t, in: "SubscriptionStatus")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case .active: try c.tag("active")
        case .pending: try c.tag("pending")
        case let .removed(subError):
            try c.tag("removed")
            try c.encode(subError, forKey: "subError")
        case .noSub: try c.tag("noSub")
        }
    }
}
