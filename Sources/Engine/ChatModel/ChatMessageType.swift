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
    case archiveExported, archiveImported
    case chatHelp
    // Both responses and events
    case acceptingContactRequest, newChatItems, chatItemUpdated, chatItemsDeleted, chatItemReaction
    // Events
    case contactConnected, contactUpdated, contactDeletedByContact, receivedContactRequest, chatItemsStatusesUpdated
    case hostConnected, hostDisconnected, subscriptionStatus, chatError
    // Groups (``GroupResponse``, ``GroupChatEvent``; `groupUpdated` is both)
    case groupCreated, sentGroupInvitation, userAcceptedGroupSent, groupMembers, groupsList, membersRoleUser, membersBlockedForAllUser
    case userDeletedMembers, leftMemberUser, groupDeletedUser, groupUpdated
    case receivedGroupInvitation, userJoinedGroup, joinedGroupMember, joinedGroupMemberConnecting, connectedToGroupMember, memberRole
    case memberBlockedForAll, deletedMember, deletedMemberUser, leftMember, groupDeleted, memberAcceptedByOther
    // Group links and admission
    case groupLinkCreated, groupLink, groupLinkDeleted, memberAccepted, groupLinkConnecting
    // Member contacts
    case newMemberContact, newMemberContactSentInv, memberContactAccepted, newMemberContactReceivedInv
    // Member profiles
    case groupMemberUpdated
    // Channels (``ChannelResponse``, ``ChannelChatEvent``)
    case userChatRelays, publicGroupCreated, publicGroupCreationFailed, groupRelays, startedConnectionToGroup
    case groupRelaysAdded, groupRelaysAddFailed, relayGroupAllowed, chatRelayTestResult, groupInfo
    case groupRelayUpdated, groupLinkDataUpdated
}

// Payloads that responses and events share: one struct each, with synthesized Codable, written
// into the message's own object after its `type` (the message encodes its tag, then the payload
// into the same encoder; decoding reads the payload's keys from the same object).

/// `user` and `chatItems` (`newChatItems`, `chatItemsStatusesUpdated`).
public struct UserChatItems: Sendable, Hashable, Codable {
    public var user: User
    public var chatItems: [AChatItem]
    public init(user: User, chatItems: [AChatItem]) {
        self.user = user
        self.chatItems = chatItems
    }

}

/// `user` and one `chatItem` (`chatItemUpdated`, `chatItemNotChanged`).
public struct UserChatItem: Sendable, Hashable, Codable {
    public var user: User
    public var chatItem: AChatItem
    public init(user: User, chatItem: AChatItem) {
        self.user = user
        self.chatItem = chatItem
    }

}

/// `chatItemsDeleted`: what was deleted, by whom.
public struct ChatItemsDeleted: Sendable, Hashable, Codable {
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

}

/// `chatItemReaction`: a reaction added or removed.
public struct ChatItemReactionChange: Sendable, Hashable, Codable {
    public var user: User
    public var added: Bool
    public var reaction: ACIReaction
    public init(user: User, added: Bool, reaction: ACIReaction) {
        self.user = user
        self.added = added
        self.reaction = reaction
    }

}

/// `user` and one `contact` (`acceptingContactRequest`, `contactDeleted`, `contactDeletedByContact`).
public struct UserContact: Sendable, Hashable, Codable {
    public var user: User
    public var contact: Contact
    public init(user: User, contact: Contact) {
        self.user = user
        self.contact = contact
    }

}

/// `user`, `fromContact` and `toContact` (`contactPrefsUpdated`, `contactUpdated`).
public struct ContactChange: Sendable, Hashable, Codable {
    public var user: User
    public var fromContact: Contact
    public var toContact: Contact
    public init(user: User, fromContact: Contact, toContact: Contact) {
        self.user = user
        self.fromContact = fromContact
        self.toContact = toContact
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
