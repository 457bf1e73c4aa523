/// What the engine reports by itself, on its event stream: every event type it produces, written
/// as a JSON object whose `"type"` names the case.
public enum ChatEvent: Sendable, Hashable, Codable {
    // Contacts
    case contactConnected(user: User, contact: Contact, userCustomProfile: Profile?)
    case contactUpdated(user: User, fromContact: Contact, toContact: Contact)
    case contactDeletedByContact(user: User, contact: Contact)
    case receivedContactRequest(user: User, contactRequest: UserContactRequest, chat: AChat?)
    /// A request the address accepted by itself (`autoAccept`).
    case acceptingContactRequest(user: User, contact: Contact)
    // Items
    case newChatItems(user: User, chatItems: [AChatItem])
    case chatItemUpdated(user: User, chatItem: AChatItem)
    case chatItemsDeleted(user: User, chatItemDeletions: [ChatItemDeletion], byUser: Bool, timed: Bool)
    case chatItemReaction(user: User, added: Bool, reaction: ACIReaction)
    case chatItemsStatusesUpdated(user: User, chatItems: [AChatItem])
    // Network
    case hostConnected(protocol: String, transportHost: String)
    case hostDisconnected(protocol: String, transportHost: String)
    // Failure
    case chatError(ChatError)

    /// Every `type` this enum reads and writes.
    public static let allTags = [
        "contactConnected", "contactUpdated", "contactDeletedByContact", "receivedContactRequest", "acceptingContactRequest", "newChatItems",
        "chatItemUpdated", "chatItemsDeleted", "chatItemReaction", "chatItemsStatusesUpdated", "hostConnected", "hostDisconnected", "chatError",
    ]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        func user() throws -> User { try c.decode(User.self, forKey: "user") }
        func field<T: Decodable>(_ key: FieldKey, _ type: T.Type = T.self) throws -> T { try c.decode(T.self, forKey: key) }
        switch try c.tag() {
        case "contactConnected":
            self = .contactConnected(user: try user(), contact: try field("contact"),
                                     userCustomProfile: try c.decodeIfPresent(Profile.self, forKey: "userCustomProfile"))
        case "contactUpdated": self = .contactUpdated(user: try user(), fromContact: try field("fromContact"), toContact: try field("toContact"))
        case "contactDeletedByContact": self = .contactDeletedByContact(user: try user(), contact: try field("contact"))
        case "receivedContactRequest":
            self = .receivedContactRequest(user: try user(), contactRequest: try field("contactRequest"), chat: try c.decodeIfPresent(AChat.self, forKey: "chat_"))
        case "acceptingContactRequest": self = .acceptingContactRequest(user: try user(), contact: try field("contact"))
        case "newChatItems": self = .newChatItems(user: try user(), chatItems: try field("chatItems"))
        case "chatItemUpdated": self = .chatItemUpdated(user: try user(), chatItem: try field("chatItem"))
        case "chatItemsDeleted":
            self = .chatItemsDeleted(user: try user(), chatItemDeletions: try field("chatItemDeletions"), byUser: try field("byUser"), timed: try field("timed"))
        case "chatItemReaction": self = .chatItemReaction(user: try user(), added: try field("added"), reaction: try field("reaction"))
        case "chatItemsStatusesUpdated": self = .chatItemsStatusesUpdated(user: try user(), chatItems: try field("chatItems"))
        case "hostConnected": self = .hostConnected(protocol: try field("protocol"), transportHost: try field("transportHost"))
        case "hostDisconnected": self = .hostDisconnected(protocol: try field("protocol"), transportHost: try field("transportHost"))
        case "chatError": self = .chatError(try field("chatError"))
        case let t: throw c.unknown(t, in: "ChatEvent")
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
        case let .contactUpdated(user, from, to):
            try c.encode(user, forKey: "user")
            try c.encode(from, forKey: "fromContact")
            try c.encode(to, forKey: "toContact")
        case let .contactDeletedByContact(user, contact), let .acceptingContactRequest(user, contact):
            try c.encode(user, forKey: "user")
            try c.encode(contact, forKey: "contact")
        case let .receivedContactRequest(user, request, chat):
            try c.encode(user, forKey: "user")
            try c.encode(request, forKey: "contactRequest")
            try c.encodeIfPresent(chat, forKey: "chat_")
        case let .newChatItems(user, items), let .chatItemsStatusesUpdated(user, items):
            try c.encode(user, forKey: "user")
            try c.encode(items, forKey: "chatItems")
        case let .chatItemUpdated(user, item):
            try c.encode(user, forKey: "user")
            try c.encode(item, forKey: "chatItem")
        case let .chatItemsDeleted(user, deletions, byUser, timed):
            try c.encode(user, forKey: "user")
            try c.encode(deletions, forKey: "chatItemDeletions")
            try c.encode(byUser, forKey: "byUser")
            try c.encode(timed, forKey: "timed")
        case let .chatItemReaction(user, added, reaction):
            try c.encode(user, forKey: "user")
            try c.encode(added, forKey: "added")
            try c.encode(reaction, forKey: "reaction")
        case let .hostConnected(proto, host), let .hostDisconnected(proto, host):
            try c.encode(proto, forKey: "protocol")
            try c.encode(host, forKey: "transportHost")
        case let .chatError(error): try c.encode(error, forKey: "chatError")
        }
    }

    /// The `type` this event is written with.
    public var tag: String {
        switch self {
        case .contactConnected: "contactConnected"
        case .contactUpdated: "contactUpdated"
        case .contactDeletedByContact: "contactDeletedByContact"
        case .receivedContactRequest: "receivedContactRequest"
        case .acceptingContactRequest: "acceptingContactRequest"
        case .newChatItems: "newChatItems"
        case .chatItemUpdated: "chatItemUpdated"
        case .chatItemsDeleted: "chatItemsDeleted"
        case .chatItemReaction: "chatItemReaction"
        case .chatItemsStatusesUpdated: "chatItemsStatusesUpdated"
        case .hostConnected: "hostConnected"
        case .hostDisconnected: "hostDisconnected"
        case .chatError: "chatError"
        }
    }
}
