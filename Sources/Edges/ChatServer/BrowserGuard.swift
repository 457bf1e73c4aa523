import Hummingbird

/// Which browsers may reach a server on this machine: the defence against a web page the
/// operator visits driving the bot.
///
/// A browser lets any page open `ws://127.0.0.1:PORT` (WebSockets are not bound by CORS) and, by
/// DNS rebinding, send ordinary requests to a loopback port under a name the attacker controls.
/// Both leave a mark no page can remove: the browser sets `Origin` on every WebSocket handshake
/// and on cross-origin requests, and `Host` to the name the page used. So a request is answered
/// only when
/// - its `Host` names this server: a loopback name (`localhost`, `127.0.0.0/8`, `::1`), the
///   address it listens on, or one of `allowedHosts`. A server listening on every interface
///   (`0.0.0.0`, `::`) cannot know its names, so it takes any `Host` unless `allowedHosts` is set
///   (such a server needs a token anyway);
/// - and its `Origin`, when it has one, is this server itself (`http://` or `https://` and the
///   request's own `Host`: the admin API's dashboard) or one of `allowedOrigins`.
///
/// SimpleX's clients, the Python library and scripts send no `Origin` (or, like swift-websocket's
/// client, a `ws://` one that no browser sends), so they are unaffected.
public struct BrowserGuard: Sendable, Hashable {
    /// Host names (no port) taken besides loopback and the listen address; lowercased.
    public var allowedHosts: Set<String>
    /// Origins (`scheme://host[:port]`) taken besides the server's own; normalised.
    public var allowedOrigins: Set<String>

    public init(allowedHosts: [String] = [], allowedOrigins: [String] = []) {
        self.allowedHosts = Set(allowedHosts.map { Self.hostName($0) })
        self.allowedOrigins = Set(allowedOrigins.compactMap { Self.normalisedOrigin($0) })
    }

    /// Why a request is refused.
    public enum Refusal: Sendable, Hashable, CustomStringConvertible {
        case host(String)
        case origin(String)

        public var description: String {
            switch self {
            case let .host(h): "Host \(h) does not name this server (a loopback name, its listen address or an allowed host)"
            case let .origin(o): "requests from the web page at \(o) are refused: browsers' origins must be allowed in the configuration"
            }
        }
    }

    /// nil when a request with these headers may be answered by a server listening at `listen`.
    public func check(host: String?, origin: String?, listen: ListenAddress) -> Refusal? {
        if let host {
            let name = Self.hostName(host)
            if !(Self.isLoopbackName(name) || name == Self.hostName(listen.host) || allowedHosts.contains(name)
                 || (allowedHosts.isEmpty && Self.isWildcard(listen.host))) {
                return .host(String(host.prefix(200)))
            }
        }
        guard let origin, !Self.isNonBrowserOrigin(origin) else { return nil }
        if let host, let normalised = Self.normalisedOrigin(origin) {
            let own = host.lowercased()
            if normalised == Self.normalisedOrigin("http://" + own) || normalised == Self.normalisedOrigin("https://" + own) { return nil }
            if allowedOrigins.contains(normalised) { return nil }
        }
        return .origin(String(origin.prefix(200)))
    }

    /// The check on a Hummingbird request.
    public func check(_ request: Request, listen: ListenAddress) -> Refusal? {
        check(host: request.head.authority, origin: request.headers[.origin], listen: listen)
    }

    /// The upgrade gate's check: this guard first (403), then the bearer token when there is one (401).
    public func upgradeCheck(listen: ListenAddress, token: @escaping @Sendable () -> String?) -> @Sendable (UpgradeRequestHead) -> UpgradeRefusal? {
        { [self] head in
            if let refusal = check(host: head.host, origin: head.origin, listen: listen) { return .forbidden(refusal.description) }
            guard let token = token() else { return nil }
            return BearerToken.matches(BearerToken.presented(authorization: head.authorization, uri: head.uri), token) ? nil : .unauthorized
        }
    }

    /// `Host`'s name without its port or brackets, lowercased: `[::1]:5225` → `::1`.
    static func hostName(_ host: String) -> String {
        let h = host.lowercased().trimmingCharacters(in: .whitespaces)
        if h.hasPrefix("[") {
            guard let close = h.firstIndex(of: "]") else { return h }
            return String(h[h.index(after: h.startIndex)..<close])
        }
        // One colon: name:port. More: an unbracketed IPv6 literal (not valid in Host, kept whole).
        if h.filter({ $0 == ":" }).count == 1, let colon = h.firstIndex(of: ":") { return String(h[..<colon]) }
        return h.hasSuffix(".") ? String(h.dropLast()) : h
    }

    static func isLoopbackName(_ name: String) -> Bool {
        ListenAddress(host: name, port: 0).isLoopback
    }

    static func isWildcard(_ host: String) -> Bool {
        let h = hostName(host)
        return h == "0.0.0.0" || h == "::" || h.isEmpty
    }

    /// `ws://…` and `wss://…`: what some WebSocket client libraries (swift-websocket among them)
    /// send as `Origin`. No browser does — a page's origin is http(s), or `null` — and a page cannot
    /// set `Origin` itself, so such a request is not a browser's.
    static func isNonBrowserOrigin(_ origin: String) -> Bool {
        let o = origin.lowercased()
        return o.hasPrefix("ws://") || o.hasPrefix("wss://")
    }

    /// Whether `origin` is an http(s) origin, `scheme://host[:port]`.
    public static func isValidOrigin(_ origin: String) -> Bool { normalisedOrigin(origin) != nil }

    /// `scheme://host[:port]` lowercased, the scheme's default port dropped; nil for `null` and
    /// anything that is not an http(s) origin.
    static func normalisedOrigin(_ origin: String) -> String? {
        let o = origin.lowercased().trimmingCharacters(in: .whitespaces)
        let scheme: String, defaultPort: String
        if o.hasPrefix("http://") { (scheme, defaultPort) = ("http", "80") }
        else if o.hasPrefix("https://") { (scheme, defaultPort) = ("https", "443") }
        else { return nil }
        var rest = o.dropFirst(scheme.count + 3)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("@") else { return nil }
        var authority = String(rest)
        if authority.hasSuffix(":" + defaultPort), !authority.hasSuffix("]") { authority.removeLast(defaultPort.count + 1) }
        return scheme + "://" + authority
    }
}

/// Answers 403 (a typed JSON error) to requests that ``BrowserGuard`` refuses, before anything else.
public struct BrowserGuardMiddleware<Context: RequestContext>: RouterMiddleware {
    let guard_: BrowserGuard
    let listen: ListenAddress
    let onRefused: @Sendable () -> Void

    public init(_ guard_: BrowserGuard, listen: ListenAddress, onRefused: @escaping @Sendable () -> Void = {}) {
        self.guard_ = guard_
        self.listen = listen
        self.onRefused = onRefused
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let refusal = guard_.check(request, listen: listen) {
            onRefused()
            context.logger.notice("refused a browser's request", metadata: ["path": "\(request.uri.path)", "reason": "\(refusal)"])
            return JSONResponse.error(.forbidden, type: "forbidden", refusal.description)
        }
        return try await next(request, context)
    }
}
