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

/// A running bot: the chat engine (and, with `relays: embedded`, a relay) plus its plugins.
///
/// ```swift
/// let host = try await BotHost.start(options, logger: logger)
/// print(host.address ?? "")           // the bot's contact address
/// await host.run()                     // serves until shutdown() or graceful shutdown
/// ```
/// Start-up is the headless form of SimpleX's onboarding: open and migrate the databases,
/// create the bot user on first start, start chat, create or reuse the contact address, load the
/// plugins, then publish the profile (peer type, command menu, address).
///
/// The host is a `Service`: ``run()`` runs its parts — the embedded relay, the chat engine, the
/// plugins' event dispatch and watchdog — as services of one `ServiceGroup`, and returns once
/// a graceful shutdown (from a parent group, e.g. on SIGTERM, or from ``shutdown()``) has stopped
/// them in reverse order and the databases are closed.
public final class BotHost: Service, Sendable {
    public let api: ChatAPI
    public let plugins: PluginManager
    /// The embedded relay's address, when there is one.
    public let relayAddress: RelayAddress?
    /// The bot's contact address link, when `createAddress` is on.
    public let address: String?
    public let userId: Int64
    private let relay: RelayServer?
    private let controller: ChatController
    private let options: BotHostOptions
    private let logger: Logger
    private let menu = NIOLockedValueBox<[[String: String]]>([])
    private let profileUpdates = ProfilePublisher()
    /// The command menu changed: the plugins' service publishes the profile (newest change only).
    private let menuChanges: AsyncStream<Void>
    private let menuChangeSink: AsyncStream<Void>.Continuation
    /// Where the host is in its life: ``run()`` and ``shutdown()`` each act once.
    private let phase = NIOLockedValueBox(Phase.started)
    /// Finished when the host has stopped and closed its databases.
    private let stopped = Completion()
    private let relayService: EmbeddedRelayService?
    private let engineService: EngineService
    /// The chat events, for the plugins, the WebSocket API's clients and the admin API's stream.
    public let events: EventHub<EncodedChatEvent>
    /// The host's own subscription: every event goes to the plugins and is counted in ``metrics``.
    private let pluginEvents: EventHub<EncodedChatEvent>.Subscription
    /// The Prometheus metrics served at the admin API's `/metrics`.
    let metrics: HostMetrics
    let startedAt = ContinuousClock.now
    private let operations: NIOLockedValueBox<Operations>
    private let adminListening = ListeningAddress()
    private let webSocketListening = ListeningAddress()

    private struct Operations {
        var engineRunning = false
        var authFailures = 0
        var appliedPlugins: [PluginSpec] = []
    }

    private enum Phase {
        case started
        /// ``run()`` runs this group.
        case running(ServiceGroup)
        case stopping
    }
    /// The exclusive lock on the data directory's databases, held for the host's life.
    private let databaseLock: DatabaseLock

    /// Where the bot's databases are (`<prefix>_chat.db`, `<prefix>_agent.db`, `<prefix>.lock`).
    public static func databasePrefix(_ dataDirectory: URL) -> String { dataDirectory.appendingPathComponent("bot").path }

    /// Starts everything up to and including the plugins; events flow once `run()` is called.
    public static func start(_ options: BotHostOptions, logger: Logger) async throws -> BotHost {
        let fm = FileManager.default
        try fm.createDirectory(at: options.dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        chmod(options.dataDirectory.path, 0o700)
        // One host per data directory: a second would encrypt with the same chain keys (and
        // fight over the embedded relay's store). Refused at once with ``DatabaseLocked``.
        let databaseLock = try DatabaseLock.acquire(prefix: Self.databasePrefix(options.dataDirectory))
        do { try validateOperations(options) } catch {
            databaseLock.release()
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
                throw BotHostError("cannot start the embedded relay on \(host):\(port): \(error)")
            }
            relays = [relay!.address]
            logger.info("embedded relay listening", metadata: ["address": "\(relay!.address)"])
        case let .external(list):
            relays = list
        }

        let controller: ChatController
        do {
            let limits = ChatLimits(contactRequestsPerWindow: options.requestsPerMinute, contactRequestWindow: .seconds(60),
                                    maxPendingContactRequests: options.maxPendingRequests, contactRequestTTL: options.requestTTL)
            let agentOptions = AgentOptions(allowedHosts: options.peerRelays.allow.map(Set.init), refusePrivateAddresses: options.peerRelays.refusePrivate,
                                            peerRelayTimeout: options.peerRelays.timeout)
            controller = try ChatController(prefix: Self.databasePrefix(options.dataDirectory), defaultRelays: relays, logger: logger,
                                            limits: limits, agentOptions: agentOptions)
        } catch {
            await relay?.shutdown()
            throw BotHostError("cannot open the bot's databases in \(options.dataDirectory.path): \(error)")
        }
        let api = ChatAPI(controller: controller)
        do {
            let userId = try await Self.ensureUser(api, options.profile, logger: logger)
            try await Self.expect(api, "/_start", ["chatStarted", "chatRunning"])
            let address = options.createAddress ? try await Self.ensureAddress(api, userId: userId, logger: logger) : nil
            let storage = try PluginStorage(path: options.dataDirectory.appendingPathComponent("plugins.db"))
            let box = NIOLockedValueBox<BotHost?>(nil)
            // Crash safety: each instance's mark of the last received message it handled is kept
            // in plugins.db; after a restart it is given the received messages after it, and what
            // it sends while handling one is sent once (idempotency keys), however often it is replayed.
            let feed = ReceivedItemFeed(
                lastItemId: { try await controller.lastChatItemId() },
                eventsAfter: { after, limit in try await controller.receivedItemEvents(after: after, limit: limit).map { ($0.itemId, $0.event.description) } })
            let manager = PluginManager(storage: storage, runKeyedCommand: { line, key in await api.execute(line, idempotencyKey: key).description },
                                        feed: feed, runnerExecutable: options.runnerExecutable, logger: logger,
                                        commandsChanged: { menu in box.withLockedValue { $0 }?.menuChanged(menu) })
            let host = BotHost(api: api, controller: controller, plugins: manager, relayAddress: relay?.address, address: address,
                               userId: userId, relay: relay, options: options, logger: logger, databaseLock: databaseLock)
            box.withLockedValue { $0 = host }
            await host.reload(options.plugins)
            return host
        } catch {
            await controller.close()
            await relay?.shutdown()
            databaseLock.release()
            throw error
        }
    }

    private init(api: ChatAPI, controller: ChatController, plugins: PluginManager, relayAddress: RelayAddress?, address: String?,
                 userId: Int64, relay: RelayServer?, options: BotHostOptions, logger: Logger, databaseLock: DatabaseLock) {
        self.databaseLock = databaseLock
        self.api = api
        self.controller = controller
        self.plugins = plugins
        self.relayAddress = relayAddress
        self.address = address
        self.userId = userId
        self.relay = relay
        self.options = options
        self.logger = logger
        (menuChanges, menuChangeSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        relayService = relay.map { EmbeddedRelayService(relay: $0) }
        let flag = NIOLockedValueBox(Operations())
        operations = flag
        let metrics = HostMetrics(registry: options.metricsRegistry ?? PrometheusCollectorRegistry())
        self.metrics = metrics
        engineService = EngineService(controller: controller, api: api, logger: logger,
                                      running: { r in flag.withLockedValue { $0.engineRunning = r }; metrics.changes.bump() })
        events = EventHub(source: api.encodedEvents)
        pluginEvents = events.subscribe()
    }

    /// The host's services, in start order (the group stops them in reverse).
    private func serviceGroup() -> ServiceGroup {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let relayService { services.append(.init(service: relayService)) }
        // An engine that fails stops the host (gracefully: plugins first), rather than leaving
        // plugins running with no events.
        services.append(.init(service: engineService, successTerminationBehavior: .gracefullyShutdownGroup,
                              failureTerminationBehavior: .gracefullyShutdownGroup))
        services.append(.init(service: EventHubService(hub: events)))
        services.append(.init(service: PluginsService(host: self)))
        services.append(contentsOf: operationServices().map { .init(service: $0) })
        return ServiceGroup(configuration: .init(services: services, logger: logger))
    }

    /// Runs the host's services — embedded relay, chat engine, plugins — until a graceful
    /// shutdown (from a parent `ServiceGroup`, or ``shutdown()``); then stops them (plugins,
    /// engine, relay, in that order), closes the databases and releases the data directory.
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

    /// Serves the plugins until cancelled: chat events to them, their timeouts watched, the
    /// profile published when their command menu changes.
    func servePlugins() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.plugins.runWatchdog() }
            group.addTask {
                for await _ in self.menuChanges { await self.publishProfile() }
            }
            group.addTask {
                for await encoded in self.pluginEvents.events {
                    self.metrics.observe(encoded.event)
                    self.plugins.dispatch(type: encoded.event.tag, json: encoded.json, receivedItemId: Self.receivedItemId(encoded.event))
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// The newest received chat item a `newChatItems` event announces (nil for any other event).
    static func receivedItemId(_ event: ChatEvent) -> Int64? {
        guard case let .newChatItems(new) = event else { return nil }
        return new.chatItems.lazy.map(\.chatItem).filter { $0.chatDir == .directRcv }.map(\.meta.itemId).max()
    }

    /// Applies a new plugin list: changed instances restart (rolling back on failure), others keep running.
    @discardableResult
    public func reload(_ specs: [PluginSpec]) async -> [(name: String, outcome: PluginOutcome)] {
        let results = await plugins.apply(specs)
        operations.withLockedValue { $0.appliedPlugins = specs }
        for (name, outcome) in results where outcome.isFailure {
            logger.error("plugin \(name): \(outcome)")
        }
        await publishProfile()
        return results
    }

    /// Stops plugins, the engine and the embedded relay, closes the databases and releases the
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
            await stopPlugins()
            await engineService.stop()
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

    /// Stops every plugin (reporting what each did).
    func stopPlugins() async {
        for s in plugins.statuses() {
            let c = s.stats
            logger.info("plugin \(s.name): \(c.delivered) events handled, \(c.failed) failed, \(c.timedOut) timed out, \(c.dropped) dropped, \(c.crashes) crashes, \(c.restarts) restarts, \(c.protocolErrors) protocol errors, \(c.refusedCalls) refused calls")
        }
        await plugins.stopAll()
    }

    /// After the services stopped: closes the controller (its background work awaited, the
    /// agent stopped, both databases closed) and releases the data directory's lock.
    private func close() async {
        phase.withLockedValue { $0 = .stopping }  // a later run() only waits
        menuChangeSink.finish()
        await controller.close()
        databaseLock.release()
        stopped.finish()
    }

    // MARK: Operations (WebSocket API, admin API)

    /// The servers of `ws_api:` and `admin:`, when configured (a bad setting — a WebSocket API
    /// beyond loopback without a token — was refused by ``start(_:logger:)``).
    private func operationServices() -> [any Service] {
        var services: [any Service] = []
        if let ws = options.webSocketAPI {
            do {
                services.append(try ChatWebSocketServer(api: api, events: events, listen: ws.listen, token: ws.token, logger: logger,
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

    var engineRunning: Bool { operations.withLockedValue { $0.engineRunning } }
    func countAuthFailure() {
        operations.withLockedValue { $0.authFailures += 1 }
        metrics.countAuthFailure()
    }
    public var authFailures: Int { operations.withLockedValue { $0.authFailures } }
    /// The plugin list last applied.
    public var appliedPlugins: [PluginSpec] { operations.withLockedValue { $0.appliedPlugins } }

    var uptimeSeconds: Double {
        let elapsed = ContinuousClock.now - startedAt
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// The hosts of the bot's own relays (where its queues are), as the agent names them in
    /// `hostConnected`; a peer's relay the bot only sends to is not among them.
    var ownRelayHosts: Set<String> {
        switch options.relays {
        case .embedded: Set(relayAddress.map { [$0.host] } ?? [])
        case let .external(list): Set(list.map(\.host))
        }
    }

    /// The bot's own relays the engine is connected to now, and those it lost and has not got back.
    var relayConnections: HostMetrics.RelayState {
        let own = ownRelayHosts
        let all = metrics.relayState
        return HostMetrics.RelayState(connected: all.connected.intersection(own), lost: all.lost.intersection(own))
    }

    /// `/readyz`: the engine runs, none of the bot's own relays it was connected to is down, and —
    /// when the bot has an address, whose queue the agent subscribes at start — at least one of
    /// them is connected. Peers' relays (dialled to send, dropped when idle) do not count.
    public func readiness() -> (ready: Bool, json: JSONValue) {
        let running = engineRunning
        let relays = relayConnections
        let ready = Self.isReady(engineRunning: running, hasAddress: address != nil, ownRelays: relays)
        return (ready, .object([("ready", .bool(ready)), ("engineRunning", .bool(running)),
                                ("relaysConnected", .int(Int64(relays.connected.count))),
                                ("relaysDown", .array(relays.lost.sorted().map(JSONValue.string)))]))
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

    /// The Prometheus text of ``metrics``, its scrape-time values read now.
    func metricsText() -> [UInt8] {
        metrics.render(plugins: plugins.statuses(), engineRunning: engineRunning, uptime: uptimeSeconds,
                       agentDatabase: URL(fileURLWithPath: Self.databasePrefix(options.dataDirectory) + "_agent.db"))
    }

    func statusJSON() -> JSONValue {
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
            ("relaysConnected", .int(Int64(relayConnections.connected.count))),
            ("embeddedRelay", .bool(relay != nil)),
            ("address", address.map(JSONValue.string) ?? .null),
            ("plugins", .int(Int64(plugins.statuses().count))),
            ("authFailures", .int(Int64(authFailures))),
            ("eventSubscribers", .int(Int64(events.subscriberCount))),
        ])
    }

    // MARK: Profile

    private func menuChanged(_ commands: [[String: String]]) {
        menu.withLockedValue { $0 = commands }
        menuChangeSink.yield()
    }

    /// Puts the peer type, the command menu and the address into the bot's profile when they changed.
    func publishProfile() async {
        var preferences: [(String, JSONValue)] = []
        if options.profile.publishCommands {
            let commands = menu.withLockedValue { $0 }.map { c -> JSONValue in
                .object([("type", .string("command")), ("keyword", .string(c["keyword"] ?? "")), ("label", .string(c["label"] ?? ""))])
            }
            if !commands.isEmpty { preferences.append(("commands", .array(commands))) }
        }
        var profile: [(String, JSONValue)] = [
            ("displayName", .string(options.profile.displayName)),
            ("fullName", .string(options.profile.fullName)),
            ("peerType", .string(options.profile.peerType)),
            ("preferences", .object(preferences)),
        ]
        if let address { profile.append(("contactLink", .string(address))) }
        let line = "/_profile \(userId) \(JSONValue.object(profile).description)"
        await profileUpdates.publish(line) { [api, logger] line in
            if case let .failure(f) = await api.respond(line) {
                logger.warning("cannot update the bot's profile", metadata: ["error": "\(Self.describe(f))"])
            }
        }
    }

    // MARK: Start-up steps

    static func ensureUser(_ api: ChatAPI, _ profile: BotHostOptions.Profile, logger: Logger) async throws -> Int64 {
        if case let .success(.activeUser(user)) = await api.respond("/user") { return user.userId }
        let newUser: JSONValue = .object([
            ("profile", .object([("displayName", .string(profile.displayName)), ("fullName", .string(profile.fullName)),
                                 ("peerType", .string(profile.peerType))])),
            ("pastTimestamp", .bool(false)), ("userChatRelay", .bool(false)), ("clientService", .bool(false)),
        ])
        let created = await api.respond("/_create user \(newUser.description)")
        guard case let .success(.activeUser(user)) = created else {
            throw BotHostError("cannot create the bot user \"\(profile.displayName)\": \(Self.describe(created))")
        }
        logger.info("created the bot user", metadata: ["name": "\(profile.displayName)"])
        return user.userId
    }

    static func ensureAddress(_ api: ChatAPI, userId: Int64, logger: Logger) async throws -> String {
        var shown = await api.respond("/_show_address \(userId)")
        if case .success(.userContactLink) = shown {} else {
            let created = await api.respond("/_address \(userId)")
            guard case .success(.userContactLinkCreated) = created else {
                throw BotHostError("cannot create the bot's contact address: \(Self.describe(created))")
            }
            shown = await api.respond("/_show_address \(userId)")
            logger.info("created the bot's contact address")
        }
        guard case let .success(.userContactLink(_, contactLink)) = shown else {
            throw BotHostError("cannot read the bot's contact address: \(Self.describe(shown))")
        }
        let link = contactLink.connLinkContact
        guard let text = link.connShortLink ?? Optional(link.connFullLink), !text.isEmpty else {
            throw BotHostError("the bot's contact address has no link")
        }
        return text
    }

    /// Runs a start-up command that must answer one of `types` (response tags).
    static func expect(_ api: ChatAPI, _ command: String, _ types: [String]) async throws {
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
