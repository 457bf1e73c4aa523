import Foundation

/// Which chat engine a bot runs on (`engine:` in the configuration).
public enum EngineChoice: Sendable, Equatable, CustomStringConvertible {
    /// Swiftplex's engine in the host process (the default).
    case swiftplex
    /// A `libsimplex.so` at `library`, its data under the bot's prefix in the data directory (or
    /// the host's PostgreSQL database); `key` encrypts SQLite files; `confirmMigrations` is what
    /// `chat_migrate_init` may do by itself (`yesUp`, `yesUpDown`, `error`).
    case libsimplex(library: String, key: String = "", confirmMigrations: String = "yesUp")
    /// A `simplex-chat -p PORT` process at `url`, with an optional bearer token.
    case websocket(url: String, token: String?)

    public var kind: String {
        switch self {
        case .swiftplex: "swiftplex"
        case .libsimplex: "libsimplex"
        case .websocket: "websocket"
        }
    }

    public var description: String {
        switch self {
        case .swiftplex: "swiftplex (embedded)"
        case let .libsimplex(library, _, _): "libsimplex (\(library))"
        case let .websocket(url, _): "websocket (\(url))"
        }
    }

    /// Whether this is Swiftplex's own engine, with its extensions.
    public var isSwiftplex: Bool { self == .swiftplex }

    /// What works differently on a foreign engine, for the start-up log and `check-config`.
    public static let foreignEngineNotes = [
        "after a crash or a lost connection to the engine, plugins get the received messages they missed read back through the bot API: at least once (the engine keeps no idempotency keys, so an answer sent just before may be sent again)",
        "/metrics has no outbox gauge for this bot",
    ]
}
