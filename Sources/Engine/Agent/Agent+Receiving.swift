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

// MARK: - Receiving: what relays deliver, opened and applied to a connection, then acknowledged
extension Agent {
    /// One delivery from a relay, kept to be processed again when the database refused it.
    struct Delivery: Sendable {
        var relay: RelayAddress
        var connection: RelayConnection
        var recipientId: [UInt8]
        var messageId: [UInt8]
        var sealed: [UInt8]
        var attempt = 0
    }

    func receive(relay: RelayAddress, connection: RelayConnection, recipientId: [UInt8], messageId: [UInt8], sealed: [UInt8]) async {
        await receive(Delivery(relay: relay, connection: connection, recipientId: recipientId, messageId: messageId, sealed: sealed))
    }

    func receive(_ d: Delivery) async {
        guard !closed else { return }
        let (relay, connection, recipientId, messageId, sealed) = (d.relay, d.connection, d.recipientId, d.messageId, d.sealed)
        // The receiving queue never changes, so any remembered record serves to find it; a
        // connection's queue is never an address's, so a remembered one needs no store read.
        var found = recordByRecipient[Data(recipientId)].flatMap { records[$0] }
        if found == nil {
            do {
                // Not remembered: an address or a connection not used since the start, one read.
                let lookup = try await store.db.read { db -> (AddressRecord?, ConnectionRecord?) in
                    if let address = try AgentStore.address(db, recipientId: recipientId) { return (address, nil) }
                    return (nil, try AgentStore.connection(db, recipientId: recipientId))
                }
                if let address = lookup.0 { return await receiveRequest(address, delivery: d) }
                found = lookup.1
            } catch {
                return deferReceive(d, connection: nil, error)
            }
        }
        guard let found, var q = try? found.receivingQueue else {
            logger.warning("message for an unknown queue")
            return
        }
        q.relay = relay
        // The ACK goes after the commit and is not waited for: the loop takes the next delivery
        // meanwhile (the relay sends this queue's next message only after the ACK, so the order of
        // a connection's messages holds). One lost with the connection means the relay delivers
        // the message again, and it is recognised (`lastRelayMessageId`, the ratchet).
        let logger = self.logger
        let ack = {
            connection.acknowledgeWithoutWaiting(q, messageId: messageId).whenFailure { error in
                logger.debug("ACK not confirmed; the relay will deliver the message again", metadata: ["error": "\(error)"])
            }
        }
        let id = found.id
        do {
            // The state is read again under the connection's lock: a send may have moved the ratchet.
            let applied = try await withConnectionLock(id) { () async throws -> (ConnectionRecord, [AgentEvent], [UInt8]?)? in
                guard var r = try await lockedRecord(id) else { return nil }
                if r.lastRelayMessageId == Data(messageId) { return nil } // processed before a restart; only the ACK was lost
                let delivered = try q.open(messageId: messageId, sealed: sealed)
                let known = try r.rcvPeerE2E.map { try X25519.PublicKey(bytes: [UInt8]($0)) }
                let opened = try Envelope.open(delivered.body, own: try r.rcv.e2eKey, knownSender: known)
                if let sender = opened.senderKey {
                    guard r.rcvPeerE2E == nil || r.rcvPeerE2E == Data(sender.bytes) else {
                        throw AgentError(.badEnvelope, "a second confirmation with another key")
                    }
                    r.rcvPeerE2E = Data(sender.bytes)
                }
                let (events, reply) = try process(&r, opened)
                r.lastRelayMessageId = Data(messageId)
                let record = r
                // The new state and any answer are committed together before the relay is told.
                // A connection deleted since it was read (its row is gone) takes nothing: the
                // message is acknowledged and dropped, as for a queue that no longer exists.
                // Messages the chat layer has stored since leave the inbox in the same commit.
                let marks = takeProcessedMarks()
                let stillThere: Bool
                do {
                    stillThere = try await store.db.write { db -> Bool in
                        try AgentStore.removeFromInbox(db, marks)
                        try AgentStore.save(db, record)
                        guard db.changesCount > 0 else { return false }  // the UPDATE found no row
                        if let reply { try AgentStore.enqueue(db, connectionId: record.id, envelope: reply, messageSeq: nil) }
                        for case let .message(_, seq, body, integrity) in events where integrity != .duplicate {
                            try AgentStore.keepInInbox(db, connectionId: record.id, seq: seq, body: body)
                        }
                        return true
                    }
                } catch {
                    restoreProcessedMarks(marks)
                    throw error
                }
                guard stillThere else {
                    logger.debug("message for a connection deleted meanwhile dropped", metadata: ["connection": "\(id)"])
                    return nil
                }
                committed(record)
                return (record, events, reply)
            }
            guard let (r, events, reply) = applied else { return ack() }
            // Reported before the ACK, so before the relay can deliver this queue's next message.
            if let info = r.autoAllowInfo, r.status == .confirmed {
                // We asked for this connection through the peer's address: accept its answer,
                // outside this relay's receive loop (the peer's relay may be slow to answer).
                startAutoAllow(r.id, info: [UInt8](info))
            } else {
                for e in events { eventSink.yield(e) }
            }
            ack()
            if reply != nil {
                // Sent outside the receive loop too: one slow peer relay must not hold up what
                // this relay delivers for everyone else.
                let id = r.id
                spawn { await self.deliverOutbox(id) }
            }
        } catch let e as RatchetError where e.code == .duplicate {
            // The sender re-sent a message it had already delivered (a crash before it recorded
            // the relay's OK): already processed, nothing to report.
            ack()
            logger.debug("duplicate message dropped", metadata: ["connection": "\(id)"])
        } catch let e as SQLError {
            // Nothing was committed, so nothing is acknowledged: the relay keeps the message.
            deferReceive(d, connection: id, e)
        } catch is CancellationError {
            // The agent is stopping (its database access was cancelled) before the new state
            // was committed: not acknowledged either, so the relay delivers it again next time.
            // Acknowledging it as unreadable would lose a message nobody has seen.
            return
        } catch {
            ack()
            eventSink.yield(.rejected(connection: id, reason: "\(error)"))
        }
    }

    /// The database refused what a delivery needed: reports it and processes the same delivery
    /// again after a pause (growing to 5 s). The relay is not acknowledged meanwhile, so it keeps
    /// the message (and sends it again after a reconnection).
    func deferReceive(_ d: Delivery, connection: Int64?, _ error: any Error) {
        guard !closed else { return }
        logger.warning("the agent database refused a received message; it stays on the relay and is retried",
                       metadata: ["connection": "\(connection.map(String.init) ?? "-")", "error": "\(error)"])
        eventSink.yield(.storeError(connection: connection, message: "\(error)"))
        var again = d
        again.attempt += 1
        let next = again
        let delay = min(Duration.milliseconds(50) * (1 << min(d.attempt, 7)), .seconds(5))
        spawn {
            try? await Task.sleep(for: delay)
            // A new connection gets the message again from the relay when it subscribes.
            guard !Task.isCancelled, next.connection.isActive else { return }
            await self.receive(next)
        }
    }

    /// Applies one opened envelope to a connection; returns the events it produces. Throws
    /// without side effects on anything that does not open or does not fit the connection's state.
    func process(_ r: inout ConnectionRecord, _ opened: Envelope.Opened) throws -> (events: [AgentEvent], reply: [UInt8]?) {
        guard case let .advance(step, next) = ConnectionStateMachine(r).decide(.received(opened.kind)) else {
            throw AgentError(.wrongState, "a \(opened.kind == .confirmation ? "confirmation" : "message") does not fit a \(r.role.rawValue) connection in state \(r.status.rawValue)")
        }
        switch step {
        case .acceptConfirmation:
            let p = opened.plaintext
            guard p.count > 64, let k1 = r.x3dhKey1, let k2 = r.x3dhKey2 else { throw AgentError(.badEnvelope, "short confirmation") }
            let joinerKeys = X3DH.PublicKeys(key1: try X25519.PublicKey(bytes: Array(p[0..<32])), key2: try X25519.PublicKey(bytes: Array(p[32..<64])))
            let own = X3DH.PrivateKeys(key1: try X25519.PrivateKey(secretBytes: [UInt8](k1)), key2: try X25519.PrivateKey(secretBytes: [UInt8](k2)))
            let secrets = try X3DH.inviterSecrets(own: own, joiner: joinerKeys)
            var ratchet = DoubleRatchet.inviter(secrets: secrets, ratchetKey: own.key2)
            let ad = own.publicKeys.key1 + own.publicKeys.key2 + joinerKeys.key1 + joinerKeys.key2
            guard case let .connectionInfo(reply?, info) = try AgentMessage.decode(try ratchet.decrypt(Array(p[64...]), associatedData: ad, limits: options.skippedKeys)) else {
                throw AgentError(.badEnvelope, "confirmation without a reply queue")
            }
            r.ratchet = ratchet
            r.associatedData = Data(ad)
            r.sndQueue = reply.description
            r.peerInfo = Data(info)
            r.x3dhKey1 = nil
            r.x3dhKey2 = nil
            r.status = next
            return ([.confirmation(connection: r.id, info: info)], nil)

        case .completeJoin:
            guard var ratchet = r.ratchet, let ad = r.associatedData else { throw AgentError(.wrongState, "no ratchet") }
            guard case let .connectionInfo(nil, info) = try AgentMessage.decode(try ratchet.decrypt(opened.plaintext, associatedData: [UInt8](ad), limits: options.skippedKeys)) else {
                throw AgentError(.badEnvelope, "unexpected handshake message")
            }
            let hello = try ratchet.encrypt(AgentMessage.hello.encoded(), associatedData: [UInt8](ad))
            r.ratchet = ratchet
            r.peerInfo = Data(info)
            r.status = next
            return ([.connected(connection: r.id, info: info)], try sealForPeer(hello, record: r))

        case .completeAccept:
            guard var ratchet = r.ratchet, let ad = r.associatedData else { throw AgentError(.wrongState, "no ratchet") }
            guard try AgentMessage.decode(try ratchet.decrypt(opened.plaintext, associatedData: [UInt8](ad), limits: options.skippedKeys)) == .hello else {
                throw AgentError(.badEnvelope, "expected hello")
            }
            r.ratchet = ratchet
            r.status = next
            return ([.connected(connection: r.id, info: [UInt8](r.peerInfo ?? Data()))], nil)

        case .receiveMessage:
            guard var ratchet = r.ratchet, let ad = r.associatedData else { throw AgentError(.wrongState, "no ratchet") }
            let plain = try ratchet.decrypt(opened.plaintext, associatedData: [UInt8](ad), limits: options.skippedKeys)
            let decoded = try AgentMessage.decode(plain)
            if case let .receipt(seqs) = decoded {
                r.ratchet = ratchet
                return ([.delivered(connection: r.id, seqs: seqs.filter { $0 <= r.sndSeq })], nil)
            }
            guard case let .message(seq, previousHash, body) = decoded else {
                throw AgentError(.badEnvelope, "unexpected message on a connected connection")
            }
            let integrity: MessageIntegrity
            if seq <= r.rcvSeq {
                integrity = .duplicate
            } else if seq > r.rcvSeq + 1 {
                integrity = .skipped(from: r.rcvSeq + 1, to: seq - 1)
            } else if Data(previousHash) != r.rcvLastHash {
                integrity = .badHash
            } else {
                integrity = .ok
            }
            r.ratchet = ratchet
            if seq > r.rcvSeq {
                r.rcvSeq = seq
                r.rcvLastHash = Data(Digest.sha256(plain))
            }
            return ([.message(connection: r.id, seq: seq, body: body, integrity: integrity)], nil)

        case .answerJoiner, .sendMessage:
            // Not inputs an envelope gives (the machine never decides them for `.received`).
            throw AgentError(.wrongState, "\(step) on receiving")
        }
    }
}
