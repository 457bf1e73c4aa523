import Foundation
import RelayProtocol
import SwiftplexCrypto

/// Queue creation (`NEW`): the queue is inserted first and exists in memory once durable.
extension RelayCore {
    func createQueue(recipientKey: AuthPublicKey, recipientDhKey: X25519.PublicKey, mode: QueueMode, owner: UInt64, reply: @escaping Reply) {
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
        let onDemand = store.loadsOnDemand
        let capacity = configuration.queueCacheSize
        store.insertQueue(stored, now: now, owner: owner) { [self] result in
            switch result {
            case .success:
                let n = state.withLockedValue { s -> Int in
                    s.creating -= 1
                    if onDemand { s.evictLeastRecentlyUsed(capacity: capacity - 1) }
                    s.queues[rid] = QueueState(recipientId: rid, senderId: sid, recipientKey: recipientKey, boxKey: boxKey,
                                               senderKey: nil, enabled: true, linkId: nil, mode: mode, count: 0)
                    s.senders[sid] = rid
                    s.stats.queues += 1
                    if onDemand {
                        s.tick += 1
                        s.queues[rid]!.lastUsed = s.tick
                    }
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
}
