import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// A deliberately badly-behaved client: raw TCP or TLS (trusting any certificate) that writes
/// arbitrary bytes, optionally never reads, and reports what arrives and when it is closed.
final class RawClient: Sendable {
    let channel: any Channel
    private let received = NIOLockedValueBox<[UInt8]>([])

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let sink: NIOLockedValueBox<[UInt8]>
        init(_ sink: NIOLockedValueBox<[UInt8]>) { self.sink = sink }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var b = unwrapInboundIn(data)
            sink.withLockedValue { $0.append(contentsOf: b.readBytes(length: b.readableBytes) ?? []) }
        }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }

    /// `sourceAddress`: the local IP address to connect from (nil: the system's choice).
    init(host: String, port: Int, tls: Bool, autoRead: Bool = true, sourceAddress: String? = nil) async throws {
        let sink = received
        let sslContext = try NIOSSLContext(configuration: {
            var c = TLSConfiguration.makeClientConfiguration()
            c.certificateVerification = .none
            return c
        }())
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        if let sourceAddress { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: sourceAddress, port: 0)) }
        channel = try await bootstrap
            .channelOption(.autoRead, value: autoRead)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if tls { try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: sslContext, serverHostname: nil)) }
                    try channel.pipeline.syncOperations.addHandler(Collector(sink))
                }
            }
            .connect(host: host, port: port).get()
    }

    var bytesReceived: [UInt8] { received.withLockedValue { $0 } }

    func write(_ bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes)).get()
    }

    /// Writes without waiting for the write to complete (for flooding).
    func writeNoWait(_ bytes: [UInt8]) {
        channel.writeAndFlush(channel.allocator.buffer(bytes: bytes), promise: nil)
    }

    /// Waits for the relay to close the connection; false if it is still open after `timeout`.
    func waitForClose(timeout: Duration = .seconds(10)) async -> Bool {
        let closed = channel.closeFuture
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { _ = try? await closed.get(); return true }
            group.addTask { try? await Task.sleep(for: timeout); return false }
            let r = await group.next()!
            group.cancelAll()
            return r
        }
    }

    func close() async { try? await channel.close() }
}
