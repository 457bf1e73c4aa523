import Agent
import Foundation
import GRDB

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
            ("userContactLinkId", .number(Double(userId))),
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
            throw ChatFailure(ChatJSON.storeError("contactNotFound", [("contactId", .number(Double(contactId)))]))
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

    // MARK: - Requests

    public func acceptRequest(_ requestId: Int64, incognito: Bool = false) async throws -> JSONValue {
        guard let (userId, agentRequest, profile, localName) = try dbRead({ db in
            try Row.fetchOne(db, sql: "SELECT * FROM contact_request WHERE id = ?", arguments: [requestId]).map {
                ($0["user_id"] as Int64, $0["agent_request_id"] as Int64, (try? JSONValue.parse($0["profile"] as String)) ?? .object([]),
                 $0["local_display_name"] as String?)
            }
        }) else { throw ChatFailure(ChatJSON.storeError("contactRequestNotFound", [("contactRequestId", .number(Double(requestId)))])) }
        let u = try user(userId)
        return try await accept(user: u, requestId: requestId, agentRequest: agentRequest, profile: profile, incognito: incognito, localName: localName)
    }

    /// Accepts a request; the new contact keeps the local name the request had.
    func accept(user u: UserRow, requestId: Int64, agentRequest: Int64, profile: JSONValue, incognito: Bool, localName: String?) async throws -> JSONValue {
        let custom = incognito ? Self.randomProfile() : nil
        let info = profileInfo(custom ?? u.profile)
        let id = try await trackingJoin {
            let conn = try await agentCall { try await agent.acceptRequest(agentRequest, info: info) }
            return (try insertContact(userId: u.id, agentConnId: conn, profile: profile, viaAddress: true, invitation: nil, incognito: custom, accepted: true,
                                      localName: localName), conn)
        }
        try dbWrite { db in try db.execute(sql: "DELETE FROM contact_request WHERE id = ?", arguments: [requestId]) }
        return response("acceptingContactRequest", u, [("contact", contactJSON(try contact(id).1, user: u))])
    }

    public func rejectRequest(_ requestId: Int64) async throws -> JSONValue {
        guard let (userId, agentRequest, profile, createdAt, localName) = try dbRead({ db in
            try Row.fetchOne(db, sql: "SELECT * FROM contact_request WHERE id = ?", arguments: [requestId]).map {
                ($0["user_id"] as Int64, $0["agent_request_id"] as Int64, (try? JSONValue.parse($0["profile"] as String)) ?? .object([]), $0["created_at"] as String,
                 $0["local_display_name"] as String?)
            }
        }) else { throw ChatFailure(ChatJSON.storeError("contactRequestNotFound", [("contactRequestId", .number(Double(requestId)))])) }
        let u = try user(userId)
        try? await agent.rejectRequest(agentRequest)
        try dbWrite { db in
            try db.execute(sql: "DELETE FROM contact_request WHERE id = ?", arguments: [requestId])
            try LocalNames.release(db, userId: userId, name: localName)
        }
        return response("contactRequestRejected", u, [("contactRequest", ChatJSON.contactRequest(id: requestId, profile: profile, createdAt: createdAt, localName: localName))])
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

    // MARK: - Agent events

    /// Takes one agent event, in the agent's order. An event of a connection that a join in
    /// flight has not yet recorded as a contact waits (`parked`) until it has; the rest are
    /// handled now.
    func dispatch(_ event: AgentEvent) async {
        if let conn = event.connectionId {
            if parked[conn] != nil {
                parked[conn]!.append(event)
                return
            }
            let known = try? dbRead { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM contact WHERE agent_conn_id = ?", arguments: [conn]) }
            if joinsInFlight > 0, known == nil {
                parked[conn] = [event]
                return
            }
        }
        await handleStoring(event)
    }

    /// Runs a join (`body` returns the new agent connection) so that the connection's events
    /// wait for the contact that `body` records.
    func trackingJoin<T>(_ body: () async throws -> (T, Int64)) async throws -> T {
        joinsInFlight += 1
        var conn: Int64?
        defer {
            joinsInFlight -= 1
            let c = conn
            let idle = joinsInFlight == 0
            inBackground { await self.releaseParked(c, all: idle) }
        }
        let (result, id) = try await body()
        conn = id
        return result
    }

    private func releaseParked(_ conn: Int64?, all: Bool) async {
        if let conn { await drainParked(conn) }
        if all, joinsInFlight == 0 {
            for c in Array(parked.keys) { await drainParked(c) }
        }
    }

    private func drainParked(_ conn: Int64) async {
        guard !draining.contains(conn) else { return }
        draining.insert(conn)
        defer { draining.remove(conn) }
        while let waiting = parked[conn], let first = waiting.first {
            parked[conn] = Array(waiting.dropFirst())
            await handleStoring(first)
        }
        parked[conn] = nil
    }

    /// Handles an event; when the chat database refuses a write, reports `errorStore` and
    /// handles the same event again after a pause, so that nothing the agent delivered is
    /// marked processed before it is stored. Faults that pass (a full disk, a busy or read-only
    /// file) are waited out; any other database error is tried a few times, then the event is
    /// left with the agent (a message is announced again at the next start).
    func handleStoring(_ event: AgentEvent) async {
        var attempt = 0
        while !closing {
            do {
                try await handle(event)
                return
            } catch let e as DatabaseError {
                attempt += 1
                logger.warning("the chat database refused an event; retrying", metadata: ["attempt": "\(attempt)", "error": "\(e.resultCode)"])
                sink.yield(.object([("type", .string("chatError")), ("chatError", ChatJSON.storeError("dbError", [
                    ("resultCode", .string("\(e.resultCode)")), ("message", .string(e.message ?? "")),
                ]))]))
                if Task.isCancelled || closing { return }
                if !Self.passingFault(e), attempt >= Self.maxStoreAttempts { return }
                try? await Task.sleep(for: min(.milliseconds(50) * (1 << min(attempt, 7)), .seconds(5)))
            } catch let failure as ChatFailure {
                sink.yield(.object([("type", .string("chatError")), ("chatError", failure.chatError)]))
                return
            } catch {
                sink.yield(.object([("type", .string("chatError")), ("chatError", ChatJSON.chatError("commandError", [("message", .string("\(error)"))]))]))
                return
            }
        }
    }

    static let maxStoreAttempts = 8

    /// Database faults that go away by themselves (space returns, a lock is released).
    static func passingFault(_ e: DatabaseError) -> Bool {
        let passing: [ResultCode] = [.SQLITE_FULL, .SQLITE_IOERR, .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_READONLY, .SQLITE_NOMEM, .SQLITE_CANTOPEN, .SQLITE_PROTOCOL]
        return passing.contains(e.resultCode)
    }

    /// Runs `body` in a task of its own (accepting, allowing: they wait on a peer's relay),
    /// reporting its failure as a `chatError` event.
    func inBackground(_ body: @escaping @Sendable () async throws -> Void) {
        guard !closing else { return }
        let key = nextBackground
        nextBackground += 1
        background[key] = Task {
            do {
                try await body()
            } catch let failure as ChatFailure {
                self.sink.yield(.object([("type", .string("chatError")), ("chatError", failure.chatError)]))
            } catch let e as AgentError {
                self.sink.yield(.object([("type", .string("chatError")), ("chatError", Self.failure(e).chatError)]))
            } catch {
                self.sink.yield(.object([("type", .string("chatError")), ("chatError", ChatJSON.chatError("commandError", [("message", .string("\(error)"))]))]))
            }
            self.finishedBackground(key)
        }
    }

    private func finishedBackground(_ key: Int) { background[key] = nil }

    func handle(_ event: AgentEvent) async throws {
        switch event {
        case let .confirmation(conn, info):
            // Someone joined our one-time invitation: keep their profile and accept (in a task:
            // allowing dials the joiner's relay).
            guard let (userId, row) = try dbRead({ db in try Self.contactRow(db, where: "agent_conn_id = ?", [conn]) }) else { return }
            if let profile = Self.profile(fromInfo: info) {
                try dbWrite { db in try Self.storeContactProfile(db, contactId: row.id, profile: profile) }
            }
            let own = profileInfo(ownProfile(for: row, user: try user(userId)))
            let agent = self.agent
            inBackground { try await agent.allow(conn, info: own) }
        case let .connected(conn, info):
            try await connected(conn, info: info)
        case let .contactRequest(addressId, request, info):
            try await contactRequest(addressId: addressId, request: request, info: info)
        case let .message(conn, seq, body, _):
            // Stored (or refused) before the agent forgets it: a crash in between means the
            // agent announces it again after the restart, and `received` drops the repeat. A
            // database failure leaves it with the agent (see `handleStoring`).
            let wantsReceipt: Bool
            do { wantsReceipt = try await received(conn, seq: seq, body: body) } catch let e as DatabaseError {
                throw e
            } catch {
                await agent.messageProcessed(conn, seq: seq)
                throw error
            }
            await agent.messageProcessed(conn, seq: seq)
            if wantsReceipt { await agent.acknowledgeDelivery(conn, seq: seq) }
        case let .sent(conn, seq):
            try statusChanged(conn, seqs: [seq], to: "sndSent", from: ["sndNew"])
        case let .delivered(conn, seqs):
            try statusChanged(conn, seqs: seqs, to: "sndRcvd", from: ["sndNew", "sndSent"])
        case let .hostConnected(relay):
            sink.yield(.object([("type", .string("hostConnected")), ("protocol", .string("smp")), ("transportHost", .string(relay.host))]))
        case let .hostDisconnected(relay):
            sink.yield(.object([("type", .string("hostDisconnected")), ("protocol", .string("smp")), ("transportHost", .string(relay.host))]))
        case let .rejected(conn, reason):
            logger.info("a message was rejected", metadata: ["connection": "\(conn)", "reason": "\(reason)"])
        case let .undeliverable(conn, seqs):
            try statusChanged(conn, seqs: seqs, to: "sndErrorAuth", from: ["sndNew", "sndSent"])
        case let .storeError(conn, message):
            // The agent database refused what arrived; the agent keeps trying.
            sink.yield(.object([("type", .string("chatError")), ("chatError", .object([
                ("type", .string("errorAgent")), ("agentError", .object([("type", .string(AgentError.Code.store.rawValue)), ("message", .string(message))])),
                ("agentConnId", .string(conn.map(String.init) ?? "")),
            ]))]))
        }
    }

    /// Moves sent items to a later status and reports them in `chatItemsStatusesUpdated`. A
    /// `sent` that arrives before its item is stored is remembered for ``sendItem``.
    private func statusChanged(_ conn: Int64, seqs: [UInt64], to status: String, from: [String]) throws {
        guard let (userId, row) = try dbRead({ db in try Self.contactRow(db, where: "agent_conn_id = ?", [conn]) }) else { return }
        let ids = try dbWrite { db -> [Int64] in
            var ids: [Int64] = []
            for seq in seqs {
                let found = try Int64.fetchOne(db, sql: "SELECT id FROM chat_item WHERE contact_id = ? AND agent_seq = ? AND sent = 1 AND status IN (\(from.map { "'\($0)'" }.joined(separator: ",")))",
                                               arguments: [row.id, Int64(seq)])
                if let found {
                    try db.execute(sql: "UPDATE chat_item SET status = ? WHERE id = ?", arguments: [status, found])
                    ids.append(found)
                }
            }
            return ids
        }
        if status == "sndSent", itemSendsInFlight[conn] != nil {
            for seq in seqs {
                let stored = try dbRead { db in
                    try Bool.fetchOne(db, sql: "SELECT 1 FROM chat_item WHERE contact_id = ? AND agent_seq = ?", arguments: [row.id, Int64(seq)]) ?? false
                }
                if !stored { sentBeforeStored.insert("\(conn):\(seq)") }
            }
        }
        guard !ids.isEmpty else { return }
        let u = try user(userId)
        let items = try ids.compactMap { id in try dbRead { db in try Self.itemRow(db, where: "id = ?", [id]) } }
        sink.yield(response("chatItemsStatusesUpdated", u, [("chatItems", .array(try items.map { aChatItem(user: u, contact: row, item: try itemJSON($0)) }))]))
    }

    private func connected(_ conn: Int64, info: [UInt8]) async throws {
        guard let (userId, pending) = try dbRead({ db in try Self.contactRow(db, where: "agent_conn_id = ?", [conn]) }) else { return }
        let profile = Self.profile(fromInfo: info)
        let now = Timestamp.now()
        try dbWrite { db in
            if let profile { try Self.storeContactProfile(db, contactId: pending.id, profile: profile) }
            try db.execute(sql: "UPDATE contact SET status = 'ready', updated_at = ?, chat_ts = ? WHERE agent_conn_id = ?",
                           arguments: [now, now, conn])
        }
        let u = try user(userId)
        guard let (_, row) = try dbRead({ db in try Self.contactRow(db, where: "agent_conn_id = ?", [conn]) }) else { return }
        var fields: [(String, JSONValue)] = [("contact", contactJSON(row, user: u))]
        if let custom = row.incognitoProfile { fields.append(("userCustomProfile", custom)) }
        sink.yield(response("contactConnected", u, fields))
        // A contact accepted from our address gets the welcome message, if one is set.
        let accepted = try dbRead { db in
            try Bool.fetchOne(db, sql: "SELECT accepted FROM contact WHERE agent_conn_id = ?", arguments: [conn]) ?? false
        }
        if accepted, let welcome = try address(userId: userId)?.settings["autoReply"] {
            let item = try await sendItem(user: u, contact: row, content: welcome)
            sink.yield(response("newChatItems", u, [("chatItems", .array([item]))]))
        }
    }

    private func contactRequest(addressId: Int64, request: Int64, info: [UInt8]) async throws {
        guard let userId = try dbRead({ db in try Int64.fetchOne(db, sql: "SELECT user_id FROM address WHERE agent_address_id = ?", arguments: [addressId]) }) else { return }
        let u = try user(userId)
        await expireContactRequests()
        guard try admitContactRequest(addressId: addressId, userId: userId) else {
            refusedContactRequests += 1
            try? await agent.rejectRequest(request)
            return
        }
        let profile = Self.profile(fromInfo: info) ?? .object([("displayName", .string("unknown")), ("fullName", .string(""))])
        let now = Timestamp.now()
        let (requestId, localName) = try dbWrite { db in
            let local = try LocalNames.reserve(db, userId: userId, displayName: LocalNames.base(of: profile) ?? "unknown")
            try db.execute(sql: "INSERT INTO contact_request (user_id, agent_request_id, profile, local_display_name, created_at) VALUES (?, ?, ?, ?, ?)",
                           arguments: [userId, request, profile.description, local, now])
            return (db.lastInsertedRowID, local)
        }
        if let auto = try address(userId: userId)?.settings["autoAccept"] {
            // Accepting joins the requester's invitation on a relay it chose: in a task, so a
            // relay that does not answer holds up nothing else (the request stays, and can be
            // accepted again, when the join fails).
            autoAccept(user: u, requestId: requestId, agentRequest: request, profile: profile, incognito: auto["acceptIncognito"]?.boolValue ?? false,
                       localName: localName)
        } else {
            sink.yield(response("receivedContactRequest", u, [("contactRequest", ChatJSON.contactRequest(id: requestId, profile: profile, createdAt: now, localName: localName))]))
        }
    }

    /// Whether a new request to an address fits the limits: at most `contactRequestsPerWindow`
    /// per address in the window, and fewer than `maxPendingContactRequests` waiting.
    private func admitContactRequest(addressId: Int64, userId: Int64) throws -> Bool {
        let now = ContinuousClock.now
        var recent = (requestArrivals[addressId] ?? []).filter { now - $0 < limits.contactRequestWindow }
        defer { requestArrivals[addressId] = recent.isEmpty ? nil : recent }
        guard recent.count < limits.contactRequestsPerWindow else {
            logger.info("a contact request was refused: too many to this address", metadata: ["window": "\(limits.contactRequestWindow)"])
            return false
        }
        let pending = try dbRead { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM contact_request WHERE user_id = ?", arguments: [userId]) ?? 0 }
        guard pending < limits.maxPendingContactRequests else {
            logger.info("a contact request was refused: too many waiting", metadata: ["pending": "\(pending)"])
            return false
        }
        recent.append(now)
        return true
    }

    /// Rejects and forgets contact requests older than `contactRequestTTL` (as of `now`), freeing
    /// their names; returns how many.
    @discardableResult
    public func expireContactRequests(now: Date = Date()) async -> Int {
        let ttl = limits.contactRequestTTL.components
        let age: TimeInterval = Double(ttl.seconds) + Double(ttl.attoseconds) / 1e18
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let cutoff = f.string(from: now.addingTimeInterval(-age))
        let expired: [(id: Int64, userId: Int64, agentRequest: Int64, name: String?)]
        do {
            expired = try dbRead { db in
                try Row.fetchAll(db, sql: "SELECT id, user_id, agent_request_id, local_display_name FROM contact_request WHERE created_at < ? ORDER BY id",
                                 arguments: [cutoff]).map { ($0["id"], $0["user_id"], $0["agent_request_id"], $0["local_display_name"]) }
            }
        } catch {
            logger.warning("could not look for expired contact requests", metadata: ["error": "\(error)"])
            return 0
        }
        var count = 0
        for r in expired {
            try? await agent.rejectRequest(r.agentRequest)
            do {
                try dbWrite { db in
                    try db.execute(sql: "DELETE FROM contact_request WHERE id = ?", arguments: [r.id])
                    try LocalNames.release(db, userId: r.userId, name: r.name)
                }
                count += 1
            } catch {
                logger.warning("could not delete an expired contact request", metadata: ["error": "\(error)"])
            }
        }
        if count > 0 { logger.info("expired unanswered contact requests", metadata: ["count": "\(count)"]) }
        expiredContactRequests += count
        return count
    }

    /// Accepts a request in a task of its own, reporting `acceptingContactRequest` or a
    /// `chatError` with the `contactRequestId` (the request stays: `/_accept` tries again, and so
    /// does the next start).
    func autoAccept(user u: UserRow, requestId: Int64, agentRequest: Int64, profile: JSONValue, incognito: Bool, localName: String?) {
        guard !autoAccepting.contains(requestId) else { return }
        autoAccepting.insert(requestId)
        inBackground {
            do {
                let accepted = try await self.accept(user: u, requestId: requestId, agentRequest: agentRequest, profile: profile, incognito: incognito, localName: localName)
                await self.autoAcceptDone(requestId)
                self.sink.yield(accepted)
            } catch let failure as ChatFailure {
                await self.autoAcceptDone(requestId)
                guard case let .object(fields) = failure.chatError else { throw failure }
                throw ChatFailure(.object(fields + [("contactRequestId", .number(Double(requestId)))]))
            } catch {
                await self.autoAcceptDone(requestId)
                throw error
            }
        }
    }

    private func autoAcceptDone(_ requestId: Int64) { autoAccepting.remove(requestId) }

    /// Requests an auto-accepting address received but did not get to accept — the process
    /// stopped during the join, or the requester's relay failed — are accepted again when the
    /// chat starts.
    func resumeAutoAccepts() {
        let pending = (try? dbRead { db in
            try Row.fetchAll(db, sql: """
                SELECT r.id, r.user_id, r.agent_request_id, r.profile, r.local_display_name, a.settings FROM contact_request r
                JOIN address a ON a.user_id = r.user_id ORDER BY r.id
                """)
        }) ?? []
        for row in pending {
            guard let settings = try? JSONValue.parse(row["settings"] as String), let auto = settings["autoAccept"],
                  let u = try? user(row["user_id"]) else { continue }
            let profile = (try? JSONValue.parse(row["profile"] as String)) ?? .object([])
            autoAccept(user: u, requestId: row["id"], agentRequest: row["agent_request_id"], profile: profile,
                       incognito: auto["acceptIncognito"]?.boolValue ?? false, localName: row["local_display_name"])
        }
    }

    /// Applies one chat message from a contact. Returns whether it deserves a delivery receipt
    /// (a new message, when the user sends receipts).
    private func received(_ conn: Int64, seq: UInt64, body: [UInt8]) async throws -> Bool {
        guard let (userId, row) = try dbRead({ db in try Self.contactRow(db, where: "agent_conn_id = ?", [conn]) }) else { return false }
        let seen = try dbRead { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM chat_item WHERE contact_id = ? AND agent_seq = ? AND sent = 0", arguments: [row.id, Int64(seq)]) ?? false
        }
        if seen { return false }  // stored before a crash; the agent announced it again
        let u = try user(userId)
        let message = try ChatMessage(decoding: body)
        switch message.event {
        case "x.msg.new":
            guard let content = message.params["content"], case .object = content else { throw ChatFailure.command("x.msg.new without content") }
            let quoted = try receivedQuote(message.params["quote"], contactId: row.id)
            let now = Timestamp.now()
            let itemId = try dbWrite { db in
                try db.execute(sql: "INSERT INTO chat_item (user_id, contact_id, sent, content, shared_msg_id, agent_seq, status, quoted, created_at) VALUES (?, ?, 0, ?, ?, ?, 'rcvNew', ?, ?)",
                               arguments: [userId, row.id, content.description, message.msgId, Int64(seq), quoted?.description, now])
                try db.execute(sql: "UPDATE contact SET chat_ts = ? WHERE id = ?", arguments: [now, row.id])
                return db.lastInsertedRowID
            }
            let item = try dbRead { db in try Self.itemRow(db, where: "id = ?", [itemId]) }!
            sink.yield(try receivedItemEvent(user: u, contact: row, item: item))
            return u.sendReceipts
        case "x.msg.update", "x.msg.del", "x.msg.react":
            try receivedItemEvent(message, user: u, contact: row)
        case "x.info":
            guard let p = message.params["profile"], case .object = p, p["displayName"]?.stringValue != nil else {
                throw ChatFailure.command("x.info without a profile")
            }
            guard p != row.profile else { return false }
            try dbWrite { db in try Self.storeContactProfile(db, contactId: row.id, profile: p, updatedAt: Timestamp.now()) }
            let updated = try contact(row.id).1
            sink.yield(response("contactUpdated", u, [("fromContact", contactJSON(row, user: u)), ("toContact", contactJSON(updated, user: u))]))
        case "x.direct.del":
            try dbWrite { db in try db.execute(sql: "UPDATE contact SET status = 'deleted', updated_at = ? WHERE id = ?", arguments: [Timestamp.now(), row.id]) }
            let updated = try contact(row.id).1
            sink.yield(response("contactDeletedByContact", u, [("contact", contactJSON(updated, user: u))]))
            // The peer's side is gone: our queue for it is of no use either.
            let agent = self.agent
            Task { try? await agent.deleteConnection(conn) }
        default:
            logger.debug("unsupported chat event", metadata: ["event": "\(message.event)"])
        }
        return false
    }
}
