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
        /// A read of the oldest message is under way; its completion decides what is in flight.
        case fetching
        case inFlight(messageId: [UInt8])
    }

    struct QueueState: Sendable {
        let recipientId: [UInt8]
        let senderId: [UInt8]
        let recipientKey: Ed25519.PublicKey
        let boxKey: BoxKey
        var senderKey: Ed25519.PublicKey?
        var enabled: Bool
        var linkId: [UInt8]?
        var count: Int
        var subscriber: (any RelaySubscriber)?
        var delivery: Delivery = .idle
    }

    struct State: Sendable {
        var queues: [[UInt8]: QueueState] = [:]
        var senders: [[UInt8]: [UInt8]] = [:]
        var links: [[UInt8]: [UInt8]] = [:]
        var subscriptions: [UInt64: Set<[UInt8]>] = [:]
        var stats = RelayStats()
    }

    typealias Reply = @Sendable (ServerResponse) -> Void

    private let state = NIOLockedValueBox(State())
    let store: RelayStore
    private let configuration: RelayConfiguration
    private let metrics = RelayMetrics()
    private let logger: Logger
    /// Verified against when a queue is missing, so "no such queue" costs what "wrong key" costs.
    private let dummyKey = Ed25519.PrivateKey().publicKey

    init(store: RelayStore, configuration: RelayConfiguration, logger: Logger) throws {
        self.store = store
        self.configuration = configuration
        self.logger = logger
    }

    /// Loads queue metadata and message counts from the store.
    func load() async throws {
        let (queues, counts) = try await store.perform { db in
            (try RelayStore.loadQueues(db), try RelayStore.messageCounts(db))
        }
        try state.withLockedValue { s in
            for q in queues {
                let qs = QueueState(
                    recipientId: q.recipientId, senderId: q.senderId,
                    recipientKey: try Ed25519.PublicKey(bytes: q.recipientKey),
                    boxKey: try BoxKey(secretBytes: q.boxKey),
                    senderKey: try q.senderKey.map { try Ed25519.PublicKey(bytes: $0) },
                    enabled: q.enabled, linkId: q.linkId, count: counts[q.recipientId] ?? 0
                )
                s.queues[q.recipientId] = qs
                s.senders[q.senderId] = q.recipientId
                if let l = q.linkId { s.links[l] = q.recipientId }
            }
            s.stats.queues = s.queues.count
            s.stats.storedMessages = counts.values.reduce(0, +)
        }
        metrics.queues.record(queues.count)
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
    func handle(_ t: Transmission, _ command: ClientCommand, sessionId: [UInt8], from conn: any RelaySubscriber, reply: @escaping Reply) {
        switch command.party {
        case .anyone:
            guard t.entityId.isEmpty else { return reply(.error(.noEntity)) }
            guard t.signature.isEmpty else { return reply(.error(.hasAuth)) }
            reply(.pong)
        case .creator:
            guard t.entityId.isEmpty else { return reply(.error(.noEntity)) }
            guard case let .new(rk, dh) = command else { return reply(.error(.internal)) }
            guard !t.signature.isEmpty else { return reply(.error(.noAuth)) }
            guard verify(t, sessionId: sessionId, key: rk) else { return authFailed(reply) }
            createQueue(recipientKey: rk, recipientDhKey: dh, reply: reply)
        case .recipient:
            guard t.entityId.count == RelayLimits.entityIdLength else { return reply(.error(.noEntity)) }
            guard !t.signature.isEmpty else { return reply(.error(.noAuth)) }
            let key = state.withLockedValue { $0.queues[t.entityId]?.recipientKey }
            guard verify(t, sessionId: sessionId, key: key) else { return authFailed(reply) }
            handleRecipient(command, recipientId: t.entityId, conn: conn, reply: reply)
        case .sender:
            guard t.entityId.count == RelayLimits.entityIdLength else { return reply(.error(.noEntity)) }
            handleSender(t, command, sessionId: sessionId, reply: reply)
        case .linkReader:
            guard t.entityId.count == RelayLimits.entityIdLength else { return reply(.error(.noEntity)) }
            guard t.signature.isEmpty else { return reply(.error(.hasAuth)) }
            readLink(linkId: t.entityId, reply: reply)
        }
    }

    /// Always performs one signature verification, against `dummyKey` when there is no key, so the
    /// time taken does not tell whether the entity exists.
    private func verify(_ t: Transmission, sessionId: [UInt8], key: Ed25519.PublicKey?) -> Bool {
        let ok = (key ?? dummyKey).isValidSignature(t.signature, for: t.signedBytes(sessionId: sessionId))
        return ok && key != nil
    }

    private func authFailed(_ reply: Reply) {
        state.withLockedValue { $0.stats.authFailures += 1 }
        metrics.authFailures.increment()
        reply(.error(.auth))
    }

    // MARK: - Creator

    private func createQueue(recipientKey: Ed25519.PublicKey, recipientDhKey: X25519.PublicKey, reply: @escaping Reply) {
        let serverDh = X25519.PrivateKey()
        guard let boxKey = try? BoxKey(privateKey: serverDh, peer: recipientDhKey) else {
            return reply(.error(.syntax))
        }
        let rid = Sodium.randomBytes(RelayLimits.entityIdLength)
        let sid = Sodium.randomBytes(RelayLimits.entityIdLength)
        let stored = StoredQueue(recipientId: rid, senderId: sid, recipientKey: recipientKey.bytes, boxKey: boxKey.secretBytes, senderKey: nil, enabled: true, linkId: nil)
        let now = self.now
        store.submit({ db in try RelayStore.insertQueue(db, stored, now: now) }) { [self] result in
            switch result {
            case .success:
                let n = state.withLockedValue { s -> Int in
                    s.queues[rid] = QueueState(recipientId: rid, senderId: sid, recipientKey: recipientKey, boxKey: boxKey,
                                               senderKey: nil, enabled: true, linkId: nil, count: 0)
                    s.senders[sid] = rid
                    s.stats.queues += 1
                    return s.stats.queues
                }
                metrics.queuesCreated.increment()
                metrics.queues.record(n)
                reply(.ids(recipientId: rid, senderId: sid, serverDhKey: serverDh.publicKey))
            case let .failure(error):
                storeFailed(error, reply)
            }
        }
    }

    private func storeFailed(_ error: Error, _ reply: Reply) {
        logger.error("relay store operation failed", metadata: ["error": "\(error)"])
        reply(.error(.internal))
    }

    // MARK: - Recipient

    private func handleRecipient(_ command: ClientCommand, recipientId rid: [UInt8], conn: any RelaySubscriber, reply: @escaping Reply) {
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
            let found = state.withLockedValue { s -> Bool in
                guard s.queues[rid] != nil else { return false }
                s.queues[rid]!.enabled = false
                return true
            }
            guard found else { return authFailed(reply) }
            persist({ db in try RelayStore.disable(db, recipientId: rid) }, reply)
        case .delete:
            deleteQueue(rid, reply: reply)
        case let .linkSet(data):
            let linkId = state.withLockedValue { s -> [UInt8]? in
                guard var q = s.queues[rid] else { return nil }
                if q.linkId == nil {
                    let id = Sodium.randomBytes(RelayLimits.entityIdLength)
                    q.linkId = id
                    s.links[id] = rid
                    s.queues[rid] = q
                }
                return q.linkId
            }
            guard let linkId else { return authFailed(reply) }
            store.submit({ db in try RelayStore.setLink(db, recipientId: rid, linkId: linkId, data: data) }) { [self] result in
                switch result {
                case .success: reply(.linkId(linkId))
                case let .failure(e): storeFailed(e, reply)
                }
            }
        case .linkDelete:
            let found = state.withLockedValue { s -> Bool in
                guard var q = s.queues[rid] else { return false }
                if let l = q.linkId { s.links[l] = nil }
                q.linkId = nil
                s.queues[rid] = q
                return true
            }
            guard found else { return authFailed(reply) }
            persist({ db in try RelayStore.setLink(db, recipientId: rid, linkId: nil, data: nil) }, reply)
        default:
            reply(.error(.prohibited))
        }
    }

    private func persist(_ body: @escaping @Sendable (Database) throws -> Void, _ reply: @escaping Reply) {
        store.submit(body) { [self] result in
            switch result {
            case .success: reply(.ok)
            case let .failure(e): storeFailed(e, reply)
            }
        }
    }

    private func setSenderKey(_ rid: [UInt8], _ key: Ed25519.PublicKey, reply: @escaping Reply) {
        enum Outcome { case set, same, refused }
        let outcome = state.withLockedValue { s -> Outcome in
            guard var q = s.queues[rid] else { return .refused }
            if let existing = q.senderKey { return existing == key ? .same : .refused }
            q.senderKey = key
            s.queues[rid] = q
            return .set
        }
        switch outcome {
        case .refused: authFailed(reply)
        case .same: reply(.ok)
        case .set: persist({ db in try RelayStore.setSenderKey(db, recipientId: rid, key: key.bytes) }, reply)
        }
    }

    private func subscribe(_ rid: [UInt8], conn: any RelaySubscriber, reply: @escaping Reply) {
        var ended: (any RelaySubscriber)?
        let (found, fetch) = state.withLockedValue { s -> (Bool, Bool) in
            guard var q = s.queues[rid] else { return (false, false) }
            if let old = q.subscriber, old !== conn {
                ended = old
                s.subscriptions[old.connectionId]?.remove(rid)
            }
            q.subscriber = conn
            s.subscriptions[conn.connectionId, default: []].insert(rid)
            var fetch = false
            if q.count > 0, q.delivery != .fetching {
                q.delivery = .fetching
                fetch = true
            }
            s.queues[rid] = q
            return (true, fetch)
        }
        guard found else { return authFailed(reply) }
        ended?.push(.end, entityId: rid)
        reply(.ok)
        if fetch { fetchNext(rid) }
    }

    /// Reads the oldest live message and hands it to the current subscriber.
    private func fetchNext(_ rid: [UInt8]) {
        let notBefore = oldestAllowed
        store.submit({ db in try RelayStore.oldestMessage(db, recipientId: rid, notBefore: notBefore) }) { [self] result in
            let message = (try? result.get()) ?? nil
            if case let .failure(e) = result { logger.error("relay store read failed", metadata: ["error": "\(e)"]) }
            let target = state.withLockedValue { s -> (any RelaySubscriber, BoxKey)? in
                guard var q = s.queues[rid], q.delivery == .fetching else { return nil }
                defer { s.queues[rid] = q }
                guard let message, let sub = q.subscriber else {
                    q.delivery = .idle
                    return nil
                }
                q.delivery = .inFlight(messageId: message.id)
                return (sub, q.boxKey)
            }
            if let (sub, key) = target, let message { deliver(message, to: sub, recipientId: rid, key: key) }
        }
    }

    private func deliver(_ m: StoredMessage, to sub: any RelaySubscriber, recipientId: [UInt8], key: BoxKey) {
        guard let sealed = try? ReceivedMessage.seal(id: m.id, timestamp: m.timestamp, flags: MessageFlags(rawValue: m.flags), body: m.body, key: key) else {
            logger.error("cannot seal a message for delivery")
            return
        }
        state.withLockedValue { $0.stats.messagesDelivered += 1 }
        metrics.messagesDelivered.increment()
        sub.push(.message(id: m.id, sealed: sealed), entityId: recipientId)
    }

    private func acknowledge(_ rid: [UInt8], messageId: [UInt8], reply: @escaping Reply) {
        enum Outcome { case missing, noMessage, acked(fetchNext: Bool) }
        let outcome = state.withLockedValue { s -> Outcome in
            guard var q = s.queues[rid] else { return .missing }
            guard case let .inFlight(id) = q.delivery, id == messageId else { return .noMessage }
            let next = q.subscriber != nil
            q.delivery = next ? .fetching : .idle
            s.queues[rid] = q
            return .acked(fetchNext: next)
        }
        switch outcome {
        case .missing: return authFailed(reply)
        case .noMessage: return reply(.error(.noMessage))
        case let .acked(fetchNext):
            let notBefore = oldestAllowed
            store.submit({ db -> (Int, StoredMessage?) in
                let deleted = try RelayStore.deleteMessage(db, recipientId: rid, messageId: messageId)
                let next = fetchNext ? try RelayStore.oldestMessage(db, recipientId: rid, notBefore: notBefore) : nil
                return (deleted, next)
            }) { [self] result in
                switch result {
                case let .failure(e):
                    state.withLockedValue { s in
                        if s.queues[rid]?.delivery == .fetching { s.queues[rid]!.delivery = .idle }
                    }
                    storeFailed(e, reply)
                case let .success((deleted, next)):
                    let target = state.withLockedValue { s -> (any RelaySubscriber, BoxKey)? in
                        s.stats.storedMessages -= deleted
                        guard var q = s.queues[rid] else { return nil }
                        defer { s.queues[rid] = q }
                        q.count -= deleted
                        guard q.delivery == .fetching else { return nil }
                        guard let next, let sub = q.subscriber else { q.delivery = .idle; return nil }
                        q.delivery = .inFlight(messageId: next.id)
                        return (sub, q.boxKey)
                    }
                    reply(.ok)
                    if let (sub, key) = target, let next { deliver(next, to: sub, recipientId: rid, key: key) }
                }
            }
        }
    }

    private func getMessage(_ rid: [UInt8], reply: @escaping Reply) {
        enum Outcome { case missing, prohibited, fetch }
        let outcome = state.withLockedValue { s -> Outcome in
            guard let q = s.queues[rid] else { return .missing }
            return q.subscriber == nil ? .fetch : .prohibited
        }
        switch outcome {
        case .missing: return authFailed(reply)
        case .prohibited: return reply(.error(.prohibited))
        case .fetch:
            let notBefore = oldestAllowed
            store.submit({ db in try RelayStore.oldestMessage(db, recipientId: rid, notBefore: notBefore) }) { [self] result in
                switch result {
                case let .failure(e): storeFailed(e, reply)
                case let .success(message):
                    let key = state.withLockedValue { s -> BoxKey? in
                        guard var q = s.queues[rid], q.subscriber == nil else { return nil }
                        q.delivery = message.map { .inFlight(messageId: $0.id) } ?? .idle
                        s.queues[rid] = q
                        return q.boxKey
                    }
                    guard let key else { return reply(.error(.prohibited)) }
                    guard let m = message else { return reply(.error(.noMessage)) }
                    guard let sealed = try? ReceivedMessage.seal(id: m.id, timestamp: m.timestamp, flags: MessageFlags(rawValue: m.flags), body: m.body, key: key) else {
                        return reply(.error(.internal))
                    }
                    state.withLockedValue { $0.stats.messagesDelivered += 1 }
                    metrics.messagesDelivered.increment()
                    reply(.message(id: m.id, sealed: sealed))
                }
            }
        }
    }

    private func deleteQueue(_ rid: [UInt8], reply: @escaping Reply) {
        let removed = state.withLockedValue { s -> (QueueState, Int)? in
            guard let q = s.queues.removeValue(forKey: rid) else { return nil }
            s.senders[q.senderId] = nil
            if let l = q.linkId { s.links[l] = nil }
            if let sub = q.subscriber { s.subscriptions[sub.connectionId]?.remove(rid) }
            s.stats.queues -= 1
            s.stats.storedMessages -= q.count
            return (q, s.stats.queues)
        }
        guard let (_, n) = removed else { return authFailed(reply) }
        metrics.queuesDeleted.increment()
        metrics.queues.record(n)
        persist({ db in try RelayStore.deleteQueue(db, recipientId: rid) }, reply)
    }

    // MARK: - Sender

    private func handleSender(_ t: Transmission, _ command: ClientCommand, sessionId: [UInt8], reply: @escaping Reply) {
        let sid = t.entityId
        let snapshot = state.withLockedValue { s -> (rid: [UInt8], senderKey: Ed25519.PublicKey?, enabled: Bool)? in
            guard let rid = s.senders[sid], let q = s.queues[rid] else { return nil }
            return (rid, q.senderKey, q.enabled)
        }
        switch command {
        case let .secureBySender(newKey):
            guard !t.signature.isEmpty else { return reply(.error(.noAuth)) }
            // Signed by the key being set: proves possession.
            guard verify(t, sessionId: sessionId, key: snapshot == nil ? nil : newKey), let snapshot, snapshot.enabled else {
                return authFailed(reply)
            }
            setSenderKey(snapshot.rid, newKey, reply: reply)
        case let .send(flags, body):
            let authorised: Bool
            if let key = snapshot?.senderKey {
                authorised = verify(t, sessionId: sessionId, key: key)
            } else if snapshot != nil, t.signature.isEmpty {
                authorised = true // unsecured queue: the first (confirmation) message may be unsigned
            } else {
                authorised = verify(t, sessionId: sessionId, key: nil)
            }
            guard authorised, let snapshot, snapshot.enabled else { return authFailed(reply) }
            enqueue(snapshot.rid, flags: flags, body: body, reply: reply)
        default:
            reply(.error(.prohibited))
        }
    }

    private func enqueue(_ rid: [UInt8], flags: MessageFlags, body: [UInt8], reply: @escaping Reply) {
        let quota = configuration.queueQuota
        enum Outcome { case missing, full, accepted }
        let outcome = state.withLockedValue { s -> Outcome in
            guard var q = s.queues[rid], q.enabled else { return .missing }
            guard q.count < quota else { return .full }
            q.count += 1
            s.queues[rid] = q
            s.stats.storedMessages += 1
            return .accepted
        }
        switch outcome {
        case .missing: return authFailed(reply)
        case .full:
            metrics.quotaExceeded.increment()
            return reply(.error(.quota))
        case .accepted: break
        }
        let message = StoredMessage(id: Sodium.randomBytes(RelayLimits.entityIdLength), timestamp: now, flags: flags.rawValue, body: body)
        store.submit({ db in try RelayStore.insertMessage(db, recipientId: rid, message: message) }) { [self] result in
            switch result {
            case let .failure(e):
                state.withLockedValue { s in
                    s.queues[rid]?.count -= 1
                    s.stats.storedMessages -= 1
                }
                storeFailed(e, reply)
            case .success:
                let target = state.withLockedValue { s -> (any RelaySubscriber, BoxKey)? in
                    s.stats.messagesSent += 1
                    guard var q = s.queues[rid], let sub = q.subscriber, q.delivery == .idle else { return nil }
                    q.delivery = .inFlight(messageId: message.id)
                    s.queues[rid] = q
                    return (sub, q.boxKey)
                }
                metrics.messagesSent.increment()
                reply(.ok)
                if let (sub, key) = target { deliver(message, to: sub, recipientId: rid, key: key) }
            }
        }
    }

    // MARK: - Links

    private func readLink(linkId: [UInt8], reply: @escaping Reply) {
        let known = state.withLockedValue { $0.links[linkId] != nil }
        guard known else { return authFailed(reply) }
        store.submit({ db in try RelayStore.linkData(db, linkId: linkId) }) { [self] result in
            switch result {
            case let .success(data?): reply(.linkData(data))
            case .success(nil): authFailed(reply)
            case let .failure(e): storeFailed(e, reply)
            }
        }
    }

    // MARK: - Expiry

    /// Deletes messages older than the TTL. Returns how many went.
    @discardableResult
    func sweepExpired() async throws -> Int {
        let cutoff = oldestAllowed
        let removed = try await store.perform { db in try RelayStore.deleteExpired(db, before: cutoff) }
        let total = removed.values.reduce(0, +)
        guard total > 0 else { return 0 }
        state.withLockedValue { s in
            for (rid, n) in removed { s.queues[rid]?.count -= n }
            s.stats.storedMessages -= total
            s.stats.messagesExpired += total
        }
        metrics.messagesExpired.increment(by: total)
        logger.info("expired messages swept", metadata: ["count": "\(total)"])
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
