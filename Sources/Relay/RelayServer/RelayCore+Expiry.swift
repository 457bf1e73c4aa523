import Foundation
import RelayProtocol
import SwiftplexCrypto

/// Expiry: messages older than the TTL are deleted and uncounted exactly once.
extension RelayCore {
    /// Deletes messages older than the TTL. Returns how many unacknowledged ones went.
    ///
    /// The accounting runs in the store's completion, in commit order with the deletions of
    /// acknowledged messages: a message the sweep deleted is uncounted unless it had been
    /// acknowledged (then its ACK uncounted it), whatever the order of the two.
    @discardableResult
    func sweepExpired() async throws -> Int {
        let cutoff = oldestAllowed
        let total: Int = try await withCheckedThrowingContinuation { cont in
            let onDemand = store.loadsOnDemand
            store.deleteExpired(before: cutoff) { [self] result in
                switch result {
                case let .failure(e):
                    cont.resume(throwing: e)
                case let .success(removed):
                    let total = state.withLockedValue { s -> Int in
                        var total = 0
                        for m in removed {
                            let (rid, seq, bytes) = (m.recipientId, m.seq, m.bytes)
                            guard var q = s.queues[rid] else {
                                // Not in memory (a store that loads on demand): counted in the totals only.
                                if onDemand {
                                    s.stats.storedBytes -= bytes
                                    total += 1
                                }
                                continue
                            }
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
