import SwiftplexBase
import Foundation
import PluginHost
import Prometheus
import RelayProtocol

/// Everything a bot host needs to run, already validated (the `swiftplex` executable builds it
/// from the YAML configuration; tests and the plugin test harness build it directly).
public struct BotHostOptions: Sendable {
    public enum Relays: Sendable {
        /// Run a relay inside the host, its data under `<data dir>/relay`.
        case embedded(host: String, port: Int, publicHost: String?)
        /// Use these relays.
        case external([RelayAddress])
    }

    public struct Profile: Sendable, Equatable {
        public var displayName: String
        public var fullName: String
        public var peerType: String
        /// Put the plugins' commands in the profile's command menu.
        public var publishCommands: Bool
        /// Relay mode: the bot is a chat relay user (`userChatRelay`), its address a relay
        /// address (`/r`). Fixed when the user is created: a bot is never switched.
        public var chatRelay = false

        public init(displayName: String, fullName: String = "", peerType: String = "bot", publishCommands: Bool = true) {
            self.displayName = displayName
            self.fullName = fullName
            self.peerType = peerType
            self.publishCommands = publishCommands
        }
    }

    /// Databases (`bot_chat.db`, `bot_agent.db`, `plugins.db`; other bots' under their own
    /// ``BotOptions/dataPrefix``), the embedded relay's data and the admin token.
    public var dataDirectory: URL
    /// The first (default) bot's name: the bot the admin API's calls without `?bot=` act on.
    public var botName = BotOptions.defaultName
    /// A PostgreSQL connection string for every bot's chat and agent data (schemas
    /// `<schema>_<dataPrefix>_chat_schema` and `…_agent_schema`, `<schema>` from the string or
    /// `swiftplex`); nil keeps them as SQLite files in ``dataDirectory``.
    public var database: String?
    /// The first bot's file prefix in ``dataDirectory`` (`bot`: `bot_chat.db`, `bot_agent.db`, `plugins.db`).
    public var dataPrefix = BotOptions.defaultName
    /// The first bot's chat engine (`engine:`; default Swiftplex's, embedded).
    public var engine: EngineChoice = .swiftplex
    public var profile: Profile
    public var relays: Relays
    /// Create (or reuse) the bot's contact address at start.
    public var createAddress: Bool
    public var plugins: [PluginSpec]
    /// The `swiftplex-plugin-runner` binary for `isolation: process`.
    public var runnerExecutable: URL
    /// Contact requests to the address: taken per minute, waiting at most, and how long one may
    /// wait unanswered (the engine's `ChatLimits`).
    public var requestsPerMinute = 30
    public var maxPendingRequests = 1000
    public var requestTTL = Duration.seconds(168 * 3600)
    /// Members a group the first bot hosts takes, the bot included (`groups.max_members`).
    public var maxGroupMembers = 1000
    /// Relays that peers' links may make the bot dial (see `peer_relays` in docs/configuration.md).
    public var peerRelays: PeerRelays = PeerRelays()
    /// The host's further bots (`bots:` in the configuration), each with its own engine, data
    /// files, profile, address and plugins; the fields above describe the first one.
    public var otherBots: [BotOptions] = []
    /// SimpleX's WebSocket API (`ws_api:`); nil: not served.
    public var webSocketAPI: WebSocketAPIOptions?
    /// The admin API (`admin:`); nil: not served.
    public var admin: AdminOptions?
    /// Where the host's metrics are kept (served at the admin API's `/metrics`). The `swiftplex`
    /// executable passes the registry it bootstrapped swift-metrics with, so the embedded relay's
    /// own metrics are served beside the host's; nil: a registry of the host's own.
    public var metricsRegistry: PrometheusCollectorRegistry?

    public struct PeerRelays: Sendable {
        /// Hosts (`host` or `host:port`) links may name; nil: any.
        public var allow: [String]?
        /// Refuse relays at loopback, private, link-local and other non-public addresses.
        public var refusePrivate: Bool
        /// The most a join waits on a peer's relay.
        public var timeout: Duration

        public init(allow: [String]? = nil, refusePrivate: Bool = false, timeout: Duration = .seconds(30)) {
            self.allow = allow
            self.refusePrivate = refusePrivate
            self.timeout = timeout
        }
    }

    public init(dataDirectory: URL, profile: Profile, relays: Relays, createAddress: Bool = true,
                plugins: [PluginSpec] = [], runnerExecutable: URL) {
        self.dataDirectory = dataDirectory
        self.profile = profile
        self.relays = relays
        self.createAddress = createAddress
        self.plugins = plugins
        self.runnerExecutable = runnerExecutable
    }
}

extension BotHostOptions {
    /// Every bot of the host, the first (described by the top-level fields) first.
    public var bots: [BotOptions] {
        var first = BotOptions(name: botName, dataPrefix: dataPrefix, profile: profile, createAddress: createAddress, plugins: plugins)
        first.requestsPerMinute = requestsPerMinute
        first.maxPendingRequests = maxPendingRequests
        first.requestTTL = requestTTL
        first.maxGroupMembers = maxGroupMembers
        first.peerRelays = peerRelays
        first.engine = engine
        return [first] + otherBots
    }
}

/// One bot of a host: its own engine (users, contacts, groups in its own databases), profile,
/// contact address and plugins.
public struct BotOptions: Sendable {
    /// The name of the only bot of a host configured with `bot:`, and its file prefix.
    public static let defaultName = "bot"
    /// The bot's name in the admin API (`?bot=`), metrics (`bot` label) and logs.
    public var name: String
    /// Its files in the data directory: `<prefix>_chat.db`, `<prefix>_agent.db`, `<prefix>.lock`
    /// and the plugins' storage (`plugins.db` for the prefix `bot`, else `<prefix>_plugins.db`).
    public var dataPrefix: String
    public var profile: BotHostOptions.Profile
    public var createAddress: Bool
    public var plugins: [PluginSpec]
    public var requestsPerMinute = 30
    public var maxPendingRequests = 1000
    public var requestTTL = Duration.seconds(168 * 3600)
    /// Members a group the bot hosts takes, the bot included (`groups.max_members`).
    public var maxGroupMembers = 1000
    public var peerRelays = BotHostOptions.PeerRelays()
    /// The bot's chat engine.
    public var engine: EngineChoice = .swiftplex

    public init(name: String, dataPrefix: String? = nil, profile: BotHostOptions.Profile, createAddress: Bool = true, plugins: [PluginSpec] = []) {
        self.name = name
        self.dataPrefix = dataPrefix ?? "bot_\(name)"
        self.profile = profile
        self.createAddress = createAddress
        self.plugins = plugins
    }

    /// The plugins' storage file of a bot with this prefix.
    public static func pluginStorage(_ dataDirectory: URL, prefix: String) -> URL {
        dataDirectory.appendingPathComponent(prefix == defaultName ? "plugins.db" : "\(prefix)_plugins.db")
    }
}

/// Why the host could not start.
public struct BotHostError: CodedError {
    public enum Code: Sendable, Hashable { case cannotStart }
    public var code: Code { .cannotStart }
    public let message: String
    init(_ message: String) { self.message = message }
}
