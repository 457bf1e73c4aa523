/// The bot host's configuration (`swiftplex run --config FILE`), typed, with defaults applied
/// and relative paths resolved against the config file's directory.
///
/// Read it with ``load(path:environment:)``; every problem in the file comes back at once in
/// ``ConfigErrors`` as `FILE:LINE:COLUMN: message`. The format is documented in
/// `docs/configuration.md`.
public struct HostConfiguration: Sendable, Hashable {
    /// The config file as it was named (used in messages).
    public var file: String
    /// The absolute directory of the config file; relative paths in it resolve against this.
    public var directory: String

    /// Absolute path of the host's data directory (databases, embedded relay, plugin storage).
    public var dataDirectory: String
    public var logLevel: LogLevel
    /// The first bot's profile (the only bot's, with `bot:`); ``bots`` holds every bot.
    public var bot: Bot
    public var relays: Relays
    /// Where the embedded relay listens; used only when ``relays`` is ``Relays/embedded``.
    public var embeddedRelay: EmbeddedRelay
    /// The first bot's `address:`.
    public var address: Address
    /// Which relays named in peers' links (contact requests, invitations) the bot may dial.
    public var peerRelays: PeerRelays
    /// Absolute directories searched, in order, for plugins given by name.
    public var pluginDirectories: [String]
    /// The first bot's plugin entries.
    public var plugins: [Plugin]
    /// Every bot of the host, in file order: the entries of `bots:`, or the one bot of `bot:`,
    /// `address:` and `plugins:` (named `bot`, data prefix `bot`).
    public var bots: [BotEntry] = []
    /// Things that are allowed but probably not meant (a setting that has no effect), for
    /// `swiftplex check-config` to show.
    public var warnings: [ConfigProblem]
    /// `ws_api:` (SimpleX's WebSocket API), when present.
    public var webSocketAPI: WebSocketAPI? = nil
    /// `admin:` (the admin API; off unless `admin:` is given).
    public var admin = Admin()
    /// `log: {format: …}`.
    public var logFormat = LogFormat.text
    /// `database:`: a PostgreSQL connection string; every bot keeps its chat and agent data in
    /// schemas of that database (`<schema>_<data>_chat_schema`, …). Absent: SQLite files in
    /// ``dataDirectory``.
    public var database: String? = nil

    // The defaults, in one place; docs/configuration.md and the starter template repeat them.
    public static let defaultDataDirectory = ".swiftplex/bot"
    public static let defaultListenHost = "127.0.0.1"
    public static let defaultListenPort = 5223
    public static let defaultPluginTimeout = Duration.seconds(5)
    public static let defaultQueueLimit = 1000
    public static let queueLimitRange = 1...1_000_000
    public static let defaultBackoff = Backoff(initial: .seconds(1), max: .seconds(60))
    public static let defaultPeerRelayTimeout = Duration.seconds(30)

    /// `peer_relays`: a peer's link names the relay the bot then dials (to accept a contact
    /// request, to join an invitation).
    public struct PeerRelays: Sendable, Hashable {
        /// Hosts (`host` or `host:port`) links may name; nil: any.
        public var allow: [String]?
        /// Refuse relays at loopback, private, link-local and other non-public addresses.
        public var refusePrivate: Bool
        /// The most a join waits on a peer's relay.
        public var timeout: Duration

        public init(allow: [String]? = nil, refusePrivate: Bool = false, timeout: Duration = HostConfiguration.defaultPeerRelayTimeout) {
            self.allow = allow
            self.refusePrivate = refusePrivate
            self.timeout = timeout
        }
    }

    /// The levels of swift-log's `Logger.Level`, by the same names.
    public enum LogLevel: String, Sendable, Hashable, CaseIterable {
        case trace, debug, info, notice, warning, error, critical
    }

    /// `log.format`: how log lines are written to standard error.
    public enum LogFormat: String, Sendable, Hashable, CaseIterable {
        /// swift-log's plain text lines (the default).
        case text
        /// `key=value` pairs, one record a line.
        case logfmt
        /// One JSON object a line.
        case json
    }

    public struct Bot: Sendable, Hashable {
        /// Trimmed, non-empty, not starting with `@` or `#` (the engine's rules for a user name).
        public var displayName: String
        public var fullName: String
        public var peerType: PeerType
        /// Put the plugins' commands into the bot profile's command menu.
        public var publishCommands: Bool
    }

    /// One bot of the host: its own engine and data files, profile, address and plugins.
    public struct BotEntry: Sendable, Hashable {
        /// The bot's name, `[a-z0-9][a-z0-9_-]{0,63}`, unique in the host (`bot` for a `bot:` config).
        public var name: String
        /// Its files' prefix in the data directory (`<data>_chat.db`, `<data>_agent.db`, …),
        /// unique in the host; `bot_<name>` unless given (`bot` for a `bot:` config).
        public var data: String
        public var profile: Bot
        public var address: Address
        /// `groups:`: limits on the groups the bot hosts.
        public var groups: Groups = Groups()
        public var plugins: [Plugin]
        /// `chat_relay:`: the bot runs as a chat relay user (relay mode); nil for an ordinary bot.
        public var chatRelay: ChatRelay? = nil
        /// `engine:`: the chat engine the bot runs on.
        public var engine: Engine = .swiftplex
        /// Where its keys are: `""` for a `bot:` config, `bots[N].` for an entry of `bots:`
        /// (messages about a plugin's `config:` name `<keyPath>plugins[M].config`).
        public var keyPath: String
        /// Where the entry starts.
        public var mark: ConfigMark
    }

    /// `engine:` — which chat engine a bot runs on (docs/simplex-network.md).
    public enum Engine: Sendable, Hashable {
        /// Swiftplex's engine in the host (the default).
        case swiftplex
        /// SimpleX's (or Swiftplex's) `libsimplex.so` at `library` (resolved against the
        /// configuration's directory), loaded at run time.
        case libsimplex(library: String, key: String, confirmMigrations: String)
        /// A `simplex-chat -p PORT` process at `url`.
        case websocket(url: String, token: String?)
    }

    /// Relay mode (`chat_relay:`): the bot is a chat relay user — created with `userChatRelay`,
    /// its address a relay address (`/r`) that channel owners invite it through.
    public struct ChatRelay: Sendable, Hashable {
        /// Print the relay address as a QR code too.
        public var printQR: Bool = false
        public init(printQR: Bool = false) { self.printQR = printQR }
    }

    /// The name and data prefix of the one bot of a `bot:` configuration.
    public static let defaultBotName = "bot"

    public enum PeerType: String, Sendable, Hashable, CaseIterable {
        case bot, human
    }

    public enum Relays: Sendable, Hashable {
        /// Run a relay inside the host (see ``EmbeddedRelay``).
        case embedded
        /// External relays, as `smp://<fingerprint>@host[:port]` addresses (syntax checked only;
        /// the host parses them fully).
        case external([String])
    }

    public struct EmbeddedRelay: Sendable, Hashable {
        public var host: String
        /// 1...65535, or 0 for an ephemeral port (tests).
        public var port: Int
        /// The host name put into the relay's address instead of ``host``.
        public var publicHost: String?
    }

    public struct Address: Sendable, Hashable {
        /// Create the bot's contact address at start, or reuse the existing one.
        public var enabled: Bool
        /// Print the address as a QR code in the terminal as well as a link.
        public var printQR: Bool
        /// Contact requests taken per minute; more are dropped unseen.
        public var requestsPerMinute: Int = HostConfiguration.defaultRequestsPerMinute
        /// Requests waiting for an answer at most; more are dropped unseen.
        public var maxPendingRequests: Int = HostConfiguration.defaultMaxPendingRequests
        /// A request unanswered this long is rejected and forgotten.
        public var requestTTL: Duration = HostConfiguration.defaultRequestTTL
    }

    /// `groups:` of a bot.
    public struct Groups: Sendable, Hashable {
        /// `max_members`: members a group the bot hosts takes, the bot included (2…100,000).
        public var maxMembers: Int = HostConfiguration.defaultMaxGroupMembers
        public init(maxMembers: Int = HostConfiguration.defaultMaxGroupMembers) { self.maxMembers = maxMembers }
    }

    public static let defaultMaxGroupMembers = 1000
    public static let defaultRequestsPerMinute = 30
    public static let defaultMaxPendingRequests = 1000
    public static let defaultRequestTTL = Duration.seconds(168 * 3600)

    /// One `plugins:` entry. Several entries may load the same library with different configs.
    public struct Plugin: Sendable, Hashable {
        /// Unique instance name, `[a-z0-9][a-z0-9_-]{0,63}`.
        public var name: String
        public var path: PluginPath
        public var enabled: Bool
        public var isolation: Isolation
        /// Per-event handler timeout.
        public var timeout: Duration
        /// Events queued for this plugin before new ones are dropped.
        public var queueLimit: Int
        /// Restart delays for an isolated plugin that crashed: doubling from `initial` to `max`.
        public var restartBackoff: Backoff
        /// Bounds on what an isolated child may make the host hold or do (nil: the host's default).
        public var isolationLimits = IsolationLimits()
        /// The raw `config:` mapping with positions (an empty mapping when absent), for
        /// ``PluginConfigSchema/validate(_:file:path:)`` once the plugin's schema is known.
        public var config: ConfigNode
        /// Where the entry starts, for messages about the plugin that come later (load failures).
        public var mark: ConfigMark
    }

    /// `isolation_limits:` of a plugin entry; each nil takes the host's default (see
    /// docs/configuration.md).
    public struct IsolationLimits: Sendable, Hashable {
        public var maxFrameBytes: Int?
        public var maxOutputLineBytes: Int?
        public var maxConcurrentCalls: Int?
        public var maxPendingInputBytes: Int?
        public init(maxFrameBytes: Int? = nil, maxOutputLineBytes: Int? = nil, maxConcurrentCalls: Int? = nil, maxPendingInputBytes: Int? = nil) {
            self.maxFrameBytes = maxFrameBytes
            self.maxOutputLineBytes = maxOutputLineBytes
            self.maxConcurrentCalls = maxConcurrentCalls
            self.maxPendingInputBytes = maxPendingInputBytes
        }
    }

    /// How a plugin entry names its library.
    public enum PluginPath: Sendable, Hashable {
        /// A path (it contained `/` or ended in `.so`), made absolute against the config's directory.
        case file(String)
        /// A plugin name, looked up by the host as `lib<name>.so` in the plugin directories.
        case name(String)

        /// The shared object's file name the host looks for: `lib<name>.so`, or the file's own name.
        public var libraryFileName: String {
            switch self {
            case let .name(n): "lib\(n).so"
            case let .file(p): String(p.split(separator: "/").last ?? Substring(p))
            }
        }
    }

    public enum Isolation: String, Sendable, Hashable, CaseIterable {
        case inProcess = "in-process"
        case process
    }

    public struct Backoff: Sendable, Hashable {
        public var initial: Duration
        public var max: Duration

        public init(initial: Duration, max: Duration) {
            self.initial = initial
            self.max = max
        }
    }
}
