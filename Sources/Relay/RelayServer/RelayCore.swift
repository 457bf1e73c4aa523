import Foundation
import Metrics
import Logging
import NIOConcurrencyHelpers
import RelayProtocol
import SwiftplexCrypto

/// The relay's queues and their delivery state, over a durable ``RelayStore``.
///
/// Queue metadata lives in the store and in memory — every queue, loaded at start, on a store that
/// loads everything (SQLite), or the queues in use and a bounded cache of recently used ones,
/// loaded on demand (PostgreSQL; see ``RelayCore+Residency``); message bodies live only in the store. Every state change happens under one lock; signature checks and encryption run outside
/// it. Each queue has at most one subscriber and at most one message in flight to it.
///
/// This file holds the state, loading, connections and dispatch; the commands live by capability in
/// `RelayCore+Creation` (`NEW`), `+Recipient` (`KEY`, `GET`, `OFF`, `DEL`, links), `+Delivery`
/// (`SUB`, delivery, `ACK`), `+Sender` (`SKEY`, `SEND`, `LGET`) and `+Expiry` (the TTL sweep).
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
        /// Commands under way on this queue (on a store that loads on demand: it stays in memory until they are answered).
        var pins = 0
        /// When it was last used (``State/tick``), for evicting the least recently used.
        var lastUsed: UInt64 = 0
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
        /// Counts uses of queues (``QueueState/lastUsed``).
        var tick: UInt64 = 0

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

    let state = NIOLockedValueBox(State())
    let store: any RelayQueueStore
    let configuration: RelayConfiguration
    let metrics = RelayMetrics()
    /// The relay-wide rates every connection's budget also takes from.
    let globalBudget: GlobalBudget
    /// The per-source budgets of new connections' work (nil when ``RelayConfiguration/sourceHandshakeWorkRate`` is unlimited).
    let sourceBudgets: SourceBudgets?
    let logger: Logger
    /// Checked against when a queue is missing (or its key is of another kind than the command's
    /// authorisation), so that "no such queue" costs what "wrong key" costs.
    let dummyEd25519 = AuthPublicKey.ed25519(Ed25519.PrivateKey().publicKey)
    let dummyX25519 = AuthPublicKey.x25519(X25519.PrivateKey().publicKey)

    init(store: any RelayQueueStore, configuration: RelayConfiguration, logger: Logger) throws {
        self.store = store
        self.configuration = configuration
        self.logger = logger
        globalBudget = GlobalBudget(configuration)
        sourceBudgets = configuration.sourceHandshakeWorkRate.isUnlimited ? nil
            : SourceBudgets(rate: configuration.sourceHandshakeWorkRate, prefixIPv4: configuration.sourcePrefixLengthIPv4,
                            prefixIPv6: configuration.sourcePrefixLengthIPv6, prepaid: configuration.sourceHandshakePrepaidMicroseconds,
                            maxWaiting: configuration.maxWaitingPerSource)
    }

    /// Loads queue metadata and message counts from the store. A row that cannot be a valid queue
    /// is skipped, logged (without its contents) and counted; the others load.
    func load() async throws {
        if store.loadsOnDemand {
            // Queues are loaded as they are used; only the totals the limits need are read now.
            let totals = try await store.totals()
            state.withLockedValue { s in
                s.stats.queues = totals.queues
                s.stats.storedMessages = totals.messages
                s.stats.storedBytes = totals.bytes
            }
            recordStorage()
            metrics.queues.record(stats.queues)
            return
        }
        let (loaded, counts) = try await store.loadAll()
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

    var stats: RelayStats {
        var stats = state.withLockedValue { $0.stats }
        stats.sources = sourceBudgets?.count ?? 0
        return stats
    }

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

    var now: Int64 { configuration.clock.now() }
    var oldestAllowed: Int64 { now - configuration.messageTTL.components.seconds }

    // MARK: - Dispatch

    /// Handles one decoded command; `reply` is called exactly once, possibly later and on another thread.
    func handle(_ t: Transmission, _ command: ClientCommand, session: SessionKeys, from conn: any RelaySubscriber, reply: @escaping Reply) {
        dispatch(t, command, session: session, from: conn, loaded: false, reply: reply)
    }

    /// `loaded`: on a store that loads on demand, the queue was looked up in the store already
    /// (if it is still not in memory, it does not exist).
    func dispatch(_ t: Transmission, _ command: ClientCommand, session: SessionKeys, from conn: any RelaySubscriber, loaded: Bool,
                  reply unpinnedReply: @escaping Reply) {
        var reply = unpinnedReply
        if store.loadsOnDemand, t.entityId.count == RelayLimits.entityIdLength {
            let key: QueueKey? = switch command.party {
            case .recipient: .recipient(t.entityId)
            case .sender: .sender(t.entityId)
            default: nil
            }
            if let key {
                if let pinned = pin(key, unpinnedReply) {
                    reply = pinned
                } else if !loaded {
                    return loadQueue(key, owner: conn.connectionId, reply: unpinnedReply) { [self] in
                        dispatch(t, command, session: session, from: conn, loaded: true, reply: unpinnedReply)
                    }
                }
            }
        }
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
            createQueue(recipientKey: rk, recipientDhKey: dh, mode: mode, owner: conn.connectionId, reply: reply)
        case .recipient:
            guard t.entityId.count == RelayLimits.entityIdLength else { return reply(.error(.noEntity)) }
            guard !t.signature.isEmpty else { return reply(.error(.noAuth)) }
            let key = state.withLockedValue { $0.queues[t.entityId]?.recipientKey }
            guard verify(t, session: session, key: key) else { return authFailed(reply) }
            handleRecipient(command, recipientId: t.entityId, conn: conn, reply: reply)
        case .sender:
            guard t.entityId.count == RelayLimits.entityIdLength else { return reply(.error(.noEntity)) }
            handleSender(t, command, session: session, owner: conn.connectionId, reply: reply)
        case .linkReader:
            guard t.entityId.count == RelayLimits.entityIdLength else { return reply(.error(.noEntity)) }
            guard t.signature.isEmpty else { return reply(.error(.hasAuth)) }
            readLink(linkId: t.entityId, reply: reply)
        }
    }

    /// Always does the work of checking the presented authorisation — against a dummy key of the
    /// matching kind when there is no key or the key is of another kind — so the time taken does
    /// not tell whether the entity exists or what kind of key it has.
    func verify(_ t: Transmission, session: SessionKeys, key: AuthPublicKey?) -> Bool {
        let matching = key.flatMap { $0.authorizationLength == t.signature.count ? $0 : nil }
        let checked = matching ?? (t.signature.count == BoxKey.authenticatorLength ? dummyX25519 : dummyEd25519)
        let ok = session.verify(t.signature, signedBytes: t.signedBytes(sessionId: session.sessionId),
                                correlationId: t.correlationId, key: checked)
        return ok && matching != nil
    }

    /// Compares the presented password with the relay's in constant time (SHA-256 of both, so that
    /// neither the length nor a prefix shows in the time taken). Without a relay password, any is accepted.
    func passwordAccepted(_ presented: [UInt8]?) -> Bool {
        guard let expected = configuration.newQueuePassword else { return true }
        let same = Sodium.constantTimeEquals(Digest.sha256(presented ?? []), Digest.sha256(Array(expected.utf8)))
        return same && presented != nil
    }

    func refused(_ limit: RelayMetrics.Limit, _ reply: Reply) {
        noteRefusal(limit)
        reply(.error(.quota))
    }

    /// Counts a refusal by a resource limit (also those the connection handler and listener make).
    func noteRefusal(_ limit: RelayMetrics.Limit) {
        state.withLockedValue { $0.stats.limitRefusals += 1 }
        metrics.refused(limit)
    }

    /// Counts a connection going over one of its rates (its reads are held for a while).
    func noteThrottled(_ limit: ConnectionBudget.Limit) {
        state.withLockedValue {
            $0.stats.throttled += 1
            $0.stats.throttledByLimit[limit.rawValue, default: 0] += 1
        }
        metrics.throttled(limit)
    }

    func recordStorage() {
        let (messages, bytes) = state.withLockedValue { ($0.stats.storedMessages, $0.stats.storedBytes) }
        metrics.storedMessages.record(messages)
        metrics.storedBytes.record(bytes)
    }

    func authFailed(_ reply: Reply) {
        state.withLockedValue { $0.stats.authFailures += 1 }
        metrics.authFailures.increment()
        reply(.error(.auth))
    }

    func storeFailed(_ error: Error, _ reply: Reply) {
        logger.error("relay store operation failed", metadata: ["error": "\(error)"])
        reply(.error(.internal))
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
