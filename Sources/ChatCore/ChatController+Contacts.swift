import Agent
import Foundation
import GRDB

extension ChatController {
    // MARK: - Address

    struct AddressRow { var agentId: Int64; var link: String; var settings: JSONValue }

    func address(userId: Int64) throws -> AddressRow? {
        try dbRead { db in
            try Row.fetchOne(db, sql: "SELECT * FROM address WHERE user_id = ?", arguments: [userId]).map {
                AddressRow(agentId: $0["agent_address_id"], link: $0["link"], settings: (try? JSONValue.parse($0["settings"])) ?? .object([]))
            }
        }
    }

    func addressJSON(_ a: AddressRow, userId: Int64) -> JSONValue {
        .object([
            ("userContactLinkId", .number(Double(userId))),
            ("connLinkContact", .object([("connFullLink", .string(a.link))])),
            ("shortLinkDataSet", .bool(false)), ("shortLinkLargeDataSet", .bool(false)),
            ("addressSettings", a.settings),
        ])
    }

    public func createAddress(userId: Int64) async throws -> JSONValue {
        let u = try user(userId)
        try requireStarted()
        if try address(userId: userId) != nil { throw ChatFailure(ChatJSON.chatError("userContactLinkExists")) }
        let (agentId, link) = try await agentCall { try await agent.createAddress() }
        let settings = JSONValue.object([("businessAddress", .bool(false))])
        try dbWrite { db in
            try db.execute(sql: "INSERT INTO address (user_id, agent_address_id, link, settings) VALUES (?, ?, ?, ?)",
                           arguments: [userId, agentId, link.description, settings.description])
        }
        return response("userContactLinkCreated", u, [("connLinkContact", .object([("connFullLink", .string(link.description))]))])
    }

    public func showAddress(userId: Int64) throws -> JSONValue {
        let u = try user(userId)
        guard let a = try address(userId: userId) else { throw ChatFailure(ChatJSON.storeError("userContactLinkNotFound")) }
        return response("userContactLink", u, [("contactLink", addressJSON(a, userId: userId))])
    }

    public func setAddressSettings(userId: Int64, settings: JSONValue) throws -> JSONValue {
        let u = try user(userId)
        guard settings["businessAddress"]?.boolValue != nil else { throw ChatFailure.command("AddressSettings needs businessAddress") }
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

    // MARK: - Connections

    /// What a peer learns about this user: `x.info` with the profile.
    func profileInfo(_ u: UserRow) -> [UInt8] {
        ChatMessage(event: "x.info", params: .object([("profile", u.profile)])).encoded
    }

    static func profile(fromInfo info: [UInt8]) -> JSONValue? {
        guard let m = try? ChatMessage(decoding: info), m.event == "x.info" || m.event == "x.contact" else { return nil }
        return m.params["profile"]
    }

    func insertContact(userId: Int64, agentConnId: Int64, profile: JSONValue?, viaAddress: Bool, invitation: String?, accepted: Bool = false) throws -> Int64 {
        try dbWrite { db in
            let now = Timestamp.now()
            try db.execute(sql: "INSERT INTO contact (user_id, agent_conn_id, profile, status, via_address, accepted, invitation, created_at, updated_at) VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?)",
                           arguments: [userId, agentConnId, profile?.description, viaAddress, accepted, invitation, now, now])
            return db.lastInsertedRowID
        }
    }

    nonisolated static func contactRow(_ db: Database, where clause: String, _ args: StatementArguments) throws -> (userId: Int64, row: ChatJSON.ContactRow)? {
        try Row.fetchOne(db, sql: "SELECT * FROM contact WHERE \(clause)", arguments: args).map {
            ($0["user_id"], ChatJSON.ContactRow(
                id: $0["id"], agentConnId: $0["agent_conn_id"], profile: ($0["profile"] as String?).flatMap { try? JSONValue.parse($0) },
                ready: ($0["status"] as String) == "ready", viaAddress: $0["via_address"], createdAt: $0["created_at"], updatedAt: $0["updated_at"]))
        }
    }

    func contactJSON(_ c: ChatJSON.ContactRow, user u: UserRow) -> JSONValue { ChatJSON.contact(c, userProfile: u.profile) }

    func pendingJSON(_ c: ChatJSON.ContactRow, link: String?) -> JSONValue {
        ChatJSON.pendingConnection(id: c.id, agentConnId: c.agentConnId, viaAddress: c.viaAddress, link: link, createdAt: c.createdAt)
    }

    public func addContact(userId: Int64) async throws -> JSONValue {
        let u = try user(userId)
        try requireStarted()
        let (conn, link) = try await agentCall { try await agent.createInvitation() }
        let id = try insertContact(userId: userId, agentConnId: conn, profile: nil, viaAddress: false, invitation: link.description)
        let row = try dbRead { db in try Self.contactRow(db, where: "id = ?", [id]) }!.row
        return response("invitation", u, [
            ("connLinkInvitation", .object([("connFullLink", .string(link.description))])),
            ("connection", pendingJSON(row, link: link.description)),
        ])
    }

    public func connectPlan(userId: Int64, link text: String) async throws -> JSONValue {
        let u = try user(userId)
        let link: AgentLink
        do { link = try AgentLink(parsing: text) } catch { throw ChatFailure(ChatJSON.chatError("invalidConnReq")) }
        let own = try dbRead { db -> Bool in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM contact WHERE invitation = ? UNION SELECT 1 FROM address WHERE link = ?", arguments: [text, text]) ?? false
        }
        let plan: JSONValue
        switch link {
        case .invitation:
            plan = .object([("type", .string("invitationLink")), ("invitationLinkPlan", .object([("type", .string(own ? "ownLink" : "ok"))]))])
        case .contact:
            plan = .object([("type", .string("contactAddress")), ("contactAddressPlan", .object([("type", .string(own ? "ownLink" : "ok"))]))])
        }
        return response("connectionPlan", u, [("connLink", .object([("connFullLink", .string(link.description))])), ("connectionPlan", plan)])
    }

    /// Connects the user through an invitation link or a contact address.
    public func connect(userId: Int64?, link text: String) async throws -> JSONValue {
        let u = try userId.map { try user($0) } ?? activeUser()
        try requireStarted()
        let link: AgentLink
        do { link = try AgentLink(parsing: text) } catch { throw ChatFailure(ChatJSON.chatError("invalidConnReq")) }
        switch link {
        case let .invitation(inv):
            let info = profileInfo(u)
            let conn = try await agentCall { try await agent.join(inv, info: info) }
            let id = try insertContact(userId: u.id, agentConnId: conn, profile: nil, viaAddress: false, invitation: nil)
            let row = try dbRead { db in try Self.contactRow(db, where: "id = ?", [id]) }!.row
            return response("sentConfirmation", u, [("connection", pendingJSON(row, link: nil))])
        case let .contact(address):
            let info = profileInfo(u)
            let conn = try await agentCall { try await agent.joinAddress(address, info: info) }
            let id = try insertContact(userId: u.id, agentConnId: conn, profile: nil, viaAddress: true, invitation: nil)
            let row = try dbRead { db in try Self.contactRow(db, where: "id = ?", [id]) }!.row
            return response("sentInvitation", u, [("connection", pendingJSON(row, link: nil))])
        }
    }

    public func listContacts(userId: Int64) throws -> JSONValue {
        let u = try user(userId)
        let rows = try dbRead { db in
            try Int64.fetchAll(db, sql: "SELECT id FROM contact WHERE user_id = ? AND status = 'ready' ORDER BY id", arguments: [userId]).compactMap {
                try Self.contactRow(db, where: "id = ?", [$0])?.row
            }
        }
        return response("contactsList", u, [("contacts", .array(rows.map { contactJSON($0, user: u) }))])
    }

    // MARK: - Requests

    public func acceptRequest(_ requestId: Int64) async throws -> JSONValue {
        guard let (userId, agentRequest, profile) = try dbRead({ db in
            try Row.fetchOne(db, sql: "SELECT * FROM contact_request WHERE id = ?", arguments: [requestId]).map {
                ($0["user_id"] as Int64, $0["agent_request_id"] as Int64, (try? JSONValue.parse($0["profile"] as String)) ?? .object([]))
            }
        }) else { throw ChatFailure(ChatJSON.storeError("contactRequestNotFound")) }
        let u = try user(userId)
        return try await accept(user: u, requestId: requestId, agentRequest: agentRequest, profile: profile)
    }

    func accept(user u: UserRow, requestId: Int64, agentRequest: Int64, profile: JSONValue) async throws -> JSONValue {
        let info = profileInfo(u)
        let conn = try await agentCall { try await agent.acceptRequest(agentRequest, info: info) }
        let id = try insertContact(userId: u.id, agentConnId: conn, profile: profile, viaAddress: true, invitation: nil, accepted: true)
        try dbWrite { db in try db.execute(sql: "DELETE FROM contact_request WHERE id = ?", arguments: [requestId]) }
        let row = try dbRead { db in try Self.contactRow(db, where: "id = ?", [id]) }!.row
        return response("acceptingContactRequest", u, [("contact", contactJSON(row, user: u))])
    }

    public func rejectRequest(_ requestId: Int64) async throws -> JSONValue {
        guard let (userId, agentRequest, profile, createdAt) = try dbRead({ db in
            try Row.fetchOne(db, sql: "SELECT * FROM contact_request WHERE id = ?", arguments: [requestId]).map {
                ($0["user_id"] as Int64, $0["agent_request_id"] as Int64, (try? JSONValue.parse($0["profile"] as String)) ?? .object([]), $0["created_at"] as String)
            }
        }) else { throw ChatFailure(ChatJSON.storeError("contactRequestNotFound")) }
        let u = try user(userId)
        try? await agent.rejectRequest(agentRequest)
        try dbWrite { db in try db.execute(sql: "DELETE FROM contact_request WHERE id = ?", arguments: [requestId]) }
        return response("contactRequestRejected", u, [("contactRequest", ChatJSON.contactRequest(id: requestId, profile: profile, createdAt: createdAt))])
    }

    // MARK: - Messages

    public func send(contactId: Int64, messages: [JSONValue]) async throws -> JSONValue {
        guard let (userId, row) = try dbRead({ db in try Self.contactRow(db, where: "id = ?", [contactId]) }) else {
            throw ChatFailure(ChatJSON.storeError("contactNotFound"))
        }
        let u = try user(userId)
        guard row.ready else { throw ChatFailure(ChatJSON.chatError("contactNotReady", [("contact", contactJSON(row, user: u))])) }
        var items: [JSONValue] = []
        for m in messages {
            guard let content = m["msgContent"], case .object = content, content["type"]?.stringValue != nil else {
                throw ChatFailure.command("each message needs a msgContent object with a type")
            }
            let item = try await sendItem(user: u, contact: row, content: content)
            items.append(item)
        }
        return response("newChatItems", u, [("chatItems", .array(items))])
    }

    /// Sends one message content to a ready contact, stores it and returns its AChatItem.
    func sendItem(user u: UserRow, contact row: ChatJSON.ContactRow, content: JSONValue) async throws -> JSONValue {
        let message = ChatMessage(event: "x.msg.new", params: .object([("content", content)]))
        let seq = try await agentCall { try await agent.send(row.agentConnId, message.encoded) }
        let now = Timestamp.now()
        let itemId = try dbWrite { db in
            try db.execute(sql: "INSERT INTO chat_item (user_id, contact_id, sent, content, shared_msg_id, agent_seq, status, created_at) VALUES (?, ?, 1, ?, ?, ?, 'sndNew', ?)",
                           arguments: [u.id, row.id, content.description, message.msgId, Int64(seq), now])
            return db.lastInsertedRowID
        }
        return aChatItem(user: u, contact: row, item: ChatJSON.chatItem(id: itemId, sent: true, content: content, sharedMsgId: message.msgId, status: "sndNew", createdAt: now))
    }

    func aChatItem(user u: UserRow, contact row: ChatJSON.ContactRow, item: JSONValue) -> JSONValue {
        .object([("chatInfo", .object([("type", .string("direct")), ("contact", contactJSON(row, user: u))])), ("chatItem", item)])
    }

    // MARK: - Agent events

    func handle(_ event: AgentEvent) async {
        do {
            switch event {
            case let .confirmation(conn, info):
                // Someone joined our one-time invitation: keep their profile and accept.
                guard let (userId, _) = try dbRead({ db in try Self.contactRow(db, where: "agent_conn_id = ?", [conn]) }) else { return }
                let profile = Self.profile(fromInfo: info)
                try dbWrite { db in try db.execute(sql: "UPDATE contact SET profile = ? WHERE agent_conn_id = ?", arguments: [profile?.description, conn]) }
                let own = profileInfo(try user(userId))
                try await agent.allow(conn, info: own)
            case let .connected(conn, info):
                try await connected(conn, info: info)
            case let .contactRequest(addressId, request, info):
                try await contactRequest(addressId: addressId, request: request, info: info)
            case let .message(conn, _, body, _):
                try received(conn, body: body)
            case let .sent(conn, seq):
                try dbWrite { db in
                    try db.execute(sql: "UPDATE chat_item SET status = 'sndSent' WHERE agent_seq = ? AND contact_id = (SELECT id FROM contact WHERE agent_conn_id = ?)",
                                   arguments: [Int64(seq), conn])
                }
            case let .hostConnected(relay):
                sink.yield(.object([("type", .string("hostConnected")), ("protocol", .string("smp")), ("transportHost", .string(relay.host))]))
            case let .hostDisconnected(relay):
                sink.yield(.object([("type", .string("hostDisconnected")), ("protocol", .string("smp")), ("transportHost", .string(relay.host))]))
            case let .rejected(conn, reason):
                logger.info("a message was rejected", metadata: ["connection": "\(conn)", "reason": "\(reason)"])
            }
        } catch let failure as ChatFailure {
            sink.yield(.object([("type", .string("chatError")), ("chatError", failure.chatError)]))
        } catch {
            sink.yield(.object([("type", .string("chatError")), ("chatError", ChatJSON.chatError("commandError", [("message", .string("\(error)"))]))]))
        }
    }

    private func connected(_ conn: Int64, info: [UInt8]) async throws {
        guard let (userId, _) = try dbRead({ db in try Self.contactRow(db, where: "agent_conn_id = ?", [conn]) }) else { return }
        let profile = Self.profile(fromInfo: info)
        try dbWrite { db in
            try db.execute(sql: "UPDATE contact SET status = 'ready', profile = COALESCE(?, profile), updated_at = ? WHERE agent_conn_id = ?",
                           arguments: [profile?.description, Timestamp.now(), conn])
        }
        let u = try user(userId)
        guard let (_, row) = try dbRead({ db in try Self.contactRow(db, where: "agent_conn_id = ?", [conn]) }) else { return }
        sink.yield(response("contactConnected", u, [("contact", contactJSON(row, user: u))]))
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
        let profile = Self.profile(fromInfo: info) ?? .object([("displayName", .string("unknown")), ("fullName", .string(""))])
        let now = Timestamp.now()
        let requestId = try dbWrite { db in
            try db.execute(sql: "INSERT INTO contact_request (user_id, agent_request_id, profile, created_at) VALUES (?, ?, ?, ?)",
                           arguments: [userId, request, profile.description, now])
            return db.lastInsertedRowID
        }
        if try address(userId: userId)?.settings["autoAccept"] != nil {
            let accepted = try await accept(user: u, requestId: requestId, agentRequest: request, profile: profile)
            sink.yield(accepted)
        } else {
            sink.yield(response("receivedContactRequest", u, [("contactRequest", ChatJSON.contactRequest(id: requestId, profile: profile, createdAt: now))]))
        }
    }

    private func received(_ conn: Int64, body: [UInt8]) throws {
        guard let (userId, row) = try dbRead({ db in try Self.contactRow(db, where: "agent_conn_id = ?", [conn]) }) else { return }
        let u = try user(userId)
        let message = try ChatMessage(decoding: body)
        switch message.event {
        case "x.msg.new":
            guard let content = message.params["content"], case .object = content else { throw ChatFailure.command("x.msg.new without content") }
            let now = Timestamp.now()
            let itemId = try dbWrite { db in
                try db.execute(sql: "INSERT INTO chat_item (user_id, contact_id, sent, content, shared_msg_id, status, created_at) VALUES (?, ?, 0, ?, ?, 'rcvNew', ?)",
                               arguments: [userId, row.id, content.description, message.msgId, now])
                return db.lastInsertedRowID
            }
            let item = ChatJSON.chatItem(id: itemId, sent: false, content: content, sharedMsgId: message.msgId, status: "rcvNew", createdAt: now)
            sink.yield(response("newChatItems", u, [("chatItems", .array([aChatItem(user: u, contact: row, item: item)]))]))
        case "x.msg.update", "x.msg.del", "x.msg.react":
            try receivedItemEvent(message, user: u, contact: row)
        case "x.info":
            if let p = message.params["profile"] {
                try dbWrite { db in try db.execute(sql: "UPDATE contact SET profile = ? WHERE id = ?", arguments: [p.description, row.id]) }
            }
        default:
            logger.debug("unsupported chat event", metadata: ["event": "\(message.event)"])
        }
    }
}
