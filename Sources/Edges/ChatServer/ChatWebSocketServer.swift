import ChatAPI
import ChatCore
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import NIOCore
import ServiceLifecycle

/// SimpleX's WebSocket API (``WebSocketAPI``) served over a Chat API: `swiftplex-chat -p PORT`
/// and the bot host's `ws_api`.
///
/// Each connection gets every chat event from the moment it connected (``EventHub``), and its
/// commands run one at a time in the order sent. With a token, a connection must present it
/// (`Authorization: Bearer …` or `?token=…`) or is answered 401 before any upgrade; a token is
/// required whenever the address is not loopback (``init(api:events:listen:token:browsers:logger:onListening:)``
/// throws otherwise). Browsers' requests are refused unless `browsers` allows them (``BrowserGuard``):
/// without that, any web page the operator visits could open the API on loopback.
public struct ChatWebSocketServer: Service {
    /// Largest client message taken; a bigger one closes the connection (1009).
    public static let maxMessageBytes = 1 << 20
    /// Events a connection may fall behind by before newer ones are dropped for it.
    public static let maxPendingEvents = 10_000

    /// Serves one upgraded connection (its events from the hub given to `init`).
    let serveConnection: @Sendable (WebSocketInboundStream, WebSocketOutboundWriter) async -> Void
    public let listen: ListenAddress
    let token: String?
    let browsers: BrowserGuard
    let logger: Logger
    let onListening: @Sendable (ListenAddress) async -> Void

    public init<Event: WebSocketAPIEvent>(api: any ChatCommandRunner, events: EventHub<Event>, listen: ListenAddress, token: String?,
                browsers: BrowserGuard = BrowserGuard(), logger: Logger,
                onListening: @escaping @Sendable (ListenAddress) async -> Void = { _ in }) throws {
        if let token, token.isEmpty { throw ServerConfigurationError("the WebSocket API's token must not be empty") }
        if token == nil, !listen.isLoopback {
            throw ServerConfigurationError("the WebSocket API listens on \(listen), beyond loopback: it needs a token (SimpleX's has no authentication; this one must)")
        }
        serveConnection = { [logger] inbound, outbound in
            await Self.serve(inbound: inbound, outbound: outbound, api: api, events: events, logger: logger)
        }
        self.listen = listen
        self.token = token
        self.browsers = browsers
        self.logger = logger
        self.onListening = onListening
    }

    func authorized(_ request: Request) -> Bool {
        guard let token else { return true }
        return BearerToken.matches(BearerToken.presented(authorization: request.headers[.authorization], uri: request.uri.description), token)
    }

    public func run() async throws {
        let router = Router(context: BasicWebSocketRequestContext.self)
        // What reaches the HTTP router was not upgraded: a browser (403), a bad token (401), or a
        // plain request.
        router.middlewares.add(BrowserGuardMiddleware(browsers, listen: listen))
        router.middlewares.add(BearerMiddleware(check: authorized))
        router.get("/") { _, _ in
            JSONResponse.error(.badRequest, type: "upgradeRequired", "this is SimpleX's WebSocket API: connect with a WebSocket client")
        }
        let wsRouter = Router(context: BasicWebSocketRequestContext.self)
        wsRouter.ws("/") { request, _ in
            authorized(request) ? .upgrade([:]) : .dontUpgrade
        } onUpgrade: { [serveConnection] inbound, outbound, _ in
            await serveConnection(inbound, outbound)
        }
        var log = logger
        log[metadataKey: "server"] = "ws_api"
        let app = Application(
            router: router,
            server: .guardedWebSocketUpgrade(webSocketRouter: wsRouter, configuration: .init(ws: .init(maxFrameSize: Self.maxMessageBytes)),
                                             check: browsers.upgradeCheck(listen: listen, token: { [token] in token })),
            configuration: .init(address: .hostname(listen.host, port: listen.port), serverName: nil),
            onServerRunning: { [listen, onListening, logger] channel in
                let bound = ListenAddress(host: listen.host, port: channel.localAddress?.port ?? listen.port)
                logger.info("WebSocket API listening", metadata: ["address": "\(bound)"])
                await onListening(bound)
            },
            logger: log
        )
        try await app.run()
    }

    /// One connection: events written as they come, commands answered in order.
    static func serve<Event: WebSocketAPIEvent>(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, api: any ChatCommandRunner,
                                                events: EventHub<Event>, logger: Logger) async {
        let subscription = events.subscribe(limit: maxPendingEvents)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in subscription.events {
                    do { try await outbound.write(.text(event.webSocketFrame)) } catch { return }
                }
            }
            do {
                for try await message in inbound.messages(maxSize: maxMessageBytes) {
                    let answer: String = switch message {
                    case let .text(text): await WebSocketAPI.respond(to: text, api: api)
                    case .binary: WebSocketAPI.response(corrId: nil, resp: WebSocketAPI.commandError("invalid frame: binary messages are not accepted; send JSON text"))
                    }
                    try await outbound.write(.text(answer))
                }
            } catch {
                logger.debug("WebSocket API connection ended", metadata: ["error": "\(type(of: error))"])
            }
            group.cancelAll()
        }
        if subscription.dropped > 0 {
            logger.warning("a WebSocket API client fell behind; events were dropped for it", metadata: ["dropped": "\(subscription.dropped)"])
        }
    }
}

/// Answers 401 (a typed JSON error) to requests without the right bearer token, except the
/// paths in `open`.
public struct BearerMiddleware<Context: RequestContext>: RouterMiddleware {
    let check: @Sendable (Request) -> Bool
    let open: Set<String>
    let onFailure: @Sendable () -> Void

    public init(check: @escaping @Sendable (Request) -> Bool, open: Set<String> = [], onFailure: @escaping @Sendable () -> Void = {}) {
        self.check = check
        self.open = open
        self.onFailure = onFailure
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if open.contains(request.uri.path) { return try await next(request, context) }
        guard check(request) else {
            onFailure()
            context.logger.notice("refused a request without a valid token", metadata: ["path": "\(request.uri.path)"])
            return JSONResponse.unauthorized()
        }
        return try await next(request, context)
    }
}
