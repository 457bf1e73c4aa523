import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import RelayProtocol
import RelayServer

/// The baseline: a TLS 1.3 server on the same NIO stack that echoes every 16 KiB block, and
/// clients that keep a fixed number of blocks in flight per connection.
enum TLSEcho {
    final class EchoHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            context.write(data, promise: nil)
        }
        func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }

    final class ClientHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let inFlight: Int
        let bodySize: Int
        let recorder: Recorder
        let remaining: NIOLockedValueBox<Int>
        let done: EventLoopPromise<Void>

        init(inFlight: Int, bodySize: Int, recorder: Recorder, remaining: NIOLockedValueBox<Int>, done: EventLoopPromise<Void>) {
            self.inFlight = inFlight
            self.bodySize = bodySize
            self.recorder = recorder
            self.remaining = remaining
            self.done = done
        }

        func start(context: ChannelHandlerContext) {
            for _ in 0..<inFlight { sendOne(context: context) }
            context.flush()
        }

        private func sendOne(context: ChannelHandlerContext) {
            let claimed = remaining.withLockedValue { r -> Bool in
                guard r > 0 else { return false }
                r -= 1
                return true
            }
            guard claimed else { return }
            // The same framing a relay SEND uses: one transmission in a padded block.
            let body = [UInt8].stamped(size: bodySize)
            var t = context.channel.allocator.buffer(capacity: body.count + 8)
            t.writeBytes(body)
            for block in BlockCodec.encode([t], allocator: context.channel.allocator) {
                context.write(wrapOutboundOut(block), promise: nil)
            }
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let block = unwrapInboundIn(data)
            if let parts = try? BlockCodec.decode(block), let first = parts.first, let bytes = first.getBytes(at: first.readerIndex, length: 8) {
                recorder.record(monotonicNanos() &- bytes.stamp)
            }
            sendOne(context: context)
        }

        func channelReadComplete(context: ChannelHandlerContext) { context.flush() }

        func channelActive(context: ChannelHandlerContext) {
            context.fireChannelActive()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted = event as? TLSUserEvent ?? .shutdownCompleted { start(context: context) }
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Runs `messages` echoes over `connections` connections with `inFlight` blocks each.
    static func run(group: any EventLoopGroup, connections: Int, inFlight: Int, messages: Int, bodySize: Int) async throws -> Summary {
        let identity = try RelayIdentity.generate()
        let serverContext = try identity.makeServerTLSContext()
        let server = try await ServerBootstrap(group: group)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: serverContext))
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(BlockDecoder()))
                    try channel.pipeline.syncOperations.addHandler(EchoHandler())
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv13
        tls.certificateVerification = .none
        let clientContext = try NIOSSLContext(configuration: tls)
        let recorder = Recorder(capacity: messages)
        let remaining = NIOLockedValueBox(messages)
        let port = server.localAddress!.port!
        let start = ContinuousClock.now
        var channels: [any Channel] = []
        for _ in 0..<connections {
            let ch = try await ClientBootstrap(group: group)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let done = channel.eventLoop.makePromise(of: Void.self)
                        done.succeed()
                        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: clientContext, serverHostname: nil))
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(BlockDecoder()))
                        try channel.pipeline.syncOperations.addHandler(ClientHandler(inFlight: inFlight, bodySize: bodySize, recorder: recorder, remaining: remaining, done: done))
                    }
                }
                .connect(host: "127.0.0.1", port: port).get()
            channels.append(ch)
        }
        while recorder.count < messages {
            try await Task.sleep(for: .milliseconds(1))
        }
        let elapsed = ContinuousClock.now - start
        for ch in channels { try? await ch.close() }
        try? await server.close()
        return recorder.summary(elapsed: elapsed)
    }
}
