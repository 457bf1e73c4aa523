import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore
import SwiftplexBase

/// The head of a request asking for a WebSocket upgrade, as the upgrade gate sees it.
public struct UpgradeRequestHead: Sendable {
    public var uri: String
    public var authorization: String?
    public var host: String?
    public var origin: String?
}

/// Why the upgrade gate refuses an upgrade.
public enum UpgradeRefusal: Sendable {
    /// No valid bearer token: 401.
    case unauthorized
    /// A browser's request (``BrowserGuard``): 403.
    case forbidden(String)
}

/// hummingbird-websocket answers every refused upgrade with a bare 400, so a WebSocket upgrade
/// that `check` refuses (a wrong token, a browser's origin) is answered here instead: this gate
/// reads the head of a connection's first request, and when it asks for a WebSocket upgrade that
/// `check` refuses, it answers `401` or `403` (a JSON error) and closes — before any upgrade.
/// Anything else passes through unchanged and the gate removes itself. (A later request on the same connection cannot upgrade:
/// hummingbird-websocket redirects such a request to a new connection, which meets the gate.)
final class UpgradeTokenGate: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// A head longer than this is passed on unread (the HTTP decoder refuses it).
    static let maxHead = 16 << 10
    private let check: @Sendable (UpgradeRequestHead) -> UpgradeRefusal?
    private let onRefused: @Sendable () -> Void
    private var buffered: ByteBuffer?
    private var done = false
    private var refused = false

    init(check: @escaping @Sendable (UpgradeRequestHead) -> UpgradeRefusal?, onRefused: @escaping @Sendable () -> Void) {
        self.check = check
        self.onRefused = onRefused
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }  // closing: the rest of a refused request is dropped
        guard !done else { return context.fireChannelRead(data) }
        var incoming = unwrapInboundIn(data)
        if buffered == nil { buffered = incoming } else { buffered!.writeBuffer(&incoming) }
        let bytes = buffered!.readableBytesView
        guard let headEnd = Self.endOfHead(bytes) else {
            if bytes.count > Self.maxHead { pass(context) }
            return
        }
        let head = String(decoding: bytes.prefix(headEnd), as: UTF8.self)
        if let request = Self.upgradeRequest(head), let refusal = check(request) {
            done = true
            refused = true
            onRefused()
            let response: String
            switch refusal {
            case .unauthorized:
                let body = JSONValueText.error(type: "unauthorized", message: "a valid bearer token is required (Authorization: Bearer <token>, or ?token=<token>)")
                response = "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json; charset=utf-8\r\nWWW-Authenticate: Bearer\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
            case let .forbidden(message):
                let body = JSONValueText.error(type: "forbidden", message: message)
                response = "HTTP/1.1 403 Forbidden\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
            }
            let out = context.channel.allocator.buffer(string: response)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(out)).whenComplete { _ in channel.close(promise: nil) }
            buffered = nil
            return
        }
        pass(context)
    }

    private func pass(_ context: ChannelHandlerContext) {
        done = true
        if let b = buffered {
            buffered = nil
            context.fireChannelRead(wrapInboundOut(b))
        }
        context.pipeline.syncOperations.removeHandler(self, promise: nil)
    }

    static func endOfHead(_ bytes: ByteBufferView) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var i = bytes.startIndex
        while i <= bytes.endIndex - 4 {
            if bytes[i] == 13, bytes[i + 1] == 10, bytes[i + 2] == 13, bytes[i + 3] == 10 { return i - bytes.startIndex }
            i += 1
        }
        return nil
    }

    /// The request URI and the headers the gate checks of a head that asks for a WebSocket
    /// upgrade; nil for any other request.
    static func upgradeRequest(_ head: String) -> UpgradeRequestHead? {
        let lines = head.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard let requestLine = lines.first else { return nil }
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3 else { return nil }
        var upgrade = false
        var request = UpgradeRequestHead(uri: String(parts[1]))
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name == "upgrade", value.lowercased().contains("websocket") { upgrade = true }
            switch name {
            case "authorization": request.authorization = value
            case "host": request.host = value
            case "origin": request.origin = value
            default: break
            }
        }
        return upgrade ? request : nil
    }
}

/// The JSON error text of ``JSONResponse/error(_:type:_:headers:)``, for the gate's raw answer.
enum JSONValueText {
    static func error(type: String, message: String) -> String {
        JSONResponse.errorValue(type: type, message).description + "\n"
    }
}

/// A server child channel that puts an ``UpgradeTokenGate`` in front of another.
struct GuardedChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    typealias Value = Inner.Value
    let inner: Inner
    let check: @Sendable (UpgradeRequestHead) -> UpgradeRefusal?
    let onRefused: @Sendable () -> Void

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(UpgradeTokenGate(check: check, onRefused: onRefused), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async { await inner.handle(value: value, logger: logger) }
}

extension HTTPServerBuilder {
    /// HTTP/1 with WebSocket upgrades through `webSocketRouter`, an upgrade refused by `check`
    /// (given the request URI and the Authorization, Host and Origin headers) answered 401 or 403
    /// before it happens.
    public static func guardedWebSocketUpgrade<WSResponderBuilder: HTTPResponderBuilder>(
        webSocketRouter: WSResponderBuilder,
        configuration: HTTP1WebSocketUpgradeChannel.Configuration = .init(),
        check: @escaping @Sendable (UpgradeRequestHead) -> UpgradeRefusal?,
        onRefused: @escaping @Sendable () -> Void = {}
    ) -> HTTPServerBuilder where WSResponderBuilder.Responder.Context: WebSocketRequestContext {
        let webSocketResponder = webSocketRouter.buildResponder()
        return .init { responder in
            GuardedChildChannel(
                inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder, configuration: configuration),
                check: check, onRefused: onRefused)
        }
    }
}
