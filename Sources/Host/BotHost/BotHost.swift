import Agent
import ChatAPI
import ChatCore
import ChatModel
import ChatServer
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import PluginHost
import Prometheus
import RelayProtocol
import RelayServer
import ServiceLifecycle
import SwiftplexBase
import SwiftplexStorage

/// A running bot host: one or more bots (``HostedBot``: each a chat engine with its own
/// databases, profile, address and plugins) and, with `relays: embedded`, a relay they share.
///
/// ```swift
/// let host = try await BotHost.start(options, logger: logger)
/// print(host.address ?? "")           // the first bot's contact address
/// await host.run()                     // serves until shutdown() or graceful shutdown
/// ```
/// Start-up is the headless form of SimpleX's onboarding, for each bot: open and migrate its
/// databases, create its user on first start, start chat, create or reuse its contact address,
/// load its plugins, then publish its profile (peer type, command menu, address).
///
/// The host is a `Service`: ``run()`` runs its parts — the embedded relay, each bot's chat
/// engine and plugins' event dispatch and watchdog, the API servers — as services of one
/// `ServiceGroup`, and returns once a graceful shutdown (from a parent group, e.g. on SIGTERM, or
/// from ``shutdown()``) has stopped them in reverse order and the databases are closed.
///
/// ``api``, ``plugins``, ``address``, ``userId`` and ``events`` are the first bot's (the only one
/// of a host configured with `bot:`); ``bots`` lists them all.
public final class BotHost: Service, Sendable {
    /// The host's bots, in configuration order; the first is the default one.
    public let bots: [HostedBot]
    /// The embedded relay's address, when there is one.
    public let relayAddress: RelayAddress?
    private let relay: RelayServer?
    private let options: BotHostOptions
    private let logger: Logger
    /// Where the host is in its life: ``run()`` and ``shutdown()`` each act once.
    private let phase = NIOLockedValueBox(Phase.started)
    /// Finished when the host has stopped and closed its databases.
    private let stopped = Completion()
    private let relayService: EmbeddedRelayService?
    /// The Prometheus metrics served at the admin API's `/metrics`.
    let metrics: HostMetrics
    let startedAt = ContinuousClock.now
    private let authFailureCount = NIOLockedValueBox(0)
    private let adminListening = ListeningAddress()
    private let webSocketListening = ListeningAddress()

    private enum Phase {
        case started
        /// ``run()`` runs this group.
        case running(ServiceGroup)
        case stopping
    }

    /// The first bot.
    public var defaultBot: HostedBot { bots[0] }
    public var api: any BotEngine { defaultBot.api }
    public var plugins: PluginManager { defaultBot.plugins }
    /// The first bot's contact address link, when it makes one.
    public var address: String? { defaultBot.address }
    public var userId: Int64 { defaultBot.userId }
    /// The first bot's chat events.
    public var events: EventHub<EncodedChatEvent> { defaultBot.events }

    /// The bot of this name.
    public func bot(named name: String) -> HostedBot? { bots.first { $0.name == name } }

    /// Where the first bot's databases are when it has the default prefix (`<prefix>_chat.db`,
    /// `<prefix>_agent.db`, `<prefix>.lock`).
    public static func databasePrefix(_ dataDirectory: URL) -> String { HostedBot.databasePrefix(dataDirectory, prefix: BotOptions.defaultName) }

    /// Starts everything up to and including the plugins; events flow once `run()` is called.
    public static func start(_ options: BotHostOptions, logger: Logger) async throws -> BotHost {
        let fm = FileManager.default
        let bots = options.bots
        try validateBots(bots)
        try fm.createDirectory(at: options.dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        chmod(options.dataDirectory.path, 0o700)
        // One host per bot's databases: a second would encrypt with the same chain keys (and
        // fight over the embedded relay's store). Refused at once with ``DatabaseLocked``.
        var locks: [DatabaseLock] = []
        func releaseLocks() { for l in locks { l.release() } }
        do {
            for bot in bots { locks.append(try await DatabaseLock.acquire(prefix: HostedBot.lockPrefix(options.dataDirectory, bot))) }
            try validateOperations(options)
        } catch {
            releaseLocks()
            throw error
        }

        var relay: RelayServer?
        let relays: [RelayAddress]
        switch options.relays {
        case let .embedded(host, port, publicHost):
            let configuration = RelayConfiguration(dataDirectory: options.dataDirectory.appendingPathComponent("relay"),
                                                   host: host, port: port, publicHost: publicHost)
            do {
                relay = try await RelayServer.start(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
            } catch {
                releaseLocks()
                throw BotHostError("cannot start the embedded relay on \(host):\(port): \(error)")
            }
            relays = [relay!.address]
            logger.info("embedded relay listening", metadata: ["address": "\(relay!.address)"])
        case let .external(list):
            relays = list
        }

        let metrics = HostMetrics(registry: options.metricsRegistry ?? PrometheusCollectorRegistry())
        var started: [HostedBot] = []
        do {
            for (bot, lock) in zip(bots, locks) {
                started.append(try await HostedBot.start(bot, dataDirectory: options.dataDirectory, database: options.database, relays: relays, runnerExecutable: options.runnerExecutable,
                                                         metrics: metrics, lock: lock, logger: logger))
            }
        } catch {
            for bot in started {
                await bot.stopPlugins()
                await bot.close()
            }
            await relay?.shutdown()
            for l in locks.dropFirst(started.count) { l.release() }
            throw error
        }
        return BotHost(bots: started, relay: relay, options: options, metrics: metrics, logger: logger)
    }

    /// Names unique, files apart (the configuration checks the same with positions; this guards
    /// hosts built in code).
    static func validateBots(_ bots: [BotOptions]) throws {
        var names = Set<String>(), prefixes = Set<String>()
        for bot in bots {
            guard !bot.name.isEmpty, names.insert(bot.name).inserted else { throw BotHostError("two bots are named \"\(bot.name)\"; give each its own name") }
            guard !bot.dataPrefix.isEmpty, !bot.dataPrefix.contains("/"), prefixes.insert(bot.dataPrefix).inserted else {
                throw BotHostError("bot \(bot.name): its data files \(bot.dataPrefix)_*.db are another bot's (or not a plain file prefix)")
            }
        }
    }

    private init(bots: [HostedBot], relay: RelayServer?, options: BotHostOptions, metrics: HostMetrics, logger: Logger) {
        self.bots = bots
        self.relayAddress = relay?.address
        self.relay = relay
        self.options = options
        self.logger = logger
        self.metrics = metrics
        relayService = relay.map { EmbeddedRelayService(relay: $0) }
    }

    /// The host's services, in start order (the group stops them in reverse).
    private func serviceGroup() -> ServiceGroup {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let relayService { services.append(.init(service: relayService)) }
        for bot in bots {
            // An engine that fails stops the host (gracefully: plugins first), rather than leaving
            // plugins running with no events.
            services.append(.init(service: bot.engineService, successTerminationBehavior: .gracefullyShutdownGroup,
                                  failureTerminationBehavior: .gracefullyShutdownGroup))
            services.append(.init(service: EventHubService(hub: bot.events)))
            services.append(.init(service: PluginsService(bot: bot)))
        }
        services.append(contentsOf: operationServices().map { .init(service: $0) })
        return ServiceGroup(configuration: .init(services: services, logger: logger))
    }

    /// Runs the host's services — embedded relay, chat engines, plugins — until a graceful
    /// shutdown (from a parent `ServiceGroup`, or ``shutdown()``); then stops them (plugins,
    /// engines, relay, in that order), closes the databases and releases the data directory.
    /// Returns at once, after the shutdown has finished, when the host was already shut down.
    public func run() async {
        let group = phase.withLockedValue { p -> ServiceGroup? in
            guard case .started = p else { return nil }
            let group = serviceGroup()
            p = .running(group)
            return group
        }
        guard let group else { return await stopped.wait() }
        do {
            try await group.run()
        } catch {
            logger.error("the bot host stopped on an error: \(error)")
        }
        await close()
    }

    /// The newest received chat item a `newChatItems` event announces (nil for any other event).
    static func receivedItemId(_ event: ChatEvent) -> Int64? {
        guard case let .newChatItems(new) = event else { return nil }
        return new.chatItems.lazy.map(\.chatItem).filter { $0.chatDir == .directRcv }.map(\.meta.itemId).max()
    }

    /// Applies a new plugin list to the first bot: changed instances restart (rolling back on
    /// failure), others keep running.
    @discardableResult
    public func reload(_ specs: [PluginSpec]) async -> [(name: String, outcome: PluginOutcome)] {
        await defaultBot.reload(specs)
    }

    /// Stops plugins, the engines and the embedded relay, closes the databases and releases the
    /// data directory; returns when all of that is done (a second host may start on the same
    /// data directory right after). With ``run()`` under way, it shuts the service group down
    /// gracefully and waits for `run()` to finish; without, it does the same steps itself.
    public func shutdown() async {
        enum Step { case stopAlone, stopGroup(ServiceGroup), wait }
        let step = phase.withLockedValue { p -> Step in
            switch p {
            case .started: p = .stopping; return .stopAlone
            case let .running(group): p = .stopping; return .stopGroup(group)
            case .stopping: return .wait
            }
        }
        switch step {
        case .stopAlone:
            // Never run: the services' own stop steps, in the group's shutdown order.
            for bot in bots.reversed() {
                await bot.stopPlugins()
                await bot.engineService.stop()
            }
            await relayService?.stop()
            await close()
        case let .stopGroup(group):
            // Remembered by the group when its run() has not begun yet.
            await group.triggerGracefulShutdown()
            await stopped.wait()
        case .wait:
            await stopped.wait()
        }
    }

    /// After the services stopped: closes each bot's controller (its background work awaited,
    /// the agent stopped, both databases closed) and releases its lock.
    private func close() async {
        phase.withLockedValue { $0 = .stopping }  // a later run() only waits
        for bot in bots { await bot.close() }
        stopped.finish()
    }

    // MARK: Operations (WebSocket API, admin API)

    /// The servers of `ws_api:` and `admin:`, when configured (a bad setting — a WebSocket API
    /// beyond loopback without a token — was refused by ``start(_:logger:)``).
    private func operationServices() -> [any Service] {
        var services: [any Service] = []
        if let ws = options.webSocketAPI {
            let served = ws.bot.flatMap { self.bot(named: $0) } ?? defaultBot
            do {
                services.append(try ChatWebSocketServer(api: served.api, events: served.events, listen: ws.listen, token: ws.token,
                                                             browsers: ws.browsers, logger: logger,
                                                        onListening: { [webSocketListening] in webSocketListening.set($0) }))
            } catch {
                logger.error("the WebSocket API is not served: \(error)")
            }
        }
        if let admin = options.admin {
            do {
                let tokens = try AdminTokenStore(dataDirectory: options.dataDirectory)
                services.append(AdminServer(host: self, options: admin, tokens: tokens, listening: adminListening, logger: logger))
            } catch {
                logger.error("the admin API is not served: cannot read or make its token: \(error)")
            }
        }
        return services
    }

    /// Checks the operations settings before anything starts.
    static func validateOperations(_ options: BotHostOptions) throws {
        if let ws = options.webSocketAPI {
            if let t = ws.token, t.isEmpty { throw BotHostError("ws_api.token must not be empty") }
            if ws.token == nil, !ws.listen.isLoopback {
                throw BotHostError("ws_api listens on \(ws.listen), beyond loopback: it needs a token")
            }
            if let name = ws.bot, !options.bots.contains(where: { $0.name == name }) {
                throw BotHostError("ws_api.bot names no bot of this host: \(name)")
            }
        }
        if options.admin != nil {
            do { _ = try AdminToken.loadOrCreate(dataDirectory: options.dataDirectory) } catch {
                throw BotHostError("cannot make the admin token in \(options.dataDirectory.path): \(error)")
            }
        }
    }

    /// Where the admin API listens, once it does (`admin:` configured and ``run()`` under way).
    public func adminAddress() async -> ListenAddress { await adminListening.wait() }
    /// Where the WebSocket API listens, once it does.
    public func webSocketAddress() async -> ListenAddress { await webSocketListening.wait() }

    /// Every bot's engine runs.
    var engineRunning: Bool { bots.allSatisfy(\.engineRunning) }
    func countAuthFailure() {
        authFailureCount.withLockedValue { $0 += 1 }
        metrics.countAuthFailure()
    }
    public var authFailures: Int { authFailureCount.withLockedValue { $0 } }
    /// The plugin list last applied to the first bot.
    public var appliedPlugins: [PluginSpec] { defaultBot.appliedPlugins }

    var uptimeSeconds: Double {
        let elapsed = ContinuousClock.now - startedAt
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// The hosts of the bots' own relays (where their queues are), as the agent names them in
    /// `hostConnected`; a peer's relay a bot only sends to is not among them.
    var ownRelayHosts: Set<String> {
        switch options.relays {
        case .embedded: Set(relayAddress.map { [$0.host] } ?? [])
        case let .external(list): Set(list.map(\.host))
        }
    }

    /// The bot's own relays its engine is connected to now, and those it lost and has not got back.
    func relayConnections(_ bot: HostedBot) -> HostMetrics.RelayState {
        let own = ownRelayHosts
        let all = bot.engine.relayState
        return HostMetrics.RelayState(connected: all.connected.intersection(own), lost: all.lost.intersection(own))
    }

    /// `/readyz`: for every bot, its engine runs, none of its own relays it was connected to is
    /// down, and — when it has an address, whose queue the agent subscribes at start — at least
    /// one of them is connected. Peers' relays (dialled to send, dropped when idle) do not count.
    /// `relaysConnected` counts the bots' connections to their own relays, summed over the bots.
    public func readiness() -> (ready: Bool, json: JSONValue) {
        var allReady = true, connected = 0
        var down: Set<String> = []
        var perBot: [JSONValue] = []
        for bot in bots {
            let running = bot.engineRunning
            let relays = relayConnections(bot)
            let ready = Self.isReady(engineRunning: running, hasAddress: bot.address != nil, ownRelays: relays)
            allReady = allReady && ready
            connected += relays.connected.count
            down.formUnion(relays.lost)
            perBot.append(.object([("name", .string(bot.name)), ("ready", .bool(ready)), ("engineRunning", .bool(running)),
                                   ("relaysConnected", .int(Int64(relays.connected.count)))]))
        }
        return (allReady, .object([("ready", .bool(allReady)), ("engineRunning", .bool(engineRunning)),
                                   ("relaysConnected", .int(Int64(connected))),
                                   ("relaysDown", .array(down.sorted().map(JSONValue.string))),
                                   ("bots", .array(perBot))]))
    }

    /// Returns once the host is ready (``readiness()``): at once if it is, else at the relay
    /// connection or engine start that makes it so. For the `ready` line of `swiftplex run`.
    public func waitUntilReady() async {
        while !Task.isCancelled {
            let seen = metrics.changes.generation
            if readiness().ready { return }
            await metrics.changes.wait(after: seen)
        }
    }

    static func isReady(engineRunning: Bool, hasAddress: Bool, ownRelays: HostMetrics.RelayState) -> Bool {
        engineRunning && ownRelays.lost.isEmpty && (!hasAddress || !ownRelays.connected.isEmpty)
    }

    /// The Prometheus text of ``metrics``, its scrape-time values read now: each bot's outbox
    /// through its engine's own agent store (``ChatController/outboxDepth()``, SQLite or
    /// PostgreSQL; no connection opened per scrape).
    func metricsText() async -> [UInt8] {
        var figures: [HostMetrics.BotFigures] = []
        for bot in bots {
            // Swiftplex's engine only: a foreign engine's outbox is its own.
            var pending: Int?
            if let controller = bot.controller { pending = try? await controller.outboxDepth() }
            figures.append(HostMetrics.BotFigures(engine: bot.engine, plugins: bot.plugins.statuses(), engineRunning: bot.engineRunning,
                                                  outboxPending: pending))
        }
        return metrics.render(bots: figures, uptime: uptimeSeconds)
    }

    /// One bot in `/api/bots` and `/api/status`.
    func botJSON(_ bot: HostedBot) async -> JSONValue {
        .object([
            ("name", .string(bot.name)),
            ("default", .bool(bot === defaultBot)),
            ("displayName", .string(bot.options.profile.displayName)),
            ("dataPrefix", .string(bot.options.dataPrefix)),
            ("userId", .int(bot.userId)),
            ("engine", .string(bot.api.kind)),
            ("engineRunning", .bool(bot.engineRunning)),
            ("relaysConnected", .int(Int64(relayConnections(bot).connected.count))),
            ("address", bot.address.map(JSONValue.string) ?? .null),
            ("plugins", .int(Int64(bot.plugins.statuses().count))),
            ("eventSubscribers", .int(Int64(bot.events.subscriberCount))),
            ("chatRelay", await bot.relayStatusJSON()),
        ])
    }

    func botsJSON() async -> [JSONValue] {
        var out: [JSONValue] = []
        for b in bots { out.append(await botJSON(b)) }
        return out
    }

    /// The host as a whole; `address`, `plugins` and `eventSubscribers` are the first bot's,
    /// `bots` lists every bot.
    func statusJSON() async -> JSONValue {
        let elapsed = ContinuousClock.now - startedAt
        let relays: [JSONValue] = {
            switch options.relays {
            case .embedded: relayAddress.map { [.string($0.description)] } ?? []
            case let .external(list): list.map { .string($0.description) }
            }
        }()
        return .object([
            ("engineRunning", .bool(engineRunning)),
            ("uptimeSeconds", .int(Int64(elapsed.components.seconds))),
            ("version", .string(SwiftplexVersion.current)),
            ("relays", .array(relays)),
            ("relaysConnected", .int(Int64(relayConnections(defaultBot).connected.count))),
            ("embeddedRelay", .bool(relay != nil)),
            ("address", address.map(JSONValue.string) ?? .null),
            ("plugins", .int(Int64(plugins.statuses().count))),
            ("authFailures", .int(Int64(authFailures))),
            ("eventSubscribers", .int(Int64(events.subscriberCount))),
            ("bots", .array(await botsJSON())),
        ])
    }

    // MARK: Start-up steps

    static func ensureUser(_ api: any ChatCommandRunner, _ profile: BotHostOptions.Profile, logger: Logger) async throws -> Int64 {
        if case let .success(.activeUser(user)) = await api.respond("/user") {
            // A bot's kind is fixed when its user is made: switching would strand its contacts,
            // groups or channels, so a mismatch stops the start with what to do.
            if user.userChatRelay != profile.chatRelay {
                throw BotHostError(profile.chatRelay
                    ? "bot \"\(profile.displayName)\" was created as an ordinary bot and cannot become a chat relay (chat_relay:); give the relay its own data_dir (or bots[].data)"
                    : "bot \"\(profile.displayName)\" was created as a chat relay; keep chat_relay: in its configuration, or give the bot its own data_dir (or bots[].data)")
            }
            return user.userId
        }
        let newUser: JSONValue = .object([
            ("profile", .object([("displayName", .string(profile.displayName)), ("fullName", .string(profile.fullName)),
                                 ("peerType", .string(profile.peerType))])),
            ("pastTimestamp", .bool(false)), ("userChatRelay", .bool(profile.chatRelay)), ("clientService", .bool(false)),
        ])
        let created = await api.respond("/_create user \(newUser.description)")
        guard case let .success(.activeUser(user)) = created else {
            throw BotHostError("cannot create the bot user \"\(profile.displayName)\": \(Self.describe(created))")
        }
        logger.info(profile.chatRelay ? "created the bot user as a chat relay" : "created the bot user", metadata: ["name": "\(profile.displayName)"])
        return user.userId
    }

    static func ensureAddress(_ api: any ChatCommandRunner, userId: Int64, relay: Bool = false, logger: Logger) async throws -> String {
        // A chat relay user's address is its relay address (/r): the engine decides the kind.
        let what = relay ? "relay address" : "contact address"
        var shown = await api.respond("/_show_address \(userId)")
        if case .success(.userContactLink) = shown {} else {
            let created = await api.respond("/_address \(userId)")
            guard case .success(.userContactLinkCreated) = created else {
                throw BotHostError("cannot create the bot's \(what): \(Self.describe(created))")
            }
            shown = await api.respond("/_show_address \(userId)")
            logger.info("created the bot's \(what)")
        }
        guard case let .success(.userContactLink(_, contactLink)) = shown else {
            throw BotHostError("cannot read the bot's \(what): \(Self.describe(shown))")
        }
        let link = contactLink.connLinkContact
        guard let text = link.connShortLink ?? Optional(link.connFullLink), !text.isEmpty else {
            throw BotHostError("the bot's \(what) has no link")
        }
        return text
    }

    /// Runs a start-up command that must answer one of `types` (response tags).
    static func expect(_ api: any ChatCommandRunner, _ command: String, _ types: [String]) async throws {
        let r = await api.respond(command)
        guard case let .success(response) = r, types.contains(response.type.rawValue) else {
            throw BotHostError("\(command) failed: \(describe(r))")
        }
    }

    /// A response in words for an error message (the chat error's type, not user content).
    static func describe(_ r: Result<ChatResponse, ChatFailure>) -> String {
        switch r {
        case let .success(response): "unexpected response \(response.type.rawValue)"
        case let .failure(f): describe(f)
        }
    }

    static func describe(_ f: ChatFailure) -> String { describe(ChatAPI.encode(f.error)) }

    /// A chat error's JSON object in words: its innermost type and message.
    static func describe(_ e: JSONValue) -> String {
        let inner = e["errorType"] ?? e["storeError"] ?? e["agentError"] ?? e
        let message = inner["message"]?.stringValue.map { ": \($0)" } ?? ""
        return "\(inner["type"]?.stringValue ?? "error")\(message)"
    }
}

/// Sends profile updates one at a time, skipping one identical to the last sent.
actor ProfilePublisher {
    private var last: String?

    func publish(_ line: String, _ send: @Sendable (String) async -> Void) async {
        guard line != last else { return }
        last = line
        await send(line)
    }
}
