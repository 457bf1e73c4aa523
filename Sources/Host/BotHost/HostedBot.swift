import Agent
import ChatAPI
import ChatCore
import ChatModel
import ChatServer
import Foundation
import Logging
import NIOConcurrencyHelpers
import PluginHost
import RelayProtocol
import SwiftplexBase
import SwiftplexSQL
import SwiftplexStorage

/// One bot of a ``BotHost``: its own chat engine and databases (`<prefix>_chat.db`,
/// `<prefix>_agent.db` in the host's data directory), profile, contact address, plugins (with
/// their own storage) and event stream. The bots of a host share its relays (an embedded relay,
/// or the configured ones), its admin API and its metrics registry, and nothing else: a plugin of
/// one bot sees only that bot's events and sends through that bot's engine.
public final class HostedBot: Sendable {
    /// The bot's name (`bots[].name`; `bot` for a host configured with a single `bot:`).
    public let name: String
    /// The bot's chat engine, through SimpleX's bot API (``BotEngine``): Swiftplex's own, or SimpleX's.
    public let api: any BotEngine
    public let plugins: PluginManager
    /// The bot's contact address link, when it makes one.
    public let address: String?
    public let userId: Int64
    /// The bot's chat events, for its plugins and the API servers' streams.
    public let events: EventHub<EncodedChatEvent>
    let options: BotOptions
    /// Swiftplex's engine, for its extensions; nil on a foreign engine.
    var controller: ChatController? { api.controller }
    let engine: EngineMetrics
    let engineService: EngineService
    private let logger: Logger
    private let databaseLock: DatabaseLock
    /// The bot's own subscription: every event goes to its plugins and is counted in ``engine``.
    private let pluginEvents: EventHub<EncodedChatEvent>.Subscription
    private let menu = NIOLockedValueBox<[[String: String]]>([])
    private let profileUpdates = ProfilePublisher()
    /// The command menu changed: the plugins' service publishes the profile (newest change only).
    private let menuChanges: AsyncStream<Void>
    private let menuChangeSink: AsyncStream<Void>.Continuation
    private let state = NIOLockedValueBox(State())
    /// Relay mode: the channels the relay serves with their counters, as last read (every 2 s).
    private let relayChannels = NIOLockedValueBox<[RelayChannelCounters]>([])

    private struct State {
        var engineRunning = false
        /// False while an engine in another process cannot be reached.
        var engineReachable = true
        var appliedPlugins: [PluginSpec] = []
    }

    /// A bot's chat and agent databases: SQLite files at `prefix`, or schemas named after the
    /// bot's data prefix in the PostgreSQL database `database`.
    static func engineDatabaseFor(_ options: BotOptions, prefix: String, database: String?) throws -> EngineDatabase {
        guard let database else { return .sqlite(prefix: prefix) }
        return try EngineDatabase.postgres(connection: database, bot: options.dataPrefix)
    }

    /// The prefix of the lock the host holds for a bot (`<prefix>.lock`): its databases' own,
    /// which Swiftplex's engine and `libsimplex.so` would also take — so a bot on a library engine
    /// is locked by the library, and the host takes `<prefix>.host.lock` for the bot's plugin
    /// storage instead.
    static func lockPrefix(_ dataDirectory: URL, _ bot: BotOptions) -> String {
        let prefix = databasePrefix(dataDirectory, prefix: bot.dataPrefix)
        if case .libsimplex = bot.engine { return prefix + ".host" }
        return prefix
    }

    /// The database prefix of a bot's files in a data directory.
    public static func databasePrefix(_ dataDirectory: URL, prefix: String) -> String {
        dataDirectory.appendingPathComponent(prefix).path
    }

    /// Opens the bot's databases (the lock on them already taken), creates its user on first
    /// start, starts chat, makes or reuses its address and loads its plugins. On failure the
    /// controller is closed; the lock stays the caller's to release.
    static func start(_ options: BotOptions, dataDirectory: URL, database: String?, relays: [RelayAddress], runnerExecutable: URL,
                      metrics: HostMetrics, lock: DatabaseLock, logger hostLogger: Logger) async throws -> HostedBot {
        var logger = hostLogger
        logger[metadataKey: "bot"] = "\(options.name)"
        let prefix = databasePrefix(dataDirectory, prefix: options.dataPrefix)
        let engineDatabase: EngineDatabase
        do {
            engineDatabase = try engineDatabaseFor(options, prefix: prefix, database: database)
        } catch {
            throw BotHostError("bot \(options.name): database: \(error)")
        }
        let api = try await openEngine(options, prefix: prefix, database: database, engineDatabase: engineDatabase, relays: relays, logger: logger)
        if !options.engine.isSwiftplex {
            logger.info("the bot runs on a foreign engine", metadata: ["engine": "\(options.engine)"])
            for note in EngineChoice.foreignEngineNotes { logger.notice("\(note)") }
        }
        do {
            let userId = try await BotHost.ensureUser(api, options.profile, logger: logger)
            if !options.engine.isSwiftplex, !relays.isEmpty {
                await offerRelays(relays, to: api, userId: userId, logger: logger)
            }
            try await BotHost.expect(api, "/_start", ["chatStarted", "chatRunning"])
            let address = options.createAddress || options.profile.chatRelay ? try await BotHost.ensureAddress(api, userId: userId, relay: options.profile.chatRelay, logger: logger) : nil
            let storagePath = BotOptions.pluginStorage(dataDirectory, prefix: options.dataPrefix)
            let storage = try await Blocking.run("plugin-storage-open") { try PluginStorage(path: storagePath) }
            let box = NIOLockedValueBox<HostedBot?>(nil)
            // Crash safety: each instance's mark of the last received message it handled is kept
            // in the plugin storage; after a restart it is given the received messages after it,
            // and what it sends while handling one is sent once (idempotency keys).
            // On a foreign engine the same questions go through the bot API (ForeignItemFeed).
            let feed = api.controller.map { controller in
                ReceivedItemFeed(
                    lastItemId: { try await controller.lastChatItemId() },
                    eventsAfter: { after, limit in try await controller.receivedItemEvents(after: after, limit: limit).map { ($0.itemId, $0.event.description) } })
            } ?? ForeignItemFeed(engine: api, userId: userId).feed
            let manager = PluginManager(storage: storage, runKeyedCommand: { line, key in await api.execute(line, idempotencyKey: key).description },
                                        feed: feed, runnerExecutable: runnerExecutable, logger: logger,
                                        commandsChanged: { menu in box.withLockedValue { $0 }?.menuChanged(menu) })
            let bot = HostedBot(options: options, api: api, plugins: manager, address: address, userId: userId,
                                agentLocation: try engineDatabase.agent, engine: metrics.engine(bot: options.name), logger: logger, lock: lock)
            box.withLockedValue { $0 = bot }
            await bot.reload(options.plugins)
            api.observeConnection { [weak bot] change in bot?.engineConnection(change) }
            await bot.redeliverWaitingRequests()
            return bot
        } catch {
            await api.close()
            throw error
        }
    }

    /// The host's relays (`relays:`, or the embedded one) for a foreign engine's user: through
    /// `/_relays`, which Swiftplex's library and `swiftplex-chat` take. SimpleX's own engine does
    /// not know the command and keeps the servers it is configured with; that is logged, not an error.
    private static func offerRelays(_ relays: [RelayAddress], to api: any BotEngine, userId: Int64, logger: Logger) async {
        let line = "/_relays \(userId) " + relays.map(\.description).joined(separator: ",")
        switch await api.respond(line) {
        case .success:
            logger.info("the engine uses the host's relays", metadata: ["relays": "\(relays.count)"])
        case let .failure(f):
            logger.notice("the engine did not take the host's relays (/_relays); it uses the servers it is configured with",
                          metadata: ["error": "\(BotHost.describe(f))"])
        }
    }

    /// Opens the bot's engine: Swiftplex's on its databases, SimpleX's library on the same
    /// prefix (or the host's PostgreSQL database), or a connection to a `simplex-chat -p` process.
    private static func openEngine(_ options: BotOptions, prefix: String, database: String?, engineDatabase: EngineDatabase,
                                   relays: [RelayAddress], logger: Logger) async throws -> any BotEngine {
        switch options.engine {
        case .swiftplex:
            do {
                let limits = ChatLimits(contactRequestsPerWindow: options.requestsPerMinute, contactRequestWindow: .seconds(60),
                                        maxPendingContactRequests: options.maxPendingRequests, contactRequestTTL: options.requestTTL,
                                        maxGroupMembers: options.maxGroupMembers)
                let agentOptions = AgentOptions(allowedHosts: options.peerRelays.allow.map(Set.init), refusePrivateAddresses: options.peerRelays.refusePrivate,
                                                peerRelayTimeout: options.peerRelays.timeout)
                let controller = try await ChatController.open(database: engineDatabase, defaultRelays: relays, logger: logger, limits: limits, agentOptions: agentOptions)
                return EmbeddedEngine(ChatAPI(controller: controller))
            } catch {
                let where_ = if case .sqlite = engineDatabase { "\(prefix)_*.db" } else { "\(engineDatabase)" }
                throw BotHostError("cannot open the databases of bot \(options.name) (\(where_)): \(error)")
            }
        case let .libsimplex(library, key, confirm):
            let location: LibSimplexEngine.Database
            if let database {
                location = .postgres(connection: database, schemaPrefix: options.dataPrefix)
            } else {
                location = .sqlite(prefix: prefix, key: key)
            }
            do {
                return try await LibSimplexEngine.open(library: library, database: location, confirm: confirm, logger: logger)
            } catch {
                throw BotHostError("bot \(options.name): \(error)")
            }
        case let .websocket(url, token):
            do {
                return try await WebSocketEngine.connect(url: url, token: token, logger: logger)
            } catch {
                throw BotHostError("bot \(options.name): \(error)")
            }
        }
    }

    private init(options: BotOptions, api: any BotEngine, plugins: PluginManager, address: String?, userId: Int64,
                 agentLocation: DatabaseLocation, engine: EngineMetrics, logger: Logger, lock: DatabaseLock) {
        self.name = options.name
        self.agentLocation = agentLocation
        self.options = options
        self.api = api
        self.plugins = plugins
        self.address = address
        self.userId = userId
        self.engine = engine
        self.logger = logger
        self.databaseLock = lock
        (menuChanges, menuChangeSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let state = self.state
        engineService = EngineService(engine: api, logger: logger,
                                      running: { r in state.withLockedValue { $0.engineRunning = r }; engine.changes.bump() })
        events = EventHub(source: api.events)
        pluginEvents = events.subscribe()
    }

    /// The engine runs and (an engine in another process) can be reached.
    var engineRunning: Bool { state.withLockedValue { $0.engineRunning && $0.engineReachable } }

    /// The host's connection to an engine in another process dropped or came back. Events the
    /// engine sent in between are gone: the plugins read the received messages they missed back
    /// from the engine, and contact requests that wait in it are given to them again (as at start).
    /// Meanwhile the bot is not ready (`/readyz`, `swiftplex_engine_running`).
    func engineConnection(_ change: EngineConnectionChange) {
        state.withLockedValue { $0.engineReachable = change == .restored }
        engine.changes.bump()
        switch change {
        case .lost:
            logger.warning("the chat engine cannot be reached; the plugins will be given what they miss once it is back")
            plugins.engineConnectionLost()
        case .restored:
            plugins.engineConnectionRestored()
            Task { await self.redeliverWaitingRequests() }
        }
    }
    /// Relay mode: the bot is a chat relay and ``address`` is its relay address (`/r`).
    public var isChatRelay: Bool { options.profile.chatRelay }
    /// The plugin list last applied to this bot.
    public var appliedPlugins: [PluginSpec] { state.withLockedValue { $0.appliedPlugins } }

    /// Contact requests that arrived while no plugin listened (the host was down, or its plugins
    /// had not started) wait in the engine unanswered, and their events are gone: each is given to
    /// the plugins again at start as the `receivedContactRequest` event it came with, so an
    /// auto-accept service decides on it. (With the engine's own auto-accept on the address, none
    /// waits.) The list comes from `/_get chats` (`APIGetChats`), on every engine.
    func redeliverWaitingRequests() async {
        let chats: [JSONValue]
        do { chats = try await ForeignItemFeed.chatList(api, userId: userId) } catch {
            logger.warning("cannot list the contact requests waiting in the engine; those that arrived while the host was down wait for /_accept",
                           metadata: ["error": "\(error)"])
            return
        }
        let waiting = chats.compactMap { chat -> JSONValue? in
            chat["chatInfo"]?["type"]?.stringValue == "contactRequest" ? chat["chatInfo"]?["contactRequest"] : nil
        }.sorted { ($0["contactRequestId"]?.int64Value ?? 0) < ($1["contactRequestId"]?.int64Value ?? 0) }
        guard !waiting.isEmpty else { return }
        let user = (try? await ForeignItemFeed.activeUser(api)) ?? .null
        for request in waiting {
            let event = JSONValue.object([("type", .string("receivedContactRequest")), ("user", user), ("contactRequest", request)])
            plugins.dispatch(type: "receivedContactRequest", json: event.description)
        }
        logger.notice("gave the plugins the contact requests waiting in the engine", metadata: ["requests": "\(waiting.count)"])
    }

    /// Serves the plugins until cancelled: the bot's chat events to them, their timeouts watched,
    /// the profile published when their command menu changes.
    func servePlugins() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.plugins.runWatchdog() }
            group.addTask {
                for await _ in self.menuChanges { await self.publishProfile() }
            }
            if self.isChatRelay {
                group.addTask { await self.watchRelayChannels() }
            }
            group.addTask {
                for await encoded in self.pluginEvents.events {
                    if let event = encoded.event { self.engine.observe(event) }
                    let itemId = encoded.event.map(BotHost.receivedItemId) ?? BotHost.receivedItemId(json: encoded.json)
                    self.plugins.dispatch(type: encoded.type, json: encoded.json, receivedItemId: itemId)
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Applies a new plugin list: changed instances restart (rolling back on failure), others keep running.
    @discardableResult
    public func reload(_ specs: [PluginSpec]) async -> [(name: String, outcome: PluginOutcome)] {
        let results = await plugins.apply(specs)
        state.withLockedValue { $0.appliedPlugins = specs }
        // Relay mode: the engine keeps the channel-relay plugin's policy across restarts (so that
        // no request meets an empty one before the plugin sets it again); without the plugin
        // running, the relay serves every channel.
        // (A configured one that failed to start keeps the last policy: refusing stays the safer side.)
        let configured = specs.contains { URL(fileURLWithPath: $0.path).lastPathComponent.contains("channel-relay") }
            || plugins.statuses().contains { $0.info.name == "channel-relay" }
        if isChatRelay, !configured, let controller,
           await controller.currentRelayPolicy != ChannelRelayPolicy() {
            do {
                _ = try await controller.setRelayPolicy(.object([]))
                logger.info("no channel-relay plugin: the relay serves every channel")
            } catch {
                logger.error("the relay policy could not be cleared: \(error)")
            }
        }
        for (name, outcome) in results where outcome.isFailure {
            logger.error("plugin \(name): \(outcome)")
        }
        await publishProfile()
        return results
    }

    /// Stops every plugin (reporting what each did).
    func stopPlugins() async {
        for s in plugins.statuses() {
            let c = s.stats
            logger.info("plugin \(s.name): \(c.delivered) events handled, \(c.failed) failed, \(c.timedOut) timed out, \(c.dropped) dropped, \(c.crashes) crashes, \(c.restarts) restarts, \(c.protocolErrors) protocol errors, \(c.refusedCalls) refused calls")
        }
        await plugins.stopAll()
    }

    /// After the services stopped: closes the controller (its background work awaited, the agent
    /// stopped, both databases closed) and releases the bot's lock.
    func close() async {
        menuChangeSink.finish()
        await api.close()
        databaseLock.release()
    }

    /// The agent database (for the outbox figure of `/metrics`).
    let agentLocation: DatabaseLocation

    // MARK: Relay mode

    /// Reads the served channels' counters every 2 s for the status (``relayStatusJSON``) and
    /// logs a channel's counters when they changed (at most every 10 s per channel).
    private func watchRelayChannels() async {
        var logged: [Int64: (RelayChannelCounters, ContinuousClock.Instant)] = [:]
        guard let controller else { return }
        while !Task.isCancelled {
            if let channels = try? await controller.relayChannelCounters() {
                relayChannels.withLockedValue { $0 = channels }
                let now = ContinuousClock.now
                for c in channels {
                    if let (last, at) = logged[c.groupId], last == c || now - at < .seconds(10) { continue }
                    logged[c.groupId] = (c, now)
                    logger.info("relay channel", metadata: ["channel": "\(c.name)", "group": "\(c.groupId)", "status": "\(c.relayStatus)",
                                                            "subscribers": "\(c.subscribers)", "forwarded": "\(c.forwarded)",
                                                            "deliveriesPending": "\(c.deliveriesPending)"])
                }
            }
            try? await Task.sleep(for: .seconds(2))
        }
    }

    /// Relay mode's part of the status: the relay address, the policy's refusals and each
    /// served channel's counters; null for an ordinary bot.
    func relayStatusJSON() async -> JSONValue {
        guard isChatRelay, let controller else { return .null }
        let channels = (try? await controller.relayChannelCounters()) ?? relayChannels.withLockedValue { $0 }
        let refused = await controller.relayPolicyRefusals
        return .object([("relayAddress", address.map(JSONValue.string) ?? .null),
                        ("refusedChannels", .int(Int64(refused.channels))), ("refusedJoins", .int(Int64(refused.joins))),
                        ("channels", .array(channels.map(\.json)))])
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
                logger.warning("cannot update the bot's profile", metadata: ["error": "\(BotHost.describe(f))"])
            }
        }
    }
}
