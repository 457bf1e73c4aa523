import NIOCore
import RelayProtocol
import SwiftplexCrypto

/// A queue this client owns: its IDs, the recipient signing key, and the DH keys that open
/// what the relay delivers. Persist all of it to use the queue again later.
public struct RecipientQueue: Sendable {
    public var relay: RelayAddress
    public var recipientId: [UInt8]
    public var senderId: [UInt8]
    public var recipientKey: AuthPrivateKey
    /// The client's half of the per-queue delivery DH; the relay seals each MSG to it.
    public var deliveryKey: BoxKey

    public init(relay: RelayAddress, recipientId: [UInt8], senderId: [UInt8], recipientKey: AuthPrivateKey, deliveryKey: BoxKey) {
        self.relay = relay
        self.recipientId = recipientId
        self.senderId = senderId
        self.recipientKey = recipientKey
        self.deliveryKey = deliveryKey
    }

    /// Opens a delivered message.
    public func open(messageId: [UInt8], sealed: [UInt8]) throws -> ReceivedMessage {
        try ReceivedMessage.open(id: messageId, sealed: sealed, key: deliveryKey)
    }
}

extension RelayConnection {
    /// Creates a queue on this relay, owned by a new key of the given kind: X25519 authenticators
    /// by default (deniable, and ~20× cheaper than an Ed25519 sign + verify per command — a
    /// recipient authorises a `SUB` per queue and an `ACK` per message); Ed25519 signatures on
    /// request.
    /// - Parameters:
    ///   - mode: `.messaging` (one sender, who secures it) or `.contact` (an address: anyone sends
    ///     unsigned requests, nobody can secure it). Fixed for the queue's life.
    ///   - password: the relay's queue-creation password; by default the one in the address this
    ///     connection was made with.
    public func createQueue(recipientKey key: AuthPrivateKey = .newX25519(), mode: QueueMode = .messaging,
                            password: String? = nil) async throws -> RecipientQueue {
        let dh = X25519.PrivateKey()
        let pw = (password ?? address.password).map { Array($0.utf8) }
        let response = try await send(.new(recipientKey: key.publicKey, recipientDhKey: dh.publicKey, mode: mode, password: pw), key: key)
        guard case let .ids(rid, sid, serverDh) = response else {
            throw RelayClientError(.unexpectedResponse, "expected IDS in answer to NEW")
        }
        return RecipientQueue(relay: address, recipientId: rid, senderId: sid, recipientKey: key,
                              deliveryKey: try BoxKey(privateKey: dh, peer: serverDh))
    }

    /// Subscribes; messages then arrive on ``events``.
    public func subscribe(_ queue: RecipientQueue) async throws {
        try await expectOK(.subscribe, entityId: queue.recipientId, key: queue.recipientKey)
    }

    /// Subscribes many queues at once: the `SUB`s are pipelined, at most `window` unanswered at a
    /// time, so N queues cost about N / window round trips rather than N. Returns, for each queue
    /// in order, nil when subscribed or the error that refused it (one refusal does not stop the
    /// others).
    public func subscribe(_ queues: [RecipientQueue], window: Int = 256) async -> [RelayClientError?] {
        var results = [RelayClientError?](repeating: nil, count: queues.count)
        await withTaskGroup(of: (Int, RelayClientError?).self) { group in
            var next = 0
            func start() {
                let index = next
                let queue = queues[index]
                next += 1
                group.addTask {
                    do {
                        try await self.subscribe(queue)
                        return (index, nil)
                    } catch let e as RelayClientError {
                        return (index, e)
                    } catch {
                        return (index, RelayClientError(.unexpectedResponse, "\(error)"))
                    }
                }
            }
            while next < queues.count, next < max(1, window) { start() }
            for await (index, error) in group {
                results[index] = error
                if next < queues.count { start() }
            }
        }
        return results
    }

    public func acknowledge(_ queue: RecipientQueue, messageId: [UInt8]) async throws {
        try await expectOK(.ack(messageId: messageId), entityId: queue.recipientId, key: queue.recipientKey)
    }

    /// Sends the `ACK` and returns without waiting for the relay's answer, which comes later in
    /// the returned future (an `ERR` answer fails it). For a receive loop that has committed what
    /// the message did: it can take the next delivery meanwhile, and a lost `ACK` only means the
    /// relay delivers the message again (the receiver recognises it).
    @discardableResult
    public func acknowledgeWithoutWaiting(_ queue: RecipientQueue, messageId: [UInt8]) -> EventLoopFuture<Void> {
        let t = Transmission.signed(command: ClientCommand.ack(messageId: messageId).encoded(),
                                    correlationId: Sodium.randomBytes(RelayLimits.correlationIdLength),
                                    entityId: queue.recipientId, key: queue.recipientKey, session: session)
        return submit(transmission: t, timeout: .seconds(30)).flatMapThrowing { response in
            if case let .error(code) = response { throw RelayClientError.relay(code) }
            guard response == .ok else { throw RelayClientError(.unexpectedResponse, "expected OK in answer to ACK") }
        }
    }

    /// Recipient-side securing: only `senderKey` may send from now on.
    public func secure(_ queue: RecipientQueue, senderKey: AuthPublicKey) async throws {
        try await expectOK(.key(senderKey: senderKey), entityId: queue.recipientId, key: queue.recipientKey)
    }

    /// Sender-side securing (SKEY), signed by the key being set.
    public func secureAsSender(senderId: [UInt8], senderKey: AuthPrivateKey) async throws {
        try await expectOK(.secureBySender(senderKey: senderKey.publicKey), entityId: senderId, key: senderKey)
    }

    /// Appends a message to a queue (unsigned only while the queue is unsecured).
    public func sendMessage(senderId: [UInt8], key: AuthPrivateKey?, body: [UInt8], flags: MessageFlags = []) async throws {
        try await expectOK(.send(flags: flags, body: body), entityId: senderId, key: key)
    }

    /// Polls for the oldest message without subscribing; nil when the queue is empty.
    public func get(_ queue: RecipientQueue) async throws -> ReceivedMessage? {
        do {
            let response = try await send(.get, entityId: queue.recipientId, key: queue.recipientKey)
            guard case let .message(id, sealed) = response else {
                throw RelayClientError(.unexpectedResponse, "expected MSG in answer to GET")
            }
            return try queue.open(messageId: id, sealed: sealed)
        } catch let e as RelayClientError where e.code == .relay(.noMessage) {
            return nil
        }
    }

    public func disable(_ queue: RecipientQueue) async throws {
        try await expectOK(.off, entityId: queue.recipientId, key: queue.recipientKey)
    }

    public func delete(_ queue: RecipientQueue) async throws {
        try await expectOK(.delete, entityId: queue.recipientId, key: queue.recipientKey)
    }

    /// Stores short-link data for the queue; returns the link ID.
    public func setLinkData(_ queue: RecipientQueue, data: [UInt8]) async throws -> [UInt8] {
        let response = try await send(.linkSet(data: data), entityId: queue.recipientId, key: queue.recipientKey)
        guard case let .linkId(id) = response else { throw RelayClientError(.unexpectedResponse, "expected LINK in answer to LSET") }
        return id
    }

    public func linkData(linkId: [UInt8]) async throws -> [UInt8] {
        let response = try await send(.linkGet, entityId: linkId)
        guard case let .linkData(d) = response else { throw RelayClientError(.unexpectedResponse, "expected LNK in answer to LGET") }
        return d
    }

    public func ping() async throws {
        let response = try await send(.ping)
        guard response == .pong else { throw RelayClientError(.unexpectedResponse, "expected PONG") }
    }

    private func expectOK(_ command: ClientCommand, entityId: [UInt8], key: AuthPrivateKey?) async throws {
        let response = try await send(command, entityId: entityId, key: key)
        guard response == .ok else { throw RelayClientError(.unexpectedResponse, "expected OK in answer to \(command.tag)") }
    }
}
