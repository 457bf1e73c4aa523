import Foundation
import RelayProtocol
import SwiftplexCrypto

/// Queues in memory on a store that loads them on demand (PostgreSQL): a command for a queue that
/// is not in memory first loads it (in commit order with the store's writes, so its message count
/// is exact), then runs as if it had always been there. While a command is under way the queue is
/// pinned; a queue that is subscribed, has a message in flight or being read, or writes not yet
/// committed stays too. Beyond ``RelayConfiguration/queueCacheSize`` the least recently used of
/// the others are dropped from memory (they stay in the store and are loaded again when used).
/// On a store that loads everything at start (SQLite) none of this runs.
extension RelayCore {
    /// Pins a queue in memory until `reply` is called; nil if it is not in memory.
    func pin(_ key: QueueKey, _ reply: @escaping Reply) -> Reply? {
        let rid = state.withLockedValue { s -> [UInt8]? in
            let rid: [UInt8]? = switch key {
            case let .recipient(id): id
            case let .sender(id): s.senders[id]
            }
            guard let rid, var q = s.queues[rid] else { return nil }
            s.tick += 1
            q.pins += 1
            q.lastUsed = s.tick
            s.queues[rid] = q
            return rid
        }
        guard let rid else { return nil }
        return { [self] response in
            state.withLockedValue { s in
                guard var q = s.queues[rid] else { return }
                q.pins -= 1
                s.queues[rid] = q
            }
            reply(response)
        }
    }

    /// Loads a queue from the store into memory (unless it got there meanwhile), then runs `then`.
    /// A store failure is answered `INTERNAL`; a row that cannot be a valid queue is counted and
    /// skipped (the queue is then missing, as at start on SQLite).
    func loadQueue(_ key: QueueKey, owner: UInt64, reply: @escaping Reply, then: @escaping @Sendable () -> Void) {
        store.loadQueue(key, owner: owner) { [self] result in
            let loaded: LoadedQueue?
            switch result {
            case let .failure(e): return storeFailed(e, reply)
            case let .success(l): loaded = l
            }
            guard let loaded else { return then() }
            guard let q = loaded.queue, let state = queueState(q, count: loaded.count, bytes: loaded.bytes) else {
                self.state.withLockedValue { $0.stats.corruptRowsSkipped += 1 }
                logger.error("skipped a queue row that cannot be read; that queue is unavailable")
                metrics.corruptRows.increment(by: 1)
                return then()
            }
            let capacity = configuration.queueCacheSize
            self.state.withLockedValue { s in
                guard s.queues[q.recipientId] == nil, s.senders[q.senderId] == nil else { return }
                // Room first, so that the queue just loaded is not the one dropped (it is pinned by `then`).
                s.evictLeastRecentlyUsed(capacity: capacity - 1)
                s.tick += 1
                var qs = state
                qs.lastUsed = s.tick
                s.queues[q.recipientId] = qs
                s.senders[q.senderId] = q.recipientId
                if let l = q.linkId { s.links[l] = q.recipientId }
            }
            // Synchronously, in this completion: `then` pins the queue before anything else can drop it.
            then()
        }
    }

    /// A stored queue as kept in memory; nil if its keys cannot be read.
    func queueState(_ q: StoredQueue, count: Int, bytes: Int) -> QueueState? {
        guard let recipientKey = try? AuthPublicKey(wireBytes: q.recipientKey), let boxKey = try? BoxKey(secretBytes: q.boxKey) else { return nil }
        var senderKey: AuthPublicKey?
        if let k = q.senderKey {
            guard let key = try? AuthPublicKey(wireBytes: k) else { return nil }
            senderKey = key
        }
        var qs = QueueState(recipientId: q.recipientId, senderId: q.senderId, recipientKey: recipientKey, boxKey: boxKey,
                            senderKey: senderKey, enabled: q.enabled, linkId: q.linkId, mode: q.mode, count: count)
        qs.bytes = bytes
        return qs
    }

    /// Queues in memory (for the cache's tests and the benchmark).
    var residentQueues: Int { state.withLockedValue { $0.queues.count } }
}

extension RelayCore.State {
    /// Whether a queue can be dropped from memory: nothing refers to its in-memory state.
    static func evictable(_ q: RelayCore.QueueState) -> Bool {
        q.pins == 0 && q.subscriber == nil && q.delivery == .idle && q.reads == 0 && q.uncommitted == 0
            && q.ackedUndeleted.isEmpty && q.cached.isEmpty
    }

    /// Once the queues in memory exceed `capacity` by an eighth, drops the least recently used
    /// evictable ones down to `capacity` (amortised: one scan per `capacity / 8` loads).
    mutating func evictLeastRecentlyUsed(capacity: Int) {
        let capacity = max(capacity, 0)
        guard queues.count > capacity + max(1, capacity / 8) else { return }
        var candidates: [(used: UInt64, rid: [UInt8])] = []
        candidates.reserveCapacity(queues.count)
        for q in queues.values where Self.evictable(q) { candidates.append((q.lastUsed, q.recipientId)) }
        candidates.sort { $0.used < $1.used }
        for c in candidates.prefix(queues.count - capacity) {
            guard let q = queues.removeValue(forKey: c.rid) else { continue }
            senders[q.senderId] = nil
            if let l = q.linkId { links[l] = nil }
        }
    }
}
