import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import RelayProtocol
import SwiftplexCrypto

/// Something the relay sent without being asked.
public enum RelayEvent: Sendable, Equatable {
    /// A message for a queue this connection subscribed to; open it with ``RecipientQueue/open(messageId:sealed:)``.
    case message(recipientId: [UInt8], messageId: [UInt8], sealed: [UInt8])
    /// Another connection subscribed to the queue; this one gets nothing more from it.
    case end(recipientId: [UInt8])
    /// An error not tied to a request (e.g. a malformed block).
    case error(RelayErrorCode)
    /// The connection is gone; the stream ends after this.
    case disconnected
}

/// An authenticated TLS connection to one relay.
///
/// The relay's certificate must hash to the fingerprint in its address, or ``connect(to:group:timeout:)``
/// fails with ``RelayClientError/Code/fingerprintMismatch``. Requests may be issued from any task;
/// they are pipelined and share blocks.
public final class RelayConnection: Sendable {
    public let address: RelayAddress
    /// The relay-chosen session identifier and keys that every authorisation on this connection covers.
    public let session: SessionKeys
    public var sessionId: [UInt8] { session.sessionId }
    /// Messages, END notices and disconnection, in arrival order.
    public let events: AsyncStream<RelayEvent>
    private let channel: any Channel
    private let handler: NIOLoopBound<RelayClientHandler>

    private init(address: RelayAddress, session: SessionKeys, events: AsyncStream<RelayEvent>, channel: any Channel, handler: NIOLoopBound<RelayClientHandler>) {
        self.address = address
        self.session = session
        self.events = events
        self.channel = channel
        self.handler = handler
    }

    /// The TLS client context every relay connection shares, made once: trust is decided by the
    /// pinned fingerprint alone (checked per connection in the handler's verification callback),
    /// so no CA bundle is loaded — building a context with the platform's trust roots reads and
    /// parses the whole bundle from disk, blocking work that does not belong on a dial's path.
    private static let clientContext: Result<NIOSSLContext, any Error> = Result {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv13
        tls.maximumTLSVersion = .tlsv13
        tls.trustRoots = .certificates([])
        tls.certificateVerification = .noHostnameVerification
        return try NIOSSLContext(configuration: tls)
    }

    /// Opens TLS 1.3 to the relay, checks its fingerprint and completes the relay hello.
    /// `sourceAddress`: the local IP address to connect from (nil: the system's choice); benchmarks
    /// use several loopback addresses to stand for clients on different hosts.
    public static func connect(to address: RelayAddress, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                               timeout: Duration = .seconds(10), sourceAddress: String? = nil) async throws -> RelayConnection {
        let sslContext = try clientContext.get()
        let expected = address.fingerprint
        let mismatch = NIOLockedValueBox(false)
        let (events, continuation) = AsyncStream.makeStream(of: RelayEvent.self, bufferingPolicy: .unbounded)
        let loop = group.next()
        let helloPromise = loop.makePromise(of: ServerHello.self)
        let handlerBox = NIOLockedValueBox<NIOLoopBound<RelayClientHandler>?>(nil)

        var bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.nanoseconds(timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let ssl = try NIOSSLClientHandler(context: sslContext, serverHostname: nil) { certificates, promise in
                        guard let leaf = certificates.first, let der = try? leaf.toDERBytes(),
                              Sodium.constantTimeEquals(Digest.sha256(der), expected) else {
                            mismatch.withLockedValue { $0 = true }
                            return promise.succeed(.failed)
                        }
                        promise.succeed(.certificateVerified)
                    }
                    let handler = RelayClientHandler(helloPromise: helloPromise, events: continuation)
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(ssl)
                    try sync.addHandler(ByteToMessageHandler(BlockDecoder()))
                    try sync.addHandler(handler)
                    handlerBox.withLockedValue { $0 = NIOLoopBound(handler, eventLoop: channel.eventLoop) }
                }
            }

        let channel: any Channel
        do {
            if let sourceAddress { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: sourceAddress, port: 0)) }
            if let literal = try? SocketAddress(ipAddress: address.host, port: address.port) {
                // An IP address needs no resolving: connect from the event loop at once, instead of
                // a hop through the resolver's dispatch queue that a busy machine can delay past
                // the connect timeout.
                channel = try await bootstrap.connect(to: literal).get()
            } else {
                channel = try await bootstrap.connect(host: address.host, port: address.port).get()
            }
        } catch {
            continuation.finish()
            let failure = RelayClientError(.connectFailed, "cannot connect to relay \(address.host):\(address.port): \(error)")
            helloPromise.fail(failure)  // a promise must be completed, even when no channel ever existed
            throw failure
        }
        let timer = loop.scheduleTask(in: .nanoseconds(timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)) {
            helloPromise.fail(RelayClientError(.timeout, "relay did not complete the hello in time"))
        }
        do {
            let hello = try await helloPromise.futureResult.get()
            timer.cancel()
            return RelayConnection(address: address, session: SessionKeys(sessionId: hello.sessionId, relaySessionKey: hello.sessionKey), events: events, channel: channel,
                                   handler: handlerBox.withLockedValue { $0! })
        } catch {
            timer.cancel()
            try? await channel.close()
            if mismatch.withLockedValue({ $0 }) {
                throw RelayClientError(.fingerprintMismatch, "relay \(address.host):\(address.port) presented a certificate that does not match the fingerprint in its address")
            }
            if let e = error as? RelayClientError { throw e }
            throw RelayClientError(.handshake, "TLS or relay handshake with \(address.host):\(address.port) failed: \(error)")
        }
    }

    /// Sends `command` to `entityId`, authorised by `key` if given, and returns the relay's answer.
    /// An `ERR` answer is thrown as ``RelayClientError``.
    @discardableResult
    public func send(_ command: ClientCommand, entityId: [UInt8] = [], key: AuthPrivateKey? = nil) async throws -> ServerResponse {
        let t = Transmission.signed(command: command.encoded(), correlationId: Sodium.randomBytes(RelayLimits.correlationIdLength),
                                    entityId: entityId, key: key, session: session)
        let response = try await send(transmission: t)
        if case let .error(code) = response { throw RelayClientError.relay(code) }
        return response
    }

    /// Sends a prepared transmission as it is (tests use this to replay or forge) and returns the
    /// answer, `ERR` included. Fails with ``RelayClientError/Code/timeout`` after `timeout`.
    public func send(transmission t: Transmission, timeout: Duration = .seconds(30)) async throws -> ServerResponse {
        try await submit(transmission: t, timeout: timeout).get()
    }

    /// Writes a prepared transmission; its answer (or the timeout) completes the future.
    func submit(transmission t: Transmission, timeout: Duration) -> EventLoopFuture<ServerResponse> {
        let promise = channel.eventLoop.makePromise(of: ServerResponse.self)
        let bytes = t.encoded(allocator: channel.allocator)
        let corr = t.correlationId
        let handler = self.handler
        let limit = TimeAmount.nanoseconds(timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000)
        channel.eventLoop.execute { handler.value.send(bytes, correlationId: corr, timeout: limit, promise: promise) }
        return promise.futureResult
    }

    public func close() async {
        try? await channel.close()
    }

    public var isActive: Bool { channel.isActive }
}
