import ChatServer
import Foundation
import NIOConcurrencyHelpers
import PluginHost

/// `ws_api:` — SimpleX's WebSocket API served by the host (see ``ChatWebSocketServer``).
public struct WebSocketAPIOptions: Sendable {
    public var listen: ListenAddress
    /// Required when `listen` is not loopback.
    public var token: String?
    /// The bot it serves (SimpleX's API drives one engine); nil: the first.
    public var bot: String?
    /// Which browsers' requests it answers (by default: none but its own origin).
    public var browsers: BrowserGuard

    public init(listen: ListenAddress, token: String? = nil, bot: String? = nil, browsers: BrowserGuard = BrowserGuard()) {
        self.listen = listen
        self.token = token
        self.bot = bot
        self.browsers = browsers
    }
}

/// `admin:` — the authenticated admin API (see ``AdminServer``).
public struct AdminOptions: Sendable {
    public static let defaultListen = ListenAddress(host: "127.0.0.1", port: 5280)
    public var listen: ListenAddress
    /// Largest request body taken (bigger ones: 413).
    public var maxBodyBytes = 64 << 10
    /// Per-client rate limit: a bucket of `burst` requests refilled at `requestsPerSecond`.
    public var requestsPerSecond: Double = 20
    public var burst = 40
    /// Which browsers' requests it answers: its own dashboard's origin, and those allowed here.
    public var browsers = BrowserGuard()
    /// Reads a bot's plugin list anew for a reload (the `swiftplex` executable re-reads the
    /// config file); nil: a reload re-applies the list the bot runs.
    public var pluginSource: (@Sendable (_ bot: String) async throws -> [PluginSpec])?

    public init(listen: ListenAddress = AdminOptions.defaultListen) { self.listen = listen }
}

/// The admin token file, `<data_dir>/admin.token` (0600): made on first start, rotated by
/// `swiftplex admin-token --rotate`; the running host reads it again when it changes.
public enum AdminToken {
    public static func file(in dataDirectory: URL) -> URL { dataDirectory.appendingPathComponent("admin.token") }

    /// The token, made (and stored 0600) when there is none.
    public static func loadOrCreate(dataDirectory: URL) throws -> String {
        if let t = try? read(dataDirectory: dataDirectory) { return t }
        return try rotate(dataDirectory: dataDirectory)
    }

    public static func read(dataDirectory: URL) throws -> String {
        let text = try String(contentsOf: file(in: dataDirectory), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw BotHostError("\(file(in: dataDirectory).path) is empty") }
        return text
    }

    /// Writes a new token (0600, replacing the file atomically) and returns it.
    @discardableResult
    public static func rotate(dataDirectory: URL) throws -> String {
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let token = BearerToken.generate()
        let target = file(in: dataDirectory)
        let temporary = dataDirectory.appendingPathComponent(".admin.token.\(getpid()).tmp")
        unlink(temporary.path)
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw BotHostError("cannot write \(temporary.path): \(String(cString: strerror(errno)))") }
        let bytes = Array((token + "\n").utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count, rename(temporary.path, target.path) == 0 else {
            unlink(temporary.path)
            throw BotHostError("cannot write \(target.path): \(String(cString: strerror(errno)))")
        }
        return token
    }
}

/// The admin token as the running server checks it: re-read when the file changes.
final class AdminTokenStore: Sendable {
    private struct Cached { var token: String; var modified: Date? }
    private let dataDirectory: URL
    private let cached: NIOLockedValueBox<Cached>

    init(dataDirectory: URL) throws {
        self.dataDirectory = dataDirectory
        let token = try AdminToken.loadOrCreate(dataDirectory: dataDirectory)
        cached = NIOLockedValueBox(Cached(token: token, modified: Self.modified(dataDirectory)))
    }

    static func modified(_ dir: URL) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: AdminToken.file(in: dir).path))?[.modificationDate] as? Date
    }

    var current: String {
        let m = Self.modified(dataDirectory)
        return cached.withLockedValue { c in
            if m != c.modified, let t = try? AdminToken.read(dataDirectory: dataDirectory) { c = Cached(token: t, modified: m) }
            return c.token
        }
    }
}

/// A listening address reported once a server is up, awaited by tests and the executable.
final class ListeningAddress: Sendable {
    private let value = NIOLockedValueBox<(ListenAddress?, [CheckedContinuation<ListenAddress, Never>])>((nil, []))

    func set(_ a: ListenAddress) {
        let waiters = value.withLockedValue { v -> [CheckedContinuation<ListenAddress, Never>] in
            v.0 = a
            defer { v.1 = [] }
            return v.1
        }
        for w in waiters { w.resume(returning: a) }
    }

    func wait() async -> ListenAddress {
        await withCheckedContinuation { c in
            let now = value.withLockedValue { v -> ListenAddress? in
                if let a = v.0 { return a }
                v.1.append(c)
                return nil
            }
            if let now { c.resume(returning: now) }
        }
    }
}
