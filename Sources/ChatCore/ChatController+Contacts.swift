import Agent
import Foundation
import GRDB
import SwiftplexBase

extension ChatController {
    // MARK: - Address

    struct AddressRow { var agentId: Int64; var link: String; var shortLink: String?; var settings: JSONValue }

    func address(userId: Int64) throws -> AddressRow? {
        try dbRead { db in
            try Row.fetchOne(db, sql: "SELECT * FROM address WHERE user_id = ?", arguments: [userId]).map {
                AddressRow(agentId: $0["agent_address_id"], link: $0["link"], shortLink: $0["short_link"],
                           settings: (try? JSONValue.parse($0["settings"])) ?? .object([]))
            }
        }
    }

    func addressJSON(_ a: AddressRow, userId: Int64) -> JSONValue {
        .object([
            ("userContactLinkId", .int(Int64(userId))),
            ("connLinkContact", ChatJSON.createdConnLink(full: a.link, short: a.shortLink)),
            ("shortLinkDataSet", .bool(a.shortLink != nil)), ("shortLinkLargeDataSet", .bool(false)),
            ("addressSettings", a.settings),
        ])
    }

    /// Creates the user's contact address; with `short`, also a short link to it (its full link
    /// stored encrypted on the address's relay).
    public func createAddress(userId: Int64, short: Bool = false) async throws -> JSONValue {
        let u = try user(userId)
        try requireStarted()
        if try address(userId: userId) != nil { throw ChatFailure(ChatJSON.chatError("userContactLinkExists")) }
        let (agentId, link) = try await agentCall { try await agent.createAddress() }
        var shortLink: String?
        if short {
            do {
                shortLink = try await agentCall { try await agent.shortLink(forAddress: agentId, link: link) }.description
            } catch {
                try? await agent.deleteAddress(agentId)
                throw error
            }
        }
        let settings = JSONValue.object([("businessAddress", .bool(false))])
        try dbWrite { db in
            try db.execute(sql: "INSERT INTO address (user_id, agent_address_id, link, short_link, settings) VALUES (?, ?, ?, ?, ?)",
                           arguments: [userId, agentId, link.description, shortLink, settings.description])
        }
        return response("userContactLinkCreated", u, [("connLinkContact", ChatJSON.createdConnLink(full: link.description, short: shortLink))])
    }

    public func showAddress(userId: Int64) throws -> JSONValue {
        let u = try user(userId)
        guard let a = try address(userId: userId) else { throw ChatFailure(ChatJSON.storeError("userContactLinkNotFound")) }
        return response("userContactLink", u, [("contactLink", addressJSON(a, userId: userId))])
    }

    /// Puts the user's address into their profile as `contactLink` (or takes it out) and sends
    /// the profile to their contacts, as `/_profile` does.
    public func setProfileAddress(userId: Int64, enabled: Bool) async throws -> JSONValue {
        let u = try user(userId)
        guard case let .object(fields) = u.profile else { throw ChatFailure.command("the user's profile is not an object") }
        var updated = fields.filter { $0.0 != "contactLink" }
        if enabled {
            guard let a = try address(userId: userId) else { throw ChatFailure(ChatJSON.storeError("userContactLinkNotFound")) }
            updated.append(("contactLink", .string(a.shortLink ?? a.link)))
        }
        return try await updateProfile(userId: userId, profile: .object(updated))
    }

    public func setAddressSettings(userId: Int64, settings: JSONValue) throws -> JSONValue {
        let u = try user(userId)
        guard settings["businessAddress"]?.boolValue != nil else { throw ChatFailure.command("AddressSettings needs businessAddress") }
        if let auto = settings["autoAccept"] {
            guard case .object = auto, auto["acceptIncognito"]?.boolValue != nil else {
                throw ChatFailure.command("autoAccept must be {\"acceptIncognito\": true|false}")
            }
        }
        guard var a = try address(userId: userId) else { throw ChatFailure(ChatJSON.storeError("userContactLinkNotFound")) }
        a.settings = settings
        try dbWrite { db in try db.execute(sql: "UPDATE address SET settings = ? WHERE user_id = ?", arguments: [settings.description, userId]) }
        return response("userContactLinkUpdated", u, [("contactLink", addressJSON(a, userId: userId))])
    }

    public func deleteAddress(userId: Int64) async throws -> JSONValue {
        let u = try user(userId)
        guard let a = try address(userId: userId) else { throw ChatFailure(ChatJSON.storeError("userContactLinkNotFound")) }
        try await agentCall { try await agent.deleteAddress(a.agentId) }
        try dbWrite { db in try db.execute(sql: "DELETE FROM address WHERE user_id = ?", arguments: [userId]) }
        return response("userContactLinkDeleted", u)
    }

    // MARK: - Profiles

    /// What a peer learns about this user: `x.info` with the profile.
    func profileInfo(_ profile: JSONValue) -> [UInt8] {
        ChatMessage(event: "x.info", params: .object([("profile", profile)])).encoded
    }

    /// The profile this user shows a contact: the random incognito profile or the user's own,
    /// with the preferences set for this contact alone laid over the profile's.
    func ownProfile(for c: ChatJSON.ContactRow, user u: UserRow) -> JSONValue {
        let base = c.incognitoProfile ?? u.profile
        guard case let .object(overrides)? = c.userPreferences, !overrides.isEmpty, case var .object(pairs) = base else { return base }
        var prefs: [(String, JSONValue)] = []
        if case let .object(p)? = base["preferences"] { prefs = p }
        for (k, v) in overrides {
            if let i = prefs.firstIndex(where: { $0.0 == k }) { prefs[i].1 = v } else { prefs.append((k, v)) }
        }
        if let i = pairs.firstIndex(where: { $0.0 == "preferences" }) { pairs[i].1 = .object(prefs) } else { pairs.append(("preferences", .object(prefs))) }
        return .object(pairs)
    }

    static func profile(fromInfo info: [UInt8]) -> JSONValue? {
        guard let m = try? ChatMessage(decoding: info), m.event == "x.info" || m.event == "x.contact" else { return nil }
        return m.params["profile"]
    }

    static let incognitoAdjectives = ["Quiet", "Brave", "Amber", "Swift", "Gentle", "Silver", "Clever", "Misty", "Bright", "Calm",
                                      "Rusty", "Lucky", "Nimble", "Frosty", "Velvet", "Sunny"]
    static let incognitoNouns = ["Otter", "Falcon", "Maple", "River", "Comet", "Badger", "Heron", "Cedar", "Lynx", "Pebble",
                                 "Willow", "Marten", "Finch", "Harbor", "Ember", "Fox"]

    /// A fresh random profile for one incognito connection: a name and nothing that links it to the user.
    static func randomProfile() -> JSONValue {
        let name = "\(incognitoAdjectives.randomElement()!)\(incognitoNouns.randomElement()!)\(Int.random(in: 10...99))"
        return .object([("displayName", .string(name)), ("fullName", .string(""))])
    }

    // MARK: - Contacts

    func insertContact(userId: Int64, agentConnId: Int64, profile: JSONValue?, viaAddress: Bool, invitation: String?, shortLink: String? = nil,
                       incognito: JSONValue? = nil, accepted: Bool = false, localName: String? = nil) throws -> Int64 {
        try dbWrite { db in
            let now = Timestamp.now()
            try db.execute(sql: """
                INSERT INTO contact (user_id, agent_conn_id, profile, status, via_address, accepted, invitation, short_link, incognito_profile, local_display_name, created_at, updated_at)
                VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [userId, agentConnId, profile?.description, viaAddress, accepted, invitation, shortLink, incognito?.description, localName, now, now])
            return db.lastInsertedRowID
        }
    }

    /// Stores a contact's profile and gives the contact the local name that profile asks for:
    /// unchanged while the display name is, else a fresh unique one (``LocalNames``).
    nonisolated static func storeContactProfile(_ db: Database, contactId: Int64, profile: JSONValue, updatedAt: String? = nil) throws {
        guard let row = try Row.fetchOne(db, sql: "SELECT user_id, local_display_name FROM contact WHERE id = ?", arguments: [contactId]) else { return }
        var local: String? = row["local_display_name"]
        if let base = LocalNames.base(of: profile) {
            local = try LocalNames.rename(db, userId: row["user_id"], current: local, displayName: base)
        }
        try db.execute(sql: "UPDATE contact SET profile = ?, local_display_name = ?, updated_at = COALESCE(?, updated_at) WHERE id = ?",
                       arguments: [profile.description, local, updatedAt, contactId])
    }

    nonisolated static func contactRow(_ db: Database, where clause: String, _ args: StatementArguments) throws -> (userId: Int64, row: ChatJSON.ContactRow)? {
        try Row.fetchOne(db, sql: "SELECT * FROM contact WHERE \(clause)", arguments: args).map { contactRow($0) }
    }

    nonisolated static func contactRow(_ r: Row) -> (userId: Int64, row: ChatJSON.ContactRow) {
        func json(_ column: String) -> JSONValue? { (r[column] as String?).flatMap { try? JSONValue.parse($0) } }
        return (r["user_id"], ChatJSON.ContactRow(
            id: r["id"], agentConnId: r["agent_conn_id"], profile: json("profile"), status: r["status"], viaAddress: r["via_address"],
            createdAt: r["created_at"], updatedAt: r["updated_at"], chatTs: r["chat_ts"], customData: json("custom_data"),
            userPreferences: json("user_prefs"), incognitoProfile: json("incognito_profile"), invitation: r["invitation"], shortLink: r["short_link"],
            localName: r["local_display_name"]))
    }

    func contacts(userId: Int64, where clause: String) throws -> [ChatJSON.ContactRow] {
        try dbRead { db in
            try Row.fetchAll(db, sql: "SELECT * FROM contact WHERE user_id = ? AND \(clause) ORDER BY id", arguments: [userId]).map { Self.contactRow($0).row }
        }
    }

    /// A contact and its user, or `contactNotFound`.
    func contact(_ contactId: Int64) throws -> (UserRow, ChatJSON.ContactRow) {
        guard let (userId, row) = try dbRead({ db in try Self.contactRow(db, where: "id = ?", [contactId]) }) else {
            throw ChatFailure(ChatJSON.storeError("contactNotFound", [("contactId", .int(Int64(contactId)))]))
        }
        return (try user(userId), row)
    }

    func contactJSON(_ c: ChatJSON.ContactRow, user u: UserRow) -> JSONValue { ChatJSON.contact(c, userProfile: u.profile) }

    func pendingJSON(_ c: ChatJSON.ContactRow, link: String?) -> JSONValue {
        ChatJSON.pendingConnection(id: c.id, agentConnId: c.agentConnId, viaAddress: c.viaAddress, link: link, shortLink: c.shortLink,
                                   incognito: c.incognitoProfile != nil, createdAt: c.createdAt)
    }

    func cmdOk(_ u: UserRow?) -> JSONValue {
        var pairs: [(String, JSONValue)] = [("type", .string("cmdOk"))]
        if let u { pairs.append(("user_", userJSON(u))) }
        return .object(pairs)
    }

    /// Sends one chat-protocol message to a contact; returns its agent message number.
    @discardableResult
    func sendChatMessage(_ c: ChatJSON.ContactRow, _ message: ChatMessage) async throws -> UInt64 {
        try await agentCall { try await agent.send(c.agentConnId, message.encoded) }
    }

    // MARK: - Connections

    /// Creates a one-time invitation; `incognito` shows the joiner a random profile, `short` also
    /// makes a short link.
    public func addContact(userId: Int64, incognito: Bool = false, short: Bool = false) async throws -> JSONValue {
        let u = try user(userId)
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
        let id = try insertContact(userId: userId, agentConnId: conn, profile: nil, viaAddress: false, invitation: link.description,
                                   shortLink: shortLink, incognito: incognito ? Self.randomProfile() : nil)
        let row = try contact(id).1
        return response("invitation", u, [
            ("connLinkInvitation", ChatJSON.createdConnLink(full: link.description, short: shortLink)),
            ("connection", pendingJSON(row, link: link.description)),
        ])
    }

    /// Parses a link; a short link (`https://…`) is resolved on its relay into the full link.
    func resolveLink(_ text: String) async throws -> (link: AgentLink, short: String?) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("https://") {
            let short: ShortLink
            do { short = try ShortLink(parsing: trimmed) } catch { throw ChatFailure(ChatJSON.chatError("invalidConnReq")) }
            let full = try await agentCall { try await agent.resolve(short) }
            return (full, short.description)
        }
        do { return (try AgentLink(parsing: trimmed), nil) } catch { throw ChatFailure(ChatJSON.chatError("invalidConnReq")) }
    }

    public func connectPlan(userId: Int64, link text: String) async throws -> JSONValue {
        let u = try user(userId)
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let ownShort = try dbRead { db -> Bool in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM contact WHERE short_link = ? UNION SELECT 1 FROM address WHERE short_link = ?",
                              arguments: [trimmed, trimmed]) ?? false
        }
        let (link, short): (AgentLink, String?)
        if ownShort, let own = try dbRead({ db in
            try String.fetchOne(db, sql: "SELECT invitation FROM contact WHERE short_link = ? UNION SELECT link FROM address WHERE short_link = ?",
                                arguments: [trimmed, trimmed])
        }) {
            do { link = try AgentLink(parsing: own) } catch { throw ChatFailure(ChatJSON.chatError("invalidConnReq")) }
            short = trimmed
        } else {
            (link, short) = try await resolveLink(trimmed)
        }
        let full = link.description
        let own = try dbRead { db -> Bool in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM contact WHERE invitation = ? UNION SELECT 1 FROM address WHERE link = ?", arguments: [full, full]) ?? false
        }
        let plan: JSONValue
        switch link {
        case .invitation:
            plan = .object([("type", .string("invitationLink")), ("invitationLinkPlan", .object([("type", .string(own ? "ownLink" : "ok"))]))])
        case .contact:
            plan = .object([("type", .string("contactAddress")), ("contactAddressPlan", .object([("type", .string(own ? "ownLink" : "ok"))]))])
        }
        return response("connectionPlan", u, [("connLink", ChatJSON.createdConnLink(full: full, short: short)), ("connectionPlan", plan)])
    }

    /// Connects the user through an invitation link or a contact address (full or short);
    /// `incognito` shows the peer a random profile made for this connection only.
    public func connect(userId: Int64?, link text: String, incognito: Bool = false) async throws -> JSONValue {
        let u = try userId.map { try user($0) } ?? activeUser()
        try requireStarted()
        let (link, _) = try await resolveLink(text)
        let custom = incognito ? Self.randomProfile() : nil
        let info = profileInfo(custom ?? u.profile)
        var extra: [(String, JSONValue)] = []
        if let custom { extra.append(("customUserProfile", custom)) }
        switch link {
        case let .invitation(inv):
            let id = try await trackingJoin {
                let conn = try await agentCall { try await agent.join(inv, info: info) }
                return (try insertContact(userId: u.id, agentConnId: conn, profile: nil, viaAddress: false, invitation: nil, incognito: custom), conn)
            }
            return response("sentConfirmation", u, [("connection", pendingJSON(try contact(id).1, link: nil))] + extra)
        case let .contact(address):
            let id = try await trackingJoin {
                let conn = try await agentCall { try await agent.joinAddress(address, info: info) }
                return (try insertContact(userId: u.id, agentConnId: conn, profile: nil, viaAddress: true, invitation: nil, incognito: custom), conn)
            }
            return response("sentInvitation", u, [("connection", pendingJSON(try contact(id).1, link: nil))] + extra)
        }
    }

    /// Contacts that are connected, or were until the contact deleted them (`contactStatus` says which).
    public func listContacts(userId: Int64) throws -> JSONValue {
        let u = try user(userId)
        let rows = try contacts(userId: userId, where: "status IN ('ready', 'deleted')")
        return response("contactsList", u, [("contacts", .array(rows.map { contactJSON($0, user: u) }))])
    }

    // MARK: - Contact state

    /// Deletes a contact (`full`/`entity`): tells the peer (`x.direct.del`) when `notify`, deletes
    /// the connection and its queue on the relay, then the contact and its items. `messages`
    /// deletes only the items. A pending connection is deleted as `contactConnectionDeleted`.
    public func deleteContact(contactId: Int64, notify: Bool, messagesOnly: Bool) async throws -> JSONValue {
        let (u, c) = try contact(contactId)
        if messagesOnly {
            try dbWrite { db in try db.execute(sql: "DELETE FROM chat_item WHERE contact_id = ?", arguments: [contactId]) }
            return response("chatCleared", u, [("chatInfo", .object([("type", .string("direct")), ("contact", contactJSON(c, user: u))]))])
        }
        if c.ready, notify {
            do { try await sendChatMessage(c, ChatMessage(event: "x.direct.del", params: .object([]))) } catch {
                logger.info("could not tell the contact about the deletion", metadata: ["contact": "\(contactId)"])
            }
        }
        try? await agent.deleteConnection(c.agentConnId)
        try dbWrite { db in
            try db.execute(sql: "DELETE FROM contact WHERE id = ?", arguments: [contactId])
            try LocalNames.release(db, userId: u.id, name: c.localName)
        }
        if c.status == "pending" {
            return response("contactConnectionDeleted", u, [("connection", pendingJSON(c, link: c.invitation))])
        }
        return response("contactDeleted", u, [("contact", contactJSON(c, user: u))])
    }

    /// Sets (or, with nil, clears) the application's own JSON on a contact.
    public func setCustomData(contactId: Int64, data: JSONValue?) throws -> JSONValue {
        let (u, _) = try contact(contactId)
        try dbWrite { db in try db.execute(sql: "UPDATE contact SET custom_data = ? WHERE id = ?", arguments: [data?.description, contactId]) }
        return cmdOk(u)
    }

    static let allowValues: Set<String> = ["always", "yes", "no"]

    /// Sets this user's preferences for one contact and sends the contact the resulting profile.
    public func setContactPreferences(contactId: Int64, preferences: JSONValue) async throws -> JSONValue {
        let (u, c) = try contact(contactId)
        guard case let .object(pairs) = preferences else { throw ChatFailure.command("Preferences must be a JSON object") }
        for (key, value) in pairs {
            if key == "commands" {
                guard case .array = value else { throw ChatFailure.command("preferences.commands must be an array") }
                continue
            }
            guard ChatJSON.features.contains(key) else { throw ChatFailure.command("unknown preference \(key)") }
            guard let allow = value["allow"]?.stringValue, Self.allowValues.contains(allow) else {
                throw ChatFailure.command("preference \(key) needs allow: always, yes or no")
            }
        }
        try dbWrite { db in
            try db.execute(sql: "UPDATE contact SET user_prefs = ?, updated_at = ? WHERE id = ?", arguments: [preferences.description, Timestamp.now(), contactId])
        }
        let updated = try contact(contactId).1
        if updated.ready {
            try await sendChatMessage(updated, ChatMessage(event: "x.info", params: .object([("profile", ownProfile(for: updated, user: u))])))
        }
        return response("contactPrefsUpdated", u, [("fromContact", contactJSON(c, user: u)), ("toContact", contactJSON(updated, user: u))])
    }
}
