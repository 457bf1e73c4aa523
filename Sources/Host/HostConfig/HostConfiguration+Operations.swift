import SwiftplexBase

/// `ws_api:` and `admin:` — the host's WebSocket API and admin API (docs/operations.md).
extension HostConfiguration {
    public static let defaultWebSocketAPIPort = 5225
    public static let defaultAdminPort = 5280

    /// `ws_api:` — SimpleX's WebSocket API (`simplex-chat -p`) served by the host.
    public struct WebSocketAPI: Sendable, Hashable {
        public var host = HostConfiguration.defaultListenHost
        public var port = HostConfiguration.defaultWebSocketAPIPort
        /// Required when `host` is not loopback.
        public var token: String?
        /// The bot it serves (`ws_api.bot`); nil: the first.
        public var bot: String?
        /// Host names taken besides loopback and the listen address (`ws_api.allowed_hosts`).
        public var allowedHosts: [String] = []
        /// Browser origins allowed to use the API (`ws_api.allowed_origins`); none by default.
        public var allowedOrigins: [String] = []
        public init() {}
    }

    /// `admin:` — the authenticated admin API.
    public struct Admin: Sendable, Hashable {
        public var enabled = false
        public var host = HostConfiguration.defaultListenHost
        public var port = HostConfiguration.defaultAdminPort
        public var maxBodyBytes = 64 << 10
        public var requestsPerSecond = 20
        public var burst = 40
        /// Host names taken besides loopback and the listen address (`admin.allowed_hosts`).
        public var allowedHosts: [String] = []
        /// Browser origins allowed besides the dashboard's own (`admin.allowed_origins`).
        public var allowedOrigins: [String] = []
        public init() {}
    }

    /// Loopback addresses: `127.0.0.0/8`, `::1`, `localhost`.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}

extension NodeDecoder {
    mutating func listen(_ node: ConfigNode, _ path: String, example: String) -> (String, Int)? {
        if let s = string(node, path), let (host, port) = HostPortSyntax.parse(s, allowPortZero: true) { return (host, port) }
        if node.scalar != nil { expected("host:port with a port in 0...65535 (like \(example))", node, path) }
        return nil
    }

    mutating func webSocketAPI(_ node: ConfigNode, botNames: [String]) -> HostConfiguration.WebSocketAPI? {
        guard let f = fields(node, "ws_api", known: ["listen", "token", "bot", "allowed_hosts", "allowed_origins"]) else { return nil }
        var ws = HostConfiguration.WebSocketAPI()
        if let n = f("bot") {
            guard let name = string(n, "ws_api.bot") else { return nil }
            // With no bots decoded (they had problems of their own), the name cannot be checked.
            guard botNames.isEmpty || botNames.contains(name) else {
                problem(n, "ws_api.bot", "names no bot of this host; the bots are \(botNames.map { JSONWriter.quote($0) }.joined(separator: ", "))")
                return nil
            }
            ws.bot = name
        }
        var listenNode: ConfigNode?
        if let n = f("listen") {
            listenNode = n
            guard let (host, port) = listen(n, "ws_api.listen", example: "127.0.0.1:5225") else { return nil }
            ws.host = host
            ws.port = port
        }
        if let n = f("token") {
            guard let t = string(n, "ws_api.token") else { return nil }
            guard t.count >= 16 else {
                problem(n, "ws_api.token", "must be at least 16 characters (a random secret; `openssl rand -hex 32` makes one)")
                return nil
            }
            ws.token = t
        }
        if let n = f("allowed_hosts") { guard let hosts = allowedHosts(n, "ws_api.allowed_hosts") else { return nil }; ws.allowedHosts = hosts }
        if let n = f("allowed_origins") { guard let origins = allowedOrigins(n, "ws_api.allowed_origins") else { return nil }; ws.allowedOrigins = origins }
        if ws.token == nil, !HostConfiguration.isLoopback(ws.host) {
            problem(listenNode ?? node, "ws_api.listen", "listens beyond loopback (\(ws.host)) without ws_api.token: SimpleX's WebSocket API has no authentication of its own, so a token is required here")
            return nil
        }
        return ws
    }

    mutating func admin(_ node: ConfigNode) -> HostConfiguration.Admin? {
        guard let f = fields(node, "admin", known: ["enabled", "listen", "max_body_bytes", "requests_per_second", "burst", "allowed_hosts", "allowed_origins"]) else { return nil }
        var admin = HostConfiguration.Admin()
        admin.enabled = true
        if let v = f("enabled") { admin.enabled = bool(v, "admin.enabled") ?? true }
        if let n = f("listen"), let (host, port) = listen(n, "admin.listen", example: "127.0.0.1:5280") {
            admin.host = host
            admin.port = port
        }
        if let v = f("max_body_bytes"), let i = integer(v, "admin.max_body_bytes", in: 1024...(16 << 20)) { admin.maxBodyBytes = i }
        if let v = f("requests_per_second"), let i = integer(v, "admin.requests_per_second", in: 1...100_000) { admin.requestsPerSecond = i }
        if let v = f("burst"), let i = integer(v, "admin.burst", in: 1...1_000_000) { admin.burst = i }
        if let n = f("allowed_hosts"), let hosts = allowedHosts(n, "admin.allowed_hosts") { admin.allowedHosts = hosts }
        if let n = f("allowed_origins"), let origins = allowedOrigins(n, "admin.allowed_origins") { admin.allowedOrigins = origins }
        return admin
    }

    /// A list of host names (no scheme, no path; a port is ignored).
    mutating func allowedHosts(_ node: ConfigNode, _ path: String) -> [String]? {
        stringList(node, path, what: "a list of host names (like [bot.example.com, 192.168.1.5])") { item in
            item.isEmpty || item.contains("/") || item.contains(" ") ? "is not a host name (like bot.example.com or 192.168.1.5)" : nil
        }
    }

    /// A list of browser origins: `http://` or `https://`, a host and an optional port, no path.
    mutating func allowedOrigins(_ node: ConfigNode, _ path: String) -> [String]? {
        stringList(node, path, what: "a list of origins (like [https://dashboard.example.com])") { item in
            let lower = item.lowercased()
            let rest = lower.hasPrefix("http://") ? lower.dropFirst(7) : lower.hasPrefix("https://") ? lower.dropFirst(8) : nil
            guard let rest, !rest.isEmpty, !rest.dropLast(rest.hasSuffix("/") ? 1 : 0).contains("/") else {
                return "is not an origin (scheme://host[:port], like https://dashboard.example.com)"
            }
            return nil
        }
    }

    /// A list of strings, each checked by `problem` (nil: fine).
    mutating func stringList(_ node: ConfigNode, _ path: String, what: String, problem check: (String) -> String?) -> [String]? {
        guard let items = node.sequence else {
            expected(what, node, path)
            return nil
        }
        var out: [String] = []
        for (i, item) in items.enumerated() {
            let itemPath = "\(path)[\(i)]"
            guard let s = string(item, itemPath) else { continue }
            if let why = check(s) { problem(item, itemPath, "\(JSONWriter.quote(s)) \(why)") } else { out.append(s) }
        }
        return out.count == items.count ? out : nil
    }
}
