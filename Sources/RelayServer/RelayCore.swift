import Foundation
import Metrics
import GRDB
import Logging
import NIOConcurrencyHelpers
import RelayProtocol
import SwiftplexCrypto

/// The relay's queues and their delivery state, over a durable ``RelayStore``.
///
/// Queue metadata lives in memory (loaded at start) and in SQLite; message bodies live only in
/// SQLite. Every state change happens under one lock; signature checks and encryption run outside
/// it. Each queue has at most one subscriber and at most one message in flight to it.
final class RelayCore: Sendable {
    enum Delivery: Sendable, Equatable {
        case idle
        /// A read of the oldest unacknowledged message is under way; its completion decides what is in flight.
        case fetching
        case inFlight(messageId: [UInt8], seq: Int64, bytes: Int)
    }

    struct QueueState: Sendable {
        let recipientId: [UInt8]
        let senderId: [UInt8]
        let recipientKey: AuthPublicKey
        let boxKey: BoxKey
        var senderKey: AuthPublicKey?
        var enabled: Bool
        var linkId: [UInt8]?
        let mode: QueueMode
        /// Undelivered or unacknowledged messages (acknowledged ones are not counted), including
        /// expired ones until the sweep deletes them.
        var count: Int
        /// The body bytes of the messages in `count`.
        var bytes: Int = 0
        /// Acknowledged messages whose deletion has not committed (or failed): already uncounted,
        /// so the expiry sweep must not uncount them again.
        var ackedUndeleted: Set<Int64> = []
        /// Messages the sweep deleted (and uncounted) that may still be acknowledged: in flight, or
        /// returned by a read under way. Their ACK must not uncount them again.
        var sweptUnacked: Set<Int64> = []
        /// `GET` reads under way.
        var reads = 0
        var subscriber: (any RelaySubscriber)?
        var delivery: Delivery = .idle
        /// Every message with `seq` up to this one is acknowledged (its deletion may still be committing).
        var ackedThrough: Int64 = 0
        /// A message was committed while a fetch was under way; fetch again if that one finds nothing.
        var recheck = false
        /// Messages accepted (counted) whose insert is not yet committed, and their bytes.
        var uncommitted = 0
        var uncommittedBytes = 0
        /// Committed, undelivered messages kept in memory in `seq` order (a suffix of what waits
        /// in the database, or all of it — see ``State/advance(_:notBefore:)``).
        var cached: [StoredMessage] = []
    }

    struct State: Sendable {
        var queues: [[UInt8]: QueueState] = [:]
        var senders: [[UInt8]: [UInt8]] = [:]
        var links: [[UInt8]: [UInt8]] = [:]
        var subscriptions: [UInt64: Set<[UInt8]>] = [:]
        var stats = RelayStats()
        var cachedBytes = 0
        /// `NEW`s accepted whose insert is not yet committed (count against `maxQueues`).
        var creating = 0

        mutating func dropCache(_ q: inout QueueState, throughSeq seq: Int64 = .max) {
            while let first = q.cached.first, first.seq <= seq {
                cachedBytes -= first.body.count
                q.cached.removeFirst()
            }
        }

        /// Decides what a subscribed queue with nothing in flight does next: deliver the oldest
        /// waiting message from memory when memory provably holds every committed waiting message,
        /// otherwise read it from the database, or go idle when nothing committed is waiting.
        mutating func advance(_ q: inout QueueState, notBefore: Int64) -> Next {
            guard let sub = q.subscriber else {
                q.delivery = .idle
                return .none
            }
            let committedWaiting = q.count - q.uncommitted
            guard committedWaiting > 0 else {
                q.delivery = .idle
                return .none
            }
            if committedWaiting == q.cached.count, let m = q.cached.first, m.timestamp >= notBefore {
                q.cached.removeFirst()
                cachedBytes -= m.body.count
                q.delivery = .inFlight(messageId: m.id, seq: m.seq, bytes: m.body.count)
                return .deliver(m, (sub, q.boxKey))
            }
            q.delivery = .fetching
            q.recheck = false
            return .fetch(after: q.ackedThrough)
        }
    }

    enum Next: Sendable {
        case none
        case deliver(StoredMessage, Target)
        case fetch(after: Int64)
    }

    typealias Reply = @Sendable (ServerResponse) -> Void
    typealias Target = (subscriber: any RelaySubscriber, key: BoxKey)

    private let state = NIOLockedValueBox(State())
    let store: RelayStore
    private let configuration: RelayConfiguration
    private let metrics = RelayMetrics()
    private let logger: Logger
    /// Checked against when a queue is missing (or its key is of another kind than the command's
    /// authorisation), so that "no such queue" costs what "wrong key" costs.
    private let dummyEd25519 = AuthPublicKey.ed25519(Ed25519.PrivateKey().publicKey)
    private let dummyX25519 = AuthPublicKey.x25519(X25519.PrivateKey().publicKey)

    init(store: RelayStore, configuration: RelayConfiguration, logger: Logger) throws {
        self.store = store
        self.configuration = configuration
        self.logger = logger
    }

    /// Loads queue metadata and message counts from the store. A row that cannot be a valid queue
    /// is skipped, logged (without its contents) and counted; the others load.
    func load() async throws {
        let (loaded, counts) = try await store.perform { db in
            (try RelayStore.loadQueues(db), try RelayStore.messageCounts(db))
        }
        var corrupt = loaded.corruptRows
        state.withLockedValue { s in
            for q in loaded.queues {
                guard s.queues[q.recipientId] == nil, s.senders[q.senderId] == nil,
                      let recipientKey = try? AuthPublicKey(wireBytes: q.recipientKey),
                      let boxKey = try? BoxKey(secretBytes: q.boxKey) else { corrupt += 1; continue }
                var senderKey: AuthPublicKey?
                if let k = q.senderKey {
                    guard let key = try? AuthPublicKey(wireBytes: k) else { corrupt += 1; continue }
                    senderKey = key
                }
                let stored = counts[q.recipientId] ?? (0, 0)
                var qs = QueueState(
                    recipientId: q.recipientId, senderId: q.senderId, recipientKey: recipientKey, boxKey: boxKey,
                    senderKey: senderKey, enabled: q.enabled, linkId: q.linkId, mode: q.mode, count: stored.count
                )
                qs.bytes = stored.bytes
                s.queues[q.recipientId] = qs
                s.senders[q.senderId] = q.recipientId
                if let l = q.linkId { s.links[l] = q.recipientId }
                s.stats.storedMessages += stored.count
                s.stats.storedBytes += stored.bytes
            }
            s.stats.queues = s.queues.count
            s.stats.corruptRowsSkipped = corrupt
        }
        if corrupt > 0 {
            logger.error("skipped queue rows that cannot be read; those queues are unavailable", metadata: ["rows": "\(corrupt)"])
            metrics.corruptRows.increment(by: corrupt)
        }
        recordStorage()
        metrics.queues.record(stats.queues)
    }

    var stats: RelayStats { state.withLockedValue { $0.stats } }

    func connectionOpened() {
        let n = state.withLockedValue { s -> Int in s.stats.connections += 1; return s.stats.connections }
        metrics.connections.record(n)
        metrics.connectionsAccepted.increment()
    }

    /// Drops the connection's subscriptions; an unacknowledged message will be delivered again
    /// to the next subscriber.
    func connectionClosed(_ conn: any RelaySubscriber) {
        let n = state.withLockedValue { s -> Int in
            s.stats.connections -= 1
            for rid in s.subscriptions.removeValue(forKey: conn.connectionId) ?? [] {
                guard var q = s.queues[rid], q.subscriber === conn else { continue }
                q.subscriber = nil
                if case .inFlight = q.delivery { q.delivery = .idle }
                s.dropCache(&q)
                s.queues[rid] = q
            }
            return s.stats.connections
        }
        metrics.connections.record(n)
    }

    private var now: Int64 { configuration.clock.now() }
    private var oldestAllowed: Int64 { now - configuration.messageTTL.components.seconds }

    // MARK: - Dispatch

    /// Handles one decoded command; `reply` is called exactly once, possibly later and on another thread.
    func handle(_ t: Transmission, _ command: ClientCommand, session: SessionKeys, from conn: any RelaySubscriber, reply: @escaping Reply) {
        switch command.party {
        case .anyone:
            guard t.entityId.isEmpty else { return reply(.error(.noEntity)) }
            guard t.signature.isEmpty else { return reply(.error(.hasAuth)) }
            reply(.pong)
        case .creator:
            guard t.entityId.isEmpty else { return reply(.error(.noEntity)) }
            guard case let .new(rk, dh, mode, password) = command else { return reply(.error(.internal)) }
            guard !t.signature.isEmpty else { return reply(.error(.noAuth)) }
            // Both checks always run, so a wrong password and a wrong signature cost the same.
            let signed = verify(t, session: session, key: rk)
            let allowed = passwordAccepted(password)
            guard signed, allowed else { return authFailed(reply) }
            createQueue(recipientKey: rk, recipientDhKey: dh, mode: mode, reply: reply)
        case .recipient:
            guard t.entityId.count == RelayLimits.entityIdLength else { return reply(.error(.noEntity)) }
            guard !t.signature.isEmpty else { return reply(.error(.noAuth)) }
            let key = state.withLockedValue { $0.queues[t.entityId]?.recipientKey }
            guard verify(t, session: session, key: key) else { return authFailed(reply) }
            handleRecipient(command, recipientId: t.entityId, conn: conn, reply: reply)
        case .sender:
            guard t.entityId.count == RelayLimits.entityIdLength else { return reply(.error(.noEntity)) }
            handleSender(t, command, session: session, reply: reply)
        case .linkReader:
            guard t.entityId.count == RelayLimits.entityIdLength else { return reply(.error(.noEntity)) }
            guard t.signature.isEmpty else { return reply(.error(.hasAuth)) }
            readLink(linkId: t.entityId, reply: reply)
        }
    }

    /// Always does the work of checking the presented authorisation — against a dummy key of the
    /// matching kind when there is no key or the key is of another kind — so the time taken does
    /// not tell whether the entity exists or what kind of key it has.
    private func verify(_ t: Transmission, session: SessionKeys, key: AuthPublicKey?) -> Bool {
        let matching = key.flatMap { $0.authorizationLength == t.signature.count ? $0 : nil }
        let checked = matching ?? (t.signature.count == BoxKey.authenticatorLength ? dummyX25519 : dummyEd25519)
        let ok = session.verify(t.signature, signedBytes: t.signedBytes(sessionId: session.sessionId),
                                correlationId: t.correlationId, key: checked)
        return ok && matching != nil
    }

    /// Compares the presented password with the relay's in constant time (SHA-256 of both, so that
    /// neither the length nor a prefix shows in the time taken). Without a relay password, any is accepted.
    private func passwordAccepted(_ presented: [UInt8]?) -> Bool {
        guard let expected = configuration.newQueuePassword else { return true }
        let same = Sodium.constantTimeEquals(Digest.sha256(presented ?? []), Digest.sha256(Array(expected.utf8)))
        return same && presented != nil
    }

    private func refused(_ limit: RelayMetrics.Limit, _ reply: Reply) {
        noteRefusal(limit)
        reply(.error(.quota))
    }

    /// Counts a refusal by a resource limit (also those the connection handler and listener make).
    func noteRefusal(_ limit: RelayMetrics.Limit) {
        state.withLockedValue { $0.stats.limitRefusals += 1 }
        metrics.refused(limit)
    }

    private func recordStorage() {
        let (messages, bytes) = state.withLockedValue { ($0.stats.storedMessages, $0.stats.storedBytes) }
        metrics.storedMessages.record(messages)
        metrics.storedBytes.record(bytes)
    }

    private func authFailed(_ reply: Reply) {
        state.withLockedValue { $0.stats.authFailures += 1 }
        metrics.authFailures.increment()
        reply(.error(.auth))
    }

    private func storeFailed(_ error: Error, _ reply: Reply) {
        logger.error("relay store operation failed", metadata: ["error": "\(error)"])
        reply(.error(.internal))
    }

    private func persist(_ body: @escaping @Sendable (Database) throws -> Void, _ reply: @escaping Reply) {
        store.submit(body) { [self] result in
            switch result {
            case .success: reply(.ok)
            case let .failure(e): storeFailed(e, reply)
            }
        }
    }

    // MARK: - Creator

    private func createQueue(recipientKey: AuthPublicKey, recipientDhKey: X25519.PublicKey, mode: QueueMode, reply: @escaping Reply) {
        let serverDh = X25519.PrivateKey()
        guard let boxKey = try? BoxKey(privateKey: serverDh, peer: recipientDhKey) else {
            return reply(.error(.syntax))
        }
        let maxQueues = configuration.maxQueues
        let reserved = state.withLockedValue { s -> Bool in
            guard s.stats.queues + s.creating < maxQueues else { return false }
            s.creating += 1
            return true
        }
        guard reserved else { return refused(.queuesTotal, reply) }
        let rid = Sodium.randomBytes(RelayLimits.entityIdLength)
        let sid = Sodium.randomBytes(RelayLimits.entityIdLength)
        let stored = StoredQueue(recipientId: rid, senderId: sid, recipientKey: recipientKey.wireBytes, boxKey: boxKey.secretBytes,
                                 senderKey: nil, enabled: true, linkId: nil, mode: mode)
        let now = self.now
        store.submit({ db in try RelayStore.insertQueue(db, stored, now: now) }) { [self] result in
            switch result {
            case .success:
                let n = state.withLockedValue { s -> Int in
                    s.creating -= 1
                    s.queues[rid] = QueueState(recipientId: rid, senderId: sid, recipientKey: recipientKey, boxKey: boxKey,
                                               senderKey: nil, enabled: true, linkId: nil, mode: mode, count: 0)
                    s.senders[sid] = rid
                    s.stats.queues += 1
                    return s.stats.queues
                }
                metrics.queuesCreated.increment()
                metrics.queues.record(n)
                reply(.ids(recipientId: rid, senderId: sid, serverDhKey: serverDh.publicKey))
            case let .failure(error):
                state.withLockedValue { $0.creating -= 1 }
                storeFailed(error, reply)
            }
        }
    }

    // MARK: - Recipient

    /// Recipient commands. Every change is written first and applied to memory only once it is
    /// durable (in the store's completion, which runs in commit order), so a failed write leaves
    /// memory as the disk is. A disabled queue (`OFF`) answers `AUTH` to everything but `OFF`,
    /// `DEL` and `LDEL`.
    private func handleRecipient(_ command: ClientCommand, recipientId rid: [UInt8], conn: any RelaySubscriber, reply: @escaping Reply) {
        enum Found { case missing, disabled, enabled }
        let found = state.withLockedValue { s -> Found in
            guard let q = s.queues[rid] else { return .missing }
            return q.enabled ? .enabled : .disabled
        }
        switch (found, command) {
        case (.missing, _):
            return authFailed(reply)
        case (.disabled, .off), (.disabled, .delete), (.disabled, .linkDelete):
            break
        case (.disabled, _):
            return authFailed(reply)
        case (.enabled, _):
            break
        }
        switch command {
        case let .key(senderKey):
            setSenderKey(rid, senderKey, reply: reply)
        case .subscribe:
            subscribe(rid, conn: conn, reply: reply)
        case let .ack(messageId):
            acknowledge(rid, messageId: messageId, reply: reply)
        case .get:
            getMessage(rid, reply: reply)
        case .off:
            store.submit({ db in try RelayStore.disable(db, recipientId: rid) }) { [self] result in
                switch result {
                case .success:
                    let found = state.withLockedValue { s -> Bool in
                        guard s.queues[rid] != nil else { return false }
                        s.queues[rid]!.enabled = false
                        return true
                    }
                    found ? reply(.ok) : authFailed(reply)
                case let .failure(e):
                    storeFailed(e, reply)
                }
            }
        case .delete:
            deleteQueue(rid, reply: reply)
        case let .linkSet(data):
            let linkId = state.withLockedValue { $0.queues[rid]?.linkId } ?? Sodium.randomBytes(RelayLimits.entityIdLength)
            store.submit({ db in try RelayStore.setLink(db, recipientId: rid, linkId: linkId, data: data) }) { [self] result in
                switch result {
                case .success:
                    let found = state.withLockedValue { s -> Bool in
                        guard var q = s.queues[rid] else { return false }
                        if let old = q.linkId, old != linkId { s.links[old] = nil }
                        q.linkId = linkId
                        s.links[linkId] = rid
                        s.queues[rid] = q
                        return true
                    }
                    found ? reply(.linkId(linkId)) : authFailed(reply)
                case let .failure(e):
                    storeFailed(e, reply)
                }
            }
        case .linkDelete:
            store.submit({ db in try RelayStore.setLink(db, recipientId: rid, linkId: nil, data: nil) }) { [self] result in
                switch result {
                case .success:
                    let found = state.withLockedValue { s -> Bool in
                        guard var q = s.queues[rid] else { return false }
                        if let l = q.linkId { s.links[l] = nil }
                        q.linkId = nil
                        s.queues[rid] = q
                        return true
                    }
                    found ? reply(.ok) : authFailed(reply)
                case let .failure(e):
                    storeFailed(e, reply)
                }
            }
        default:
            reply(.error(.prohibited))
        }
    }

    /// `KEY` (recipient) or `SKEY` (sender): sets the sender key of an enabled messaging queue that
    /// has none. A contact queue can never be secured; a second, different key is refused; the
    /// same key again is `OK`. The conditional update on disk decides, so two racing keys cannot
    /// both win.
    private func setSenderKey(_ rid: [UInt8], _ key: AuthPublicKey, reply: @escaping Reply) {
        enum Outcome { case write, same, refused }
        let outcome = state.withLockedValue { s -> Outcome in
            guard let q = s.queues[rid], q.enabled, q.mode == .messaging else { return .refused }
            if let existing = q.senderKey { return existing == key ? .same : .refused }
            return .write
        }
        switch outcome {
        case .refused: return authFailed(reply)
        case .same: return reply(.ok)
        case .write: break
        }
        store.submit({ db in try RelayStore.setSenderKey(db, recipientId: rid, key: key.wireBytes) }) { [self] result in
            switch result {
            case let .success(changed):
                let accepted = state.withLockedValue { s -> Bool in
                    guard var q = s.queues[rid] else { return false }
                    if changed {
                        q.senderKey = key
                        s.queues[rid] = q
                        return true
                    }
                    return q.enabled && q.senderKey == key // another SKEY with the same key won the race
                }
                accepted ? reply(.ok) : authFailed(reply)
            case let .failure(e):
                storeFailed(e, reply)
            }
        }
    }

    private func subscribe(_ rid: [UInt8], conn: any RelaySubscriber, reply: @escaping Reply) {
        var ended: (any RelaySubscriber)?
        let notBefore = oldestAllowed
        let next = state.withLockedValue { s -> Next? in
            guard var q = s.queues[rid] else { return nil }
            defer { s.queues[rid] = q }
            if let old = q.subscriber, old !== conn {
                ended = old
                s.subscriptions[old.connectionId]?.remove(rid)
            }
            q.subscriber = conn
            s.subscriptions[conn.connectionId, default: []].insert(rid)
            switch q.delivery {
            case .fetching:
                return Next.none // the read under way delivers to the new subscriber
            case .inFlight:
                // Unacknowledged: deliver it again (it is the oldest after `ackedThrough`).
                q.delivery = .fetching
                q.recheck = false
                return .fetch(after: q.ackedThrough)
            case .idle:
                return s.advance(&q, notBefore: notBefore)
            }
        }
        guard let next else { return authFailed(reply) }
        ended?.push(.end, entityId: rid)
        reply(.ok)
        perform(next, rid)
    }

    private func perform(_ next: Next, _ rid: [UInt8]) {
        switch next {
        case .none: break
        case let .deliver(m, target): deliver(m, to: target, recipientId: rid)
        case let .fetch(after): fetchNext(rid, after: after)
        }
    }

    /// Reads the oldest unacknowledged live message (on a reader, concurrently with commits) and
    /// hands it to the current subscriber.
    private func fetchNext(_ rid: [UInt8], after: Int64) {
        let notBefore = oldestAllowed
        store.read({ db in try RelayStore.oldestMessage(db, recipientId: rid, after: after, notBefore: notBefore) }) { [self] result in
            if case let .failure(e) = result { logger.error("relay store read failed", metadata: ["error": "\(e)"]) }
            let message = (try? result.get()) ?? nil
            let next = state.withLockedValue { s -> Next in
                guard var q = s.queues[rid], q.delivery == .fetching else { return .none }
                defer { s.queues[rid] = q }
                guard let sub = q.subscriber else { q.delivery = .idle; return .none }
                if let message {
                    s.dropCache(&q, throughSeq: message.seq)
                    q.delivery = .inFlight(messageId: message.id, seq: message.seq, bytes: message.body.count)
                    return .deliver(message, (sub, q.boxKey))
                }
                guard q.recheck else { q.delivery = .idle; return .none }
                return s.advance(&q, notBefore: notBefore)
            }
            perform(next, rid)
        }
    }

    private func deliver(_ m: StoredMessage, to target: Target, recipientId: [UInt8]) {
        guard let response = sealedDelivery(m, key: target.key) else { return }
        target.subscriber.push(response, entityId: recipientId)
    }

    /// Seals a stored message for its recipient and counts the delivery; nil (logged) if it cannot be sealed.
    private func sealedDelivery(_ m: StoredMessage, key: BoxKey) -> ServerResponse? {
        guard let sealed = try? ReceivedMessage.seal(id: m.id, timestamp: m.timestamp, flags: MessageFlags(rawValue: m.flags), body: m.body, key: key) else {
            logger.error("cannot seal a message for delivery")
            return nil
        }
        state.withLockedValue { $0.stats.messagesDelivered += 1 }
        metrics.messagesDelivered.increment()
        return .message(id: m.id, sealed: sealed)
    }

    /// Acknowledgement is answered at once: the deletion is committed in the background (if it is
    /// lost in a crash the message is delivered again, which at-least-once delivery allows), and
    /// the next message is read without waiting for it.
    private func acknowledge(_ rid: [UInt8], messageId: [UInt8], reply: @escaping Reply) {
        enum Outcome { case missing, noMessage, acked(seq: Int64, Next) }
        let notBefore = oldestAllowed
        let outcome = state.withLockedValue { s -> Outcome in
            guard var q = s.queues[rid] else { return .missing }
            guard case let .inFlight(id, seq, bytes) = q.delivery, id == messageId else { return .noMessage }
            defer { s.queues[rid] = q }
            q.ackedThrough = seq
            if q.sweptUnacked.remove(seq) == nil {
                q.count -= 1
                q.bytes -= bytes
                q.ackedUndeleted.insert(seq)
                s.stats.storedMessages -= 1
                s.stats.storedBytes -= bytes
            } // else the sweep deleted it (expired while in flight) and uncounted it then
            if !q.sweptUnacked.isEmpty { q.sweptUnacked = q.sweptUnacked.filter { $0 > seq } }
            return .acked(seq: seq, s.advance(&q, notBefore: notBefore))
        }
        switch outcome {
        case .missing:
            authFailed(reply)
        case .noMessage:
            reply(.error(.noMessage))
        case let .acked(seq, next):
            store.submit({ db in try RelayStore.deleteMessage(db, seq: seq) }) { [self] result in
                switch result {
                case .success:
                    // Runs in commit order with the sweep's completion: whichever deleted the row,
                    // the message is uncounted once.
                    state.withLockedValue { s in _ = s.queues[rid]?.ackedUndeleted.remove(seq) }
                case let .failure(e):
                    // Kept in `ackedUndeleted`: the sweep deletes it later without uncounting it again.
                    logger.error("deleting an acknowledged message failed", metadata: ["error": "\(e)"])
                }
            }
            recordStorage()
            reply(.ok)
            perform(next, rid)
        }
    }

    private func getMessage(_ rid: [UInt8], reply: @escaping Reply) {
        let after = state.withLockedValue { s -> Int64?? in
            guard var q = s.queues[rid] else { return .none }
            guard q.subscriber == nil else { return .some(nil) }
            q.reads += 1
            s.queues[rid] = q
            return .some(q.ackedThrough)
        }
        guard let after else { return authFailed(reply) }
        guard let after else { return reply(.error(.prohibited)) }
        let notBefore = oldestAllowed
        store.read({ db in try RelayStore.oldestMessage(db, recipientId: rid, after: after, notBefore: notBefore) }) { [self] result in
            switch result {
            case let .failure(e):
                state.withLockedValue { s in
                    if var q = s.queues[rid] { q.reads -= 1; s.queues[rid] = q }
                }
                storeFailed(e, reply)
            case let .success(message):
                let key = state.withLockedValue { s -> BoxKey? in
                    guard var q = s.queues[rid] else { return nil }
                    q.reads -= 1
                    defer { s.queues[rid] = q }
                    guard q.subscriber == nil else { return nil }
                    if let m = message { q.delivery = .inFlight(messageId: m.id, seq: m.seq, bytes: m.body.count) }
                    return q.boxKey
                }
                guard let key else { return reply(.error(.prohibited)) }
                guard let m = message else { return reply(.error(.noMessage)) }
                reply(sealedDelivery(m, key: key) ?? .error(.internal))
            }
        }
    }

    private func deleteQueue(_ rid: [UInt8], reply: @escaping Reply) {
        store.submit({ db in try RelayStore.deleteQueue(db, recipientId: rid) }) { [self] result in
            if case let .failure(e) = result { return storeFailed(e, reply) }
            let remaining = state.withLockedValue { s -> Int? in
                guard let q = s.queues.removeValue(forKey: rid) else { return nil }
                s.senders[q.senderId] = nil
                if let l = q.linkId { s.links[l] = nil }
                if let sub = q.subscriber { s.subscriptions[sub.connectionId]?.remove(rid) }
                s.stats.queues -= 1
                // Messages still being inserted fail (the queue row is gone) and uncount themselves.
                s.stats.storedMessages -= q.count - q.uncommitted
                s.stats.storedBytes -= q.bytes - q.uncommittedBytes
                s.cachedBytes -= q.cached.reduce(0) { $0 + $1.body.count }
                return s.stats.queues
            }
            guard let remaining else { return authFailed(reply) }
            metrics.queuesDeleted.increment()
            metrics.queues.record(remaining)
            recordStorage()
            reply(.ok)
        }
    }

    // MARK: - Sender

    private func handleSender(_ t: Transmission, _ command: ClientCommand, session: SessionKeys, reply: @escaping Reply) {
        let sid = t.entityId
        let snapshot = state.withLockedValue { s -> (rid: [UInt8], senderKey: AuthPublicKey?, enabled: Bool)? in
            guard let rid = s.senders[sid], let q = s.queues[rid] else { return nil }
            return (rid, q.senderKey, q.enabled)
        }
        switch command {
        case let .secureBySender(newKey):
            guard !t.signature.isEmpty else { return reply(.error(.noAuth)) }
            // Authorised by the key being set: proves possession of it. A contact queue is refused
            // after the same check (setSenderKey), so its answer costs what any other refusal costs.
            guard verify(t, session: session, key: snapshot == nil ? nil : newKey), let snapshot, snapshot.enabled else {
                return authFailed(reply)
            }
            setSenderKey(snapshot.rid, newKey, reply: reply)
        case let .send(flags, body):
            let authorised: Bool
            if let key = snapshot?.senderKey {
                authorised = verify(t, session: session, key: key)
            } else if snapshot != nil, t.signature.isEmpty {
                authorised = true // unsecured queue: the first (confirmation) message may be unauthorised
            } else {
                authorised = verify(t, session: session, key: nil)
            }
            guard authorised, let snapshot, snapshot.enabled else { return authFailed(reply) }
            enqueue(snapshot.rid, flags: flags, body: body, reply: reply)
        default:
            reply(.error(.prohibited))
        }
    }

    private func enqueue(_ rid: [UInt8], flags: MessageFlags, body: [UInt8], reply: @escaping Reply) {
        let quota = configuration.queueQuota
        let maxMessages = configuration.maxStoredMessages
        let maxBytes = configuration.maxStoredBytes
        let size = body.count
        enum Outcome { case missing, full, storeFull(RelayMetrics.Limit), accepted }
        let outcome = state.withLockedValue { s -> Outcome in
            guard var q = s.queues[rid], q.enabled else { return .missing }
            guard q.count < quota else { return .full }
            guard s.stats.storedMessages < maxMessages else { return .storeFull(.storedMessages) }
            guard s.stats.storedBytes + size <= maxBytes else { return .storeFull(.storedBytes) }
            q.count += 1
            q.bytes += size
            q.uncommitted += 1
            q.uncommittedBytes += size
            s.queues[rid] = q
            s.stats.storedMessages += 1
            s.stats.storedBytes += size
            return .accepted
        }
        switch outcome {
        case .missing: return authFailed(reply)
        case .full:
            metrics.quotaExceeded.increment()
            return reply(.error(.quota))
        case let .storeFull(limit):
            return refused(limit, reply)
        case .accepted: break
        }
        let id = Sodium.randomBytes(RelayLimits.entityIdLength)
        let timestamp = now
        store.submit({ db in
            try RelayStore.insertMessage(db, recipientId: rid, id: id, timestamp: timestamp, flags: flags.rawValue, body: body)
        }) { [self] result in
            switch result {
            case let .failure(e):
                let queueGone = state.withLockedValue { s -> Bool in
                    s.stats.storedMessages -= 1
                    s.stats.storedBytes -= size
                    guard var q = s.queues[rid] else { return true }
                    q.count -= 1
                    q.bytes -= size
                    q.uncommitted -= 1
                    q.uncommittedBytes -= size
                    s.queues[rid] = q
                    return false
                }
                recordStorage()
                // Deleted meanwhile: the same answer as for a missing queue. Otherwise (disk full,
                // I/O error) INTERNAL: nothing was stored and nothing is answered OK.
                queueGone ? authFailed(reply) : storeFailed(e, reply)
            case let .success(seq):
                let message = StoredMessage(seq: seq, id: id, timestamp: timestamp, flags: flags.rawValue, body: body)
                let cacheLimit = configuration.deliveryCacheBytes
                let notBefore = oldestAllowed
                let next = state.withLockedValue { s -> Next in
                    s.stats.messagesSent += 1
                    guard var q = s.queues[rid] else { return .none }
                    defer { s.queues[rid] = q }
                    q.uncommitted -= 1
                    q.uncommittedBytes -= size
                    guard q.subscriber != nil else { return .none }
                    // Keep it in memory for a subscribed queue (always when it can go out at once).
                    if q.delivery == .idle || s.cachedBytes + body.count <= cacheLimit {
                        q.cached.append(message)
                        s.cachedBytes += body.count
                    }
                    switch q.delivery {
                    case .idle: return s.advance(&q, notBefore: notBefore)
                    case .fetching: q.recheck = true; return .none
                    case .inFlight: return .none
                    }
                }
                metrics.messagesSent.increment()
                recordStorage()
                reply(.ok)
                perform(next, rid)
            }
        }
    }

    // MARK: - Links

    private func readLink(linkId: [UInt8], reply: @escaping Reply) {
        let known = state.withLockedValue { $0.links[linkId] != nil }
        guard known else { return authFailed(reply) }
        store.read({ db in try RelayStore.linkData(db, linkId: linkId) }) { [self] result in
            switch result {
            case let .success(data?): reply(.linkData(data))
            case .success(nil): authFailed(reply)
            case let .failure(e): storeFailed(e, reply)
            }
        }
    }

    // MARK: - Expiry

    /// Deletes messages older than the TTL. Returns how many unacknowledged ones went.
    ///
    /// The accounting runs in the store's completion, in commit order with the deletions of
    /// acknowledged messages: a message the sweep deleted is uncounted unless it had been
    /// acknowledged (then its ACK uncounted it), whatever the order of the two.
    @discardableResult
    func sweepExpired() async throws -> Int {
        let cutoff = oldestAllowed
        let total: Int = try await withCheckedThrowingContinuation { cont in
            store.submit({ db in try RelayStore.deleteExpired(db, before: cutoff) }) { [self] result in
                switch result {
                case let .failure(e):
                    cont.resume(throwing: e)
                case let .success(removed):
                    let total = state.withLockedValue { s -> Int in
                        var total = 0
                        for (rid, seq, bytes) in removed {
                            guard var q = s.queues[rid] else { continue }
                            if q.ackedUndeleted.remove(seq) != nil {
                                s.queues[rid] = q
                                continue
                            }
                            q.count -= 1
                            q.bytes -= bytes
                            s.stats.storedBytes -= bytes
                            let mayBeAcknowledged: Bool
                            switch q.delivery {
                            case let .inFlight(_, inFlight, _): mayBeAcknowledged = inFlight == seq || q.reads > 0
                            case .fetching: mayBeAcknowledged = true
                            case .idle: mayBeAcknowledged = q.reads > 0
                            }
                            if mayBeAcknowledged, seq > q.ackedThrough { q.sweptUnacked.insert(seq) }
                            if let i = q.cached.firstIndex(where: { $0.seq == seq }) {
                                s.cachedBytes -= q.cached[i].body.count
                                q.cached.remove(at: i)
                            }
                            s.queues[rid] = q
                            total += 1
                        }
                        s.stats.storedMessages -= total
                        s.stats.messagesExpired += total
                        return total
                    }
                    cont.resume(returning: total)
                }
            }
        }
        metrics.messagesExpired.increment(by: total)
        recordStorage()
        if total > 0 { logger.info("expired messages swept", metadata: ["count": "\(total)"]) }
        return total
    }
}

extension RelayCore {
    /// Counts a malformed block, transmission or command (reported as a metric only: the
    /// offending bytes are never logged).
    func noteProtocolError() {
        RelayMetrics.protocolErrorsCounter.increment()
    }
}

extension RelayMetrics {
    static let protocolErrorsCounter = Counter(label: "swiftplex_relay_protocol_errors_total")
}
