import Foundation
import SwiftplexSQL
import RelayClient
import RelayProtocol
import SwiftplexCrypto

// MARK: - One body to many connections, committed together
extension Agent {
    /// What ``sendMany(_:to:)`` did for one connection.
    public enum ManySendOutcome: Sendable, Equatable {
        /// Committed now with this number; the outbox delivers it (`sent` follows).
        case sent(UInt64)
        /// The key had been used on this connection: nothing sent now (the first send's number).
        case repeated(UInt64)
        /// Not sent: the connection is unknown (`unknownConnection`) or not connected (`wrongState`).
        case refused(AgentError.Code)
    }

    /// ``sendKeyed(_:_:idempotencyKey:)`` of one `body` to each of `sends` (distinct connections, each
    /// with its idempotency key): each connection's ratchet step, outbox entry and key as one send
    /// makes them, but committed in one transaction for all (a fan-out pays one commit, not one
    /// per connection). Connections that cannot take it are refused one by one; the others are
    /// sent. A connection another task is changing is waited for after the connections taken so
    /// far are committed, so no lock is waited for while others are held. The keys are looked up
    /// once, before; a key used meanwhile by another send fails the commit (`send_key`'s primary
    /// key) and nothing of the batch is kept, so a key never sends twice.
    public func sendMany(_ body: [UInt8], to sends: [(connection: Int64, idempotencyKey: String)]) async throws -> [ManySendOutcome] {
        guard Set(sends.map(\.connection)).count == sends.count else {
            throw AgentError(.wrongState, "sendMany: a connection is named twice")
        }
        var outcomes: [ManySendOutcome?] = Array(repeating: nil, count: sends.count)
        let keys = sends
        let used = try await store.db.read { db in try keys.map { try AgentStore.sentSeq(db, connectionId: $0.connection, key: $0.idempotencyKey) } }
        var held: [Int64] = []
        var staged: [StagedSend] = []
        do {
            for (i, send) in sends.enumerated() {
                if let seq = used[i] {
                    // A repeat (after a crash): the first send committed it with its key.
                    outcomes[i] = .repeated(seq)
                    continue
                }
                let id = send.connection
                if !tryConnectionLock(id) {
                    // Never wait for a lock while holding others: commit what is taken first.
                    let batch = staged, taken = held
                    staged = []
                    held = []
                    for (index, seq) in try await commitStaged(batch, held: taken) { outcomes[index] = .sent(seq) }
                    await acquireConnectionLock(id)
                }
                held.append(id)
                guard var r = try await lockedRecord(id) else {
                    outcomes[i] = .refused(.unknownConnection)
                    continue
                }
                guard let (envelope, seq) = try sealNextMessage(&r, body: body) else {
                    outcomes[i] = .refused(.wrongState)
                    continue
                }
                staged.append(StagedSend(index: i, record: r, envelope: envelope, seq: seq, key: send.idempotencyKey))
            }
        } catch {
            for id in held { releaseConnectionLock(id) }
            throw error
        }
        for (index, seq) in try await commitStaged(staged, held: held) { outcomes[index] = .sent(seq) }
        return outcomes.map { $0 ?? .refused(.wrongState) }
    }

    /// Commits staged sends in one transaction, lets go of the locks `held`, and starts their
    /// delivery; returns each send's index and number.
    private func commitStaged(_ batch: [StagedSend], held: [Int64]) async throws -> [(Int, UInt64)] {
        defer { for id in held { releaseConnectionLock(id) } }
        guard !batch.isEmpty else { return [] }
        try await store.db.write { db in
            for s in batch {
                try AgentStore.save(db, s.record)
                try AgentStore.enqueue(db, connectionId: s.record.id, envelope: s.envelope, messageSeq: s.seq)
                try AgentStore.recordSendKey(db, connectionId: s.record.id, key: s.key, seq: s.seq)
            }
        }
        for s in batch { committed(s.record) }
        let ids = batch.map(\.record.id)
        spawn { await self.deliverOutboxes(ids) }
        return batch.map { ($0.index, $0.seq) }
    }

    /// ``deliverOutbox(_:)`` for many connections at once (a fan-out's): one read of their
    /// outboxes, the sends side by side (each connection's in order), one write removing what was
    /// sent. A connection whose outbox another delivery is sending is left to it; one whose send
    /// failed, or that has more waiting afterwards, goes through ``deliverOutbox(_:)`` (which
    /// drops a refused queue's messages or leaves them for the retry).
    func deliverOutboxes(_ ids: [Int64]) async {
        guard !closed else { return }
        let mine = ids.filter { !deliveringOutbox.contains($0) }
        guard !mine.isEmpty else { return }
        for id in mine { deliveringOutbox.insert(id) }
        var again = Set<Int64>()
        do {
            let remembered = mine.map { records[$0] }
            let loaded = try await store.db.read { db in
                try zip(mine, remembered).map { id, r in (try r ?? AgentStore.connection(db, id: id), try AgentStore.pending(db, connectionId: id)) }
            }
            struct Outbox: Sendable {
                var id: Int64
                var connection: RelayConnection
                var senderId: [UInt8]
                var key: AuthPrivateKey
                var items: [PendingEnvelope]
            }
            var outboxes: [Outbox] = []
            for (id, (record, items)) in zip(mine, loaded) {
                guard let record, let sndText = record.sndQueue, let keyBytes = record.sndKey, !items.isEmpty else { continue }
                do {
                    let snd = try QueueURI(parsing: sndText)
                    let key = try AuthPrivateKey(secretBytes: [UInt8](keyBytes))
                    outboxes.append(Outbox(id: id, connection: try await relayConnection(snd.relay, peer: true), senderId: snd.senderId, key: key, items: items))
                } catch {
                    again.insert(id)
                }
            }
            // Each connection's items in order; the connections side by side.
            let sent = await withTaskGroup(of: (Int64, [PendingEnvelope], Bool).self) { group -> [(Int64, [PendingEnvelope], Bool)] in
                for o in outboxes {
                    group.addTask {
                        var done: [PendingEnvelope] = []
                        for item in o.items {
                            do { try await o.connection.sendMessage(senderId: o.senderId, key: o.key, body: item.envelope) } catch { return (o.id, done, false) }
                            done.append(item)
                        }
                        return (o.id, done, true)
                    }
                }
                var all: [(Int64, [PendingEnvelope], Bool)] = []
                for await r in group { all.append(r) }
                return all
            }
            guard !closed else { return } // sent again after a restart; the peer drops the repeat
            let removed = sent.flatMap(\.1).map(\.id)
            try await store.db.write { db in for id in removed { try AgentStore.removePending(db, id: id) } }
            for (id, items, ok) in sent {
                for item in items { if let seq = item.messageSeq { eventSink.yield(.sent(connection: id, seq: seq)) } }
                if !ok { again.insert(id) }
            }
            // Anything queued meanwhile (its own delivery found this one running) goes now.
            let waiting = try await store.db.read { db in
                try Int64.fetchAll(db, sql: "SELECT DISTINCT connection_id FROM pending WHERE connection_id IN (\(mine.map { _ in "?" }.joined(separator: ",")))",
                                   arguments: StatementArguments(mine))
            }
            again.formUnion(waiting)
        } catch {
            logger.debug("outbox delivery deferred", metadata: ["connections": "\(mine.count)", "error": "\(error)"])
            again.formUnion(mine)
        }
        for id in mine { deliveringOutbox.remove(id) }
        for id in again.sorted() { spawn { await self.deliverOutbox(id) } }
    }
}

/// One send of ``Agent/sendMany(_:to:)``, encrypted and waiting for the batch's commit.
private struct StagedSend: Sendable {
    var index: Int
    var record: ConnectionRecord
    var envelope: [UInt8]
    var seq: UInt64
    var key: String
}
