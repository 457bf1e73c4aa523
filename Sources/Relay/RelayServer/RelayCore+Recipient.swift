import Foundation
import RelayProtocol
import SwiftplexCrypto

/// Recipient commands other than subscriptions and acknowledgements: `KEY`, `GET`, `OFF`, `DEL`,
/// `LSET`, `LDEL`, and the sender key shared with `SKEY`.
extension RelayCore {
    /// Recipient commands. Every change is written first and applied to memory only once it is
    /// durable (in the store's completion, which runs in commit order), so a failed write leaves
    /// memory as the disk is. A disabled queue (`OFF`) answers `AUTH` to everything but `OFF`,
    /// `DEL` and `LDEL`.
    func handleRecipient(_ command: ClientCommand, recipientId rid: [UInt8], conn: any RelaySubscriber, reply: @escaping Reply) {
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
        let owner = conn.connectionId
        switch command {
        case let .key(senderKey):
            setSenderKey(rid, senderKey, owner: owner, reply: reply)
        case .subscribe:
            subscribe(rid, conn: conn, reply: reply)
        case let .ack(messageId):
            acknowledge(rid, messageId: messageId, owner: owner, reply: reply)
        case .get:
            getMessage(rid, reply: reply)
        case .off:
            store.disable(recipientId: rid, owner: owner) { [self] result in
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
            deleteQueue(rid, owner: owner, reply: reply)
        case let .linkSet(data):
            let linkId = state.withLockedValue { $0.queues[rid]?.linkId } ?? Sodium.randomBytes(RelayLimits.entityIdLength)
            store.setLink(recipientId: rid, linkId: linkId, data: data, owner: owner) { [self] result in
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
            store.setLink(recipientId: rid, linkId: nil, data: nil, owner: owner) { [self] result in
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
    func setSenderKey(_ rid: [UInt8], _ key: AuthPublicKey, owner: UInt64, reply: @escaping Reply) {
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
        store.setSenderKey(recipientId: rid, key: key.wireBytes, owner: owner) { [self] result in
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

    func getMessage(_ rid: [UInt8], reply: @escaping Reply) {
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
        store.oldestMessage(recipientId: rid, after: after, notBefore: notBefore) { [self] result in
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

    func deleteQueue(_ rid: [UInt8], owner: UInt64, reply: @escaping Reply) {
        store.deleteQueue(recipientId: rid, owner: owner) { [self] result in
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
}
