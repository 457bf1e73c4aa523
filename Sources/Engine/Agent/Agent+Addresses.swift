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

// MARK: - Contact addresses: creating them, contact requests sent and received
extension Agent {
    /// Creates a reusable contact address; with `groupLinkId`, a group link (the id goes into the
    /// link's client data, so joiners know the requests go to a group).
    public func createAddress(groupLinkId: String? = nil) async throws -> (address: Int64, link: ContactAddressLink) {
        let relay = try ownRelay
        let connection = try await relayConnection(relay)
        // A contact queue: anyone may send a request, nobody can secure it.
        let q = try await connection.createQueue(mode: .contact, password: relay.password)
        let e2e = X25519.PrivateKey()
        let record = AddressRecord(rcv: OwnQueue(q, relay: relay, e2e: e2e))
        let id = try await store.db.write { db in try AgentStore.save(db, record) }
        try await connection.subscribe(q)
        return (id, ContactAddressLink(queue: QueueURI(relay: relay, senderId: q.senderId, recipientDhKey: e2e.publicKey), groupLinkId: groupLinkId))
    }

    /// Sends a contact request to someone's address; the connection completes when they accept.
    /// The acceptor's confirmation is allowed at once with the same `info`; with `autoAllow` false
    /// it is reported (`confirmation`) for the caller to `allow` — a group link joiner reads the
    /// host's `x.grp.link.inv` first.
    public func joinAddress(_ link: ContactAddressLink, info: [UInt8], autoAllow: Bool = true) async throws -> Int64 {
        let senderId = link.queue.senderId
        if try await store.db.read({ db in try AgentStore.isOwnQueue(db, senderId: senderId) }) {
            throw AgentError(.ownLink, "this is your own contact address")
        }
        let peerRelay = link.queue.relay
        try await checkPeerRelay(peerRelay)
        let (id, invitation) = try await newInvitation(autoAllowInfo: autoAllow ? info : nil)
        let envelope = try Envelope.seal(AgentMessage.contactRequest(invitation: invitation, info: info).encoded(), kind: .confirmation,
                                         own: X25519.PrivateKey(), peer: link.queue.recipientDhKey)
        try await withDeadline(options.peerRelayTimeout, "sending a contact request through relay \(peerRelay.host):\(peerRelay.port)") {
            let peer = try await self.relayConnection(peerRelay, peer: true)
            do {
                // Address queues stay unsecured: anyone may send a request, unsigned.
                try await peer.sendMessage(senderId: senderId, key: nil, body: envelope)
            } catch {
                throw AgentError(.relay, "cannot deliver the contact request: \(error)")
            }
        }
        return id
    }

    /// Accepts a contact request: joins the requester's invitation, sending `info`.
    public func acceptRequest(_ request: Int64, info: [UInt8]) async throws -> Int64 {
        guard let (invitation, _) = try await store.db.read({ db in try AgentStore.request(db, id: request) }) else {
            throw AgentError(.unknownConnection, "no contact request \(request)")
        }
        let id = try await join(invitation, info: info)
        try await store.db.write { db in try AgentStore.deleteRequest(db, id: request) }
        return id
    }

    public func rejectRequest(_ request: Int64) async throws {
        let deleted = try await store.db.write { db -> Bool in
            try AgentStore.deleteRequest(db, id: request)
            return db.changesCount > 0
        }
        guard deleted else { throw AgentError(.unknownConnection, "no contact request \(request)") }
    }

    func receiveRequest(_ a: AddressRecord, delivery d: Delivery) async {
        let (relay, connection, messageId, sealed) = (d.relay, d.connection, d.messageId, d.sealed)
        guard var q = try? a.receivingQueue else { return }
        q.relay = relay
        if a.lastRelayMessageId == Data(messageId) {
            try? await connection.acknowledge(q, messageId: messageId)
            return
        }
        do {
            let delivered = try q.open(messageId: messageId, sealed: sealed)
            let opened = try Envelope.open(delivered.body, own: try a.rcv.e2eKey, knownSender: nil)
            guard opened.kind == .confirmation, case let .contactRequest(invitation, info) = try AgentMessage.decode(opened.plaintext) else {
                throw AgentError(.badEnvelope, "not a contact request")
            }
            var updated = a
            updated.lastRelayMessageId = Data(messageId)
            let record = updated
            let requestId = try await store.db.write { db in
                try AgentStore.save(db, record)
                return try AgentStore.insertRequest(db, addressId: a.id, invitation: invitation, info: info)
            }
            try? await connection.acknowledge(q, messageId: messageId)
            eventSink.yield(.contactRequest(address: a.id, request: requestId, info: info))
        } catch let e as SQLError {
            deferReceive(d, connection: nil, e) // not acknowledged: the relay keeps the request
        } catch is CancellationError {
            return // stopping before it was stored: not acknowledged, delivered again next time
        } catch {
            try? await connection.acknowledge(q, messageId: messageId)
            logger.info("dropped an unreadable contact request", metadata: ["address": "\(a.id)"])
        }
    }
}
