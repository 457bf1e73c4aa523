import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus
import ServiceLifecycle

/// A minimal HTTP/1.1 server answering `GET /metrics` with the Prometheus text format.
struct MetricsEndpoint: Service {
    let channel: any Channel
    let port: Int

    static func start(host: String, port: Int, registry: PrometheusCollectorRegistry, group: any EventLoopGroup) async throws -> MetricsEndpoint {
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(MetricsHTTPHandler(registry: registry))
                }
            }
            .bind(host: host, port: port).get()
        return MetricsEndpoint(channel: channel, port: channel.localAddress?.port ?? port)
    }

    func run() async throws {
        try? await gracefulShutdown()
        try? await channel.close()
    }
}

final class MetricsHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let registry: PrometheusCollectorRegistry
    private var path = ""

    init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .head(head):
            path = head.method == .GET ? head.uri : ""
        case .body:
            break
        case .end:
            let ok = path == "/metrics"
            let body = ok ? registry.emitToBuffer() : Array("not found\n".utf8)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: ok ? "text/plain; version=0.0.4" : "text/plain")
            headers.add(name: "Content-Length", value: "\(body.count)")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: ok ? .ok : .notFound, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }
}
