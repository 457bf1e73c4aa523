import ChatModel
import SwiftplexBase

/// Rows of the chat database read into model values (profiles, settings and content decoded).
struct UserRow: Sendable {
    var id: Int64
    var profile: Profile
    var active: Bool
    var relays: [String]
    var sendReceipts: Bool
    /// The user's own name among its local names (`bot`, or `bot_1` if it renamed itself to a contact's name).
    var localName: String?
    /// A chat relay user.
    var chatRelay: Bool
    var autoAcceptMemberContacts: Bool

    init(_ r: UserRecord) {
        id = r.id ?? 0
        profile = Stored.profile(r.profile) ?? Profile(displayName: r.displayName)
        active = r.active
        relays = r.relays.split(separator: ",").map(String.init)
        sendReceipts = r.sendReceipts
        localName = r.localDisplayName
        chatRelay = r.chatRelay
        autoAcceptMemberContacts = r.autoAcceptMemberContacts
    }
}

struct ContactRow: Sendable {
    var id: Int64
    var userId: Int64
    var agentConnId: Int64
    var profile: Profile?
    var status: ContactState
    var viaAddress: Bool
    var accepted: Bool
    var createdAt: String
    var updatedAt: String
    var chatTs: String?
    var customData: JSONValue?
    /// Preferences set for this contact alone (`/_set prefs`).
    var userPreferences: Preferences?
    /// The random profile this user shows this contact, when connected incognito.
    var incognitoProfile: Profile?
    var invitation: String?
    var shortLink: String?
    /// The name unique among this user's names (`alice`, `alice_1`, …); nil until the peer's profile is known.
    var localName: String?
    /// A group member's contact: the member's row; the invitation sent to it; one received from it.
    var groupMemberRowId: Int64?
    var grpInvSent: Bool
    var directInv: GroupDirectInvitation?

    var ready: Bool { status == .ready }

    init(_ r: ContactRecord) {
        id = r.id ?? 0
        userId = r.userId
        agentConnId = r.agentConnId
        profile = Stored.profile(r.profile)
        status = r.status
        viaAddress = r.viaAddress
        accepted = r.accepted
        createdAt = r.createdAt
        updatedAt = r.updatedAt
        chatTs = r.chatTs
        customData = Stored.customData(r.customData)
        userPreferences = Stored.preferences(r.userPrefs)
        incognitoProfile = Stored.profile(r.incognitoProfile)
        invitation = r.invitation
        shortLink = r.shortLink
        localName = r.localDisplayName
        groupMemberRowId = r.groupMemberRowId
        grpInvSent = r.grpInvSent
        directInv = Stored.decode(GroupDirectInvitation.self, r.directInv)
    }
}

struct ItemRow: Sendable {
    var id: Int64
    var contactId: Int64
    var sent: Bool
    var content: MsgContent
    var sharedMsgId: String?
    var status: ItemStatus
    var edited: Bool
    var deleted: Bool
    var createdAt: String
    var quoted: CIQuote?

    init(_ r: ChatItemRecord) {
        id = r.id ?? 0
        contactId = r.contactId
        sent = r.sent
        content = Stored.decode(MsgContent.self, r.content) ?? .text("")
        sharedMsgId = r.sharedMsgId
        status = r.status
        edited = r.edited
        deleted = r.deleted
        createdAt = r.createdAt
        quoted = Stored.decode(CIQuote.self, r.quoted)
    }

    /// A row whose content and quote are known already (just sent or received): not decoded again.
    init(_ r: ChatItemRecord, content: MsgContent, quoted: CIQuote?) {
        id = r.id ?? 0
        contactId = r.contactId
        sent = r.sent
        self.content = content
        sharedMsgId = r.sharedMsgId
        status = r.status
        edited = r.edited
        deleted = r.deleted
        createdAt = r.createdAt
        self.quoted = quoted
    }
}

struct RequestRow: Sendable {
    var id: Int64
    var userId: Int64
    var agentRequestId: Int64
    var profile: Profile
    var createdAt: String
    var localName: String?

    init(_ r: ContactRequestRecord) {
        id = r.id ?? 0
        userId = r.userId
        agentRequestId = r.agentRequestId
        profile = Stored.profile(r.profile) ?? Profile(displayName: "unknown")
        createdAt = r.createdAt
        localName = r.localDisplayName
    }
}

struct AddressRow: Sendable {
    var agentId: Int64
    var link: String
    var shortLink: String?
    var settings: AddressSettings

    init(_ r: AddressRecord) {
        agentId = r.agentAddressId
        link = r.link
        shortLink = r.shortLink
        settings = Stored.decode(AddressSettings.self, r.settings) ?? AddressSettings()
    }
}

/// The model values the API reports, from what the store holds; the fields this engine does not
/// keep are filled with the values it implies (docs/simplex-bot-api.md §8).
enum ModelOf {
    /// The id under which an incognito contact's random profile is reported (`customUserProfileId`).
    static func incognitoProfileId(contactId: Int64) -> Int64 { 3_000_000 + contactId }

    static func fullPreferences(_ profile: Profile) -> FullPreferences {
        let p = profile.preferences
        let yes = SimplePreference(allow: .yes)
        return FullPreferences(timedMessages: p?.timedMessages ?? TimedMessagesPreference(allow: .yes), fullDelete: p?.fullDelete ?? yes,
                               reactions: p?.reactions ?? yes, voice: p?.voice ?? yes, files: p?.files ?? yes, calls: p?.calls ?? yes,
                               sessions: p?.sessions ?? yes, commands: p?.commands ?? [])
    }

    static func user(_ u: UserRow) -> User {
        User(userId: u.id, agentUserId: 1, userContactId: u.id, localDisplayName: u.localName ?? u.profile.displayName,
             profile: LocalProfile(profileId: u.id, profile: u.profile), fullPreferences: fullPreferences(u.profile),
             activeUser: u.active, activeOrder: u.id, sendRcptsContacts: u.sendReceipts, autoAcceptMemberContacts: u.autoAcceptMemberContacts,
             userChatRelay: u.chatRelay)
    }

    static func connection(_ c: ContactRow) -> Connection {
        Connection(connId: c.id, agentConnId: String(c.agentConnId),
                   customUserProfileId: c.incognitoProfile != nil ? incognitoProfileId(contactId: c.id) : nil,
                   connStatus: c.status == .ready ? .ready : c.status == .deleted ? .deleted : c.agentConnId < 0 ? .prepared : .joined,
                   contactConnInitiated: !c.viaAddress, entityId: c.id, createdAt: Stored.timestamp(c.createdAt))
    }

    static func pendingConnection(_ c: ContactRow, link: String?) -> PendingContactConnection {
        let created = Stored.timestamp(c.createdAt)
        return PendingContactConnection(pccConnId: c.id, pccAgentConnId: String(c.agentConnId), pccConnStatus: .new, viaContactUri: c.viaAddress,
                                        customUserProfileId: c.incognitoProfile != nil ? incognitoProfileId(contactId: c.id) : nil,
                                        connLinkInv: link.map { CreatedConnLink(connFullLink: $0, connShortLink: c.shortLink) },
                                        createdAt: created, updatedAt: created)
    }

    /// `user` is the profile this user shows the contact (incognito or not); `overrides` are the
    /// preferences set for this contact alone (`/_set prefs`), which win over the profile's.
    static func mergedPreferences(user: Profile, overrides: Preferences?, contact: Profile?) -> ContactUserPreferences {
        func one<P>(_ key: KeyPath<Preferences, P?>, _ allowed: (P) -> FeatureAllowed, _ fallback: P) -> ContactUserPreference<P> {
            let own = overrides?[keyPath: key]
            let mine = own ?? user.preferences?[keyPath: key] ?? fallback
            let theirs = contact?.preferences?[keyPath: key] ?? fallback
            let on = allowed(mine) != .no && allowed(theirs) != .no
            return ContactUserPreference(enabled: PrefEnabled(forUser: on, forContact: on),
                                         userPreference: own == nil ? .user(preference: mine) : .contact(preference: mine), contactPreference: theirs)
        }
        let yes = SimplePreference(allow: .yes)
        return ContactUserPreferences(
            timedMessages: one(\.timedMessages, \.allow, TimedMessagesPreference(allow: .yes)), fullDelete: one(\.fullDelete, \.allow, yes),
            reactions: one(\.reactions, \.allow, yes), voice: one(\.voice, \.allow, yes), files: one(\.files, \.allow, yes),
            calls: one(\.calls, \.allow, yes), sessions: one(\.sessions, \.allow, yes), commands: contact?.preferences?.commands)
    }

    static func contact(_ c: ContactRow, userProfile: Profile) -> Contact {
        let profile = c.profile ?? Profile(displayName: "contact \(c.id)")
        return Contact(contactId: c.id, localDisplayName: c.localName ?? profile.displayName,
                       profile: LocalProfile(profileId: 1_000_000 + c.id, profile: profile), activeConn: connection(c),
                       contactStatus: c.status == .deleted ? .deleted : .active, userPreferences: c.userPreferences ?? Preferences(),
                       mergedPreferences: mergedPreferences(user: c.incognitoProfile ?? userProfile, overrides: c.userPreferences, contact: c.profile),
                       createdAt: Stored.timestamp(c.createdAt), updatedAt: Stored.timestamp(c.updatedAt), chatTs: c.chatTs.map(Stored.timestamp),
                       contactGroupMemberId: c.groupMemberRowId, contactGrpInvSent: c.grpInvSent, groupDirectInv: c.directInv,
                       customData: c.customData)
    }

    static func contactRequest(_ r: RequestRow) -> UserContactRequest {
        let created = Stored.timestamp(r.createdAt)
        return UserContactRequest(contactRequestId: r.id, agentInvitationId: String(r.id), localDisplayName: r.localName ?? r.profile.displayName,
                                  profileId: 2_000_000 + r.id, profile: LocalProfile(profileId: 2_000_000 + r.id, profile: r.profile),
                                  createdAt: created, updatedAt: created)
    }

    static func address(_ a: AddressRow, userId: Int64) -> UserContactLink {
        UserContactLink(userContactLinkId: userId, connLinkContact: CreatedConnLink(connFullLink: a.link, connShortLink: a.shortLink),
                        shortLinkDataSet: a.shortLink != nil, addressSettings: a.settings)
    }

    static func direction(sent: Bool) -> CIDirection { sent ? .directSnd : .directRcv }

    static func chatItem(_ i: ItemRow, reactions: [CIReactionCount]) -> ChatItem {
        let created = Stored.timestamp(i.createdAt)
        let meta = CIMeta(itemId: i.id, itemTs: created, itemText: i.content.text, itemStatus: i.status.ciStatus, itemSharedMsgId: i.sharedMsgId,
                          itemEdited: i.edited, deletable: !i.deleted, editable: i.sent && !i.deleted, createdAt: created, updatedAt: created)
        let content: CIContent = i.deleted
            ? (i.sent ? .sndDeleted(deleteMode: .broadcast) : .rcvDeleted(deleteMode: .broadcast))
            : (i.sent ? .sndMsgContent(i.content) : .rcvMsgContent(i.content))
        return ChatItem(chatDir: direction(sent: i.sent), meta: meta, content: content, quotedItem: i.quoted, reactions: reactions)
    }

    static func chatStats(unread: Int, minUnreadItemId: Int64) -> ChatStats {
        ChatStats(unreadCount: unread, minUnreadItemId: minUnreadItemId)
    }
}

extension ChatFailure {
    static func chat(_ type: ChatErrorType) -> ChatFailure { ChatFailure(ChatError.error(type)) }
    static func store(_ error: StoreError) -> ChatFailure { ChatFailure(ChatError.store(error)) }
}
