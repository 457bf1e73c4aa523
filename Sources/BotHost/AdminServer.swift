import ChatAPI
import ChatCore
import ChatServer
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import NIOCore
import PluginHost
import QRCode
import ServiceLifecycle
import SwiftplexBase

/// The request context of the admin API: a WebSocket-capable context that knows the client's
/// address (for the rate limit).
struct AdminRequestContext: RequestContext, WebSocketRequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<AdminRequestContext>
    let remoteAddress: SocketAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        remoteAddress = source.channel.remoteAddress
    }
}

/// The host's authenticated admin API: JSON over HTTP (documented in ``AdminOpenAPI``), and
/// the chat events over a WebSocket at `/api/events`. Every path but `/healthz` and `/readyz`
/// needs the bearer token of `<data_dir>/admin.token`.
struct AdminServer: Service {
    let host: BotHost
    let options: AdminOptions
    let tokens: AdminTokenStore
    let listening: ListeningAddress
    let logger: Logger

    /// Every route, as the OpenAPI document must list it (`{name}` for a path parameter).
    static let routes: [(method: String, path: String)] = [
        ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/api/openapi.json"), ("GET", "/api/status"),
        ("GET", "/api/plugins"), ("POST", "/api/plugins/reload"), ("POST", "/api/plugins/{name}/reload"),
        ("GET", "/api/contacts"), ("POST", "/api/contacts/{contactId}/messages"),
        ("GET", "/api/contact-requests"), ("POST", "/api/contact-requests/{requestId}/accept"),
        ("POST", "/api/contact-requests/{requestId}/reject"),
        ("GET", "/api/address"), ("GET", "/api/address/qr.svg"), ("POST", "/api/command"), ("GET", "/api/events"),
    ]
    static let openPaths: Set<String> = ["/healthz", "/readyz"]

    func authorized(_ request: Request) -> Bool {
        BearerToken.matches(BearerToken.presented(authorization: request.headers[.authorization], uri: request.uri.description), tokens.current)
    }

    func run() async throws {
        let router = Router(context: AdminRequestContext.self)
        router.middlewares.add(AdminErrorMiddleware())
        router.middlewares.add(RateLimitMiddleware(limiter: RateLimiter(rate: options.requestsPerSecond, burst: options.burst)))
        router.middlewares.add(BearerMiddleware(check: authorized, open: Self.openPaths, onFailure: { [host] in host.countAuthFailure() }))
        addRoutes(router)

        let wsRouter = Router(context: AdminRequestContext.self)
        wsRouter.ws("/api/events") { request, _ in
            authorized(request) ? .upgrade([:]) : .dontUpgrade
        } onUpgrade: { [host] inbound, outbound, context in
            let subscription = host.events.subscribe(limit: ChatWebSocketServer.maxPendingEvents)
            context.logger.info("admin event stream opened")
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await event in subscription.events {
                        do { try await outbound.write(.text(event.description)) } catch { return }
                    }
                }
                // Nothing is read from the client; this only notices when it goes.
                do { for try await _ in inbound.messages(maxSize: 4096) {} } catch {}
                group.cancelAll()
            }
            context.logger.info("admin event stream closed", metadata: ["dropped": "\(subscription.dropped)"])
        }
        var log = logger
        log[metadataKey: "server"] = "admin"
        let app = Application(
            router: router,
            server: .guardedWebSocketUpgrade(webSocketRouter: wsRouter,
                                             check: { [tokens] uri, authorization in
                                                 BearerToken.matches(BearerToken.presented(authorization: authorization, uri: uri), tokens.current)
                                             },
                                             onRefused: { [host] in host.countAuthFailure() }),
            configuration: .init(address: .hostname(options.listen.host, port: options.listen.port), serverName: nil),
            onServerRunning: { [options, listening, logger] channel in
                let bound = ListenAddress(host: options.listen.host, port: channel.localAddress?.port ?? options.listen.port)
                logger.info("admin API listening", metadata: ["address": "\(bound)"])
                listening.set(bound)
            },
            logger: log
        )
        try await app.run()
    }

    // MARK: Routes

    private func addRoutes(_ router: Router<AdminRequestContext>) {
        let host = self.host
        let maxBody = options.maxBodyBytes
        router.get("/healthz") { _, _ in JSONResponse.make(.object([("status", .string("ok"))])) }
        router.get("/readyz") { _, _ in
            let ready = host.engineRunning
            return JSONResponse.make(.object([("ready", .bool(ready)), ("engineRunning", .bool(ready))]),
                                     status: ready ? .ok : .serviceUnavailable)
        }
        router.get("/api/openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: AdminOpenAPI.document)))
        }
        router.get("/api/status") { _, _ in JSONResponse.make(host.statusJSON()) }
        router.get("/api/plugins") { _, _ in JSONResponse.make(.object([("plugins", .array(host.plugins.statuses().map(Self.pluginJSON)))])) }
        router.post("/api/plugins/reload") { _, context in
            try await reload(only: nil, context: context)
        }
        router.post("/api/plugins/:name/reload") { _, context in
            try await reload(only: context.parameters.require("name"), context: context)
        }
        router.get("/api/contacts") { request, _ in
            let page = try Page(request)
            let r = await host.api.execute("/_contacts \(host.userId)")
            guard case let .array(all)? = r["contacts"] else { return Self.chatFailure(r) }
            return JSONResponse.make(page.json(all, key: "contacts"))
        }
        router.get("/api/contact-requests") { request, _ in
            let page = try Page(request)
            let r = await host.api.execute("/_get chats \(host.userId) count=1000000")
            guard case let .array(chats)? = r["chats"] else { return Self.chatFailure(r) }
            let requests = chats.compactMap { chat -> JSONValue? in
                guard chat["chatInfo"]?["type"]?.stringValue == "contactRequest" else { return nil }
                return chat["chatInfo"]?["contactRequest"]
            }
            return JSONResponse.make(page.json(requests, key: "contactRequests"))
        }
        router.post("/api/contact-requests/:requestId/accept") { _, context in
            let id = try context.parameters.require("requestId", as: Int64.self)
            return Self.commandResult(await host.api.execute("/_accept \(id)"))
        }
        router.post("/api/contact-requests/:requestId/reject") { _, context in
            let id = try context.parameters.require("requestId", as: Int64.self)
            return Self.commandResult(await host.api.execute("/_reject \(id)"))
        }
        router.post("/api/contacts/:contactId/messages") { request, context in
            let id = try context.parameters.require("contactId", as: Int64.self)
            let body = try await Self.jsonBody(request, limit: maxBody)
            guard case let .string(text)? = body["text"], !text.isEmpty else {
                throw AdminError(.badRequest, "badRequest", "the body must be {\"text\": \"a non-empty message\"}")
            }
            let messages: JSONValue = .array([.object([("msgContent", .object([("type", .string("text")), ("text", .string(text))]))])])
            return Self.commandResult(await host.api.execute("/_send @\(id) json \(messages.description)"))
        }
        router.get("/api/address") { _, _ in
            guard let link = host.address else { throw AdminError(.notFound, "noAddress", "the bot has no contact address (address.enabled is false)") }
            return JSONResponse.make(.object([("link", .string(link)), ("qrSvg", .string("/api/address/qr.svg"))]))
        }
        router.get("/api/address/qr.svg") { _, _ in
            guard let link = host.address else { throw AdminError(.notFound, "noAddress", "the bot has no contact address (address.enabled is false)") }
            let code: QRCode
            do { code = try QRCode.encode(link) } catch { throw AdminError(.internalServerError, "qrCode", "the address does not fit a QR code: \(error)") }
            return Response(status: .ok, headers: [.contentType: "image/svg+xml"], body: .init(byteBuffer: ByteBuffer(string: Self.svg(code))))
        }
        router.post("/api/command") { request, _ in
            let body = try await Self.jsonBody(request, limit: maxBody)
            guard case let .string(cmd)? = body["cmd"], !cmd.isEmpty else {
                throw AdminError(.badRequest, "badRequest", "the body must be {\"cmd\": \"a chat command\"}")
            }
            return JSONResponse.make(await host.api.execute(cmd))
        }
    }

    private func reload(only name: String?, context: AdminRequestContext) async throws -> Response {
        let specs: [PluginSpec]
        do {
            specs = try await options.pluginSource?() ?? host.appliedPlugins
        } catch {
            throw AdminError(.unprocessableContent, "configError", "the configuration cannot be read; the running plugins are unchanged:\n\(error)")
        }
        var chosen = specs
        if let name {
            guard specs.contains(where: { $0.name == name }) || host.appliedPlugins.contains(where: { $0.name == name }) else {
                throw AdminError(.notFound, "noSuchPlugin", "no plugin instance named \(name)")
            }
            // Only this instance takes its new settings; the others keep what they run.
            chosen = host.appliedPlugins.filter { $0.name != name } + specs.filter { $0.name == name }
        }
        context.logger.notice("plugin reload requested", metadata: ["instance": "\(name ?? "all")"])
        let results = await host.reload(chosen)
        let outcomes: [JSONValue] = results.map { r in
            .object([("name", .string(r.name)), ("outcome", .string(Self.outcomeName(r.outcome))),
                     ("failed", .bool(r.outcome.isFailure)), ("message", .string(r.outcome.description))])
        }
        return JSONResponse.make(.object([("results", .array(outcomes))]))
    }

    static func outcomeName(_ o: PluginOutcome) -> String {
        switch o {
        case .started: "started"
        case .unchanged: "unchanged"
        case .stopped: "stopped"
        case .failed: "failed"
        case .rolledBack: "rolledBack"
        }
    }

    static func pluginJSON(_ s: PluginStatus) -> JSONValue {
        let c = s.stats
        func n(_ v: Int) -> JSONValue { .int(Int64(v)) }
        return .object([
            ("name", .string(s.name)), ("plugin", .string(s.info.name)), ("version", .string(s.info.version)),
            ("isolation", .string(s.isolation.rawValue)),
            ("counters", .object([("handled", n(c.delivered)), ("errors", n(c.failed)), ("timeouts", n(c.timedOut)),
                                  ("dropped", n(c.dropped)), ("crashes", n(c.crashes)), ("restarts", n(c.restarts)),
                                  ("protocolErrors", n(c.protocolErrors)), ("refusedCalls", n(c.refusedCalls))])),
        ])
    }

    /// A Chat API response: 200, or 422 with the chat error when it is a `chatCmdError`.
    static func commandResult(_ r: JSONValue) -> Response {
        r["type"]?.stringValue == "chatCmdError" ? chatFailure(r) : JSONResponse.make(r)
    }

    static func chatFailure(_ r: JSONValue) -> Response {
        JSONResponse.make(.object([("error", .object([("type", .string("chatError")), ("message", .string(BotHost.describe(r))),
                                                      ("chatError", r["chatError"] ?? .null)]))]), status: .unprocessableContent)
    }

    static func jsonBody(_ request: Request, limit: Int) async throws -> JSONValue {
        let buffer: ByteBuffer
        do { buffer = try await request.body.collect(upTo: limit) } catch {
            throw AdminError(.contentTooLarge, "bodyTooLarge", "the request body is larger than \(limit) bytes")
        }
        let value: JSONValue
        do { value = try JSONValue.parse(String(buffer: buffer)) } catch {
            throw AdminError(.badRequest, "malformedJSON", "the request body is not JSON: \(error)")
        }
        guard case .object = value else { throw AdminError(.badRequest, "malformedJSON", "the request body must be a JSON object") }
        return value
    }

    /// The QR code as an SVG image (one rect per dark module, a 4-module quiet zone).
    static func svg(_ code: QRCode) -> String {
        let quiet = 4, size = code.size + 2 * quiet
        var out = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 \(size) \(size)\" shape-rendering=\"crispEdges\">"
        out += "<rect width=\"\(size)\" height=\"\(size)\" fill=\"#fff\"/><path fill=\"#000\" d=\""
        for y in 0..<code.size {
            for x in 0..<code.size where code[x, y] { out += "M\(x + quiet) \(y + quiet)h1v1h-1z" }
        }
        return out + "\"/></svg>\n"
    }
}

/// `?offset=&limit=` of a list endpoint.
struct Page {
    static let maxLimit = 500
    var offset = 0
    var limit = 100

    init(_ request: Request) throws {
        let q = request.uri.queryParameters
        if let s = q["offset"] {
            guard let v = Int(String(s)), v >= 0 else { throw AdminError(.badRequest, "badRequest", "offset must be a whole number ≥ 0") }
            offset = v
        }
        if let s = q["limit"] {
            guard let v = Int(String(s)), (1...Self.maxLimit).contains(v) else {
                throw AdminError(.badRequest, "badRequest", "limit must be a whole number in 1...\(Self.maxLimit)")
            }
            limit = v
        }
    }

    func json(_ all: [JSONValue], key: String) -> JSONValue {
        let slice = offset < all.count ? Array(all[offset..<min(all.count, offset + limit)]) : []
        return .object([(key, .array(slice)), ("total", .int(Int64(all.count))), ("offset", .int(Int64(offset))),
                        ("limit", .int(Int64(limit)))])
    }
}

/// A typed admin API error, answered as `{"error": {"type": …, "message": …}}`.
struct AdminError: Error {
    let status: HTTPResponse.Status
    let type: String
    let message: String
    init(_ status: HTTPResponse.Status, _ type: String, _ message: String) {
        self.status = status
        self.type = type
        self.message = message
    }
}

/// Turns every failure — unknown routes, bad parameters, thrown errors — into a typed JSON
/// error, and logs each call (method, path, status) with its request id.
struct AdminErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let response: Response
        do {
            response = try await next(request, context)
        } catch let e as AdminError {
            response = JSONResponse.error(e.status, type: e.type, e.message)
        } catch let e as HTTPError {
            let type = switch e.status {
            case .notFound: "notFound"
            case .methodNotAllowed: "methodNotAllowed"
            case .contentTooLarge: "bodyTooLarge"
            case .badRequest: "badRequest"
            default: "httpError"
            }
            let message = e.status == .notFound ? "no such endpoint: \(request.method) \(request.uri.path) (see /api/openapi.json)" : (e.body ?? e.status.reasonPhrase)
            response = JSONResponse.error(e.status, type: type, message)
        } catch {
            context.logger.error("admin call failed", metadata: ["error": "\(type(of: error))"])
            response = JSONResponse.error(.internalServerError, type: "internal", "the request failed inside the host")
        }
        var r = response
        r.headers[.init("X-Request-Id")!] = context.id
        context.logger.info("admin call", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(r.status.code)"])
        return r
    }
}

/// Per-client token buckets.
final class RateLimiter: Sendable {
    private struct Bucket { var tokens: Double; var at: ContinuousClock.Instant }
    private let rate: Double
    private let burst: Double
    private let buckets = NIOLockedValueBox<[String: Bucket]>([:])

    init(rate: Double, burst: Int) {
        self.rate = rate
        self.burst = Double(burst)
    }

    func take(_ client: String) -> Bool {
        let now = ContinuousClock.now
        return buckets.withLockedValue { b in
            if b.count > 10_000 { b = [:] }  // bounded memory under a flood of addresses
            var bucket = b[client] ?? Bucket(tokens: burst, at: now)
            let elapsed = Double((now - bucket.at).components.seconds) + Double((now - bucket.at).components.attoseconds) / 1e18
            bucket.tokens = min(burst, bucket.tokens + elapsed * rate)
            bucket.at = now
            let ok = bucket.tokens >= 1
            if ok { bucket.tokens -= 1 }
            b[client] = bucket
            return ok
        }
    }
}

struct RateLimitMiddleware<Context: RemoteAddressRequestContext>: RouterMiddleware {
    let limiter: RateLimiter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard limiter.take(context.remoteAddress?.ipAddress ?? "unknown") else {
            var h = HTTPFields()
            h[.retryAfter] = "1"
            return JSONResponse.error(.tooManyRequests, type: "rateLimited", "too many requests from this client; slow down", headers: h)
        }
        return try await next(request, context)
    }
}
