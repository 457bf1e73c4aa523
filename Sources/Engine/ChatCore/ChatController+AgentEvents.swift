import Agent
import ChatModel
import Foundation
import SwiftplexSQL
import SwiftplexBase

extension ChatController {
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
            // Only while a join is in flight can an event come before its contact is recorded.
            if joinsInFlight > 0 {
                let known = (try? await dbRead { db in try !ContactRecord.filter(ContactRecord.Columns.agentConnId == conn).isEmpty(db) }) ?? false
                if joinsInFlight > 0, !known {
                    parked[conn] = [event]
                    return
                }
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
            } catch let e as SQLError {
                attempt += 1
                logger.warning("the chat database refused an event; retrying", metadata: ["attempt": "\(attempt)", "error": "\(e.backendCode ?? e.code.rawValue)"])
                sink.yield(.chatError(.store(.dbError(resultCode: e.backendCode ?? e.code.rawValue, message: e.message))))
                if Task.isCancelled || closing { return }
                if !Self.passingFault(e), attempt >= Self.maxStoreAttempts { return }
                try? await Task.sleep(for: min(.milliseconds(50) * (1 << min(attempt, 7)), .seconds(5)))
            } catch {
                sink.yield(.chatError(Self.chatError(error)))
                return
            }
        }
    }

    /// The `chatError` any failure is reported as.
    nonisolated static func chatError(_ error: any Error) -> ChatError {
        switch error {
        case let failure as ChatFailure: failure.error
        case let e as AgentError: failure(e).error
        case let e as ChatProtocolError: .error(.commandError(message: e.message))
        default: .error(.commandError(message: "\(error)"))
        }
    }

    static let maxStoreAttempts = 8

    /// An error that says the work was cut short by the engine stopping, not that the input was
    /// refused: its message must stay with the agent (marking it processed would lose it).
    nonisolated static func isStopping(_ error: any Error) -> Bool {
        error is CancellationError || Task.isCancelled
    }

    /// Database faults that go away by themselves (space returns, a lock is released, the
    /// server is reached again).
    static func passingFault(_ e: SQLError) -> Bool { e.isTransient }

    /// Runs `body` in a task of its own (accepting, allowing: they wait on a peer's relay),
    /// reporting its failure as a `chatError` event.
    func inBackground(_ body: @escaping @Sendable () async throws -> Void) {
        guard !closing else { return }
        let key = nextBackground
        nextBackground += 1
        background[key] = Task {
            do {
                try await body()
            } catch {
                self.sink.yield(.chatError(Self.chatError(error)))
            }
            self.finishedBackground(key)
        }
    }

    private func finishedBackground(_ key: Int) { background[key] = nil }

    func handle(_ event: AgentEvent) async throws {
        if try await handleChannelAgentEvent(event) { return } // a channel connection (+Channels)
        if try await handleGroupAgentEvent(event) { return } // a member connection (+Groups)
        switch event {
        case let .confirmation(conn, info):
            // Someone joined our one-time invitation: keep their profile and accept (in a task:
            // allowing dials the joiner's relay).
            guard let row = try await contact(connection: conn) else { return }
            if let profile = PeerInput.profile(fromInfo: info) {
                let id = row.id
                try await dbWrite { db in try Self.storeContactProfile(db, contactId: id, profile: profile) }
            }
            let own = try profileInfo(ownProfile(for: row, user: try await user(row.userId)))
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
            do { wantsReceipt = try await received(conn, seq: seq, body: body) } catch let e as SQLError {
                throw e
            } catch where Self.isStopping(error) || closing {
                // The engine is stopping (its database access was cancelled): nothing was
                // stored, so the agent keeps the message and announces it again after the start.
                throw error
            } catch {
                await agent.messageProcessed(conn, seq: seq)
                throw error
            }
            await agent.messageProcessed(conn, seq: seq)
            if wantsReceipt { await agent.acknowledgeDelivery(conn, seq: seq) }
        case let .sent(conn, seq):
            try await statusChanged(conn, seqs: [seq], to: .sndSent, from: [.sndNew])
        case let .delivered(conn, seqs):
            try await statusChanged(conn, seqs: seqs, to: .sndRcvd, from: [.sndNew, .sndSent])
        case let .hostConnected(relay):
            sink.yield(.hostConnected(protocol: "smp", transportHost: relay.host))
        case let .hostDisconnected(relay):
            sink.yield(.hostDisconnected(protocol: "smp", transportHost: relay.host))
        case let .subscriptions(relay, active, removed):
            if !active.isEmpty {
                sink.yield(.subscriptionStatus(server: relay.description, subscriptionStatus: .active, connections: active.map(String.init)))
            }
            for (error, failures) in Dictionary(grouping: removed, by: \.error).sorted(by: { $0.key < $1.key }) {
                sink.yield(.subscriptionStatus(server: relay.description, subscriptionStatus: .removed(subError: error),
                                               connections: failures.map { String($0.connection) }))
            }
        case let .rejected(conn, reason):
            logger.info("a message was rejected", metadata: ["connection": "\(conn)", "reason": "\(reason)"])
        case let .undeliverable(conn, seqs):
            try await statusChanged(conn, seqs: seqs, to: .sndErrorAuth, from: [.sndNew, .sndSent])
        case let .storeError(conn, message):
            // The agent database refused what arrived; the agent keeps trying.
            sink.yield(.chatError(.agent(Self.agentError(.store, message), connection: conn.map(String.init) ?? "")))
        }
    }

    /// Moves sent items to a later status and reports them in `chatItemsStatusesUpdated`. A
    /// `sent` that arrives before its item is stored is remembered for ``sendItem``, which
    /// looks again once it has stored the item.
    private func statusChanged(_ conn: Int64, seqs: [UInt64], to status: ItemStatus, from: [ItemStatus]) async throws {
        // The contact, the move and the moved items with their reactions: one database access.
        guard let (record, moved) = try await dbWrite({ db -> (ContactRecord, MovedItems)? in
            guard let c = try ContactRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM contact WHERE agent_conn_id = ?"), arguments: [conn]),
                  let contactId = c.id else { return nil }
            return (c, try Self.moveAndRead(db, contactId: contactId, seqs: seqs, to: status, from: from))
        }) else { return }
        let row = ContactRow(record)
        let contactId = row.id
        var stored = moved.items
        if status == .sndSent, itemSendsInFlight[conn] != nil, !moved.unstored.isEmpty {
            let unstored = moved.unstored
            for seq in unstored { sentBeforeStored.insert("\(conn):\(seq)") }
            // The item may have been stored while this looked: look once more now that the
            // `sent` is remembered (whichever of the two comes second moves the item).
            let late = try await dbWrite { db in try Self.moveAndRead(db, contactId: contactId, seqs: unstored, to: status, from: from) }
            stored += late.items
            for seq in unstored where !late.unstored.contains(seq) { sentBeforeStored.remove("\(conn):\(seq)") }
        }
        guard !stored.isEmpty else { return }
        let u = try await user(row.userId)
        let items = stored.map { aChatItem(user: u, contact: row, item: ModelOf.chatItem(ItemRow($0.record), reactions: $0.reactions)) }
        sink.yield(.chatItemsStatusesUpdated(user: userModel(u), chatItems: items))
    }

    /// Items whose status moved, read back with their reactions, and the seqs with no item stored.
    struct MovedItems: Sendable {
        var items: [(record: ChatItemRecord, reactions: [CIReactionCount])]
        var unstored: [UInt64]
    }

    /// ``moveStatus(_:contactId:seqs:to:from:)``, then the moved items read back with their reactions.
    nonisolated static func moveAndRead(_ db: Database, contactId: Int64, seqs: [UInt64], to status: ItemStatus, from: [ItemStatus]) throws -> MovedItems {
        let (updated, unstored) = try moveStatus(db, contactId: contactId, seqs: seqs, to: status, from: from)
        let byId = try db.cachedStatement(sql: "SELECT * FROM chat_item WHERE id = ?")
        let items = try updated.compactMap { id in try ChatItemRecord.fetchOne(byId, arguments: [id]).map { (record: $0, reactions: try reactionCounts(db, itemId: id)) } }
        return MovedItems(items: items, unstored: unstored)
    }

    /// Moves the sent items of `seqs` in one of `from` to `status`; returns their ids, and the
    /// seqs with no item stored at all.
    nonisolated static func moveStatus(_ db: Database, contactId: Int64, seqs: [UInt64], to status: ItemStatus, from: [ItemStatus])
        throws -> (updated: [Int64], unstored: [UInt64]) {
        var ids: [Int64] = []
        var unstored: [UInt64] = []
        // Cached statements: this runs for every `sent` and every receipt.
        let bySeq = try db.cachedStatement(sql: "SELECT id, sent, status FROM chat_item WHERE contact_id = ? AND agent_seq = ? ORDER BY id")
        let move = try db.cachedStatement(sql: "UPDATE chat_item SET status = ? WHERE id = ?")
        for seq in seqs {
            let rows = try Row.fetchAll(bySeq, arguments: [contactId, Int64(seq)])
            if rows.isEmpty {
                unstored.append(seq)
                continue
            }
            guard let found = rows.first(where: { row in
                (row["sent"] as Bool? ?? false) && (row["status"] as ItemStatus?).map(from.contains) == true
            }) else { continue }
            let id: Int64 = found["id"]
            try move.execute(arguments: [status, id])
            ids.append(id)
        }
        return (ids, unstored)
    }

    private func connected(_ conn: Int64, info: [UInt8]) async throws {
        guard let pending = try await contact(connection: conn) else { return }
        let profile = PeerInput.profile(fromInfo: info)
        let now = Timestamp.now()
        let id = pending.id
        try await dbWrite { db in
            if let profile { try Self.storeContactProfile(db, contactId: id, profile: profile) }
            _ = try ContactRecord.filter(key: id).updateAll(db, ContactRecord.Columns.status.set(to: ContactState.ready),
                                                            ContactRecord.Columns.updatedAt.set(to: now), ContactRecord.Columns.chatTs.set(to: now))
        }
        let u = try await user(pending.userId)
        guard let row = try await contact(connection: conn) else { return }
        sink.yield(.contactConnected(user: userModel(u), contact: contactModel(row, user: u), userCustomProfile: row.incognitoProfile))
        // A contact accepted from our address gets the welcome message, if one is set.
        if row.accepted, let welcome = try await address(userId: u.id)?.settings.autoReply {
            let item = try await sendItem(user: u, contact: row, content: welcome, contentJSON: try JSONValueEncoder().encode(welcome))
            sink.yield(.newChatItems(user: userModel(u), chatItems: [item]))
        }
    }

    /// Applies one chat message from a contact. Returns whether it deserves a delivery receipt
    /// (a new message, when the user sends receipts).
    private func received(_ conn: Int64, seq: UInt64, body: [UInt8]) async throws -> Bool {
        let decoded = Result { try ChatMessage(decoding: body) }
        // A new message without a quote (the common case) is looked up and stored in one write.
        if case let .success(message) = decoded, message.event == "x.msg.new", message.params["quote"] == nil,
           let json = message.params["content"], let content = try? PeerInput.content(json) {
            return try await receivedMessage(conn, seq: seq, message: message, content: content, json: json)
        }
        // The contact, and whether this message is stored already: one read.
        let found = try await dbRead { db -> (ContactRecord, Bool)? in
            guard let c = try ContactRecord.filter(ContactRecord.Columns.agentConnId == conn).fetchOne(db) else { return nil }
            let seen = try !ChatItemRecord.filter(ChatItemRecord.Columns.contactId == c.id && ChatItemRecord.Columns.agentSeq == Int64(seq) &&
                                                  ChatItemRecord.Columns.sent == false).isEmpty(db)
            return (c, seen)
        }
        guard let (record, seen) = found else { return false }
        if seen { return false }  // stored before a crash; the agent announced it again
        let row = ContactRow(record)
        let contactId = row.id
        let u = try await user(row.userId)
        let message = try decoded.get()
        switch message.event {
        case "x.msg.new":
            let content = try PeerInput.content(message.params["content"])
            let quoted = try await receivedQuote(message.params["quote"], contactId: contactId)
            let now = Timestamp.now()
            var record = ChatItemRecord(userId: u.id, contactId: contactId, sent: false, content: message.params["content"]!.description,
                                        sharedMsgId: message.msgId, agentSeq: Int64(seq), status: .rcvNew, createdAt: now,
                                        quoted: try quoted.map(Stored.text))
            let toInsert = record
            let itemId = try await dbWrite { db in
                var inserted = toInsert
                try inserted.insert(db)
                _ = try ContactRecord.filter(key: contactId).updateAll(db, ContactRecord.Columns.chatTs.set(to: now))
                return inserted.id!
            }
            // The event is made from what arrived, not read back from the store.
            record.id = itemId
            let item = ItemRow(record, content: content, quoted: quoted)
            sink.yield(.newChatItems(user: userModel(u), chatItems: [aChatItem(user: u, contact: row, item: ModelOf.chatItem(item, reactions: []))]))
            return u.sendReceipts
        case "x.msg.update", "x.msg.del", "x.msg.react":
            try await receivedItemEvent(message, user: u, contact: row)
        case "x.info":
            guard let p = message.params["profile"] else { throw ChatProtocolError(.malformed, "x.info without a profile") }
            let profile = try PeerInput.profile(p)
            guard profile != row.profile else { return false }
            let now = Timestamp.now()
            try await dbWrite { db in try Self.storeContactProfile(db, contactId: contactId, profile: profile, updatedAt: now) }
            let updated = try await contact(contactId).1
            sink.yield(.contactUpdated(user: userModel(u), fromContact: contactModel(row, user: u), toContact: contactModel(updated, user: u)))
        case "x.grp.inv":
            try await receivedGroupInvitation(conn: conn, seq: seq, body: body, contact: row, user: u)
        case "x.direct.del":
            let now = Timestamp.now()
            try await dbWrite { db in
                _ = try ContactRecord.filter(key: contactId).updateAll(db, ContactRecord.Columns.status.set(to: ContactState.deleted),
                                                                       ContactRecord.Columns.updatedAt.set(to: now))
            }
            let updated = try await contact(contactId).1
            sink.yield(.contactDeletedByContact(user: userModel(u), contact: contactModel(updated, user: u)))
            // The peer's side is gone: our queue for it is of no use either. Deleted in a task
            // `close()` waits for; one cut short (a shutdown cancels it, a crash) is done again
            // at the next run — the contact's `deleted` status is the durable mark.
            inBackground { await self.deleteConnectionOfDeletedContact(conn) }
        default:
            logger.debug("unsupported chat event", metadata: ["event": "\(message.event)"])
        }
        return false
    }

    /// Stores a new message (``received(_:seq:body:)``): the contact, the check that the message
    /// is not stored already (the agent announces it again after a crash) and the insert are one
    /// database write. The event is made from what arrived, not read back from the store.
    private func receivedMessage(_ conn: Int64, seq: UInt64, message: ChatMessage, content: MsgContent, json: JSONValue) async throws -> Bool {
        let now = Timestamp.now()
        let text = json.description
        let msgId = message.msgId
        // Cached statements: this runs for every message a contact sends.
        guard let (record, item) = try await dbWrite({ db -> (ContactRecord, ChatItemRecord?)? in
            guard let c = try ContactRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM contact WHERE agent_conn_id = ?"), arguments: [conn]),
                  let contactId = c.id else { return nil }
            let seen = try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM chat_item WHERE contact_id = ? AND agent_seq = ? AND sent = 0 LIMIT 1"),
                                         arguments: [contactId, Int64(seq)]) ?? false
            if seen { return (c, nil) }
            var item = ChatItemRecord(userId: c.userId, contactId: contactId, sent: false, content: text, sharedMsgId: msgId, agentSeq: Int64(seq),
                                      status: .rcvNew, createdAt: now)
            try item.insert(db)
            try db.cachedStatement(sql: "UPDATE contact SET chat_ts = ? WHERE id = ?").execute(arguments: [now, contactId])
            return (c, item)
        }) else { return false }
        guard let item else { return false }  // stored before a crash
        let row = ContactRow(record)
        let u = try await user(row.userId)
        let stored = ItemRow(item, content: content, quoted: nil)
        sink.yield(.newChatItems(user: userModel(u), chatItems: [aChatItem(user: u, contact: row, item: ModelOf.chatItem(stored, reactions: []))]))
        return u.sendReceipts
    }

    /// Deletes the agent connections of contacts that deleted us (`deleted`) whose deletion a
    /// shutdown or a crash cut short; `run()` starts it. Connections already gone are skipped.
    public func resumeConnectionDeletions() async {
        guard let conns = try? await dbRead({ db in
            try ContactRecord.filter(ContactRecord.Columns.status == ContactState.deleted).fetchAll(db).map(\.agentConnId)
        }) else { return }
        for conn in conns where !closing { await deleteConnectionOfDeletedContact(conn) }
    }

    func deleteConnectionOfDeletedContact(_ conn: Int64) async {
        do {
            try await agent.deleteConnection(conn)
        } catch let e as AgentError where e.code == .unknownConnection {
            // Deleted already.
        } catch {
            logger.info("could not delete the connection of a contact that deleted us; retried at the next start",
                        metadata: ["connection": "\(conn)", "error": "\(error)"])
        }
    }
}
