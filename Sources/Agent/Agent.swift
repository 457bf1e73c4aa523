import Foundation
import GRDB
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayClient
import RelayProtocol
import SwiftplexCrypto
import SwiftplexStorage

/// Duplex, end-to-end encrypted connections over pairs of relay queues.
///
/// An inviter creates an invitation link; a joiner joins it (securing the inviter's queue and
/// sending a confirmation with its own reply queue); the inviter `allow`s; both get
/// ``AgentEvent/connected(connection:info:)``. Messages then travel in the double ratchet inside a
/// per-queue envelope, numbered and hash-chained. State lives in `<prefix>_agent.db`; outgoing
/// envelopes wait in an outbox until their relay accepts them.
///
/// Call ``run()`` (it returns when cancelled) to receive: it subscribes every queue, processes
/// what relays deliver, reconnects with backoff and retries the outbox.
public actor Agent {
    public nonisolated let events: AsyncStream<AgentEvent>
    private let eventSink: AsyncStream<AgentEvent>.Continuation
    private let store: AgentStore
    private var relays: [RelayAddress]
    private let group: any EventLoopGroup
    private let logger: Logger
    private var connections: [RelayAddress: RelayConnection] = [:]
    private let newConnections: AsyncStream<(RelayAddress, RelayConnection)>
    private let newConnectionSink: AsyncStream<(RelayAddress, RelayConnection)>.Continuation
    private var deliveringOutbox: Set<Int64> = []
    /// Receipts waiting to be sent, per connection (see ``acknowledgeDelivery(_:seq:)``).
    private var pendingReceipts: [Int64: [UInt64]] = [:]
    /// Connection records as last committed, so the message path does not decode a record (JSON,
    /// ratchet included) from the database for every message. Filled and updated only under the
    /// connection's lock (``lockedRecord(_:)``, ``committed(_:)``), where no other change of that
    /// connection can race; cleared when a connection is deleted.
    private var records: [Int64: ConnectionRecord] = [:]
    private var recordByRecipient: [Data: Int64] = [:]
    /// Receipt flushes scheduled or running; `close()` waits for them before closing the database.
    private var receiptTasks: [Int: Task<Void, Never>] = [:]
    private var nextReceiptTask = 0
    /// Deliveries, retries and allows running outside the calls that started them (``spawn(_:)``).
    private var background: [Int: Task<Void, Never>] = [:]
    private var nextBackground = 0
    private var closed = false
    /// Connections whose state is being changed, with the tasks waiting their turn (see ``withConnectionLock(_:_:)``).
    private var connectionLocks: [Int64: [CheckedContinuation<Void, Never>]] = [:]
    /// How long receipts gather before one receipt message carries them all.
    static let receiptDelay = Duration.milliseconds(20)
    private let options: AgentOptions
    /// Dial history of relays: one that never completed a handshake is given up after
    /// ``AgentOptions/newRelayMaxFailures`` failed dials (no reconnect loop, no socket).
    private var relayHealth: [RelayAddress: RelayHealth] = [:]
    /// Dials made per relay (diagnostics; tests read it to see what was dialled, and when).
    private(set) var dialAttempts: [RelayAddress: Int] = [:]

    struct RelayHealth {
        var worked = false
        var failures = 0
        var blockedUntil: ContinuousClock.Instant?
    }

    /// - Parameters:
    ///   - databasePath: the agent database file (created 0600).
    ///   - relays: where this agent creates its own queues (the first one is used).
    ///   - options: which peer relays may be dialled, and how long to wait for them.
    public init(databasePath: URL, relays: [RelayAddress], group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger,
                options: AgentOptions = AgentOptions()) throws {
        store = try AgentStore(path: databasePath)
        self.options = options
        self.relays = relays
        self.group = group
        self.logger = logger
        (events, eventSink) = AsyncStream.makeStream(of: AgentEvent.self)
        (newConnections, newConnectionSink) = AsyncStream.makeStream(of: (RelayAddress, RelayConnection).self)
    }

    /// The agent database migrations not yet applied at `databasePath`.
    public static func pendingMigrations(databasePath: URL) throws -> [String] {
        try PrivateDatabase.pendingMigrations(AgentStore.migrator, at: databasePath)
    }

    // MARK: - Running

    /// Subscribes all queues, then processes relay events, reconnects and retries until cancelled.
    /// Closes its relay connections when it returns.
    public func run() async throws {
        do {
            try await runLoops()
        } catch {
            await closeConnections()
            throw error
        }
        await closeConnections()
    }

    /// Closes relay connections and the database; the agent is unusable afterwards.
    public func close() async {
        closed = true
        // Receipt flushes and background work read the database: let them see `closed` and
        // finish first. Closing the relay connections first fails their pending requests at once.
        for task in receiptTasks.values { task.cancel() }
        for task in background.values { task.cancel() }
        await closeConnections()
        for task in receiptTasks.values { await task.value }
        while let (key, task) = background.first {
            await task.value
            background[key] = nil
        }
        try? store.queue.close()
    }

    /// Runs `body` in a task that ``close()`` waits for (a task that touched the database after
    /// it was closed would crash the process). Nothing starts once the agent is closed.
    private func spawn(_ body: @escaping @Sendable () async -> Void) {
        guard !closed else { return }
        let key = nextBackground
        nextBackground += 1
        background[key] = Task {
            await body()
            self.background[key] = nil
        }
    }

    private func closeConnections() async {
        let open = connections.values
        connections.removeAll()
        for c in open { await c.close() }
    }

    /// The chat layer has stored message `seq` of connection `id`: the agent forgets it. Until
    /// then it is kept, and announced again after a restart (the chat layer drops what it
    /// already has).
    public func messageProcessed(_ id: Int64, seq: UInt64) async {
        do {
            try await store.queue.write { db in try AgentStore.removeFromInbox(db, connectionId: id, seq: seq) }
        } catch {
            logger.error("cannot clear a processed message", metadata: ["connection": "\(id)", "error": "\(error)"])
        }
    }

    /// How long the key of an idempotent send is kept (a repeat comes right after a restart).
    public static let sendKeyRetention: TimeInterval = 7 * 24 * 3600

    private func runLoops() async throws {
        try await store.queue.write { db in try AgentStore.pruneSendKeys(db, olderThan: Self.sendKeyRetention) }
        // Messages received before a crash and not yet stored by the chat layer come first.
        for m in try await store.queue.read({ db in try AgentStore.inbox(db) }) {
            eventSink.yield(.message(connection: m.connectionId, seq: m.seq, body: m.body, integrity: .ok))
        }
        let relaysInUse = try await store.queue.read { db in
            Set(try AgentStore.allConnections(db).map(\.rcv.relay) + AgentStore.allAddresses(db).map(\.rcv.relay))
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [newConnections] in
                await withTaskGroup(of: Void.self) { readers in
                    for await (relay, connection) in newConnections {
                        readers.addTask { await self.consume(connection, from: relay) }
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: .seconds(2))
                    await self.retryOutbox()
                }
            }
            for relay in relaysInUse.compactMap({ try? RelayAddress(parsing: $0) }) {
                do { try await resubscribe(relay) } catch {
                    logger.warning("relay unreachable at start; will retry", metadata: ["relay": "\(relay.host):\(relay.port)"])
                    group.addTask { await self.reconnectLoop(relay) }
                }
            }
            await retryOutbox()
            // Answers to our contact requests that were accepted but not yet allowed when the
            // process stopped (allowing runs outside the receive loop).
            if let waiting = try? await store.queue.read({ db in try AgentStore.allConnections(db) }) {
                for r in waiting where r.status == .confirmed {
                    if let info = r.autoAllowInfo { startAutoAllow(r.id, info: [UInt8](info)) }
                }
            }
            try await group.next()
        }
    }

    private func consume(_ connection: RelayConnection, from relay: RelayAddress) async {
        for await event in connection.events {
            switch event {
            case let .message(rid, id, sealed):
                await receive(relay: relay, connection: connection, recipientId: rid, messageId: id, sealed: sealed)
            case .end, .error:
                break
            case .disconnected:
                break
            }
        }
        if connections[relay] === connection { connections[relay] = nil }
        guard !Task.isCancelled else { return }
        eventSink.yield(.hostDisconnected(relay))
        // Only relays that hold our receiving queues are reconnected; one we only send to (a
        // peer's) is dialled again when there is something to send.
        if await hostsOwnQueues(relay) { await reconnectLoop(relay) }
    }

    private func hostsOwnQueues(_ relay: RelayAddress) async -> Bool {
        guard let hosts = try? await store.queue.read({ db in
            Set(try AgentStore.allConnections(db).map(\.rcv.relay) + AgentStore.allAddresses(db).map(\.rcv.relay))
        }) else { return true }
        return hosts.contains(relay.description)
    }

    private func reconnectLoop(_ relay: RelayAddress) async {
        var delay = Duration.milliseconds(100)
        while !Task.isCancelled {
            try? await Task.sleep(for: delay)
            do {
                try await resubscribe(relay)
                await retryOutbox()
                return
            } catch {
                delay = min(delay * 2, .seconds(30))
            }
        }
    }

    /// Connects (if needed) and subscribes every receiving queue on `relay`.
    private func resubscribe(_ relay: RelayAddress) async throws {
        let connection = try await relayConnection(relay)
        let (records, addresses) = try await store.queue.read { db in (try AgentStore.allConnections(db), try AgentStore.allAddresses(db)) }
        let queues = try (records.map(\.rcv) + addresses.map(\.rcv)).filter { $0.relay == relay.description }.map { try $0.recipientQueue }
        for var q in queues {
            q.relay = relay
            try await connection.subscribe(q)
        }
    }

    /// The connection to `relay`, dialled if needed. A relay named by a peer (`peer`) that is not
    /// one of our own is first checked against the options (``RelayPolicy``): refused before any
    /// socket is opened, or given up when it never worked.
    private func relayConnection(_ relay: RelayAddress, peer: Bool = false) async throws -> RelayConnection {
        if let c = connections[relay], c.isActive { return c }
        guard !closed else { throw AgentError(.relay, "the agent is closed") }
        var dial = relay
        if peer, !relays.contains(relay) {
            dial = try await RelayPolicy.dialAddress(for: relay, options: options)
            try checkNotGivenUp(relay)
            if let c = connections[relay], c.isActive { return c }
        }
        let c: RelayConnection
        dialAttempts[relay, default: 0] += 1
        do {
            c = try await RelayConnection.connect(to: dial, group: group, timeout: options.connectTimeout)
        } catch {
            noteDialFailure(relay)
            throw AgentError(.relay, "cannot reach relay \(relay.host):\(relay.port): \(error)")
        }
        relayHealth[relay] = RelayHealth(worked: true)
        if closed {
            await c.close()
            throw AgentError(.relay, "the agent is closed")
        }
        if let other = connections[relay], other.isActive {
            // Another task dialled the same relay meanwhile: keep one connection.
            await c.close()
            return other
        }
        connections[relay] = c
        newConnectionSink.yield((relay, c))
        eventSink.yield(.hostConnected(relay))
        return c
    }

    private func checkNotGivenUp(_ relay: RelayAddress) throws {
        guard let h = relayHealth[relay], !h.worked, let until = h.blockedUntil else { return }
        if ContinuousClock.now < until {
            throw AgentError(.relayUnreachable, "relay \(relay.host):\(relay.port) never answered; not dialled again for now")
        }
        relayHealth[relay]?.blockedUntil = nil
        relayHealth[relay]?.failures = 0
    }

    private func noteDialFailure(_ relay: RelayAddress) {
        var h = relayHealth[relay] ?? RelayHealth()
        h.failures += 1
        if !h.worked, h.failures >= options.newRelayMaxFailures {
            h.blockedUntil = ContinuousClock.now + options.newRelayRetryAfter
        }
        relayHealth[relay] = h
    }

    /// Refuses, before anything is created, a peer relay the options forbid or that was given up.
    private func checkPeerRelay(_ relay: RelayAddress) async throws {
        guard !relays.contains(relay) else { return }
        _ = try await RelayPolicy.dialAddress(for: relay, options: options)
        try checkNotGivenUp(relay)
    }

    /// Where new queues are created from now on (the first relay is used).
    public func setRelays(_ relays: [RelayAddress]) {
        self.relays = relays
    }

    private var ownRelay: RelayAddress {
        get throws {
            guard let r = relays.first else {
                throw AgentError(.noRelay, "no relay configured: set the user's relays or SWIFTPLEX_SERVERS")
            }
            return r
        }
    }

    // MARK: - Handshake

    /// Creates a one-time invitation; returns the new connection's id and the link to share.
    public func createInvitation() async throws -> (connection: Int64, link: InvitationLink) {
        try await newInvitation(autoAllowInfo: nil)
    }

    private func newInvitation(autoAllowInfo: [UInt8]?) async throws -> (connection: Int64, link: InvitationLink) {
        let relay = try ownRelay
        let connection = try await relayConnection(relay)
        let q = try await connection.createQueue(mode: .messaging, password: relay.password)
        let e2e = X25519.PrivateKey()
        let x3dh = X3DH.PrivateKeys()
        let record = ConnectionRecord(
            role: .inviter, status: .pending, rcv: OwnQueue(q, relay: relay, e2e: e2e),
            x3dhKey1: Data(x3dh.key1.secretBytes), x3dhKey2: Data(x3dh.key2.secretBytes), autoAllowInfo: autoAllowInfo.map { Data($0) })
        let id = try await store.queue.write { db in try AgentStore.save(db, record) }
        try await connection.subscribe(q)
        let link = InvitationLink(queue: QueueURI(relay: relay, senderId: q.senderId, recipientDhKey: e2e.publicKey), keys: x3dh.publicKeys)
        return (id, link)
    }

    /// Joins an invitation: creates the reply queue, secures the inviter's queue and sends the
    /// confirmation carrying `info`. Returns the new connection's id.
    public func join(_ link: InvitationLink, info: [UInt8]) async throws -> Int64 {
        let senderId = link.queue.senderId
        if try await store.queue.read({ db in try AgentStore.isOwnQueue(db, senderId: senderId) }) {
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
        let id = try await store.queue.write { db in
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
            guard r.role == .inviter, r.status == .confirmed, var ratchet = r.ratchet, let ad = r.associatedData,
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
            r.status = .accepted
            let record = r
            try await store.queue.write { db in
                try AgentStore.save(db, record)
                try AgentStore.enqueue(db, connectionId: id, envelope: envelope, messageSeq: nil)
            }
            committed(record)
        }
        spawn { await self.deliverOutbox(id) } // committed; see `join`
    }

    // MARK: - Messages

    /// Encrypts and queues a message; returns its number on this connection. The `sent` event
    /// follows when the peer's relay has it.
    ///
    /// With an `idempotencyKey`, the key is committed in the same transaction as the ratchet step
    /// and the outbox entry; a later send on this connection with the same key sends nothing and
    /// returns the number the first one got (so a caller repeating its work after a crash does
    /// not send twice).
    @discardableResult
    public func send(_ id: Int64, _ body: [UInt8], idempotencyKey: String? = nil) async throws -> UInt64 {
        try await sendKeyed(id, body, idempotencyKey: idempotencyKey).seq
    }

    /// ``send(_:_:idempotencyKey:)`` that also says whether the key had been used (nothing sent now).
    public func sendKeyed(_ id: Int64, _ body: [UInt8], idempotencyKey key: String?) async throws -> (seq: UInt64, repeated: Bool) {
        let result = try await withConnectionLock(id) { () async throws -> (UInt64, Bool) in
            if let key, let seq = try await store.queue.read({ db in try AgentStore.sentSeq(db, connectionId: id, key: key) }) {
                return (seq, true)
            }
            guard var r = try await lockedRecord(id) else {
                throw AgentError(.unknownConnection, "no connection \(id)")
            }
            guard r.status == .connected, var ratchet = r.ratchet, let ad = r.associatedData else {
                throw AgentError(.wrongState, "connection \(id) is not connected")
            }
            let seq = r.sndSeq + 1
            let message = AgentMessage.message(seq: seq, previousHash: [UInt8](r.sndLastHash), body: body).encoded()
            let frame = try ratchet.encrypt(message, associatedData: [UInt8](ad))
            let envelope = try sealForPeer(frame, record: r)
            r.ratchet = ratchet
            r.sndSeq = seq
            r.sndLastHash = Data(Digest.sha256(message))
            let record = r
            try await store.queue.write { db in
                try AgentStore.save(db, record)
                try AgentStore.enqueue(db, connectionId: id, envelope: envelope, messageSeq: seq)
                if let key { try AgentStore.recordSendKey(db, connectionId: id, key: key, seq: seq) }
            }
            committed(record)
            return (seq, false)
        }
        // Committed: the outbox delivers it. Waiting for the relay here would hold the caller —
        // the chat's event loop sending a welcome, a plugin answering — on a peer relay that
        // went silent; `sent` reports the delivery instead.
        if !result.1 { spawn { await self.deliverOutbox(id) } }
        return (result.0, result.1)
    }

    /// Acknowledges, end to end, that message `seq` received on connection `id` was processed.
    /// Receipts are batched: those given within ``receiptDelay`` on one connection travel as one
    /// encrypted receipt message; the sender's agent reports them as `delivered`.
    public func acknowledgeDelivery(_ id: Int64, seq: UInt64) {
        if pendingReceipts[id] != nil {
            pendingReceipts[id]!.append(seq)
            return
        }
        guard !closed else { return }
        pendingReceipts[id] = [seq]
        let key = nextReceiptTask
        nextReceiptTask += 1
        receiptTasks[key] = Task {
            try? await Task.sleep(for: Self.receiptDelay)
            await self.flushReceipts(id)
            self.receiptTasks[key] = nil
        }
    }

    private func flushReceipts(_ id: Int64) async {
        guard var seqs = pendingReceipts.removeValue(forKey: id) else { return }
        do {
            while !seqs.isEmpty, !closed {
                let batch = Array(seqs.prefix(AgentMessage.maxReceiptSeqs))
                seqs.removeFirst(batch.count)
                try await sendUnnumbered(id, .receipt(seqs: batch))
            }
        } catch {
            logger.debug("receipt not sent", metadata: ["connection": "\(id)", "error": "\(error)"])
        }
    }

    /// Encrypts and queues an agent control message (outside the numbered application messages).
    private func sendUnnumbered(_ id: Int64, _ message: AgentMessage) async throws {
        try await withConnectionLock(id) { () async throws in
            guard var r = try await lockedRecord(id) else {
                throw AgentError(.unknownConnection, "no connection \(id)")
            }
            guard r.status == .connected, var ratchet = r.ratchet, let ad = r.associatedData else {
                throw AgentError(.wrongState, "connection \(id) is not connected")
            }
            let frame = try ratchet.encrypt(message.encoded(), associatedData: [UInt8](ad))
            let envelope = try sealForPeer(frame, record: r)
            r.ratchet = ratchet
            let record = r
            try await store.queue.write { db in
                try AgentStore.save(db, record)
                try AgentStore.enqueue(db, connectionId: id, envelope: envelope, messageSeq: nil)
            }
            committed(record)
        }
        await deliverOutbox(id)
    }

    /// Deletes a connection: first delivers what its outbox still holds (such as a goodbye), then
    /// deletes its receiving queue on the relay (unless `deleteQueue` is false), then its state.
    public func deleteConnection(_ id: Int64, deleteQueue: Bool = true) async throws {
        guard let r = try await store.queue.read({ db in try AgentStore.connection(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no connection \(id)")
        }
        pendingReceipts[id] = nil
        if deleteQueue {
            // A delivery already under way returns from `deliverOutbox` at once; wait for it (a
            // little), or the goodbye it is about to send would be deleted with the connection.
            let deadline = ContinuousClock.now + .seconds(5)
            while deliveringOutbox.contains(id), ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            await deliverOutbox(id)
            if let q = try? r.receivingQueue, let relay = try? RelayAddress(parsing: r.rcv.relay) {
                try? await relayConnection(relay).delete(q)
            }
        }
        try await store.queue.write { db in try AgentStore.delete(db, id: id) }
        forgetRecord(id)
    }

    private func sealForPeer(_ frame: [UInt8], record r: ConnectionRecord) throws -> [UInt8] {
        guard let sndText = r.sndQueue, let e2e = r.sndE2E else { throw AgentError(.wrongState, "no sending queue yet") }
        let snd = try QueueURI(parsing: sndText)
        return try Envelope.seal(frame, kind: .message, own: try X25519.PrivateKey(secretBytes: [UInt8](e2e)), peer: snd.recipientDhKey)
    }

    /// Sends a connection's outbox in order, stopping at the first failure (retried later).
    private func deliverOutbox(_ id: Int64) async {
        guard !closed, !deliveringOutbox.contains(id) else { return }
        deliveringOutbox.insert(id)
        defer { deliveringOutbox.remove(id) }
        do {
            while !closed {
                // The sending queue and key never change once set: a remembered record serves.
                let remembered = records[id]
                let (record, items) = try await store.queue.read { db in
                    (try remembered ?? AgentStore.connection(db, id: id), try AgentStore.pending(db, connectionId: id))
                }
                guard let record, let sndText = record.sndQueue, let keyBytes = record.sndKey, !items.isEmpty else { return }
                let snd = try QueueURI(parsing: sndText)
                let key = try AuthPrivateKey(secretBytes: [UInt8](keyBytes))
                let connection = try await relayConnection(snd.relay, peer: true)
                for item in items {
                    try await connection.sendMessage(senderId: snd.senderId, key: key, body: item.envelope)
                    guard !closed else { return } // sent again after a restart; the peer drops the repeat
                    try await store.queue.write { db in try AgentStore.removePending(db, id: item.id) }
                    if let seq = item.messageSeq { eventSink.yield(.sent(connection: id, seq: seq)) }
                }
            }
        } catch let e as RelayClientError where e.code == .relay(.auth) {
            // The peer's queue is gone (or our key no longer fits it): permanent. Retrying would
            // only add to the relay's count of AUTH answers on a connection we share.
            do {
                let seqs = try await store.queue.write { db in try AgentStore.dropPending(db, connectionId: id) }
                logger.info("the peer's queue refused delivery; waiting messages dropped", metadata: ["connection": "\(id)", "messages": "\(seqs.count)"])
                eventSink.yield(.undeliverable(connection: id, seqs: seqs))
            } catch {
                logger.warning("could not drop undeliverable messages", metadata: ["connection": "\(id)", "error": "\(error)"])
            }
        } catch {
            logger.debug("outbox delivery deferred", metadata: ["connection": "\(id)", "error": "\(error)"])
        }
    }

    private func retryOutbox() async {
        guard let ids = try? await store.queue.read({ db in try AgentStore.connectionsWithPending(db) }) else { return }
        // Side by side: a peer relay that does not answer holds up only its own connections.
        await withTaskGroup(of: Void.self) { group in
            for id in ids { group.addTask { await self.deliverOutbox(id) } }
        }
    }

    // MARK: - Receiving

    /// One delivery from a relay, kept to be processed again when the database refused it.
    struct Delivery: Sendable {
        var relay: RelayAddress
        var connection: RelayConnection
        var recipientId: [UInt8]
        var messageId: [UInt8]
        var sealed: [UInt8]
        var attempt = 0
    }

    private func receive(relay: RelayAddress, connection: RelayConnection, recipientId: [UInt8], messageId: [UInt8], sealed: [UInt8]) async {
        await receive(Delivery(relay: relay, connection: connection, recipientId: recipientId, messageId: messageId, sealed: sealed))
    }

    private func receive(_ d: Delivery) async {
        guard !closed else { return }
        let (relay, connection, recipientId, messageId, sealed) = (d.relay, d.connection, d.recipientId, d.messageId, d.sealed)
        var found: ConnectionRecord?
        do {
            if let address = try await store.queue.read({ db in try AgentStore.address(db, recipientId: recipientId) }) {
                return await receiveRequest(address, delivery: d)
            }
            // The receiving queue never changes, so any remembered record serves to find it.
            found = recordByRecipient[Data(recipientId)].flatMap { records[$0] }
            if found == nil {
                found = try await store.queue.read({ db in try AgentStore.connection(db, recipientId: recipientId) })
            }
        } catch {
            return deferReceive(d, connection: nil, error)
        }
        guard let found, var q = try? found.receivingQueue else {
            logger.warning("message for an unknown queue")
            return
        }
        q.relay = relay
        let ack = { try? await connection.acknowledge(q, messageId: messageId) }
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
                try await store.queue.write { db in
                    try AgentStore.save(db, record)
                    if let reply { try AgentStore.enqueue(db, connectionId: record.id, envelope: reply, messageSeq: nil) }
                    for case let .message(_, seq, body, integrity) in events where integrity != .duplicate {
                        try AgentStore.keepInInbox(db, connectionId: record.id, seq: seq, body: body)
                    }
                }
                committed(record)
                return (record, events, reply)
            }
            _ = await ack()
            guard let (r, events, reply) = applied else { return }
            if let info = r.autoAllowInfo, r.status == .confirmed {
                // We asked for this connection through the peer's address: accept its answer,
                // outside this relay's receive loop (the peer's relay may be slow to answer).
                startAutoAllow(r.id, info: [UInt8](info))
            } else {
                for e in events { eventSink.yield(e) }
            }
            if reply != nil {
                // Sent outside the receive loop too: one slow peer relay must not hold up what
                // this relay delivers for everyone else.
                let id = r.id
                spawn { await self.deliverOutbox(id) }
            }
        } catch let e as RatchetError where e.code == .duplicate {
            // The sender re-sent a message it had already delivered (a crash before it recorded
            // the relay's OK): already processed, nothing to report.
            _ = await ack()
            logger.debug("duplicate message dropped", metadata: ["connection": "\(id)"])
        } catch let e as DatabaseError {
            // Nothing was committed, so nothing is acknowledged: the relay keeps the message.
            deferReceive(d, connection: id, e)
        } catch {
            _ = await ack()
            eventSink.yield(.rejected(connection: id, reason: "\(error)"))
        }
    }

    /// The database refused what a delivery needed: reports it and processes the same delivery
    /// again after a pause (growing to 5 s). The relay is not acknowledged meanwhile, so it keeps
    /// the message (and sends it again after a reconnection).
    private func deferReceive(_ d: Delivery, connection: Int64?, _ error: any Error) {
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

    /// Allows a connection we asked for through a peer's address, in its own task.
    private func startAutoAllow(_ id: Int64, info: [UInt8]) {
        spawn {
            do {
                try await self.allow(id, info: info)
            } catch {
                self.logger.info("could not accept the answer to a contact request", metadata: ["connection": "\(id)", "error": "\(error)"])
            }
        }
    }

    /// The connection's record; call only under its lock.
    private func lockedRecord(_ id: Int64) async throws -> ConnectionRecord? {
        if let r = records[id] { return r }
        guard let r = try await store.queue.read({ db in try AgentStore.connection(db, id: id) }) else { return nil }
        committed(r)
        return r
    }

    /// Remembers a record whose state is committed; call only under its lock.
    private func committed(_ r: ConnectionRecord) {
        records[r.id] = r
        recordByRecipient[r.rcv.id] = r.id
    }

    private func forgetRecord(_ id: Int64) {
        if let r = records.removeValue(forKey: id) { recordByRecipient[r.rcv.id] = nil }
    }

    /// Runs `body` while no other state change of connection `id` runs. The agent is an actor,
    /// but its database reads and writes suspend, so without this a send and a receive (or two
    /// sends) on one connection could each start from the same ratchet state and one would undo
    /// the other.
    private func withConnectionLock<T>(_ id: Int64, _ body: () async throws -> T) async rethrows -> T {
        if connectionLocks[id] != nil {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in connectionLocks[id]!.append(c) }
        } else {
            connectionLocks[id] = []
        }
        defer {
            if var waiting = connectionLocks[id], !waiting.isEmpty {
                let next = waiting.removeFirst()
                connectionLocks[id] = waiting // still held: handed to the next waiter
                next.resume()
            } else {
                connectionLocks[id] = nil
            }
        }
        return try await body()
    }

    /// Applies one opened envelope to a connection; returns the events it produces. Throws
    /// without side effects on anything that does not open or does not fit the connection's state.
    private func process(_ r: inout ConnectionRecord, _ opened: Envelope.Opened) throws -> (events: [AgentEvent], reply: [UInt8]?) {
        switch (r.role, r.status, opened.kind) {
        case (.inviter, .pending, .confirmation):
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
            r.status = .confirmed
            return ([.confirmation(connection: r.id, info: info)], nil)

        case (.joiner, .pending, .confirmation):
            guard var ratchet = r.ratchet, let ad = r.associatedData else { throw AgentError(.wrongState, "no ratchet") }
            guard case let .connectionInfo(nil, info) = try AgentMessage.decode(try ratchet.decrypt(opened.plaintext, associatedData: [UInt8](ad), limits: options.skippedKeys)) else {
                throw AgentError(.badEnvelope, "unexpected handshake message")
            }
            let hello = try ratchet.encrypt(AgentMessage.hello.encoded(), associatedData: [UInt8](ad))
            r.ratchet = ratchet
            r.peerInfo = Data(info)
            r.status = .connected
            return ([.connected(connection: r.id, info: info)], try sealForPeer(hello, record: r))

        case (.inviter, .accepted, .message):
            guard var ratchet = r.ratchet, let ad = r.associatedData else { throw AgentError(.wrongState, "no ratchet") }
            guard try AgentMessage.decode(try ratchet.decrypt(opened.plaintext, associatedData: [UInt8](ad), limits: options.skippedKeys)) == .hello else {
                throw AgentError(.badEnvelope, "expected hello")
            }
            r.ratchet = ratchet
            r.status = .connected
            return ([.connected(connection: r.id, info: [UInt8](r.peerInfo ?? Data()))], nil)

        case (_, .connected, .message):
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

        default:
            throw AgentError(.wrongState, "a \(opened.kind == .confirmation ? "confirmation" : "message") does not fit a \(r.role.rawValue) connection in state \(r.status.rawValue)")
        }
    }
    // MARK: - Contact addresses

    /// Creates a reusable contact address.
    public func createAddress() async throws -> (address: Int64, link: ContactAddressLink) {
        let relay = try ownRelay
        let connection = try await relayConnection(relay)
        // A contact queue: anyone may send a request, nobody can secure it (audit 1).
        let q = try await connection.createQueue(mode: .contact, password: relay.password)
        let e2e = X25519.PrivateKey()
        let record = AddressRecord(rcv: OwnQueue(q, relay: relay, e2e: e2e))
        let id = try await store.queue.write { db in try AgentStore.save(db, record) }
        try await connection.subscribe(q)
        return (id, ContactAddressLink(queue: QueueURI(relay: relay, senderId: q.senderId, recipientDhKey: e2e.publicKey)))
    }

    /// Deletes an address: its queue on the relay, its pending requests. Connections made through it stay.
    public func deleteAddress(_ id: Int64, deleteQueue: Bool = true) async throws {
        guard let a = try await store.queue.read({ db in try AgentStore.address(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no address \(id)")
        }
        let q = try a.receivingQueue
        if deleteQueue { try? await relayConnection(q.relay).delete(q) }
        try await store.queue.write { db in try AgentStore.deleteAddress(db, id: id) }
    }

    /// Sends a contact request to someone's address; the connection completes when they accept.
    public func joinAddress(_ link: ContactAddressLink, info: [UInt8]) async throws -> Int64 {
        let senderId = link.queue.senderId
        if try await store.queue.read({ db in try AgentStore.isOwnQueue(db, senderId: senderId) }) {
            throw AgentError(.ownLink, "this is your own contact address")
        }
        let peerRelay = link.queue.relay
        try await checkPeerRelay(peerRelay)
        let (id, invitation) = try await newInvitation(autoAllowInfo: info)
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
        guard let (invitation, _) = try await store.queue.read({ db in try AgentStore.request(db, id: request) }) else {
            throw AgentError(.unknownConnection, "no contact request \(request)")
        }
        let id = try await join(invitation, info: info)
        try await store.queue.write { db in try AgentStore.deleteRequest(db, id: request) }
        return id
    }

    public func rejectRequest(_ request: Int64) async throws {
        let deleted = try await store.queue.write { db -> Bool in
            try AgentStore.deleteRequest(db, id: request)
            return db.changesCount > 0
        }
        guard deleted else { throw AgentError(.unknownConnection, "no contact request \(request)") }
    }

    private func receiveRequest(_ a: AddressRecord, delivery d: Delivery) async {
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
            let requestId = try await store.queue.write { db in
                try AgentStore.save(db, record)
                return try AgentStore.insertRequest(db, addressId: a.id, invitation: invitation, info: info)
            }
            try? await connection.acknowledge(q, messageId: messageId)
            eventSink.yield(.contactRequest(address: a.id, request: requestId, info: info))
        } catch let e as DatabaseError {
            deferReceive(d, connection: nil, e) // not acknowledged: the relay keeps the request
        } catch {
            try? await connection.acknowledge(q, messageId: messageId)
            logger.info("dropped an unreadable contact request", metadata: ["address": "\(a.id)"])
        }
    }

    // MARK: - Short links

    /// Stores an invitation's full link, encrypted, on the relay of the connection's own queue
    /// (`LSET`); returns the short link that finds and decrypts it.
    public func shortLink(forConnection id: Int64, link: InvitationLink) async throws -> ShortLink {
        guard let r = try await store.queue.read({ db in try AgentStore.connection(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no connection \(id)")
        }
        return try await setLinkData(try r.receivingQueue, kind: .invitation, link: link.description)
    }

    /// The same for a contact address (on the address's own queue).
    public func shortLink(forAddress id: Int64, link: ContactAddressLink) async throws -> ShortLink {
        guard let a = try await store.queue.read({ db in try AgentStore.address(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no address \(id)")
        }
        return try await setLinkData(try a.receivingQueue, kind: .contact, link: link.description)
    }

    private func setLinkData(_ q: RecipientQueue, kind: ShortLink.Kind, link: String) async throws -> ShortLink {
        let key = XChaChaPoly.randomKey()
        let data = try ShortLink.seal(link, kind: kind, key: key)
        let linkId: [UInt8]
        do {
            linkId = try await relayConnection(q.relay).setLinkData(q, data: data)
        } catch let e as AgentError {
            throw e
        } catch {
            throw AgentError(.relay, "cannot store the short link's data: \(error)")
        }
        return ShortLink(kind: kind, relay: q.relay, linkId: linkId, key: key)
    }

    /// Reads a short link's data from its relay (`LGET`) and decrypts it into the full link.
    public func resolve(_ short: ShortLink) async throws -> AgentLink {
        let data = try await withDeadline(options.peerRelayTimeout, "reading a short link from relay \(short.relay.host):\(short.relay.port)") {
            let connection = try await self.relayConnection(short.relay, peer: true)
            do {
                return try await connection.linkData(linkId: short.linkId)
            } catch {
                throw AgentError(.linkNotFound, "the relay has no data for this short link")
            }
        }
        let link: AgentLink
        do { link = try AgentLink(parsing: try short.open(data)) } catch let e as AgentError { throw e } catch {
            throw AgentError(.badLink, "the short link's data is not a link: \(error)")
        }
        switch (short.kind, link) {
        case (.invitation, .invitation), (.contact, .contact): return link
        default: throw AgentError(.badLink, "the short link's data is a link of another kind")
        }
    }
}
