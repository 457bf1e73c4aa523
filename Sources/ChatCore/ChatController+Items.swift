import Agent
import Foundation
import GRDB
import SwiftplexBase

extension ChatController {
    struct ItemRow {
        var id: Int64
        var contactId: Int64
        var sent: Bool
        var content: JSONValue
        var sharedMsgId: String?
        var status: String
        var edited: Bool
        var deleted: Bool
        var createdAt: String
        var quoted: JSONValue?
    }

    nonisolated static func itemRow(_ db: Database, where clause: String, _ args: StatementArguments) throws -> ItemRow? {
        try Row.fetchOne(db, sql: "SELECT * FROM chat_item WHERE \(clause)", arguments: args).map {
            ItemRow(id: $0["id"], contactId: $0["contact_id"], sent: $0["sent"], content: (try? JSONValue.parse($0["content"] as String)) ?? .object([]),
                    sharedMsgId: $0["shared_msg_id"], status: $0["status"], edited: $0["edited"], deleted: $0["deleted"], createdAt: $0["created_at"],
                    quoted: ($0["quoted"] as String?).flatMap { try? JSONValue.parse($0) })
        }
    }

    func itemJSON(_ i: ItemRow) throws -> JSONValue {
        let counts = try dbRead { db in
            try Row.fetchAll(db, sql: "SELECT reaction, SUM(sent) AS mine, COUNT(*) AS total FROM chat_item_reaction WHERE item_id = ? GROUP BY reaction",
                             arguments: [i.id]).map { row -> JSONValue in
                .object([("reaction", (try? JSONValue.parse(row["reaction"] as String)) ?? .null),
                         ("userReacted", .bool((row["mine"] as Int) > 0)), ("totalReacted", .int(Int64(row["total"] as Int)))])
            }
        }
        return ChatJSON.chatItem(id: i.id, sent: i.sent, content: i.content, sharedMsgId: i.sharedMsgId, status: i.status,
                                 createdAt: i.createdAt, edited: i.edited, deleted: i.deleted, reactions: .array(counts), quoted: i.quoted)
    }

    /// The contact, its user and one of its items, or the store error the API reports.
    private func target(contactId: Int64, itemId: Int64) throws -> (UserRow, ChatJSON.ContactRow, ItemRow) {
        let (u, contact) = try contact(contactId)
        return (u, contact, try item(itemId, contactId: contactId))
    }

    /// One item of a contact's chat, or `chatItemNotFound`.
    func item(_ itemId: Int64, contactId: Int64) throws -> ItemRow {
        guard let item = try dbRead({ db in try Self.itemRow(db, where: "id = ? AND contact_id = ?", [itemId, contactId]) }) else {
            throw ChatFailure(ChatJSON.storeError("chatItemNotFound", [("itemId", .int(Int64(itemId)))]))
        }
        return item
    }

    // MARK: - Sending

    /// Sends messages to a contact. With an `idempotencyKey` (given by the bot host for the sends
    /// of a plugin handling a replayable event, never typed by users), message `i` is sent with
    /// the agent key `<key>#<i>`: a repeat of the command sends nothing again and returns the
    /// items of the first sends (storing any the first run had not stored before a crash).
    public func send(contactId: Int64, messages: [JSONValue], idempotencyKey: String? = nil) async throws -> JSONValue {
        let (u, row) = try contact(contactId)
        guard row.ready else {
            throw ChatFailure(ChatJSON.chatError(row.status == "deleted" ? "contactNotActive" : "contactNotReady", [("contact", contactJSON(row, user: u))]))
        }
        // Everything is checked before anything is sent, so a bad message loses none of the others.
        var checked: [(JSONValue, ItemRow?)] = []
        for m in messages {
            guard let content = m["msgContent"], case .object = content, content["type"]?.stringValue != nil else {
                throw ChatFailure.command("each message needs a msgContent object with a type")
            }
            var quoted: ItemRow?
            if let q = m["quotedItemId"], q != .null {
                guard let qid = q.intValue else { throw ChatFailure.command("quotedItemId must be a chat item id") }
                quoted = try item(Int64(qid), contactId: contactId)
                guard !quoted!.deleted, quoted!.sharedMsgId != nil else { throw ChatFailure(ChatJSON.storeError("invalidQuote")) }
            }
            checked.append((content, quoted))
        }
        var items: [JSONValue] = []
        for (i, (content, quoted)) in checked.enumerated() {
            items.append(try await sendItem(user: u, contact: row, content: content, quoting: quoted,
                                            idempotencyKey: idempotencyKey.map { "\($0)#\(i)" }))
        }
        return response("newChatItems", u, [("chatItems", .array(items))])
    }

    /// Sends one message content to a ready contact, stores it and returns its AChatItem. A quote
    /// travels as SimpleX's `quote`: the quoted message's shared id, time and direction, and its content.
    ///
    /// With an `idempotencyKey` the agent commits the key with the send; when the key was used
    /// already nothing is sent, and the item of that send is returned (inserted now if the process
    /// died between the agent's commit and the item's insert).
    func sendItem(user u: UserRow, contact row: ChatJSON.ContactRow, content: JSONValue, quoting quoted: ItemRow? = nil,
                  idempotencyKey: String? = nil) async throws -> JSONValue {
        var params: [(String, JSONValue)] = [("content", content)]
        var ciQuote: JSONValue?
        if let quoted, let msgId = quoted.sharedMsgId {
            params.append(("quote", .object([
                ("msgRef", .object([("msgId", .string(msgId)), ("sentAt", .string(quoted.createdAt)), ("sent", .bool(quoted.sent))])),
                ("content", quoted.content),
            ])))
            ciQuote = .object([
                ("chatDir", .object([("type", .string(quoted.sent ? "directSnd" : "directRcv"))])), ("itemId", .int(Int64(quoted.id))),
                ("sharedMsgId", .string(msgId)), ("sentAt", .string(quoted.createdAt)), ("content", quoted.content),
            ])
        }
        let message = ChatMessage(event: "x.msg.new", params: .object(params))
        itemSendsInFlight[row.agentConnId, default: 0] += 1
        defer {
            itemSendsInFlight[row.agentConnId, default: 1] -= 1
            if itemSendsInFlight[row.agentConnId] == 0 { itemSendsInFlight[row.agentConnId] = nil }
        }
        let seq: UInt64
        if let idempotencyKey {
            let sent = try await agentCall { try await agent.sendKeyed(row.agentConnId, message.encoded, idempotencyKey: idempotencyKey) }
            seq = sent.seq
            if sent.repeated,
               let existing = try dbRead({ db in try Self.itemRow(db, where: "contact_id = ? AND agent_seq = ? AND sent = 1", [row.id, Int64(seq)]) }) {
                return aChatItem(user: u, contact: row, item: try itemJSON(existing))
            }
        } else {
            seq = try await sendChatMessage(row, message)
        }
        let now = Timestamp.now()
        let status = sentBeforeStored.remove("\(row.agentConnId):\(seq)") != nil ? "sndSent" : "sndNew"
        let itemId = try dbWrite { db in
            try db.execute(sql: "INSERT INTO chat_item (user_id, contact_id, sent, content, shared_msg_id, agent_seq, status, quoted, created_at) VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?)",
                           arguments: [u.id, row.id, content.description, message.msgId, Int64(seq), status, ciQuote?.description, now])
            try db.execute(sql: "UPDATE contact SET chat_ts = ? WHERE id = ?", arguments: [now, row.id])
            return db.lastInsertedRowID
        }
        let item = try dbRead { db in try Self.itemRow(db, where: "id = ?", [itemId]) }!
        return aChatItem(user: u, contact: row, item: try itemJSON(item))
    }

    func aChatItem(user u: UserRow, contact row: ChatJSON.ContactRow, item: JSONValue) -> JSONValue {
        .object([("chatInfo", .object([("type", .string("direct")), ("contact", contactJSON(row, user: u))])), ("chatItem", item)])
    }

    /// The CIQuote of a received `quote`: the peer's `sent` is from its side, so it flips; the
    /// quoted item's id is filled in when this side has it.
    func receivedQuote(_ quote: JSONValue?, contactId: Int64) throws -> JSONValue? {
        guard let quote, let ref = quote["msgRef"], let content = quote["content"], case .object = content else { return nil }
        var pairs: [(String, JSONValue)] = []
        if let sent = ref["sent"]?.boolValue { pairs.append(("chatDir", .object([("type", .string(sent ? "directRcv" : "directSnd"))]))) }
        if let msgId = ref["msgId"]?.stringValue {
            if let local = try dbRead({ db in try Self.itemRow(db, where: "contact_id = ? AND shared_msg_id = ?", [contactId, msgId]) }) {
                pairs.append(("itemId", .int(Int64(local.id))))
            }
            pairs.append(("sharedMsgId", .string(msgId)))
        }
        pairs.append(("sentAt", ref["sentAt"] ?? .string(Timestamp.now())))
        pairs.append(("content", content))
        return .object(pairs)
    }

    private func sendEvent(_ contact: ChatJSON.ContactRow, _ event: String, _ params: [(String, JSONValue)]) async throws {
        try await sendChatMessage(contact, ChatMessage(event: event, params: .object(params)))
    }

    // MARK: - Commands

    public func updateItem(contactId: Int64, itemId: Int64, message: JSONValue) async throws -> JSONValue {
        let (u, contact, item) = try target(contactId: contactId, itemId: itemId)
        guard item.sent, !item.deleted, let msgId = item.sharedMsgId else { throw ChatFailure(ChatJSON.chatError("invalidChatItemUpdate")) }
        guard let content = message["msgContent"], case .object = content else { throw ChatFailure.command("UpdatedMessage needs msgContent") }
        if content == item.content { return response("chatItemNotChanged", u, [("chatItem", aChatItem(user: u, contact: contact, item: try itemJSON(item)))]) }
        try await sendEvent(contact, "x.msg.update", [("msgId", .string(msgId)), ("content", content)])
        try dbWrite { db in try db.execute(sql: "UPDATE chat_item SET content = ?, edited = 1, updated_at = ? WHERE id = ?", arguments: [content.description, Timestamp.now(), itemId]) }
        let updated = try dbRead { db in try Self.itemRow(db, where: "id = ?", [itemId]) }!
        return response("chatItemUpdated", u, [("chatItem", aChatItem(user: u, contact: contact, item: try itemJSON(updated)))])
    }

    public func deleteItems(contactId: Int64, itemIds: [Int64], broadcast: Bool) async throws -> JSONValue {
        var deletions: [JSONValue] = []
        var user: UserRow?
        for itemId in itemIds {
            let (u, contact, item) = try target(contactId: contactId, itemId: itemId)
            user = u
            let before = aChatItem(user: u, contact: contact, item: try itemJSON(item))
            if broadcast {
                guard item.sent, !item.deleted, let msgId = item.sharedMsgId else { throw ChatFailure(ChatJSON.chatError("invalidChatItemDelete")) }
                try await sendEvent(contact, "x.msg.del", [("msgId", .string(msgId))])
                try dbWrite { db in try db.execute(sql: "UPDATE chat_item SET deleted = 1 WHERE id = ?", arguments: [itemId]) }
                var after = item
                after.deleted = true
                deletions.append(.object([("deletedChatItem", before), ("toChatItem", aChatItem(user: u, contact: contact, item: try itemJSON(after)))]))
            } else {
                try dbWrite { db in try db.execute(sql: "DELETE FROM chat_item WHERE id = ?", arguments: [itemId]) }
                deletions.append(.object([("deletedChatItem", before)]))
            }
        }
        return response("chatItemsDeleted", user, [("chatItemDeletions", .array(deletions)), ("byUser", .bool(true)), ("timed", .bool(false))])
    }

    public func react(contactId: Int64, itemId: Int64, add: Bool, reaction: JSONValue) async throws -> JSONValue {
        let (u, contact, item) = try target(contactId: contactId, itemId: itemId)
        guard let reaction = Reactions.canonical(reaction) else {
            throw ChatFailure.command("a reaction is {\"type\":\"emoji\",\"emoji\":…} with one of \(Reactions.allowedEmoji.sorted().joined(separator: " "))")
        }
        guard !item.deleted, let msgId = item.sharedMsgId else { throw ChatFailure(ChatJSON.chatError("invalidChatItemUpdate")) }
        if add, try !reactionFits(itemId: itemId, sent: true, reaction: reaction) {
            throw ChatFailure.command("too many reactions on this item (at most \(limits.maxReactionsPerMember) of yours, \(limits.maxReactionsPerItem) in all)")
        }
        try await sendEvent(contact, "x.msg.react", [("msgId", .string(msgId)), ("reaction", reaction), ("add", .bool(add))])
        try storeReaction(itemId: itemId, sent: true, reaction: reaction, add: add)
        return response("chatItemReaction", u, [("added", .bool(add)), ("reaction", try reactionJSON(u, contact, item, sent: true, reaction: reaction))])
    }

    /// Whether one side may add `reaction` to an item: one it already has always fits; a new one
    /// must stay within `maxReactionsPerMember` for that side and `maxReactionsPerItem` in all.
    func reactionFits(itemId: Int64, sent: Bool, reaction: JSONValue) throws -> Bool {
        try dbRead { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM chat_item_reaction WHERE item_id = ? AND sent = ? AND reaction = ?",
                                 arguments: [itemId, sent, reaction.description]) == true { return true }
            let mine = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM chat_item_reaction WHERE item_id = ? AND sent = ?", arguments: [itemId, sent]) ?? 0
            let all = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM chat_item_reaction WHERE item_id = ?", arguments: [itemId]) ?? 0
            return mine < limits.maxReactionsPerMember && all < limits.maxReactionsPerItem
        }
    }

    func storeReaction(itemId: Int64, sent: Bool, reaction: JSONValue, add: Bool) throws {
        try dbWrite { db in
            if add {
                try db.execute(sql: "INSERT OR IGNORE INTO chat_item_reaction (item_id, sent, reaction, created_at) VALUES (?, ?, ?, ?)",
                               arguments: [itemId, sent, reaction.description, Timestamp.now()])
            } else {
                try db.execute(sql: "DELETE FROM chat_item_reaction WHERE item_id = ? AND sent = ? AND reaction = ?", arguments: [itemId, sent, reaction.description])
            }
        }
    }

    func reactionJSON(_ u: UserRow, _ contact: ChatJSON.ContactRow, _ item: ItemRow, sent: Bool, reaction: JSONValue) throws -> JSONValue {
        .object([
            ("chatInfo", .object([("type", .string("direct")), ("contact", contactJSON(contact, user: u))])),
            ("chatReaction", .object([
                ("chatDir", .object([("type", .string(sent ? "directSnd" : "directRcv"))])),
                ("chatItem", try itemJSON(item)), ("sentAt", .string(Timestamp.now())), ("reaction", reaction),
            ])),
        ])
    }

    // MARK: - Received

    /// The `newChatItems` event of one received item, as the engine announces it when it arrives.
    func receivedItemEvent(user u: UserRow, contact row: ChatJSON.ContactRow, item: ItemRow) throws -> JSONValue {
        response("newChatItems", u, [("chatItems", .array([aChatItem(user: u, contact: row, item: try itemJSON(item))]))])
    }

    /// The newest chat item's id (0 when there is none). Ids only grow (`AUTOINCREMENT`): one is
    /// never used again, even after the newest item is deleted.
    public func lastChatItemId() throws -> Int64 {
        try dbRead { db in try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM chat_item") ?? 0 }
    }

    /// The `newChatItems` events of received items with an id above `afterId`, oldest first, at
    /// most `limit`: one event per item, as announced when it arrived (with its current content
    /// and status). The bot host replays these to plugins that had not finished them.
    public func receivedItemEvents(after afterId: Int64, limit: Int) throws -> [(itemId: Int64, event: JSONValue)] {
        let rows = try dbRead { db -> [ItemRow] in
            let ids = try Int64.fetchAll(db, sql: "SELECT id FROM chat_item WHERE sent = 0 AND id > ? ORDER BY id LIMIT ?",
                                         arguments: [afterId, max(0, limit)])
            return try ids.compactMap { try Self.itemRow(db, where: "id = ?", [$0]) }
        }
        var users: [Int64: UserRow] = [:]
        var events: [(itemId: Int64, event: JSONValue)] = []
        for item in rows {
            guard let (userId, contact) = try dbRead({ db in try Self.contactRow(db, where: "id = ?", [item.contactId]) }) else { continue }
            if users[userId] == nil { users[userId] = try user(userId) }
            events.append((item.id, try receivedItemEvent(user: users[userId]!, contact: contact, item: item)))
        }
        return events
    }

    /// Applies a peer's `x.msg.update`, `x.msg.del` or `x.msg.react` to the item it names.
    func receivedItemEvent(_ message: ChatMessage, user u: UserRow, contact: ChatJSON.ContactRow) throws {
        guard let msgId = message.params["msgId"]?.stringValue,
              let item = try dbRead({ db in try Self.itemRow(db, where: "contact_id = ? AND shared_msg_id = ?", [contact.id, msgId]) }) else {
            logger.info("a chat event names an unknown message", metadata: ["event": "\(message.event)"])
            return
        }
        switch message.event {
        case "x.msg.update":
            guard !item.sent, let content = message.params["content"], case .object = content else { return }
            try dbWrite { db in try db.execute(sql: "UPDATE chat_item SET content = ?, edited = 1 WHERE id = ?", arguments: [content.description, item.id]) }
            let updated = try dbRead { db in try Self.itemRow(db, where: "id = ?", [item.id]) }!
            sink.yield(response("chatItemUpdated", u, [("chatItem", aChatItem(user: u, contact: contact, item: try itemJSON(updated)))]))
        case "x.msg.del":
            guard !item.sent else { return }
            let before = aChatItem(user: u, contact: contact, item: try itemJSON(item))
            try dbWrite { db in try db.execute(sql: "UPDATE chat_item SET deleted = 1 WHERE id = ?", arguments: [item.id]) }
            var after = item
            after.deleted = true
            sink.yield(response("chatItemsDeleted", u, [
                ("chatItemDeletions", .array([.object([("deletedChatItem", before), ("toChatItem", aChatItem(user: u, contact: contact, item: try itemJSON(after)))])])),
                ("byUser", .bool(false)), ("timed", .bool(false)),
            ]))
        case "x.msg.react":
            guard let raw = message.params["reaction"], let add = message.params["add"]?.boolValue else { return }
            // Only SimpleX's emoji set, and only up to the caps: anything else is dropped, so a
            // peer cannot make every event about this item carry what it likes.
            guard let reaction = Reactions.canonical(raw) else {
                logger.info("a reaction outside the allowed set was ignored", metadata: ["contact": "\(contact.id)"])
                return
            }
            if add, try !reactionFits(itemId: item.id, sent: false, reaction: reaction) {
                logger.info("a reaction over the cap was ignored", metadata: ["contact": "\(contact.id)"])
                return
            }
            try storeReaction(itemId: item.id, sent: false, reaction: reaction, add: add)
            sink.yield(response("chatItemReaction", u, [("added", .bool(add)), ("reaction", try reactionJSON(u, contact, item, sent: false, reaction: reaction))]))
        default:
            break
        }
    }
}
