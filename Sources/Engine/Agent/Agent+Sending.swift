import Foundation
import SwiftplexSQL
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayClient
import RelayProtocol
import SwiftplexCrypto
import SwiftplexStorage

// MARK: - Sending: numbered messages, receipts and the outbox that delivers them
extension Agent {
    /// Encrypts and queues a message; returns its number on this connection. The `sent` event
    /// follows when the peer's relay has it.
    ///
    /// With an `idempotencyKey`, the key is committed in the same transaction as the ratchet step
    /// and the outbox entry; a later send on this connection with the same key sends nothing and
    /// returns the number the first one got (so a caller repeating its work after a crash does
    /// not send twice).
    @discardableResult
    public func send(_ id: Int64, _ body: [UInt8], idempotencyKey: String? = nil) async throws -> UInt64 {
        try await sendKeyed(id, body, idempotencyKey: idempotencyKey).seq
    }

    /// ``send(_:_:idempotencyKey:)`` that also says whether the key had been used (nothing sent now).
    public func sendKeyed(_ id: Int64, _ body: [UInt8], idempotencyKey key: String?) async throws -> (seq: UInt64, repeated: Bool) {
        let result = try await withConnectionLock(id) { () async throws -> (UInt64, Bool) in
            if let key, let seq = try await store.db.read({ db in try AgentStore.sentSeq(db, connectionId: id, key: key) }) {
                return (seq, true)
            }
            guard var r = try await lockedRecord(id) else {
                throw AgentError(.unknownConnection, "no connection \(id)")
            }
            guard let (envelope, seq) = try sealNextMessage(&r, body: body) else {
                throw AgentError(.wrongState, "connection \(id) is not connected")
            }
            let record = r
            try await store.db.write { db in
                try AgentStore.save(db, record)
                try AgentStore.enqueue(db, connectionId: id, envelope: envelope, messageSeq: seq)
                if let key { try AgentStore.recordSendKey(db, connectionId: id, key: key, seq: seq) }
            }
            committed(record)
            return (seq, false)
        }
        // Committed: the outbox delivers it. Waiting for the relay here would hold the caller —
        // the chat's event loop sending a welcome, a plugin answering — on a peer relay that
        // went silent; `sent` reports the delivery instead.
        if !result.1 { spawn { await self.deliverOutbox(id) } }
        return (result.0, result.1)
    }

    /// Acknowledges, end to end, that message `seq` received on connection `id` was processed.
    /// Receipts are batched: those given within `delay` (``receiptDelay`` unless told) of the
    /// first one on a connection travel as one encrypted receipt message; the sender's agent
    /// reports them as `delivered`.
    public func acknowledgeDelivery(_ id: Int64, seq: UInt64, within delay: Duration = Agent.receiptDelay) {
        if pendingReceipts[id] != nil {
            pendingReceipts[id]!.append(seq)
            return
        }
        guard !closed else { return }
        pendingReceipts[id] = [seq]
        let key = nextReceiptTask
        nextReceiptTask += 1
        receiptTasks[key] = Task {
            try? await Task.sleep(for: delay)
            await self.flushReceipts(id)
            self.receiptTasks[key] = nil
        }
    }

    func flushReceipts(_ id: Int64) async {
        guard var seqs = pendingReceipts.removeValue(forKey: id) else { return }
        do {
            while !seqs.isEmpty, !closed {
                let batch = Array(seqs.prefix(AgentMessage.maxReceiptSeqs))
                seqs.removeFirst(batch.count)
                try await sendUnnumbered(id, .receipt(seqs: batch))
            }
        } catch {
            logger.debug("receipt not sent", metadata: ["connection": "\(id)", "error": "\(error)"])
        }
    }

    /// Encrypts and queues an agent control message (outside the numbered application messages).
    func sendUnnumbered(_ id: Int64, _ message: AgentMessage) async throws {
        try await withConnectionLock(id) { () async throws in
            guard var r = try await lockedRecord(id) else {
                throw AgentError(.unknownConnection, "no connection \(id)")
            }
            guard ConnectionStateMachine(r).decide(.send) != .refuse, var ratchet = r.ratchet, let ad = r.associatedData else {
                throw AgentError(.wrongState, "connection \(id) is not connected")
            }
            let frame = try ratchet.encrypt(message.encoded(), associatedData: [UInt8](ad))
            let envelope = try sealForPeer(frame, record: r)
            r.ratchet = ratchet
            let record = r
            try await store.db.write { db in
                try AgentStore.save(db, record)
                try AgentStore.enqueue(db, connectionId: id, envelope: envelope, messageSeq: nil)
            }
            committed(record)
        }
        await deliverOutbox(id)
    }

    /// The next message of a connection that may send: numbered after the last, chained to its
    /// hash, ratchet-encrypted and sealed for the peer; `r` advanced (ratchet, number, hash) for
    /// the caller to commit with the envelope. Nil when the connection may not send.
    func sealNextMessage(_ r: inout ConnectionRecord, body: [UInt8]) throws -> (envelope: [UInt8], seq: UInt64)? {
        guard ConnectionStateMachine(r).decide(.send) != .refuse, var ratchet = r.ratchet, let ad = r.associatedData else { return nil }
        let seq = r.sndSeq + 1
        let message = AgentMessage.message(seq: seq, previousHash: [UInt8](r.sndLastHash), body: body).encoded()
        let frame = try ratchet.encrypt(message, associatedData: [UInt8](ad))
        let envelope = try sealForPeer(frame, record: r)
        r.ratchet = ratchet
        r.sndSeq = seq
        r.sndLastHash = Data(Digest.sha256(message))
        return (envelope, seq)
    }

    func sealForPeer(_ frame: [UInt8], record r: ConnectionRecord) throws -> [UInt8] {
        guard let sndText = r.sndQueue, let e2e = r.sndE2E else { throw AgentError(.wrongState, "no sending queue yet") }
        let snd = try QueueURI(parsing: sndText)
        return try Envelope.seal(frame, kind: .message, own: try X25519.PrivateKey(secretBytes: [UInt8](e2e)), peer: snd.recipientDhKey)
    }

    /// Sends a connection's outbox in order, stopping at the first failure (retried later).
    func deliverOutbox(_ id: Int64) async {
        guard !closed, !deliveringOutbox.contains(id) else { return }
        deliveringOutbox.insert(id)
        defer { deliveringOutbox.remove(id) }
        do {
            while !closed {
                // The sending queue and key never change once set: a remembered record serves.
                let remembered = records[id]
                let (record, items) = try await store.db.read { db in
                    (try remembered ?? AgentStore.connection(db, id: id), try AgentStore.pending(db, connectionId: id))
                }
                guard let record, let sndText = record.sndQueue, let keyBytes = record.sndKey, !items.isEmpty else { return }
                let snd = try QueueURI(parsing: sndText)
                let key = try AuthPrivateKey(secretBytes: [UInt8](keyBytes))
                let connection = try await relayConnection(snd.relay, peer: true)
                // The envelopes the relay took leave the outbox in one commit (also when a later
                // one fails); one not removed before a crash is sent again, and the peer drops
                // the repeat.
                var sent: [PendingEnvelope] = []
                var failure: (any Error)?
                for item in items {
                    do {
                        try await connection.sendMessage(senderId: snd.senderId, key: key, body: item.envelope)
                    } catch {
                        failure = error
                        break
                    }
                    guard !closed else { return } // sent again after a restart; the peer drops the repeat
                    sent.append(item)
                }
                if !sent.isEmpty {
                    let done = sent.map(\.id)
                    try await store.db.write { db in for item in done { try AgentStore.removePending(db, id: item) } }
                    for item in sent { if let seq = item.messageSeq { eventSink.yield(.sent(connection: id, seq: seq)) } }
                }
                if let failure { throw failure }
            }
        } catch let e as RelayClientError where e.code == .relay(.auth) {
            // The peer's queue is gone (or our key no longer fits it): permanent. Retrying would
            // only add to the relay's count of AUTH answers on a connection we share.
            do {
                let seqs = try await store.db.write { db in try AgentStore.dropPending(db, connectionId: id) }
                logger.info("the peer's queue refused delivery; waiting messages dropped", metadata: ["connection": "\(id)", "messages": "\(seqs.count)"])
                eventSink.yield(.undeliverable(connection: id, seqs: seqs))
            } catch {
                logger.warning("could not drop undeliverable messages", metadata: ["connection": "\(id)", "error": "\(error)"])
            }
        } catch {
            logger.debug("outbox delivery deferred", metadata: ["connection": "\(id)", "error": "\(error)"])
        }
    }

    func retryOutbox() async {
        guard let ids = try? await store.db.read({ db in try AgentStore.connectionsWithPending(db) }) else { return }
        // Side by side: a peer relay that does not answer holds up only its own connections.
        await withTaskGroup(of: Void.self) { group in
            for id in ids { group.addTask { await self.deliverOutbox(id) } }
        }
    }
}
