import Agent
import ChannelProtocol
import ChatModel
import Foundation
import SwiftplexSQL
import SwiftplexBase

extension ChatController {
    // MARK: - Profiles

    /// What a peer learns about this user: `x.info` with the profile.
    func profileInfo(_ profile: Profile) throws -> [UInt8] {
        ChatMessage(event: "x.info", params: .object([("profile", try JSONValueEncoder().encode(profile))])).encoded
    }

    /// The profile this user shows a contact: the random incognito profile or the user's own,
    /// with the preferences set for this contact alone laid over the profile's.
    func ownProfile(for c: ContactRow, user u: UserRow) -> Profile {
        var profile = c.incognitoProfile ?? u.profile
        guard let overrides = c.userPreferences else { return profile }
        var prefs = profile.preferences ?? Preferences()
        if let v = overrides.timedMessages { prefs.timedMessages = v }
        if let v = overrides.fullDelete { prefs.fullDelete = v }
        if let v = overrides.reactions { prefs.reactions = v }
        if let v = overrides.voice { prefs.voice = v }
        if let v = overrides.files { prefs.files = v }
        if let v = overrides.calls { prefs.calls = v }
        if let v = overrides.sessions { prefs.sessions = v }
        if let v = overrides.commands { prefs.commands = v }
        if prefs != Preferences() || profile.preferences != nil { profile.preferences = prefs }
        return profile
    }

    func ownProfileJSON(for c: ContactRow, user u: UserRow) throws -> JSONValue { try JSONValueEncoder().encode(ownProfile(for: c, user: u)) }

    static let incognitoAdjectives = ["Quiet", "Brave", "Amber", "Swift", "Gentle", "Silver", "Clever", "Misty", "Bright", "Calm",
                                      "Rusty", "Lucky", "Nimble", "Frosty", "Velvet", "Sunny"]
    static let incognitoNouns = ["Otter", "Falcon", "Maple", "River", "Comet", "Badger", "Heron", "Cedar", "Lynx", "Pebble",
                                 "Willow", "Marten", "Finch", "Harbor", "Ember", "Fox"]

    /// A fresh random profile for one incognito connection: a name and nothing that links it to the user.
    static func randomProfile() -> Profile {
        Profile(displayName: "\(incognitoAdjectives.randomElement()!)\(incognitoNouns.randomElement()!)\(Int.random(in: 10...99))")
    }

    // MARK: - Contacts

    func insertContact(userId: Int64, agentConnId: Int64, profile: Profile?, viaAddress: Bool, invitation: String?, shortLink: String? = nil,
                       incognito: Profile? = nil, accepted: Bool = false, localName: String? = nil) async throws -> Int64 {
        let now = Timestamp.now()
        let record = ContactRecord(userId: userId, agentConnId: agentConnId, profile: try profile.map(Stored.text), status: .pending,
                                   viaAddress: viaAddress, accepted: accepted, invitation: invitation, createdAt: now, updatedAt: now,
                                   incognitoProfile: try incognito.map(Stored.text), shortLink: shortLink, localDisplayName: localName)
        return try await dbWrite { db in
            var inserted = record
            try inserted.insert(db)
            return inserted.id!
        }
    }

    /// Stores a contact's profile and gives the contact the local name that profile asks for:
    /// unchanged while the display name is, else a fresh unique one (``LocalNames``).
    nonisolated static func storeContactProfile(_ db: Database, contactId: Int64, profile: Profile, updatedAt: String? = nil) throws {
        guard var record = try ContactRecord.fetchOne(db, key: contactId) else { return }
        record.localDisplayName = try LocalNames.rename(db, userId: record.userId, current: record.localDisplayName, displayName: profile.displayName)
        record.profile = try Stored.text(profile)
        if let updatedAt { record.updatedAt = updatedAt }
        try record.update(db)
    }

    /// The contact of an agent connection.
    func contact(connection conn: Int64) async throws -> ContactRow? {
        try await dbRead { db in try ContactRecord.filter(ContactRecord.Columns.agentConnId == conn).fetchOne(db) }.map(ContactRow.init)
    }

    func contacts(userId: Int64, _ condition: SQLExpression) async throws -> [ContactRow] {
        try await dbRead { db in
            try ContactRecord.filter(ContactRecord.Columns.userId == userId).filter(condition).order(ContactRecord.Columns.id).fetchAll(db)
        }.map(ContactRow.init)
    }

    /// A contact and its user, or `contactNotFound`.
    func contact(_ contactId: Int64) async throws -> (UserRow, ContactRow) {
        guard let c = try await dbRead({ db in try ContactRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM contact WHERE id = ?"), arguments: [contactId]) }) else {
            throw ChatFailure.store(.contactNotFound(contactId: contactId))
        }
        return (try await user(c.userId), ContactRow(c))
    }

    func contactModel(_ c: ContactRow, user u: UserRow) -> Contact { ModelOf.contact(c, userProfile: u.profile) }

    func directInfo(_ c: ContactRow, user u: UserRow) -> ChatInfo { .direct(contact: contactModel(c, user: u)) }

    /// Sends one chat-protocol message to a contact; returns its agent message number.
    @discardableResult
    func sendChatMessage(_ c: ContactRow, _ message: ChatMessage) async throws -> UInt64 {
        try await agentCall { try await agent.send(c.agentConnId, message.encoded) }
    }

    // MARK: - Connections

    /// Creates a one-time invitation; `incognito` shows the joiner a random profile, `short` also
    /// makes a short link.
    public func addContact(userId: Int64, incognito: Bool = false, short: Bool = false) async throws -> ChatResponse {
        let u = try await user(userId)
        try requireStarted()
        let (conn, link) = try await agentCall { try await agent.createInvitation() }
        var shortLink: String?
        if short {
            do {
                shortLink = try await agentCall { try await agent.shortLink(forConnection: conn, link: link) }.description
            } catch {
                try? await agent.deleteConnection(conn)
                throw error
            }
        }
        let id = try await insertContact(userId: userId, agentConnId: conn, profile: nil, viaAddress: false, invitation: link.description,
                                         shortLink: shortLink, incognito: incognito ? Self.randomProfile() : nil)
        let row = try await contact(id).1
        return .invitation(user: userModel(u), connLinkInvitation: CreatedConnLink(connFullLink: link.description, connShortLink: shortLink),
                           connection: ModelOf.pendingConnection(row, link: link.description))
    }

    /// Refuses a chat relay's address (`/r`): nobody connects to it, it serves channel owners
    /// (`channelError` `relayAddress`, "This is a chat relay address, it cannot be used to connect.").
    nonisolated static func checkConnectable(_ text: String) throws {
        do { try ChannelLinks.checkConnectable(text) } catch { throw ChatFailure(error) }
    }

    /// A channel link (`/c`), joined through its relays, never as the address it names.
    nonisolated static func channelShortLink(_ text: String) -> ShortLink? {
        guard let short = try? ShortLink(parsing: text.trimmingCharacters(in: .whitespacesAndNewlines)), short.kind == .channel else { return nil }
        return short
    }

    /// Parses a link; a short link (`https://…`) is resolved on its relay into the full link.
    func resolveLink(_ text: String) async throws -> (link: AgentLink, short: String?) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("https://") {
            let short: ShortLink
            do { short = try ShortLink(parsing: trimmed) } catch { throw ChatFailure.chat(.invalidConnReq) }
            // Channel links (`/c`) are joined through their relays, which the engine does not do
            // yet (docs/channels.md §8): never as the contact address they resolve to.
            guard short.kind != .channel else { throw ChatFailure.chat(.invalidConnReq) }
            let full = try await agentCall { try await agent.resolve(short) }
            return (full, short.description)
        }
        do { return (try AgentLink(parsing: trimmed), nil) } catch { throw ChatFailure.chat(.invalidConnReq) }
    }

    public func connectPlan(userId: Int64, link text: String) async throws -> ChatResponse {
        let u = try await user(userId)
        try Self.checkConnectable(text)
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let channel = Self.channelShortLink(trimmed) { return try await channelPlan(user: u, short: channel) } // (+ChannelMembers)
        // A short link of this engine's own is known without asking its relay.
        let ownFull = try await dbRead { db -> String? in
            if let c = try ContactRecord.filter(ContactRecord.Columns.shortLink == trimmed).fetchOne(db), let invitation = c.invitation { return invitation }
            if let g = try GroupLinkRecord.filter(GroupLinkRecord.Columns.shortLink == trimmed).fetchOne(db) { return g.link }
            return try AddressRecord.filter(AddressRecord.Columns.shortLink == trimmed).fetchOne(db)?.link
        }
        let (link, short): (AgentLink, String?)
        if let ownFull {
            do { link = try AgentLink(parsing: ownFull) } catch { throw ChatFailure.chat(.invalidConnReq) }
            short = trimmed
        } else {
            (link, short) = try await resolveLink(trimmed)
        }
        let full = link.description
        if case let .contact(a) = link, a.groupLinkId != nil {
            return .connectionPlan(user: userModel(u), connLink: CreatedConnLink(connFullLink: full, connShortLink: short),
                                   connectionPlan: .groupLink(try await groupLinkPlan(userId: u.id, full: full)))
        }
        let own = try await dbRead { db -> Bool in
            try !ContactRecord.filter(ContactRecord.Columns.invitation == full).isEmpty(db) || !AddressRecord.filter(AddressRecord.Columns.link == full).isEmpty(db)
        }
        let plan: ConnectionPlan = switch link {
        case .invitation: .invitationLink(own ? .ownLink : .ok)
        case .contact: .contactAddress(own ? .ownLink : .ok)
        }
        return .connectionPlan(user: userModel(u), connLink: CreatedConnLink(connFullLink: full, connShortLink: short), connectionPlan: plan)
    }

    /// Connects the user through an invitation link or a contact address (full or short);
    /// `incognito` shows the peer a random profile made for this connection only.
    public func connect(userId: Int64?, link text: String, incognito: Bool = false) async throws -> ChatResponse {
        let u = if let userId { try await user(userId) } else { try await activeUser() }
        try Self.checkConnectable(text)
        try requireStarted()
        if let channel = Self.channelShortLink(text) { return try await joinChannel(user: u, short: channel, incognito: incognito) } // (+ChannelMembers)
        let (link, short) = try await resolveLink(text)
        if case let .contact(address) = link, address.groupLinkId != nil {
            return try await connectGroupLink(user: u, address: address, short: short, incognito: incognito)
        }
        let custom = incognito ? Self.randomProfile() : nil
        let info = try profileInfo(custom ?? u.profile)
        switch link {
        case let .invitation(inv):
            let id = try await trackingJoin {
                let conn = try await agentCall { try await agent.join(inv, info: info) }
                return (try await insertContact(userId: u.id, agentConnId: conn, profile: nil, viaAddress: false, invitation: nil, incognito: custom), conn)
            }
            return .sentConfirmation(user: userModel(u), connection: ModelOf.pendingConnection(try await contact(id).1, link: nil), customUserProfile: custom)
        case let .contact(address):
            let id = try await trackingJoin {
                let conn = try await agentCall { try await agent.joinAddress(address, info: info) }
                return (try await insertContact(userId: u.id, agentConnId: conn, profile: nil, viaAddress: true, invitation: nil, incognito: custom), conn)
            }
            return .sentInvitation(user: userModel(u), connection: ModelOf.pendingConnection(try await contact(id).1, link: nil), customUserProfile: custom)
        }
    }

    /// Contacts that are connected, or were until the contact deleted them (`contactStatus` says which).
    public func listContacts(userId: Int64) async throws -> ChatResponse {
        let u = try await user(userId)
        let rows = try await contacts(userId: userId, [ContactState.ready, .deleted].contains(ContactRecord.Columns.status))
        return .contactsList(user: userModel(u), contacts: rows.map { contactModel($0, user: u) })
    }

    // MARK: - Contact state

    /// Deletes a contact (`full`/`entity`): tells the peer (`x.direct.del`) when `notify`, deletes
    /// the connection and its queue on the relay, then the contact and its items. `messages`
    /// deletes only the items. A pending connection is deleted as `contactConnectionDeleted`.
    public func deleteContact(contactId: Int64, notify: Bool, messagesOnly: Bool) async throws -> ChatResponse {
        let (u, c) = try await contact(contactId)
        if messagesOnly {
            try await dbWrite { db in _ = try ChatItemRecord.filter(ChatItemRecord.Columns.contactId == contactId).deleteAll(db) }
            return .chatCleared(user: userModel(u), chatInfo: directInfo(c, user: u))
        }
        if c.ready, notify {
            do { try await sendChatMessage(c, ChatMessage(event: "x.direct.del", params: .object([]))) } catch {
                logger.info("could not tell the contact about the deletion", metadata: ["contact": "\(contactId)"])
            }
        }
        try? await agent.deleteConnection(c.agentConnId)
        let (userId, localName) = (u.id, c.localName)
        try await dbWrite { db in
            _ = try ContactRecord.deleteOne(db, key: contactId)
            try LocalNames.release(db, userId: userId, name: Self.contactOwnName(db, localName, userId: userId))
        }
        await memberContactDeleted(c)
        if c.status == .pending, c.groupMemberRowId == nil {  // a member contact is a contact from the start
            return .contactConnectionDeleted(user: userModel(u), connection: ModelOf.pendingConnection(c, link: c.invitation))
        }
        return .contactDeleted(user: userModel(u), contact: contactModel(c, user: u))
    }

    /// Sets (or, with nil, clears) the application's own JSON on a contact.
    public func setCustomData(contactId: Int64, data: JSONValue?) async throws -> ChatResponse {
        let (u, _) = try await contact(contactId)
        let text = data?.description
        try await dbWrite { db in _ = try ContactRecord.filter(key: contactId).updateAll(db, ContactRecord.Columns.customData.set(to: text)) }
        return .cmdOk(user: userModel(u))
    }

    static let allowValues: Set<String> = ["always", "yes", "no"]

    /// Sets this user's preferences for one contact and sends the contact the resulting profile.
    public func setContactPreferences(contactId: Int64, preferences: JSONValue) async throws -> ChatResponse {
        let (u, c) = try await contact(contactId)
        guard case let .object(pairs) = preferences else { throw ChatFailure.command("Preferences must be a JSON object") }
        for (key, value) in pairs {
            if key == "commands" {
                guard case .array = value else { throw ChatFailure.command("preferences.commands must be an array") }
                continue
            }
            guard ChatFeature(rawValue: key) != nil else { throw ChatFailure.command("unknown preference \(key)") }
            guard let allow = value["allow"]?.stringValue, Self.allowValues.contains(allow) else {
                throw ChatFailure.command("preference \(key) needs allow: always, yes or no")
            }
        }
        let typed: Preferences
        do { typed = try JSONValueDecoder().decode(Preferences.self, from: preferences) } catch {
            throw ChatFailure.command("malformed Preferences: \(error)")
        }
        let text = try Stored.text(typed)
        let now = Timestamp.now()
        try await dbWrite { db in
            _ = try ContactRecord.filter(key: contactId).updateAll(db, ContactRecord.Columns.userPrefs.set(to: text), ContactRecord.Columns.updatedAt.set(to: now))
        }
        let updated = try await contact(contactId).1
        if updated.ready {
            try await sendChatMessage(updated, ChatMessage(event: "x.info", params: .object([("profile", try ownProfileJSON(for: updated, user: u))])))
        }
        return .contactPrefsUpdated(user: userModel(u), fromContact: contactModel(c, user: u), toContact: contactModel(updated, user: u))
    }
}
