import Agent
import ChatModel
import Foundation
import SwiftplexSQL
import SwiftplexBase

extension ChatController {
    /// An item as the API shows it, with its reaction counts.
    func itemModel(_ i: ItemRow) async throws -> ChatItem {
        let itemId = i.id
        let counts = try await dbRead { db in try Self.reactionCounts(db, itemId: itemId) }
        return ModelOf.chatItem(i, reactions: counts)
    }

    nonisolated static func reactionCounts(_ db: Database, itemId: Int64) throws -> [CIReactionCount] {
        // A cached statement: this runs for every item an event reports (statuses included).
        let rows = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT reaction, MAX(sent) AS mine, COUNT(reaction) AS total FROM chat_item_reaction WHERE item_id = ? GROUP BY reaction
            """), arguments: [itemId])
        return rows.compactMap { row in
            guard let reaction = Stored.decode(MsgReaction.self, row["reaction"]) else { return nil }
            return CIReactionCount(reaction: reaction, userReacted: (row["mine"] as Int? ?? 0) > 0, totalReacted: row["total"])
        }
    }

    /// The contact, its user and one of its items, or the store error the API reports.
    private func target(contactId: Int64, itemId: Int64) async throws -> (UserRow, ContactRow, ItemRow) {
        let (u, contact) = try await contact(contactId)
        return (u, contact, try await item(itemId, contactId: contactId))
    }

    /// One item of a contact's chat, or `chatItemNotFound`.
    func item(_ itemId: Int64, contactId: Int64) async throws -> ItemRow {
        guard let item = try await dbRead({ db in
            try ChatItemRecord.filter(key: itemId).filter(ChatItemRecord.Columns.contactId == contactId).fetchOne(db)
        }) else {
            throw ChatFailure.store(.chatItemNotFound(itemId: itemId))
        }
        return ItemRow(item)
    }

    func storedItem(_ itemId: Int64) async throws -> ItemRow? {
        try await dbRead { db in try ChatItemRecord.fetchOne(db, key: itemId) }.map(ItemRow.init)
    }

    // MARK: - Sending

    /// Sends messages to a contact. With an `idempotencyKey` (given by the bot host for the sends
    /// of a plugin handling a replayable event, never typed by users), message `i` is sent with
    /// the agent key `<key>#<i>`: a repeat of the command sends nothing again and returns the
    /// items of the first sends (storing any the first run had not stored before a crash).
    public func send(contactId: Int64, messages: [JSONValue], idempotencyKey: String? = nil) async throws -> ChatResponse {
        let (u, row) = try await contact(contactId)
        guard row.ready else {
            let contact = contactModel(row, user: u)
            throw ChatFailure.chat(row.status == .deleted ? .contactNotActive(contact: contact) : .contactNotReady(contact: contact))
        }
        // Everything is checked before anything is sent, so a bad message loses none of the others.
        var checked: [(MsgContent, JSONValue, ItemRow?)] = []
        for m in messages {
            guard let json = m["msgContent"], let content = try? PeerInput.content(json) else {
                throw ChatFailure.command("each message needs a msgContent object with a type")
            }
            var quoted: ItemRow?
            if let q = m["quotedItemId"], q != .null {
                guard let qid = q.int64Value else { throw ChatFailure.command("quotedItemId must be a chat item id") }
                let found = try await item(qid, contactId: contactId)
                guard !found.deleted, found.sharedMsgId != nil else { throw ChatFailure.store(.invalidQuote) }
                quoted = found
            }
            checked.append((content, json, quoted))
        }
        var items: [AChatItem] = []
        for (i, (content, json, quoted)) in checked.enumerated() {
            items.append(try await sendItem(user: u, contact: row, content: content, contentJSON: json, quoting: quoted,
                                            idempotencyKey: idempotencyKey.map { "\($0)#\(i)" }))
        }
        return .newChatItems(user: userModel(u), chatItems: items)
    }

    /// Sends one message content to a ready contact, stores it and returns its AChatItem. A quote
    /// travels as SimpleX's `quote`: the quoted message's shared id, time and direction, and its content.
    /// `contentJSON` is the content as given, sent and stored as it is.
    ///
    /// With an `idempotencyKey` the agent commits the key with the send; when the key was used
    /// already nothing is sent, and the item of that send is returned (inserted now if the process
    /// died between the agent's commit and the item's insert).
    func sendItem(user u: UserRow, contact row: ContactRow, content: MsgContent, contentJSON: JSONValue, quoting quoted: ItemRow? = nil,
                  idempotencyKey: String? = nil) async throws -> AChatItem {
        var params: [(String, JSONValue)] = [("content", contentJSON)]
        var ciQuote: CIQuote?
        if let quoted, let msgId = quoted.sharedMsgId {
            let quotedJSON = try JSONValueEncoder().encode(quoted.content)
            params.append(("quote", .object([
                ("msgRef", .object([("msgId", .string(msgId)), ("sentAt", .string(quoted.createdAt)), ("sent", .bool(quoted.sent))])),
                ("content", quotedJSON),
            ])))
            ciQuote = CIQuote(chatDir: ModelOf.direction(sent: quoted.sent), itemId: quoted.id, sharedMsgId: msgId,
                              sentAt: Stored.timestamp(quoted.createdAt), content: quoted.content)
        }
        let message = ChatMessage(event: "x.msg.new", params: .object(params))
        itemSendsInFlight[row.agentConnId, default: 0] += 1
        defer {
            itemSendsInFlight[row.agentConnId, default: 1] -= 1
            if itemSendsInFlight[row.agentConnId] == 0 { itemSendsInFlight[row.agentConnId] = nil }
        }
        let seq: UInt64
        let contactId = row.id
        if let idempotencyKey {
            let sent = try await agentCall { try await agent.sendKeyed(row.agentConnId, message.encoded, idempotencyKey: idempotencyKey) }
            seq = sent.seq
            if sent.repeated, let existing = try await dbRead({ db in
                try ChatItemRecord.filter(ChatItemRecord.Columns.contactId == contactId && ChatItemRecord.Columns.agentSeq == Int64(seq) &&
                                          ChatItemRecord.Columns.sent == true).fetchOne(db)
            }) {
                return aChatItem(user: u, contact: row, item: try await itemModel(ItemRow(existing)))
            }
        } else {
            seq = try await sendChatMessage(row, message)
        }
        let now = Timestamp.now()
        let key = "\(row.agentConnId):\(seq)"
        var record = ChatItemRecord(userId: u.id, contactId: contactId, sent: true, content: contentJSON.description, sharedMsgId: message.msgId,
                                    agentSeq: Int64(seq), status: sentBeforeStored.remove(key) != nil ? .sndSent : .sndNew, createdAt: now,
                                    quoted: try ciQuote.map(Stored.text))
        let inserted = record
        let itemId = try await dbWrite { db in
            var r = inserted
            try r.insert(db)
            try db.cachedStatement(sql: "UPDATE contact SET chat_ts = ? WHERE id = ?").execute(arguments: [now, contactId])
            return r.id!
        }
        record.id = itemId
        // A `sent` that came while the item was being stored is applied now.
        if record.status == .sndNew, sentBeforeStored.remove(key) != nil {
            try await dbWrite { db in _ = try ChatItemRecord.filter(key: itemId).updateAll(db, ChatItemRecord.Columns.status.set(to: ItemStatus.sndSent)) }
            record.status = .sndSent
        }
        let item = ItemRow(record, content: content, quoted: ciQuote)
        return aChatItem(user: u, contact: row, item: ModelOf.chatItem(item, reactions: []))
    }

    func aChatItem(user u: UserRow, contact row: ContactRow, item: ChatItem) -> AChatItem {
        AChatItem(chatInfo: directInfo(row, user: u), chatItem: item)
    }

    /// The CIQuote of a received `quote`: the peer's `sent` is from its side, so it flips; the
    /// quoted item's id is filled in when this side has it. A malformed quote is refused
    /// (``PeerInput/quote(_:)``): the message is kept, without it.
    func receivedQuote(_ quote: JSONValue?, contactId: Int64) async throws -> CIQuote? {
        guard let quote else { return nil }
        let ref: PeerInput.QuoteRef
        do { ref = try PeerInput.quote(quote) } catch {
            logger.info("a malformed quote was dropped", metadata: ["contact": "\(contactId)", "error": "\(error.message)"])
            return nil
        }
        var local: Int64?
        if let msgId = ref.msgId {
            local = try await dbRead { db in
                try ChatItemRecord.filter(ChatItemRecord.Columns.contactId == contactId && ChatItemRecord.Columns.sharedMsgId == msgId).fetchOne(db)?.id
            }
        }
        return CIQuote(chatDir: ref.sent.map { $0 ? .directRcv : .directSnd }, itemId: local, sharedMsgId: ref.msgId, sentAt: ref.sentAt, content: ref.content)
    }

    private func sendEvent(_ contact: ContactRow, _ event: String, _ params: [(String, JSONValue)]) async throws {
        try await sendChatMessage(contact, ChatMessage(event: event, params: .object(params)))
    }

    // MARK: - Commands

    public func updateItem(contactId: Int64, itemId: Int64, message: JSONValue) async throws -> ChatResponse {
        let (u, contact, item) = try await target(contactId: contactId, itemId: itemId)
        guard item.sent, !item.deleted, let msgId = item.sharedMsgId else { throw ChatFailure.chat(.invalidChatItemUpdate) }
        guard let json = message["msgContent"], case .object = json, let content = try? PeerInput.content(json) else {
            throw ChatFailure.command("UpdatedMessage needs msgContent")
        }
        if content == item.content {
            return .chatItemNotChanged(user: userModel(u), chatItem: aChatItem(user: u, contact: contact, item: try await itemModel(item)))
        }
        try await sendEvent(contact, "x.msg.update", [("msgId", .string(msgId)), ("content", json)])
        let (text, now) = (json.description, Timestamp.now())
        try await dbWrite { db in
            _ = try ChatItemRecord.filter(key: itemId).updateAll(db, ChatItemRecord.Columns.content.set(to: text), ChatItemRecord.Columns.edited.set(to: true),
                                                                 ChatItemRecord.Columns.updatedAt.set(to: now))
        }
        var updated = item
        updated.content = content
        updated.edited = true
        return .chatItemUpdated(user: userModel(u), chatItem: aChatItem(user: u, contact: contact, item: try await itemModel(updated)))
    }

    public func deleteItems(contactId: Int64, itemIds: [Int64], broadcast: Bool) async throws -> ChatResponse {
        var deletions: [ChatItemDeletion] = []
        var user: UserRow?
        for itemId in itemIds {
            let (u, contact, item) = try await target(contactId: contactId, itemId: itemId)
            user = u
            let before = aChatItem(user: u, contact: contact, item: try await itemModel(item))
            if broadcast {
                guard item.sent, !item.deleted, let msgId = item.sharedMsgId else { throw ChatFailure.chat(.invalidChatItemDelete) }
                try await sendEvent(contact, "x.msg.del", [("msgId", .string(msgId))])
                try await dbWrite { db in _ = try ChatItemRecord.filter(key: itemId).updateAll(db, ChatItemRecord.Columns.deleted.set(to: true)) }
                var after = item
                after.deleted = true
                deletions.append(ChatItemDeletion(deletedChatItem: before, toChatItem: aChatItem(user: u, contact: contact, item: try await itemModel(after))))
            } else {
                _ = try await dbWrite { db in try ChatItemRecord.deleteOne(db, key: itemId) }
                deletions.append(ChatItemDeletion(deletedChatItem: before))
            }
        }
        guard let user else { throw ChatFailure.command("no items to delete") }
        return .chatItemsDeleted(user: userModel(user), chatItemDeletions: deletions, byUser: true, timed: false)
    }

    public func react(contactId: Int64, itemId: Int64, add: Bool, reaction: JSONValue) async throws -> ChatResponse {
        let (u, contact, item) = try await target(contactId: contactId, itemId: itemId)
        guard let reaction = Reactions.canonical(reaction) else {
            throw ChatFailure.command("a reaction is {\"type\":\"emoji\",\"emoji\":…} with one of \(Reactions.allowedEmoji.sorted().joined(separator: " "))")
        }
        guard !item.deleted, let msgId = item.sharedMsgId else { throw ChatFailure.chat(.invalidChatItemUpdate) }
        if add, try await !reactionFits(itemId: itemId, sent: true, reaction: reaction) {
            throw ChatFailure.command("too many reactions on this item (at most \(limits.maxReactionsPerMember) of yours, \(limits.maxReactionsPerItem) in all)")
        }
        try await sendEvent(contact, "x.msg.react", [("msgId", .string(msgId)), ("reaction", Reactions.json(reaction)), ("add", .bool(add))])
        try await storeReaction(itemId: itemId, sent: true, reaction: reaction, add: add)
        return .chatItemReaction(user: userModel(u), added: add, reaction: try await reactionModel(u, contact, item, sent: true, reaction: reaction))
    }

    /// Whether one side may add `reaction` to an item: one it already has always fits; a new one
    /// must stay within `maxReactionsPerMember` for that side and `maxReactionsPerItem` in all.
    func reactionFits(itemId: Int64, sent: Bool, reaction: MsgReaction) async throws -> Bool {
        let key = Reactions.json(reaction).description
        let limits = self.limits
        return try await dbRead { db in
            let onItem = ReactionRecord.filter(ReactionRecord.Columns.itemId == itemId)
            let mine = onItem.filter(ReactionRecord.Columns.sent == sent)
            if try !mine.filter(ReactionRecord.Columns.reaction == key).isEmpty(db) { return true }
            return try mine.fetchCount(db) < limits.maxReactionsPerMember && onItem.fetchCount(db) < limits.maxReactionsPerItem
        }
    }

    func storeReaction(itemId: Int64, sent: Bool, reaction: MsgReaction, add: Bool) async throws {
        let key = Reactions.json(reaction).description
        let now = Timestamp.now()
        try await dbWrite { db in
            if add {
                try ReactionRecord(itemId: itemId, sent: sent, reaction: key, createdAt: now).insert(db, onConflict: .ignore)
            } else {
                _ = try ReactionRecord.deleteOne(db, key: ["item_id": itemId, "sent": sent, "reaction": key])
            }
        }
    }

    func reactionModel(_ u: UserRow, _ contact: ContactRow, _ item: ItemRow, sent: Bool, reaction: MsgReaction) async throws -> ACIReaction {
        ACIReaction(chatInfo: directInfo(contact, user: u),
                    chatReaction: CIReaction(chatDir: ModelOf.direction(sent: sent), chatItem: try await itemModel(item), sentAt: .now(), reaction: reaction))
    }

    // MARK: - Received

    /// Envelopes in the agent's outbox waiting for their relay (the host's gauge).
    public nonisolated func outboxDepth() async throws -> Int {
        try await agent.outboxDepth()
    }

    /// The newest chat item's id (0 when there is none). Ids only grow (`AUTOINCREMENT`): one is
    /// never used again, even after the newest item is deleted.
    public func lastChatItemId() async throws -> Int64 {
        try await dbRead { db in try ChatItemRecord.select(max(ChatItemRecord.Columns.id), as: Int64?.self).fetchOne(db).flatMap { $0 } ?? 0 }
    }

    /// The `newChatItems` events of received items with an id above `afterId`, oldest first, at
    /// most `limit`: one event per item, as announced when it arrived (with its current content
    /// and status). The bot host replays these to plugins that had not finished them.
    public func receivedItems(after afterId: Int64, limit: Int) async throws -> [(itemId: Int64, event: ChatEvent)] {
        let rows = try await dbRead { db in
            try ChatItemRecord.filter(ChatItemRecord.Columns.sent == false && ChatItemRecord.Columns.id > afterId)
                .order(ChatItemRecord.Columns.id).limit(max(0, limit)).fetchAll(db)
        }.map(ItemRow.init)
        var users: [Int64: UserRow] = [:]
        var events: [(itemId: Int64, event: ChatEvent)] = []
        for item in rows {
            let contactId = item.contactId
            guard let contact = try await dbRead({ db in try ContactRecord.fetchOne(db, key: contactId) }).map(ContactRow.init) else { continue }
            if users[contact.userId] == nil { users[contact.userId] = try await user(contact.userId) }
            let u = users[contact.userId]!
            events.append((item.id, .newChatItems(user: userModel(u), chatItems: [aChatItem(user: u, contact: contact, item: try await itemModel(item))])))
        }
        return events
    }

    /// Applies a peer's `x.msg.update`, `x.msg.del` or `x.msg.react` to the item it names.
    func receivedItemEvent(_ message: ChatMessage, user u: UserRow, contact: ContactRow) async throws {
        let contactId = contact.id
        guard let msgId = message.params["msgId"]?.stringValue,
              let item = try await dbRead({ db in
                  try ChatItemRecord.filter(ChatItemRecord.Columns.contactId == contactId && ChatItemRecord.Columns.sharedMsgId == msgId).fetchOne(db)
              }).map(ItemRow.init) else {
            logger.info("a chat event names an unknown message", metadata: ["event": "\(message.event)"])
            return
        }
        let itemId = item.id
        switch message.event {
        case "x.msg.update":
            guard !item.sent, let json = message.params["content"] else { return }
            let content = try PeerInput.content(json)
            let text = json.description
            try await dbWrite { db in
                _ = try ChatItemRecord.filter(key: itemId).updateAll(db, ChatItemRecord.Columns.content.set(to: text), ChatItemRecord.Columns.edited.set(to: true))
            }
            var updated = item
            updated.content = content
            updated.edited = true
            sink.yield(.chatItemUpdated(user: userModel(u), chatItem: aChatItem(user: u, contact: contact, item: try await itemModel(updated))))
        case "x.msg.del":
            guard !item.sent else { return }
            let before = aChatItem(user: u, contact: contact, item: try await itemModel(item))
            try await dbWrite { db in _ = try ChatItemRecord.filter(key: itemId).updateAll(db, ChatItemRecord.Columns.deleted.set(to: true)) }
            var after = item
            after.deleted = true
            sink.yield(.chatItemsDeleted(user: userModel(u), chatItemDeletions: [
                ChatItemDeletion(deletedChatItem: before, toChatItem: aChatItem(user: u, contact: contact, item: try await itemModel(after))),
            ], byUser: false, timed: false))
        case "x.msg.react":
            guard let raw = message.params["reaction"], let add = message.params["add"]?.boolValue else { return }
            // Only SimpleX's emoji set, and only up to the caps: anything else is dropped, so a
            // peer cannot make every event about this item carry what it likes.
            guard let reaction = Reactions.canonical(raw) else {
                logger.info("a reaction outside the allowed set was ignored", metadata: ["contact": "\(contact.id)"])
                return
            }
            if add, try await !reactionFits(itemId: itemId, sent: false, reaction: reaction) {
                logger.info("a reaction over the cap was ignored", metadata: ["contact": "\(contact.id)"])
                return
            }
            try await storeReaction(itemId: itemId, sent: false, reaction: reaction, add: add)
            sink.yield(.chatItemReaction(user: userModel(u), added: add, reaction: try await reactionModel(u, contact, item, sent: false, reaction: reaction)))
        default:
            break
        }
    }
}
