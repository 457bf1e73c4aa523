/// Every `"type"` a response or an event is written with — the one table of them: the responses
/// (``ChatResponse``) and events (``ChatEvent``) map their cases to these, and read them back
/// through these, so no tag is spelled anywhere else.
public enum ChatMessageType: String, Sendable, Hashable, CaseIterable {
    // Responses
    case activeUser, usersList, userProfileNoChange, userProfileUpdated, cmdOk, userRelays, chatStarted, chatRunning, chatStopped
    case userContactLinkCreated, userContactLink, userContactLinkUpdated, userContactLinkDeleted
    case invitation, connectionPlan, sentConfirmation, sentInvitation, contactRequestRejected
    case contactsList, contactPrefsUpdated, contactDeleted, contactConnectionDeleted, chatCleared, apiChats, apiChat
    case chatItemNotChanged, chatCmdError
    // Both responses and events
    case acceptingContactRequest, newChatItems, chatItemUpdated, chatItemsDeleted, chatItemReaction
    // Events
    case contactConnected, contactUpdated, contactDeletedByContact, receivedContactRequest, chatItemsStatusesUpdated
    case hostConnected, hostDisconnected, chatError
}

// Payloads that responses and events share: one struct each, written into the message's object
// after its `type`.

/// `user` and `chatItems` (`newChatItems`, `chatItemsStatusesUpdated`).
public struct UserChatItems: Sendable, Hashable {
    public var user: User
    public var chatItems: [AChatItem]
    public init(user: User, chatItems: [AChatItem]) {
        self.user = user
        self.chatItems = chatItems
    }

    init(_ c: KeyedDecodingContainer<FieldKey>) throws {
        self.init(user: try c.decode(User.self, forKey: "user"), chatItems: try c.decode([AChatItem].self, forKey: "chatItems"))
    }

    func encode(into c: inout KeyedEncodingContainer<FieldKey>) throws {
        try c.encode(user, forKey: "user")
        try c.encode(chatItems, forKey: "chatItems")
    }
}

/// `user` and one `chatItem` (`chatItemUpdated`, `chatItemNotChanged`).
public struct UserChatItem: Sendable, Hashable {
    public var user: User
    public var chatItem: AChatItem
    public init(user: User, chatItem: AChatItem) {
        self.user = user
        self.chatItem = chatItem
    }

    init(_ c: KeyedDecodingContainer<FieldKey>) throws {
        self.init(user: try c.decode(User.self, forKey: "user"), chatItem: try c.decode(AChatItem.self, forKey: "chatItem"))
    }

    func encode(into c: inout KeyedEncodingContainer<FieldKey>) throws {
        try c.encode(user, forKey: "user")
        try c.encode(chatItem, forKey: "chatItem")
    }
}

/// `chatItemsDeleted`: what was deleted, by whom.
public struct ChatItemsDeleted: Sendable, Hashable {
    public var user: User
    public var chatItemDeletions: [ChatItemDeletion]
    public var byUser: Bool
    public var timed: Bool
    public init(user: User, chatItemDeletions: [ChatItemDeletion], byUser: Bool, timed: Bool) {
        self.user = user
        self.chatItemDeletions = chatItemDeletions
        self.byUser = byUser
        self.timed = timed
    }

    init(_ c: KeyedDecodingContainer<FieldKey>) throws {
        self.init(user: try c.decode(User.self, forKey: "user"), chatItemDeletions: try c.decode([ChatItemDeletion].self, forKey: "chatItemDeletions"),
                  byUser: try c.decode(Bool.self, forKey: "byUser"), timed: try c.decode(Bool.self, forKey: "timed"))
    }

    func encode(into c: inout KeyedEncodingContainer<FieldKey>) throws {
        try c.encode(user, forKey: "user")
        try c.encode(chatItemDeletions, forKey: "chatItemDeletions")
        try c.encode(byUser, forKey: "byUser")
        try c.encode(timed, forKey: "timed")
    }
}

/// `chatItemReaction`: a reaction added or removed.
public struct ChatItemReactionChange: Sendable, Hashable {
    public var user: User
    public var added: Bool
    public var reaction: ACIReaction
    public init(user: User, added: Bool, reaction: ACIReaction) {
        self.user = user
        self.added = added
        self.reaction = reaction
    }

    init(_ c: KeyedDecodingContainer<FieldKey>) throws {
        self.init(user: try c.decode(User.self, forKey: "user"), added: try c.decode(Bool.self, forKey: "added"),
                  reaction: try c.decode(ACIReaction.self, forKey: "reaction"))
    }

    func encode(into c: inout KeyedEncodingContainer<FieldKey>) throws {
        try c.encode(user, forKey: "user")
        try c.encode(added, forKey: "added")
        try c.encode(reaction, forKey: "reaction")
    }
}

/// `user` and one `contact` (`acceptingContactRequest`, `contactDeleted`, `contactDeletedByContact`).
public struct UserContact: Sendable, Hashable {
    public var user: User
    public var contact: Contact
    public init(user: User, contact: Contact) {
        self.user = user
        self.contact = contact
    }

    init(_ c: KeyedDecodingContainer<FieldKey>) throws {
        self.init(user: try c.decode(User.self, forKey: "user"), contact: try c.decode(Contact.self, forKey: "contact"))
    }

    func encode(into c: inout KeyedEncodingContainer<FieldKey>) throws {
        try c.encode(user, forKey: "user")
        try c.encode(contact, forKey: "contact")
    }
}

/// `user`, `fromContact` and `toContact` (`contactPrefsUpdated`, `contactUpdated`).
public struct ContactChange: Sendable, Hashable {
    public var user: User
    public var fromContact: Contact
    public var toContact: Contact
    public init(user: User, fromContact: Contact, toContact: Contact) {
        self.user = user
        self.fromContact = fromContact
        self.toContact = toContact
    }

    init(_ c: KeyedDecodingContainer<FieldKey>) throws {
        self.init(user: try c.decode(User.self, forKey: "user"), fromContact: try c.decode(Contact.self, forKey: "fromContact"),
                  toContact: try c.decode(Contact.self, forKey: "toContact"))
    }

    func encode(into c: inout KeyedEncodingContainer<FieldKey>) throws {
        try c.encode(user, forKey: "user")
        try c.encode(fromContact, forKey: "fromContact")
        try c.encode(toContact, forKey: "toContact")
    }
}

extension KeyedDecodingContainer where K == FieldKey {
    /// The message's `"type"` from the one table, or `unknownTag` naming `type`.
    func messageType(in type: String) throws -> ChatMessageType {
        let t = try tag()
        guard let known = ChatMessageType(rawValue: t) else { throw unknown(t, in: type) }
        return known
    }
}
