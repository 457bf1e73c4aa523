import NIOCore
import RelayProtocol

/// Client side of one relay connection: answers the relay hello, matches responses to requests by
/// correlation ID, forwards `MSG`/`END` as events, and packs outgoing transmissions into blocks.
final class RelayClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Phase { case awaitingHello, ready, closed }

    private var phase = Phase.awaitingHello
    private let helloPromise: EventLoopPromise<ServerHello>
    private let events: AsyncStream<RelayEvent>.Continuation
    private var pending: [[UInt8]: EventLoopPromise<ServerResponse>] = [:]
    private var outbox: [ByteBuffer] = []
    private var flushScheduled = false
    private var context: ChannelHandlerContext?

    init(helloPromise: EventLoopPromise<ServerHello>, events: AsyncStream<RelayEvent>.Continuation) {
        self.helloPromise = helloPromise
        self.events = events
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let block = unwrapInboundIn(data)
        guard let parts = try? BlockCodec.decode(block) else {
            return fail(context: context, RelayClientError(.unexpectedResponse, "relay sent a malformed block"))
        }
        switch phase {
        case .closed:
            return
        case .awaitingHello:
            guard parts.count == 1, let hello = try? ServerHello.decode(parts[0]) else {
                return fail(context: context, RelayClientError(.handshake, "relay sent no valid hello"))
            }
            guard hello.minVersion <= RelayLimits.currentVersion, hello.maxVersion >= RelayLimits.minimumVersion else {
                return fail(context: context, RelayClientError(.handshake, "relay speaks versions \(hello.minVersion)–\(hello.maxVersion), this client \(RelayLimits.minimumVersion)–\(RelayLimits.currentVersion)"))
            }
            phase = .ready
            let version = min(hello.maxVersion, RelayLimits.currentVersion)
            enqueueRaw(ClientHello(version: version).encoded(allocator: context.channel.allocator))
            helloPromise.succeed(hello)
        case .ready:
            for part in parts {
                guard let t = try? Transmission.decode(part), let response = try? ServerResponse.decode(t.command) else {
                    return fail(context: context, RelayClientError(.unexpectedResponse, "relay sent an unparseable transmission"))
                }
                if let promise = pending.removeValue(forKey: t.correlationId) {
                    promise.succeed(response)
                } else {
                    switch response {
                    case let .message(id, sealed):
                        events.yield(.message(recipientId: t.entityId, messageId: id, sealed: sealed))
                    case .end:
                        events.yield(.end(recipientId: t.entityId))
                    case let .error(code) where t.correlationId.isEmpty:
                        events.yield(.error(code))
                    default:
                        break // an answer to a request that was abandoned
                    }
                }
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(context: context, RelayClientError(.connectionClosed, "relay connection closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context: context, error)
    }

    private func fail(context: ChannelHandlerContext, _ error: any Error) {
        guard phase != .closed else { return }
        phase = .closed
        helloPromise.fail(error)
        let waiting = pending
        pending.removeAll()
        for (_, p) in waiting { p.fail(RelayClientError(.connectionClosed, "relay connection closed before the answer")) }
        events.yield(.disconnected)
        events.finish()
        context.close(promise: nil)
    }

    /// Queues a transmission; `promise` gets the answer with the same correlation ID, or a
    /// timeout error after `timeout`.
    func send(_ transmission: ByteBuffer, correlationId: [UInt8], timeout: TimeAmount, promise: EventLoopPromise<ServerResponse>) {
        guard phase == .ready, let context else {
            return promise.fail(RelayClientError(.connectionClosed, "relay connection is not open"))
        }
        pending[correlationId] = promise
        enqueueRaw(transmission)
        let timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [self] in
            pending.removeValue(forKey: correlationId)?.fail(RelayClientError(.timeout, "relay did not answer in time"))
        }
        promise.futureResult.whenComplete { _ in timer.cancel() }
    }

    private func enqueueRaw(_ t: ByteBuffer) {
        guard let context else { return }
        outbox.append(t)
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            guard let context = self.context, !outbox.isEmpty else { return }
            // Every transmission may be signed: never more than the relay checks per block.
            for block in BlockCodec.encode(outbox, maxPerBlock: RelayLimits.maxAuthorizedPerBlock, allocator: context.channel.allocator) {
                context.write(wrapOutboundOut(block), promise: nil)
            }
            outbox.removeAll(keepingCapacity: true)
            context.flush()
        }
    }
}
