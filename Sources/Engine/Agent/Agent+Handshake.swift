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

// MARK: - Handshake: one-time invitations, joining them, allowing a confirmed joiner
extension Agent {
    /// Creates a one-time invitation; returns the new connection's id and the link to share.
    public func createInvitation() async throws -> (connection: Int64, link: InvitationLink) {
        try await newInvitation(autoAllowInfo: nil)
    }

    func newInvitation(autoAllowInfo: [UInt8]?) async throws -> (connection: Int64, link: InvitationLink) {
        let relay = try ownRelay
        let connection = try await relayConnection(relay)
        let q = try await connection.createQueue(mode: .messaging, password: relay.password)
        let e2e = X25519.PrivateKey()
        let x3dh = X3DH.PrivateKeys()
        let record = ConnectionRecord(
            role: .inviter, status: .pending, rcv: OwnQueue(q, relay: relay, e2e: e2e),
            x3dhKey1: Data(x3dh.key1.secretBytes), x3dhKey2: Data(x3dh.key2.secretBytes), autoAllowInfo: autoAllowInfo.map { Data($0) })
        let id = try await store.db.write { db in try AgentStore.save(db, record) }
        try await connection.subscribe(q)
        let link = InvitationLink(queue: QueueURI(relay: relay, senderId: q.senderId, recipientDhKey: e2e.publicKey), keys: x3dh.publicKeys)
        return (id, link)
    }

    /// Joins an invitation: creates the reply queue, secures the inviter's queue and sends the
    /// confirmation carrying `info`. Returns the new connection's id.
    public func join(_ link: InvitationLink, info: [UInt8]) async throws -> Int64 {
        let senderId = link.queue.senderId
        if try await store.db.read({ db in try AgentStore.isOwnQueue(db, senderId: senderId) }) {
            throw AgentError(.ownLink, "this is your own invitation link")
        }
        let peerRelay = link.queue.relay
        try await checkPeerRelay(peerRelay)
        let relay = try ownRelay
        let own = try await relayConnection(relay)
        let q = try await own.createQueue(mode: .messaging, password: relay.password)
        let rcvE2E = X25519.PrivateKey()
        let x3dh = X3DH.PrivateKeys()
        let secrets = try X3DH.joinerSecrets(own: x3dh, inviter: link.keys)
        var ratchet = try DoubleRatchet.joiner(secrets: secrets, inviterRatchetKey: try X25519.PublicKey(bytes: link.keys.key2))
        let ad = link.keys.key1 + link.keys.key2 + x3dh.publicKeys.key1 + x3dh.publicKeys.key2
        let replyQueue = QueueURI(relay: relay, senderId: q.senderId, recipientDhKey: rcvE2E.publicKey)
        let frame = try ratchet.encrypt(AgentMessage.connectionInfo(replyQueue: replyQueue, info: info).encoded(), associatedData: ad)
        let sndKey = AuthPrivateKey.newX25519()
        let sndE2E = X25519.PrivateKey()
        let envelope = try Envelope.seal(x3dh.publicKeys.key1 + x3dh.publicKeys.key2 + frame, kind: .confirmation,
                                         own: sndE2E, peer: link.queue.recipientDhKey)
        do {
            try await withDeadline(options.peerRelayTimeout, "joining through relay \(peerRelay.host):\(peerRelay.port)") {
                let peer = try await self.relayConnection(peerRelay, peer: true)
                do {
                    try await peer.secureAsSender(senderId: senderId, senderKey: sndKey)
                } catch {
                    throw AgentError(.relay, "cannot secure the inviter's queue (already used or gone?): \(error)")
                }
            }
        } catch {
            try? await own.delete(q) // the reply queue is of no use now
            throw error
        }
        let record = ConnectionRecord(
            role: .joiner, status: .pending, rcv: OwnQueue(q, relay: relay, e2e: rcvE2E),
            sndQueue: link.queue.description, sndKey: Data(sndKey.secretBytes), sndE2E: Data(sndE2E.secretBytes), sndConfirmationSent: true,
            associatedData: Data(ad), ratchet: ratchet)
        let id = try await store.db.write { db in
            let id = try AgentStore.save(db, record)
            try AgentStore.enqueue(db, connectionId: id, envelope: envelope, messageSeq: nil)
            return id
        }
        try await own.subscribe(q)
        // The confirmation is committed in the outbox: it goes out on its own, so a peer relay
        // that answered SKEY and then stalls cannot stretch the join past its bound.
        spawn { await self.deliverOutbox(id) }
        return id
    }

    /// Inviter: accepts a confirmed joiner, sending it `info`.
    public func allow(_ id: Int64, info: [UInt8]) async throws {
        try await withConnectionLock(id) { () async throws in
            guard var r = try await lockedRecord(id) else {
                throw AgentError(.unknownConnection, "no connection \(id)")
            }
            guard case let .advance(_, next) = ConnectionStateMachine(r).decide(.allow), var ratchet = r.ratchet, let ad = r.associatedData,
                  let sndText = r.sndQueue else {
                throw AgentError(.wrongState, "connection \(id) is not waiting to be allowed")
            }
            let snd = try QueueURI(parsing: sndText)
            let sndKey = AuthPrivateKey.newX25519()
            let sndE2E = X25519.PrivateKey()
            try await withDeadline(options.peerRelayTimeout, "allowing through relay \(snd.relay.host):\(snd.relay.port)") {
                let peer = try await self.relayConnection(snd.relay, peer: true)
                try await peer.secureAsSender(senderId: snd.senderId, senderKey: sndKey)
            }
            let frame = try ratchet.encrypt(AgentMessage.connectionInfo(replyQueue: nil, info: info).encoded(), associatedData: [UInt8](ad))
            let envelope = try Envelope.seal(frame, kind: .confirmation, own: sndE2E, peer: snd.recipientDhKey)
            r.ratchet = ratchet
            r.sndKey = Data(sndKey.secretBytes)
            r.sndE2E = Data(sndE2E.secretBytes)
            r.sndConfirmationSent = true
            r.status = next
            let record = r
            try await store.db.write { db in
                try AgentStore.save(db, record)
                try AgentStore.enqueue(db, connectionId: id, envelope: envelope, messageSeq: nil)
            }
            committed(record)
        }
        spawn { await self.deliverOutbox(id) } // committed; see `join`
    }

    /// Allows a connection we asked for through a peer's address, in its own task.
    func startAutoAllow(_ id: Int64, info: [UInt8]) {
        spawn {
            do {
                try await self.allow(id, info: info)
            } catch {
                self.logger.info("could not accept the answer to a contact request", metadata: ["connection": "\(id)", "error": "\(error)"])
            }
        }
    }
}
