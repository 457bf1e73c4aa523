import Foundation
import RelayProtocol
import SwiftplexCrypto

/// Sender commands (`SKEY`, `SEND`) and link reads (`LGET`).
extension RelayCore {
    func handleSender(_ t: Transmission, _ command: ClientCommand, session: SessionKeys, owner: UInt64, reply: @escaping Reply) {
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
            setSenderKey(snapshot.rid, newKey, owner: owner, reply: reply)
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
            enqueue(snapshot.rid, flags: flags, body: body, owner: owner, reply: reply)
        default:
            reply(.error(.prohibited))
        }
    }

    func enqueue(_ rid: [UInt8], flags: MessageFlags, body: [UInt8], owner: UInt64, reply: @escaping Reply) {
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
        store.insertMessage(recipientId: rid, id: id, timestamp: timestamp, flags: flags.rawValue, body: body, owner: owner) { [self] result in
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

    func readLink(linkId: [UInt8], reply: @escaping Reply) {
        // On a store that loads on demand the link may be in the store only: it is always read.
        let known = store.loadsOnDemand || state.withLockedValue { $0.links[linkId] != nil }
        guard known else { return authFailed(reply) }
        store.linkData(linkId: linkId) { [self] result in
            switch result {
            case let .success(data?): reply(.linkData(data))
            case .success(nil): authFailed(reply)
            case let .failure(e): storeFailed(e, reply)
            }
        }
    }
}
