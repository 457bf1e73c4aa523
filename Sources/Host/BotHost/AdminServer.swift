import ChatAPI
import ChatCore
import ChatModel
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

/// The host's authenticated admin API: JSON over HTTP (documented in ``AdminOpenAPI``), the
/// chat events over a WebSocket at `/api/events`, Prometheus `/metrics` and the web dashboard.
/// Every path but the open ones of ``routeTable()`` (health, readiness, the dashboard's static
/// files) needs the bearer token of `<data_dir>/admin.token`.
struct AdminServer: Service {
    let host: BotHost
    let options: AdminOptions
    let tokens: AdminTokenStore
    let listening: ListeningAddress
    let logger: Logger

    /// Paths answered without the token: health, readiness and the dashboard's static files
    /// (which hold no data; the page asks for the token and sends it with every call).
    static func openPaths(_ table: [AdminRoute]) -> Set<String> {
        Set(table.filter { $0.access == .open }.map(\.path))
    }

    func authorized(_ request: Request) -> Bool {
        BearerToken.matches(BearerToken.presented(authorization: request.headers[.authorization], uri: request.uri.description), tokens.current)
    }

    /// The routers the server runs: HTTP routes, and the WebSocket routes behind the upgrade gate.
    /// Both come from ``routeTable()``, as does the OpenAPI document.
    func makeRouters() -> (http: Router<AdminRequestContext>, webSocket: Router<AdminRequestContext>) {
        let router = Router(context: AdminRequestContext.self)
        let table = routeTable()
        router.middlewares.add(AdminErrorMiddleware(onAnswered: { [host] in host.metrics.countAdminRequest() }))
        router.middlewares.add(BrowserGuardMiddleware(options.browsers, listen: options.listen, onRefused: { [host] in host.countAuthFailure() }))
        router.middlewares.add(RateLimitMiddleware(limiter: RateLimiter(rate: options.requestsPerSecond, burst: options.burst)))
        router.middlewares.add(BearerMiddleware(check: authorized, open: Self.openPaths(table), onFailure: { [host] in host.countAuthFailure() }))
        let wsRouter = Router(context: AdminRequestContext.self)
        let document = ByteBuffer(string: AdminOpenAPI.document(table).description + "\n")
        for route in table {
            switch route.kind {
            case let .http(handler):
                router.on(RouterPath(route.routerPath), method: route.method, use: handler)
            case .openAPI:
                router.on(RouterPath(route.routerPath), method: route.method) { _, _ in
                    Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: document))
                }
            case .events:
                wsRouter.ws(RouterPath(route.routerPath)) { [host] request, _ in
                    // An unknown bot is refused like a wrong token: no upgrade.
                    authorized(request) && (try? Self.bot(request, of: host)) != nil ? .upgrade([:]) : .dontUpgrade
                } onUpgrade: { [host] inbound, outbound, context in
                    let bot = (try? Self.bot(context.request, of: host)) ?? host.defaultBot
                    try await Self.streamEvents(bot: bot, inbound: inbound, outbound: outbound, context: context)
                }
            }
        }
        return (router, wsRouter)
    }

    func run() async throws {
        let (router, wsRouter) = makeRouters()
        var log = logger
        log[metadataKey: "server"] = "admin"
        let app = Application(
            router: router,
            server: .guardedWebSocketUpgrade(webSocketRouter: wsRouter,
                                             check: options.browsers.upgradeCheck(listen: options.listen, token: { [tokens] in tokens.current }),
                                             onRefused: { [host] in host.countAuthFailure() }),
            configuration: .init(address: .hostname(options.listen.host, port: options.listen.port), serverName: nil),
            onServerRunning: { [options, listening, logger] channel in
                let bound = ListenAddress(host: options.listen.host, port: channel.localAddress?.port ?? options.listen.port)
                logger.info("admin API listening", metadata: ["address": "\(bound)"])
                if !bound.isLoopback {
                    logger.warning("the admin API listens beyond loopback over plain HTTP: its token and every answer cross the network unencrypted; keep it on 127.0.0.1 and reach it through SSH or a TLS-terminating proxy", metadata: ["address": "\(bound)"])
                }
                listening.set(bound)
            },
            logger: log
        )
        try await app.run()
    }

    static func streamEvents(bot: HostedBot, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
                             context: WebSocketRouterContext<AdminRequestContext>) async throws {
        let subscription = bot.events.subscribe(limit: ChatWebSocketServer.maxPendingEvents)
        context.logger.info("admin event stream opened", metadata: ["bot": "\(bot.name)"])
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in subscription.events {
                    do { try await outbound.write(.text(event.json)) } catch { return }
                }
            }
            // Nothing is read from the client; this only notices when it goes.
            do { for try await _ in inbound.messages(maxSize: 4096) {} } catch {}
            group.cancelAll()
        }
        context.logger.info("admin event stream closed", metadata: ["dropped": "\(subscription.dropped)"])
    }

    // MARK: Routes

    /// `?bot=`: which bot a call is for (its name from the configuration; default: the first).
    static let botParameter = AdminRoute.Parameter(name: "bot", description: "The bot, by its name in the configuration (default: the first bot)",
                                                   type: "string")

    /// The bot `?bot=` names, or the first; an unknown name is a typed 404.
    static func bot(_ request: Request, of host: BotHost) throws -> HostedBot {
        guard let name = request.uri.queryParameters["bot"].map(String.init) else { return host.defaultBot }
        guard let bot = host.bot(named: name) else { throw AdminError(.notFound, "noSuchBot", "no bot named \(name) (see /api/bots)") }
        return bot
    }

    /// Every route of the admin API: what it does, who may call it, its parameters and answers
    /// (for the OpenAPI document), and its handler.
    func routeTable() -> [AdminRoute] {
        let host = self.host
        let maxBody = options.maxBodyBytes
        let object = AdminRoute.Schema.ref("Object")
        let bot = [Self.botParameter]
        let page = bot + [AdminRoute.Parameter(name: "offset", description: "Entries to skip (default 0)"),
                          AdminRoute.Parameter(name: "limit", description: "Entries to return, 1…\(Page.maxLimit) (default 100)")]
        let noBot = AdminRoute.Answer(status: "404", description: "No such bot (noSuchBot)", schema: .ref("Error"))
        let chatResponse = AdminRoute.Answer(status: "200", description: "The Chat API's response", schema: object)
        let chatError = AdminRoute.Answer(status: "422", description: "The engine refused it (chatError)", schema: .ref("Error"))
        return [
            AdminRoute(.get, "/healthz", "Liveness (no token)", access: .open,
                       answers: [.init(status: "200", description: "The host process serves", schema: object)]) { _, _ in
                JSONResponse.make(.object([("status", .string("ok"))]))
            },
            AdminRoute(.get, "/readyz", "Readiness: the engine runs and its relays are connected (no token: ready or not; with the token: per bot and relay)", access: .open,
                       answers: [.init(status: "200", description: "Ready", schema: .ref("Readiness")),
                                 .init(status: "503", description: "Not ready", schema: .ref("Readiness"))]) { request, _ in
                let (ready, json) = host.readiness()
                // Without the token it names nothing (no bots, no relay hosts): only ready or not.
                let body: JSONValue = authorized(request) ? json : .object([("ready", .bool(ready))])
                return JSONResponse.make(body, status: ready ? .ok : .serviceUnavailable)
            },
            AdminRoute(.get, "/", "The web dashboard (no token: the page asks for it)", access: .open,
                       answers: [.init(status: "200", description: "HTML", contentType: "text/html")]) { _, _ in
                try Dashboard.response("index.html")
            },
            AdminRoute(.get, "/dashboard.js", "The dashboard's script", access: .open,
                       answers: [.init(status: "200", description: "JavaScript", contentType: "text/javascript")]) { _, _ in
                try Dashboard.response("dashboard.js")
            },
            AdminRoute(.get, "/dashboard.css", "The dashboard's style sheet", access: .open,
                       answers: [.init(status: "200", description: "CSS", contentType: "text/css")]) { _, _ in
                try Dashboard.response("dashboard.css")
            },
            AdminRoute(.get, "/api/openapi.json", "This document", kind: .openAPI,
                       answers: [.init(status: "200", description: "OpenAPI 3 document", schema: object)]),
            AdminRoute(.get, "/metrics", "Prometheus metrics: engine, plugins, process (text format 0.0.4)",
                       answers: [.init(status: "200", description: "Prometheus text", contentType: "text/plain")]) { _, _ in
                Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                         body: .init(byteBuffer: ByteBuffer(bytes: await host.metricsText())))
            },
            AdminRoute(.get, "/api/status", "Engine running, uptime, version, relays, address, auth failures",
                       answers: [.init(status: "200", description: "OK", schema: .ref("Status"))]) { _, _ in
                JSONResponse.make(await host.statusJSON())
            },
            AdminRoute(.get, "/api/bots", "The host's bots: name, profile name, engine, relays, address, plugins",
                       answers: [.init(status: "200", description: "OK", schema: .ref("Bots"))]) { _, _ in
                JSONResponse.make(.object([("bots", .array(await host.botsJSON()))]))
            },
            AdminRoute(.get, "/api/plugins", "Plugin instances of every bot (or of ?bot=) with their bot, condition, queue depth and counters",
                       query: bot, answers: [.init(status: "200", description: "OK", schema: .ref("Plugins")), noBot]) { request, _ in
                let bots = request.uri.queryParameters["bot"] == nil ? host.bots : [try Self.bot(request, of: host)]
                return JSONResponse.make(.object([("plugins", .array(bots.flatMap { b in b.plugins.statuses().map { Self.pluginJSON($0, bot: b.name) } }))]))
            },
            AdminRoute(.post, "/api/plugins/reload",
                       "Reload every plugin instance of every bot (or of ?bot=) from the configuration; per-instance outcomes (rolledBack when a new version failed)",
                       query: bot, answers: [.init(status: "200", description: "OK", schema: .ref("ReloadResults")), noBot]) { request, context in
                let bots = request.uri.queryParameters["bot"] == nil ? host.bots : [try Self.bot(request, of: host)]
                var results: [JSONValue] = []
                // Every bot's list is read before any is applied: a configuration that cannot be
                // read changes no bot.
                var lists: [(HostedBot, [PluginSpec])] = []
                for b in bots { lists.append((b, try await pluginList(b))) }
                for (b, specs) in lists { results += try await reload(b, specs: specs, only: nil, context: context) }
                return JSONResponse.make(.object([("results", .array(results))]))
            },
            AdminRoute(.post, "/api/plugins/{name}/reload", "Reload one plugin instance of a bot; the others keep what they run",
                       query: bot, answers: [.init(status: "200", description: "OK", schema: .ref("ReloadResults")),
                                             .init(status: "404", description: "No such instance or bot", schema: .ref("Error"))]) { request, context in
                let b = try Self.bot(request, of: host)
                let results = try await reload(b, specs: try await pluginList(b), only: context.parameters.require("name"), context: context)
                return JSONResponse.make(.object([("results", .array(results))]))
            },
            AdminRoute(.get, "/api/contacts", "A bot's contacts, paged", query: page,
                       answers: [.init(status: "200", description: "OK", schema: .page("contacts")), noBot]) { request, _ in
                let page = try Page(request)
                let b = try Self.bot(request, of: host)
                switch await b.api.respond("/_contacts \(b.userId)") {
                case let .success(.contactsList(_, contacts)):
                    return JSONResponse.make(page.json(contacts.map { ChatAPI.encodeValue($0) }, key: "contacts", bot: b.name))
                case let other: return Self.commandResult(other)
                }
            },
            AdminRoute(.post, "/api/contacts/{contactId}/messages", "Send a text message to a bot's contact",
                       query: bot, body: .textMessage, answers: [chatResponse, chatError, noBot]) { request, context in
                let id = try context.parameters.require("contactId", as: Int64.self)
                let b = try Self.bot(request, of: host)
                let body = try await Self.jsonBody(request, limit: maxBody)
                guard case let .string(text)? = body["text"], !text.isEmpty else {
                    throw AdminError(.badRequest, "badRequest", "the body must be {\"text\": \"a non-empty message\"}")
                }
                let messages: JSONValue = .array([.object([("msgContent", .object([("type", .string("text")), ("text", .string(text))]))])])
                return Self.commandResult(await b.api.respond("/_send @\(id) json \(messages.description)"))
            },
            AdminRoute(.get, "/api/contact-requests", "A bot's pending contact requests, paged", query: page,
                       answers: [.init(status: "200", description: "OK", schema: .page("contactRequests")), noBot]) { request, _ in
                let page = try Page(request)
                let b = try Self.bot(request, of: host)
                switch await b.api.respond("/_get chats \(b.userId) count=1000000") {
                case let .success(.apiChats(_, chats)):
                    let requests = chats.compactMap { chat -> JSONValue? in
                        guard case let .contactRequest(request) = chat.chatInfo else { return nil }
                        return ChatAPI.encodeValue(request)
                    }
                    return JSONResponse.make(page.json(requests, key: "contactRequests", bot: b.name))
                case let other: return Self.commandResult(other)
                }
            },
            AdminRoute(.post, "/api/contact-requests/{requestId}/accept", "Accept a contact request to a bot",
                       query: bot, answers: [chatResponse, chatError, noBot]) { request, context in
                let id = try context.parameters.require("requestId", as: Int64.self)
                return Self.commandResult(try await Self.bot(request, of: host).api.respond("/_accept \(id)"))
            },
            AdminRoute(.post, "/api/contact-requests/{requestId}/reject", "Reject a contact request to a bot",
                       query: bot, answers: [chatResponse, chatError, noBot]) { request, context in
                let id = try context.parameters.require("requestId", as: Int64.self)
                return Self.commandResult(try await Self.bot(request, of: host).api.respond("/_reject \(id)"))
            },
            AdminRoute(.get, "/api/groups", "A bot's groups (GroupInfo), paged", query: page,
                       answers: [.init(status: "200", description: "OK", schema: .page("groups")), noBot]) { request, _ in
                let page = try Page(request)
                let b = try Self.bot(request, of: host)
                switch await b.api.respond("/_groups \(b.userId)") {
                case let .success(.group(.groupsList(list))):
                    return JSONResponse.make(page.json(list.groups.map { ChatAPI.encodeValue($0) }, key: "groups", bot: b.name))
                case let other: return Self.commandResult(other)
                }
            },
            AdminRoute(.get, "/api/groups/{groupId}/members", "A bot's group's members with their roles and states",
                       query: bot, answers: [.init(status: "200", description: "OK", schema: .ref("GroupMembers")), chatError, noBot]) { request, context in
                let id = try context.parameters.require("groupId", as: Int64.self)
                let b = try Self.bot(request, of: host)
                switch await b.api.respond("/_members #\(id)") {
                case let .success(.group(.groupMembers(members))):
                    return JSONResponse.make(.object([("bot", .string(b.name)), ("groupInfo", ChatAPI.encodeValue(members.group.groupInfo)),
                                                      ("members", .array(members.group.members.map { ChatAPI.encodeValue($0) }))]))
                case let other: return Self.commandResult(other)
                }
            },
            AdminRoute(.get, "/api/groups/{groupId}/relays", "A bot's channel's chat relays, each with its status (/_get relays: the owner's relays; a subscriber's, with relayStats)",
                       query: bot, answers: [.init(status: "200", description: "OK", schema: .ref("GroupRelays")), chatError, noBot]) { request, context in
                let id = try context.parameters.require("groupId", as: Int64.self)
                let b = try Self.bot(request, of: host)
                switch await b.api.respond("/_get relays #\(id)") {
                case let .success(.channel(.groupRelays(list))):
                    return JSONResponse.make(.object([("bot", .string(b.name)), ("groupInfo", ChatAPI.encodeValue(list.groupInfo)),
                                                      ("relays", .array(list.groupRelays.map { ChatAPI.encodeValue($0) }))]))
                case let other: return Self.commandResult(other)
                }
            },
            AdminRoute(.get, "/api/channels", "A bot's channels (groups with useRelays), paged: its role in each and, where it is the owner, each relay with its status",
                       query: page, answers: [.init(status: "200", description: "OK", schema: .ref("Channels")), noBot]) { request, _ in
                let page = try Page(request)
                let b = try Self.bot(request, of: host)
                let list: GroupsList
                switch await b.api.respond("/_groups \(b.userId)") {
                case let .success(.group(.groupsList(l))): list = l
                case let other: return Self.commandResult(other)
                }
                let channels = list.groups.filter(\.useRelays)
                var entries: [JSONValue] = []
                for info in page.slice(channels) { entries.append(await Self.channelJSON(info, bot: b)) }
                return JSONResponse.make(page.json(sliced: entries, total: channels.count, key: "channels", bot: b.name))
            },
            AdminRoute(.post, "/api/groups/{groupId}/messages", "Send a text message to a bot's group",
                       query: bot, body: .textMessage, answers: [chatResponse, chatError, noBot]) { request, context in
                let id = try context.parameters.require("groupId", as: Int64.self)
                let b = try Self.bot(request, of: host)
                let body = try await Self.jsonBody(request, limit: maxBody)
                guard case let .string(text)? = body["text"], !text.isEmpty else {
                    throw AdminError(.badRequest, "badRequest", "the body must be {\"text\": \"a non-empty message\"}")
                }
                let messages: JSONValue = .array([.object([("msgContent", .object([("type", .string("text")), ("text", .string(text))]))])])
                return Self.commandResult(await b.api.respond("/_send #\(id) json \(messages.description)"))
            },
            AdminRoute(.get, "/api/address", "A bot's contact address link",
                       query: bot, answers: [.init(status: "200", description: "OK", schema: .ref("Address")),
                                             .init(status: "404", description: "No such bot, or the bot has no address", schema: .ref("Error"))]) { request, _ in
                let b = try Self.bot(request, of: host)
                guard let link = b.address else { throw AdminError(.notFound, "noAddress", "bot \(b.name) has no contact address (address.enabled is false)") }
                let qr = b === host.defaultBot ? "/api/address/qr.svg" : "/api/address/qr.svg?bot=\(b.name)"
                return JSONResponse.make(.object([("bot", .string(b.name)), ("link", .string(link)), ("qrSvg", .string(qr))]))
            },
            AdminRoute(.get, "/api/address/qr.svg", "A bot's contact address as a QR code",
                       query: bot, answers: [.init(status: "200", description: "SVG image", contentType: "image/svg+xml"),
                                             .init(status: "404", description: "No such bot, or the bot has no address", schema: .ref("Error"))]) { request, _ in
                let b = try Self.bot(request, of: host)
                guard let link = b.address else { throw AdminError(.notFound, "noAddress", "bot \(b.name) has no contact address (address.enabled is false)") }
                let code: QRCode
                do { code = try QRCode.encode(link) } catch { throw AdminError(.internalServerError, "qrCode", "the address does not fit a QR code: \(error)") }
                return Response(status: .ok, headers: [.contentType: "image/svg+xml"], body: .init(byteBuffer: ByteBuffer(string: Self.svg(code))))
            },
            AdminRoute(.post, "/api/command", "Run a Chat API command on a bot's engine; answered with the same JSON as chat_send_cmd",
                       query: bot, body: .command,
                       answers: [.init(status: "200", description: "The Chat API's response (a chatCmdError too)", schema: object), noBot]) { request, _ in
                let b = try Self.bot(request, of: host)
                let body = try await Self.jsonBody(request, limit: maxBody)
                guard case let .string(cmd)? = body["cmd"], !cmd.isEmpty else {
                    throw AdminError(.badRequest, "badRequest", "the body must be {\"cmd\": \"a chat command\"}")
                }
                return JSONResponse.make(await b.api.execute(cmd))
            },
            AdminRoute(.get, "/api/events", "WebSocket: a bot's Chat API events, one JSON object per text message (same token)", query: bot, kind: .events,
                       answers: [.init(status: "101", description: "Switching to WebSocket")]),
        ]
    }

    /// A bot's plugin list from ``AdminOptions/pluginSource`` (the config file read again), or
    /// the list it runs.
    private func pluginList(_ bot: HostedBot) async throws -> [PluginSpec] {
        do {
            return try await options.pluginSource?(bot.name) ?? bot.appliedPlugins
        } catch {
            throw AdminError(.unprocessableContent, "configError", "the configuration cannot be read; the running plugins are unchanged:\n\(error)")
        }
    }

    /// Applies `specs` to a bot's plugins (all, or only the instance `name`); the outcomes, one
    /// per instance.
    private func reload(_ bot: HostedBot, specs: [PluginSpec], only name: String?, context: AdminRequestContext) async throws -> [JSONValue] {
        var chosen = specs
        if let name {
            guard specs.contains(where: { $0.name == name }) || bot.appliedPlugins.contains(where: { $0.name == name }) else {
                throw AdminError(.notFound, "noSuchPlugin", "bot \(bot.name) has no plugin instance named \(name)")
            }
            // Only this instance takes its new settings; the others keep what they run.
            chosen = bot.appliedPlugins.filter { $0.name != name } + specs.filter { $0.name == name }
        }
        context.logger.notice("plugin reload requested", metadata: ["bot": "\(bot.name)", "instance": "\(name ?? "all")"])
        let results = await bot.reload(chosen)
        return results.map { r in
            .object([("bot", .string(bot.name)), ("name", .string(r.name)), ("outcome", .string(Self.outcomeName(r.outcome))),
                     ("failed", .bool(r.outcome.isFailure)), ("message", .string(r.outcome.description))])
        }
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

    static func pluginJSON(_ s: PluginStatus, bot: String) -> JSONValue {
        let c = s.stats
        func n(_ v: Int) -> JSONValue { .int(Int64(v)) }
        return .object([
            ("bot", .string(bot)), ("name", .string(s.name)), ("plugin", .string(s.info.name)), ("version", .string(s.info.version)),
            ("isolation", .string(s.isolation.rawValue)), ("state", .string(s.condition.rawValue)),
            ("queueDepth", n(s.queueDepth)),
            ("counters", .object([("handled", n(c.delivered)), ("errors", n(c.failed)), ("timeouts", n(c.timedOut)),
                                  ("dropped", n(c.dropped)), ("crashes", n(c.crashes)), ("restarts", n(c.restarts)),
                                  ("protocolErrors", n(c.protocolErrors)), ("refusedCalls", n(c.refusedCalls))])),
        ])
    }

    /// A channel for ``routeTable()``'s `/api/channels`: its `GroupInfo`, the bot's role in it
    /// (`owner`, `relay` or `subscriber`) and its relays — the owner's, with their status, from
    /// `/_get relays`; a relay's own status is `groupInfo.relayOwnStatus`. A list the engine
    /// refuses is left out with its error (`relaysError`), not failing the whole list.
    static func channelJSON(_ info: GroupInfo, bot: HostedBot) async -> JSONValue {
        let role: String = switch info.membership.memberRole {
        case .owner: "owner"
        case .relay: "relay"
        default: "subscriber"
        }
        var fields: [(String, JSONValue)] = [("groupInfo", ChatAPI.encodeValue(info)), ("role", .string(role))]
        guard role == "owner" else { return .object(fields) }
        switch await bot.api.respond("/_get relays #\(info.groupId)") {
        case let .success(.channel(.groupRelays(list))): fields.append(("relays", .array(list.groupRelays.map { ChatAPI.encodeValue($0) })))
        case let other: fields.append(("relaysError", .string(BotHost.describe(other))))
        }
        return .object(fields)
    }

    /// A Chat API response: 200 with its JSON, or 422 with the chat error of a failure.
    static func commandResult(_ r: Result<ChatResponse, ChatFailure>) -> Response {
        switch r {
        case let .success(response): JSONResponse.make(ChatAPI.encode(response))
        case let .failure(f): chatFailure(f.error)
        }
    }

    static func chatFailure(_ error: ChatError) -> Response {
        let json = ChatAPI.encode(error)
        return JSONResponse.make(.object([("error", .object([("type", .string("chatError")), ("message", .string(BotHost.describe(json))),
                                                             ("chatError", json)]))]), status: .unprocessableContent)
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

    func json(_ all: [JSONValue], key: String, bot: String) -> JSONValue {
        json(sliced: slice(all), total: all.count, key: key, bot: bot)
    }

    /// The entries of this page.
    func slice<T>(_ all: [T]) -> [T] {
        offset < all.count ? Array(all[offset..<min(all.count, offset + limit)]) : []
    }

    /// The page's answer for entries already sliced (made only for the page's entries).
    func json(sliced: [JSONValue], total: Int, key: String, bot: String) -> JSONValue {
        .object([("bot", .string(bot)), (key, .array(sliced)), ("total", .int(Int64(total))), ("offset", .int(Int64(offset))),
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
    var onAnswered: @Sendable () -> Void = {}

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
        onAnswered()
        context.logger.info("admin call", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(r.status.code)"])
        return r
    }
}

/// Per-client token buckets, for at most `maxClients` addresses at once.
///
/// When a new address comes and the table is full, the buckets that have refilled are forgotten
/// (they hold nothing a new one would not); if every bucket still holds a debt, the new address
/// shares one overflow bucket with the others that did not fit. No client's debt is ever
/// forgiven to make room (which a flood of addresses could otherwise use to reset everyone's).
final class RateLimiter: Sendable {
    private struct Bucket { var tokens: Double; var at: ContinuousClock.Instant }
    private let rate: Double
    private let burst: Double
    private let maxClients: Int
    private let buckets = NIOLockedValueBox<[String: Bucket]>([:])
    static let overflow = "(overflow)"

    init(rate: Double, burst: Int, maxClients: Int = 10_000) {
        self.rate = rate
        self.burst = Double(burst)
        self.maxClients = maxClients
    }

    /// Addresses tracked now (for tests).
    var trackedClients: Int { buckets.withLockedValue { $0.count } }

    func take(_ client: String) -> Bool {
        let now = ContinuousClock.now
        let refill = Duration.seconds(burst / rate)
        return buckets.withLockedValue { b in
            var key = client
            if b[key] == nil, b.count >= maxClients {
                b = b.filter { now - $0.value.at < refill }
                if b.count >= maxClients { key = Self.overflow }
            }
            var bucket = b[key] ?? Bucket(tokens: burst, at: now)
            let elapsed = Double((now - bucket.at).components.seconds) + Double((now - bucket.at).components.attoseconds) / 1e18
            bucket.tokens = min(burst, bucket.tokens + elapsed * rate)
            bucket.at = now
            let ok = bucket.tokens >= 1
            if ok { bucket.tokens -= 1 }
            b[key] = bucket
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
