import Foundation
import RelayProtocol
import SwiftplexCrypto

/// Subscriptions and delivery: `SUB`, one message in flight per subscribed queue, `ACK`, and the
/// reads and in-memory cache that feed the next message.
extension RelayCore {
    func subscribe(_ rid: [UInt8], conn: any RelaySubscriber, reply: @escaping Reply) {
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

    func perform(_ next: Next, _ rid: [UInt8]) {
        switch next {
        case .none: break
        case let .deliver(m, target): deliver(m, to: target, recipientId: rid)
        case let .fetch(after): fetchNext(rid, after: after)
        }
    }

    /// Reads the oldest unacknowledged live message (on a reader, concurrently with commits) and
    /// hands it to the current subscriber.
    func fetchNext(_ rid: [UInt8], after: Int64) {
        let notBefore = oldestAllowed
        store.oldestMessage(recipientId: rid, after: after, notBefore: notBefore) { [self] result in
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

    func deliver(_ m: StoredMessage, to target: Target, recipientId: [UInt8]) {
        guard let response = sealedDelivery(m, key: target.key) else { return }
        target.subscriber.push(response, entityId: recipientId)
    }

    /// Seals a stored message for its recipient and counts the delivery; nil (logged) if it cannot be sealed.
    func sealedDelivery(_ m: StoredMessage, key: BoxKey) -> ServerResponse? {
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
    func acknowledge(_ rid: [UInt8], messageId: [UInt8], owner: UInt64, reply: @escaping Reply) {
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
            store.deleteMessage(seq: seq, owner: owner) { [self] result in
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
}
