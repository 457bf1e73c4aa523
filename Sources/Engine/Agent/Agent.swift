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
import SwiftplexBase

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
///
/// This file holds the state, running and closing, relay connections and the per-connection
/// lock; each capability is an extension of its own: `Agent+Handshake`, `Agent+Sending`,
/// `Agent+Receiving`, `Agent+Addresses`, `Agent+ShortLinks`, `Agent+Deletion`. Which step a
/// connection may take is decided by ``ConnectionStateMachine`` (pure, no I/O).
public actor Agent {
    public nonisolated let events: AsyncStream<AgentEvent>
    let eventSink: AsyncStream<AgentEvent>.Continuation
    let store: AgentStore
    var relays: [RelayAddress]
    let group: any EventLoopGroup
    let logger: Logger
    var connections: [RelayAddress: RelayConnection] = [:]
    let newConnections: AsyncStream<(RelayAddress, RelayConnection)>
    let newConnectionSink: AsyncStream<(RelayAddress, RelayConnection)>.Continuation
    var deliveringOutbox: Set<Int64> = []
    /// Receipts waiting to be sent, per connection (see ``acknowledgeDelivery(_:seq:)``).
    var pendingReceipts: [Int64: [UInt64]] = [:]
    /// Connection records as last committed, so the message path does not decode a record (JSON,
    /// ratchet included) from the database for every message. Filled and updated only under the
    /// connection's lock (``lockedRecord(_:)``, ``committed(_:)``), where no other change of that
    /// connection can race; cleared when a connection is deleted.
    var records: [Int64: ConnectionRecord] = [:]
    var recordByRecipient: [Data: Int64] = [:]
    /// Receipt flushes scheduled or running; `close()` waits for them before closing the database.
    var receiptTasks: [Int: Task<Void, Never>] = [:]
    var nextReceiptTask = 0
    /// Deliveries, retries and allows running outside the calls that started them (``spawn(_:)``).
    var background: [Int: Task<Void, Never>] = [:]
    var nextBackground = 0
    var closed = false
    /// Connections whose state is being changed, with the tasks waiting their turn (see ``withConnectionLock(_:_:)``).
    var connectionLocks: [Int64: [CheckedContinuation<Void, Never>]] = [:]
    /// How long receipts gather before one receipt message carries them all.
    public static let receiptDelay = Duration.milliseconds(20)
    /// The same for a group member's messages, which arrive one per group message (each member
    /// sends its own receipts, so a receipt per message would double each delivery's work).
    public static let groupReceiptDelay = Duration.milliseconds(100)
    /// Messages the chat layer has stored, not yet removed from the inbox (``messageProcessed(_:seq:)``).
    var processedMarks: [(Int64, UInt64)] = []
    var processedFlushScheduled = false
    /// How long processed marks wait for a received message's commit to take them along.
    static let processedDelay = Duration.milliseconds(10)
    let options: AgentOptions
    /// Dial history of relays: one that never completed a handshake is given up after
    /// ``AgentOptions/newRelayMaxFailures`` failed dials (no reconnect loop, no socket).
    var relayHealth: [RelayAddress: RelayHealth] = [:]
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
        try self.init(database: .sqlite(databasePath), relays: relays, group: group, logger: logger, options: options)
    }

    /// An agent whose database is at `database` (an SQLite file or a PostgreSQL schema).
    public init(database: DatabaseLocation, relays: [RelayAddress], group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger,
                options: AgentOptions = AgentOptions()) throws {
        store = try AgentStore(location: database)
        self.options = options
        self.relays = relays
        self.group = group
        self.logger = logger
        (events, eventSink) = AsyncStream.makeStream(of: AgentEvent.self)
        (newConnections, newConnectionSink) = AsyncStream.makeStream(of: (RelayAddress, RelayConnection).self)
    }

    /// The agent database's migrations, in order (for tools and tests that apply them elsewhere).
    public static var databaseMigrations: [SQLMigration] { AgentStore.migrations }

    /// The agent database migrations not yet applied at `databasePath`.
    public static func pendingMigrations(databasePath: URL) throws -> [String] {
        try SQLiteStore.pendingMigrations(AgentStore.migrations, at: databasePath)
    }

    /// Envelopes in this agent's outbox (application messages and receipts waiting for their
    /// relay), read through its own store: what the host's gauge reads at each scrape while the
    /// bot's engine is open.
    public nonisolated func outboxDepth() async throws -> Int {
        try await store.db.read(Self.countPending)
    }

    private static func countPending(_ db: Database) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending") ?? 0
    }

    /// The same for the agent database at `location`, with no agent open on it in this process
    /// (a tool's view), read through a read-only connection of its own, beside any agent that
    /// runs on it elsewhere: an SQLite file opened read-only (WAL readers do not block the
    /// agent; a file that does not exist holds nothing), a PostgreSQL schema through a connection
    /// that takes no lock (``DatabaseLocation/openReadingOnly(label:)``).
    public static func outboxDepth(at location: DatabaseLocation) async throws -> Int {
        guard let store = try await location.openReadingOnly(label: "agent-monitor") else { return 0 }
        let count: Result<Int, any Error>
        do { count = .success(try await store.read(countPending)) } catch { count = .failure(error) }
        await Blocking.run("agent-monitor-close") { try? store.close() }
        return try count.get()
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
        // What the chat layer stored is cleared from the inbox before the database closes, so
        // that the next start does not announce it again.
        await flushProcessed()
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
        let db = store.db
        await Blocking.run("agent-close") { try? db.close() }
    }

    /// Runs `body` in a task that ``close()`` waits for (a task that touched the database after
    /// it was closed would crash the process). Nothing starts once the agent is closed.
    func spawn(_ body: @escaping @Sendable () async -> Void) {
        guard !closed else { return }
        let key = nextBackground
        nextBackground += 1
        background[key] = Task {
            await body()
            self.background[key] = nil
        }
    }

    func closeConnections() async {
        let open = connections.values
        connections.removeAll()
        for c in open { await c.close() }
    }

    /// The chat layer has stored message `seq` of connection `id`: the agent forgets it. Until
    /// then it is kept, and announced again after a restart (the chat layer drops what it
    /// already has).
    ///
    /// Batched: the mark is removed from the inbox with the next received message's commit, or
    /// within ``processedDelay`` by a flush that takes every mark given meanwhile (one
    /// transaction, not one per message). A mark lost to a crash before then only means the
    /// message is announced again, which the chat layer drops as it does after any crash
    /// between its commit and this call.
    public func messageProcessed(_ id: Int64, seq: UInt64) {
        processedMarks.append((id, seq))
        scheduleProcessedFlush()
    }

    /// Starts a flush of the processed marks after ``processedDelay``, unless one is scheduled.
    func scheduleProcessedFlush() {
        guard !processedFlushScheduled, !closed else { return }
        processedFlushScheduled = true
        spawn {
            try? await Task.sleep(for: Self.processedDelay)
            await self.flushProcessed()
        }
    }

    /// Removes the processed marks gathered so far from the inbox, in one transaction.
    func flushProcessed() async {
        processedFlushScheduled = false
        let marks = takeProcessedMarks()
        guard !marks.isEmpty else { return }
        do {
            try await store.db.write { db in try AgentStore.removeFromInbox(db, marks) }
        } catch {
            logger.error("cannot clear processed messages", metadata: ["messages": "\(marks.count)", "error": "\(error)"])
        }
    }

    /// The processed marks not yet removed, handed to the caller's transaction (which gives them
    /// back with ``restoreProcessedMarks(_:)`` if it does not commit).
    func takeProcessedMarks() -> [(Int64, UInt64)] {
        defer { processedMarks = [] }
        return processedMarks
    }

    func restoreProcessedMarks(_ marks: [(Int64, UInt64)]) {
        guard !marks.isEmpty else { return }
        processedMarks.insert(contentsOf: marks, at: 0)
        scheduleProcessedFlush()
    }

    /// How long the key of an idempotent send is kept (a repeat comes right after a restart).
    public static let sendKeyRetention: TimeInterval = 7 * 24 * 3600

    func runLoops() async throws {
        try await store.db.write { db in try AgentStore.pruneSendKeys(db, olderThan: Self.sendKeyRetention) }
        // Messages received before a crash and not yet stored by the chat layer come first.
        for m in try await store.db.read({ db in try AgentStore.inbox(db) }) {
            eventSink.yield(.message(connection: m.connectionId, seq: m.seq, body: m.body, integrity: .ok))
        }
        let relaysInUse = try await store.db.read { db in
            try AgentStore.relaysInUse(db)
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
            if let waiting = try? await store.db.read({ db in try AgentStore.connections(db, status: .confirmed) }) {
                for r in waiting {
                    if let info = r.autoAllowInfo { startAutoAllow(r.id, info: [UInt8](info)) }
                }
            }
            try await group.next()
        }
    }

    func consume(_ connection: RelayConnection, from relay: RelayAddress) async {
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

    func hostsOwnQueues(_ relay: RelayAddress) async -> Bool {
        guard let hosts = try? await store.db.read({ db in
            try AgentStore.relaysInUse(db)
        }) else { return true }
        return hosts.contains(relay.description)
    }

    func reconnectLoop(_ relay: RelayAddress) async {
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

    /// Every receiving queue (connections, then addresses) of the agent database at
    /// `databasePath`, read without running an agent: for tools that check or measure what an
    /// agent subscribes (`swiftplex-bench contacts`). The queues hold private keys.
    public static func receivingQueues(databasePath: URL) throws -> [RecipientQueue] {
        try receivingQueues(database: .sqlite(databasePath))
    }

    /// The same for an agent database anywhere (an SQLite file or a PostgreSQL schema, whose lock
    /// is taken while it is read: no agent may run on it meanwhile).
    public static func receivingQueues(database: DatabaseLocation) throws -> [RecipientQueue] {
        let store = try AgentStore(location: database)
        defer { try? store.db.close() }
        return try store.db.readNow { db in try AgentStore.receivingQueues(db).map { try $0.queue.recipientQueue } }
    }

    /// ``receivingQueues(database:)`` from async code, on a thread of its own.
    public static func receivingQueues(database: DatabaseLocation) async throws -> [RecipientQueue] {
        try await Blocking.run("agent-queues") { try receivingQueues(database: database) as [RecipientQueue] }
    }

    /// Connects (if needed) and subscribes every receiving queue on `relay`, pipelined (see
    /// `RelayConnection.subscribe(_:window:)`), then reports the result as one
    /// ``AgentEvent/subscriptions(relay:active:removed:)``. A queue the relay refuses (`AUTH`: it
    /// was deleted there) is reported removed and does not hold up the others; losing the
    /// connection meanwhile throws, and the caller dials again.
    func resubscribe(_ relay: RelayAddress) async throws {
        let connection = try await relayConnection(relay)
        let here = relay.description
        let stored = try await store.db.read { db in try AgentStore.receivingQueues(db) }
        var owners: [Int64?] = []  // the connection behind each queue; nil for an address
        var queues: [RecipientQueue] = []
        for (owner, own) in stored where own.relay == here {
            var q = try own.recipientQueue
            q.relay = relay
            queues.append(q)
            owners.append(owner)
        }
        let errors = await connection.subscribe(queues)
        var active: [Int64] = []
        var removed: [SubscriptionFailure] = []
        for (owner, error) in zip(owners, errors) {
            switch error?.code {
            case nil:
                if let owner { active.append(owner) }
            case .relay(let code):
                if let owner {
                    removed.append(SubscriptionFailure(connection: owner, error: code.rawValue))
                } else {
                    logger.warning("the relay refused to subscribe an address queue", metadata: ["relay": "\(relay.host):\(relay.port)", "error": "\(code.rawValue)"])
                }
            default:
                throw AgentError(.relay, "subscribing at \(relay.host):\(relay.port) failed: \(error!.message)")
            }
        }
        if !removed.isEmpty {
            logger.warning("the relay refused to subscribe some queues", metadata: ["relay": "\(relay.host):\(relay.port)", "count": "\(removed.count)"])
        }
        eventSink.yield(.subscriptions(relay: relay, active: active, removed: removed))
    }

    // MARK: - Relay connections

    /// The connection to `relay`, dialled if needed. A relay named by a peer (`peer`) that is not
    /// one of our own is first checked against the options (``RelayPolicy``): refused before any
    /// socket is opened, or given up when it never worked.
    func relayConnection(_ relay: RelayAddress, peer: Bool = false) async throws -> RelayConnection {
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

    func checkNotGivenUp(_ relay: RelayAddress) throws {
        guard let h = relayHealth[relay], !h.worked, let until = h.blockedUntil else { return }
        if ContinuousClock.now < until {
            throw AgentError(.relayUnreachable, "relay \(relay.host):\(relay.port) never answered; not dialled again for now")
        }
        relayHealth[relay]?.blockedUntil = nil
        relayHealth[relay]?.failures = 0
    }

    func noteDialFailure(_ relay: RelayAddress) {
        var h = relayHealth[relay] ?? RelayHealth()
        h.failures += 1
        if !h.worked, h.failures >= options.newRelayMaxFailures {
            h.blockedUntil = ContinuousClock.now + options.newRelayRetryAfter
        }
        relayHealth[relay] = h
    }

    /// Refuses, before anything is created, a peer relay the options forbid or that was given up.
    func checkPeerRelay(_ relay: RelayAddress) async throws {
        guard !relays.contains(relay) else { return }
        _ = try await RelayPolicy.dialAddress(for: relay, options: options)
        try checkNotGivenUp(relay)
    }

    /// Where new queues are created from now on (the first relay is used).
    public func setRelays(_ relays: [RelayAddress]) {
        self.relays = relays
    }

    var ownRelay: RelayAddress {
        get throws {
            guard let r = relays.first else {
                throw AgentError(.noRelay, "no relay configured: set the user's relays or SWIFTPLEX_SERVERS")
            }
            return r
        }
    }

    // MARK: - Connection records and the per-connection lock

    /// The connection's record; call only under its lock.
    func lockedRecord(_ id: Int64) async throws -> ConnectionRecord? {
        if let r = records[id] { return r }
        guard let r = try await store.db.read({ db in try AgentStore.connection(db, id: id) }) else { return nil }
        committed(r)
        return r
    }

    /// Remembers a record whose state is committed; call only under its lock.
    func committed(_ r: ConnectionRecord) {
        records[r.id] = r
        recordByRecipient[r.rcv.id] = r.id
    }

    func forgetRecord(_ id: Int64) {
        if let r = records.removeValue(forKey: id) { recordByRecipient[r.rcv.id] = nil }
    }

    /// Runs `body` while no other state change of connection `id` runs. The agent is an actor,
    /// but its database reads and writes suspend, so without this a send and a receive (or two
    /// sends) on one connection could each start from the same ratchet state and one would undo
    /// the other.
    func withConnectionLock<T>(_ id: Int64, _ body: () async throws -> T) async rethrows -> T {
        await acquireConnectionLock(id)
        defer { releaseConnectionLock(id) }
        return try await body()
    }

    /// Takes connection `id`'s lock, waiting for its turn (see ``withConnectionLock(_:_:)``).
    func acquireConnectionLock(_ id: Int64) async {
        if connectionLocks[id] != nil {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in connectionLocks[id]!.append(c) }
        } else {
            connectionLocks[id] = []
        }
    }

    /// Takes connection `id`'s lock if nobody holds it; false (nothing taken) otherwise.
    func tryConnectionLock(_ id: Int64) -> Bool {
        guard connectionLocks[id] == nil else { return false }
        connectionLocks[id] = []
        return true
    }

    /// Lets go of connection `id`'s lock: handed to the next waiter, if any.
    func releaseConnectionLock(_ id: Int64) {
        if var waiting = connectionLocks[id], !waiting.isEmpty {
            let next = waiting.removeFirst()
            connectionLocks[id] = waiting // still held: handed to the next waiter
            next.resume()
        } else {
            connectionLocks[id] = nil
        }
    }
}
