import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import RelayProtocol
import ServiceLifecycle
import SwiftplexBase

/// A running relay: TLS listener, queue core and durable store.
///
/// ```swift
/// let relay = try await RelayServer.start(configuration: config, group: group, logger: logger)
/// print(relay.address)          // smp://<fingerprint>@127.0.0.1:5223
/// …
/// await relay.shutdown()
/// ```
/// For a process, wrap it in a ``RelayService`` and run that in a `ServiceGroup`.
public final class RelayServer: Sendable {
    public let configuration: RelayConfiguration
    public let identity: RelayIdentity
    /// The address clients use, with the port actually bound (and the queue-creation password, if set).
    public let address: RelayAddress
    let core: RelayCore
    private let listener: any Channel
    private let children: NIOLockedValueBox<[ObjectIdentifier: any Channel]>
    private let sweeper: RepeatedTask
    private let logger: Logger
    private let stopped = NIOLockedValueBox(false)

    private init(configuration: RelayConfiguration, identity: RelayIdentity, address: RelayAddress, core: RelayCore,
                 listener: any Channel, children: NIOLockedValueBox<[ObjectIdentifier: any Channel]>, sweeper: RepeatedTask, logger: Logger) {
        self.configuration = configuration
        self.identity = identity
        self.address = address
        self.core = core
        self.listener = listener
        self.children = children
        self.sweeper = sweeper
        self.logger = logger
    }

    /// Creates the data directory and identity if needed, opens the store, loads the queues and
    /// starts listening. Returns once the listener is bound.
    /// `store`: where queues and messages are kept; nil for the SQLite file `relay.db` in the data
    /// directory (the default). The PostgreSQL store comes from the `RelayPostgres` module.
    package static func start(configuration: RelayConfiguration, store: (any RelayQueueStore)?, group: any EventLoopGroup,
                              logger: Logger) async throws -> RelayServer {
        if let password = configuration.newQueuePassword, !RelayAddress.isValidPassword(password) {
            throw RelayServerError(.configuration, "the queue-creation password must be 1–\(RelayLimits.maxPasswordLength) characters of A–Z a–z 0–9 and -._~!$&'()*+,;=")
        }
        let identity = try await Blocking.run("relay-identity") { try RelayIdentity.loadOrCreate(in: configuration.dataDirectory) }
        let opened: any RelayQueueStore
        if let store { opened = store } else {
            let path = configuration.dataDirectory.appendingPathComponent("relay.db")
            opened = try await Blocking.run("relay-store-open") { try RelayStore(path: path) as any RelayQueueStore }
        }
        return try await start(configuration: configuration, identity: identity, store: opened, group: group, logger: logger)
    }

    public static func start(configuration: RelayConfiguration, group: any EventLoopGroup, logger: Logger) async throws -> RelayServer {
        try await start(configuration: configuration, store: nil, group: group, logger: logger)
    }

    private static func start(configuration: RelayConfiguration, identity: RelayIdentity, store: any RelayQueueStore, group: any EventLoopGroup,
                              logger: Logger) async throws -> RelayServer {
        let core = try RelayCore(store: store, configuration: configuration, logger: logger)
        do {
            try await core.load()
            try await core.sweepExpired()
        } catch {
            try? await store.closeStore()
            throw error
        }
        let sslContext = try identity.makeServerTLSContext()
        let children = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])

        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // At most `acceptRate` connections (each a TLS handshake) accepted per second.
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AcceptPacer(rate: configuration.acceptRate, core: core))
                }
            }
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 64 * 1024, high: 256 * 1024))
            // One socket read per connection per event-loop turn: a connection that floods gets
            // its turn like the others, not four in a row.
            .childChannelOption(.maxMessagesPerRead, value: 1)
            // A bounded kernel send buffer: a client that stops reading makes its connection
            // unwritable (and the relay stop reading from it) after ~0.5 MB, not after the
            // megabytes socket autotuning allows.
            .childChannelOption(.socketOption(.so_sndbuf), value: 256 * 1024)
            .childChannelInitializer { channel in
                let id = ObjectIdentifier(channel)
                // Over the connection limit: refused before any TLS work (the acceptor closes it).
                let admitted = children.withLockedValue { c -> Bool in
                    guard c.count < configuration.maxConnections else { return false }
                    c[id] = channel
                    return true
                }
                guard admitted else {
                    core.noteRefusal(.connections)
                    return channel.eventLoop.makeFailedFuture(RelayServerError(.limit, "connection limit reached"))
                }
                channel.closeFuture.whenComplete { _ in _ = children.withLockedValue { $0.removeValue(forKey: id) } }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    // Times the connection's TLS, decoding and dispatch (the budget of unproven work).
                    let tally = WorkTally(global: core.globalBudget)
                    // New connections from a source over its budget of new connections' work wait here, before TLS.
                    if let sources = core.sourceBudgets, let key = sources.key(for: channel.remoteAddress) {
                        core.metrics.sources.record(sources.opened(key))
                        channel.closeFuture.whenComplete { _ in sources.closed(key) }
                        tally.source = SourceAccount(budgets: sources, key: key)
                        try sync.addHandler(SourceGate(tally: tally, noteWait: { core.noteThrottled(.sourceHandshakeWork) },
                                                       noteRefused: { core.noteRefusal(.sourceWaiting) }))
                    }
                    try sync.addHandler(WorkMeter(tally: tally))
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    try sync.addHandler(ByteToMessageHandler(BlockDecoder()))
                    try sync.addHandler(RelayConnectionHandler(core: core, configuration: configuration, logger: logger, workTally: tally))
                }
            }
        let listener: any Channel
        do {
            listener = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        } catch {
            try? await store.closeStore()
            throw RelayServerError(.bind, "cannot listen on \(configuration.host):\(configuration.port): \(error)")
        }
        let port = listener.localAddress?.port ?? configuration.port
        let address = RelayAddress(fingerprint: identity.fingerprint, host: configuration.publicHost ?? configuration.host, port: port,
                                   password: configuration.newQueuePassword)
        let interval = TimeAmount.nanoseconds(configuration.sweepInterval.timeAmountNanoseconds)
        let sweepLoop = group.next()
        let sweeper = sweepLoop.scheduleRepeatedAsyncTask(initialDelay: interval, delay: interval) { _ in
            let promise = sweepLoop.makePromise(of: Void.self)
            promise.completeWithTask {
                do { try await core.sweepExpired() } catch { logger.error("expiry sweep failed", metadata: ["error": "\(error)"]) }
            }
            return promise.futureResult
        }
        logger.info("relay listening", metadata: ["address": "\(address.withoutPassword)", "queues": "\(core.stats.queues)"])
        return RelayServer(configuration: configuration, identity: identity, address: address, core: core,
                           listener: listener, children: children, sweeper: sweeper, logger: logger)
    }

    /// Current counters.
    public var stats: RelayStats { core.stats }

    /// Deletes expired messages now (the relay also does this every `sweepInterval`).
    @discardableResult
    public func sweepExpired() async throws -> Int { try await core.sweepExpired() }

    /// Stops accepting, closes every connection, waits for pending writes to commit, closes the store.
    public func shutdown() async {
        let first = stopped.withLockedValue { s -> Bool in defer { s = true }; return !s }
        guard first else { return }
        logger.info("relay stopping")
        sweeper.cancel()
        try? await listener.close()
        let open = children.withLockedValue { Array($0.values) }
        for channel in open { try? await channel.close() }
        await core.store.barrier()
        try? await core.store.closeStore()
        logger.info("relay stopped")
    }
}

/// Runs a relay until graceful shutdown (SIGTERM/SIGINT in a `ServiceGroup`).
public struct RelayService: Service {
    public let server: RelayServer

    public init(server: RelayServer) { self.server = server }

    public func run() async throws {
        try? await gracefulShutdown()
        await server.shutdown()
    }
}
