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

        public init(displayName: String, fullName: String = "", peerType: String = "bot", publishCommands: Bool = true) {
            self.displayName = displayName
            self.fullName = fullName
            self.peerType = peerType
            self.publishCommands = publishCommands
        }
    }

    /// Databases (`bot_chat.db`, `bot_agent.db`, `plugins.db`) and the embedded relay's data.
    public var dataDirectory: URL
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
    /// Relays that peers' links may make the bot dial (see `peer_relays` in docs/configuration.md).
    public var peerRelays: PeerRelays = PeerRelays()
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

/// Why the host could not start.
public struct BotHostError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
