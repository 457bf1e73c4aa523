import Agent
import Foundation
import GRDB
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
            // The peer's side is gone: our queue for it is of no use either. Deleted in a task
            // `close()` waits for; one cut short (a shutdown cancels it, a crash) is done again
            // at the next run — the contact's `deleted` status is the durable mark.
            inBackground { await self.deleteConnectionOfDeletedContact(conn) }
        default:
            logger.debug("unsupported chat event", metadata: ["event": "\(message.event)"])
        }
        return false
    }

    /// Deletes the agent connections of contacts that deleted us (`deleted`) whose deletion a
    /// shutdown or a crash cut short; `run()` starts it. Connections already gone are skipped.
    public func resumeConnectionDeletions() async {
        guard let conns = try? dbRead({ db in
            try Int64.fetchAll(db, sql: "SELECT agent_conn_id FROM contact WHERE status = 'deleted'")
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
