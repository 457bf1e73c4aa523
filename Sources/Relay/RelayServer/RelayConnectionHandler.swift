import Dispatch
import Logging
import NIOConcurrencyHelpers
import NIOCore
import RelayProtocol
import SwiftplexCrypto

/// One client connection: the relay hello, block decoding, command dispatch to ``RelayCore``,
/// coalescing of responses into blocks, timeouts and backpressure.
///
/// Sits after the TLS handler and the ``BlockDecoder``. All state is confined to the channel's
/// event loop; the core reaches the connection through ``Session``, which hops onto that loop.
final class RelayConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The connection as the core sees it. Sendable: every call hops onto the connection's loop.
    final class Session: RelaySubscriber {
        let connectionId: UInt64
        let eventLoop: any EventLoop
        let handler: NIOLoopBound<RelayConnectionHandler>

        init(connectionId: UInt64, eventLoop: any EventLoop, handler: RelayConnectionHandler) {
            self.connectionId = connectionId
            self.eventLoop = eventLoop
            self.handler = NIOLoopBound(handler, eventLoop: eventLoop)
        }

        func push(_ response: ServerResponse, entityId: [UInt8]) {
            onLoop { $0.enqueue(response, correlationId: [], entityId: entityId) }
        }

        /// `proves`: the command was authorised by a key the relay already held, so an answer
        /// other than an error proves the connection (``RelayConnectionHandler/Standing``).
        func reply(_ response: ServerResponse, correlationId: [UInt8], entityId: [UInt8], proves: Bool = false) {
            onLoop { h in
                h.pendingCommands -= 1
                h.enqueue(response, correlationId: correlationId, entityId: entityId)
                h.noteAnswer(response, proves: proves)
                if response == .error(.auth) { h.noteAuthFailure() }
                h.checkBudget()
                h.dispatchInbox()
                h.resumeReadingIfPossible()
            }
        }

        private func onLoop(_ body: @escaping @Sendable (RelayConnectionHandler) -> Void) {
            if eventLoop.inEventLoop {
                body(handler.value)
            } else {
                let handler = self.handler
                eventLoop.execute { body(handler.value) }
            }
        }
    }

    private enum Phase { case awaitingHello, ready, closed }

    /// Whether the connection has shown itself well-behaved. Until it is proven, the event-loop
    /// time spent on it is taken from the relay-wide budget of unproven work
    /// (``RelayConfiguration/unprovenWorkRate``) — from that of new connections
    /// (``RelayConfiguration/handshakeWorkRate``) during its grace, see `newcomer` — and its
    /// dispatch yields to other connections after a short slice; proven, it does neither.
    /// Demoted is for the rest of the connection.
    enum Standing { case unproven, proven, demoted }

    private static let nextId = NIOLockedValueBox<UInt64>(0)

    private let core: RelayCore
    private let configuration: RelayConfiguration
    private var logger: Logger
    private let connectionId: UInt64
    private let sessionKey = X25519.PrivateKey()
    private let session: SessionKeys
    private var phase = Phase.awaitingHello
    private var subscriber: Session?
    private var context: ChannelHandlerContext?
    private var outbox: [ByteBuffer] = []
    private var flushScheduled = false
    private var pendingCommands = 0
    private var readHeld = false
    private var lastInbound = NIODeadline.now()
    private var timers: [Scheduled<Void>] = []
    private var idleTimer: Scheduled<Void>?
    private var stallTimer: Scheduled<Void>?
    /// When each `AUTH` answer of the last `authFailureWindow` was given (oldest first).
    private var authFailures: [NIODeadline] = []
    /// Set once the relay decided to close: nothing more read is dispatched.
    private var closing = false
    /// `NEW`s in the current window and when that window started.
    private var newQueuesInWindow = 0
    private var newQueueWindowStart = NIODeadline.distantPast
    /// This connection's rates; while one is overdrawn, nothing more is read (`throttleTimer` set).
    private var budget: ConnectionBudget
    private var throttleTimer: Scheduled<Void>?
    /// Transmissions read but not yet dispatched: what follows the one that overdrew a rate (or
    /// filled ``RelayConfiguration/maxPendingCommandsPerConnection``) waits here, and nothing more
    /// is read from the socket until it is empty. At most one socket read's worth.
    private var inbox = CircularBuffer<ByteBuffer>()
    private var dispatching = false
    private(set) var standing = Standing.unproven
    /// The connection's grace: its TLS handshake, hello, first read of commands and the answers
    /// flushed for it are charged to the budget of new connections, which paces the listener and
    /// holds no connection, so a reconnecting client gets to prove itself (its first `SUB`) while
    /// misbehaving connections keep the budget of unproven work overdrawn. Over after the first
    /// flush of answers (once that is charged), at its second read of commands, or when it is demoted.
    private var newcomer = true
    private var graceEnding = false
    /// Reads of commands (after the hello) so far, counted up to 2.
    private var commandReads = 0
    /// Where the connection's ``WorkMeter`` reports the time of its inbound events (nil in tests
    /// that build a pipeline without one).
    private let workTally: WorkTally?

    init(core: RelayCore, configuration: RelayConfiguration, logger: Logger, workTally: WorkTally? = nil) {
        self.core = core
        self.configuration = configuration
        self.workTally = workTally
        self.connectionId = Self.nextId.withLockedValue { $0 += 1; return $0 }
        self.budget = ConnectionBudget(configuration, global: core.globalBudget, now: .now())
        self.session = SessionKeys(sessionId: Sodium.randomBytes(RelayLimits.sessionIdLength), relayKey: sessionKey)
        var logger = logger
        logger[metadataKey: "conn"] = "\(connectionId)"
        self.logger = logger
    }

    // MARK: - Lifecycle

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The loop's clock (a test's loop moves it by hand).
        budget = ConnectionBudget(configuration, global: core.globalBudget, now: context.eventLoop.now)
        lastInbound = context.eventLoop.now
        subscriber = Session(connectionId: connectionId, eventLoop: context.eventLoop, handler: self)
        workTally?.report = { [weak self] nanoseconds in self?.chargeWork(nanoseconds) }
        workTally?.noteWait = { [core] in core.noteThrottled(.unprovenRun) }
        if context.channel.isActive { start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard timers.isEmpty else { return }
        core.connectionOpened()
        logger.info("connection opened")
        // The hello waits in the TLS handler until the handshake completes.
        enqueueRaw(ServerHello(sessionId: session.sessionId, sessionKey: sessionKey.publicKey).encoded(allocator: context.channel.allocator))
        let handshake = context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(configuration.handshakeTimeout.timeAmountNanoseconds)) { [self] in
            if phase == .awaitingHello {
                logger.info("closing connection: no hello before the handshake timeout")
                close()
            }
        }
        timers.append(handshake)
        scheduleIdleCheck(context: context)
    }

    /// Checks for an idle connection a few times per idle period (rescheduling itself).
    private func scheduleIdleCheck(context: ChannelHandlerContext) {
        let idle = TimeAmount.nanoseconds(configuration.idleTimeout.timeAmountNanoseconds)
        let checkEvery = TimeAmount.nanoseconds(max(idle.nanoseconds / 4, 1_000_000))
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: checkEvery) { [self] in
            guard phase != .closed, let context = self.context else { return }
            if context.eventLoop.now - lastInbound > idle {
                logger.info("closing idle connection")
                close()
            } else {
                scheduleIdleCheck(context: context)
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Not started: closed while held at its source's gate (never active for this handler).
        if phase != .closed, !timers.isEmpty, let subscriber {
            phase = .closed
            core.connectionClosed(subscriber)
            logger.info("connection closed")
        }
        phase = .closed
        workTally?.source?.graceEnded()
        timers.forEach { $0.cancel() }
        idleTimer?.cancel()
        stallTimer?.cancel()
        throttleTimer?.cancel()
        throttleTimer = nil
        outbox.removeAll()
        inbox.removeAll()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        workTally?.report = nil
        workTally?.noteWait = nil
        self.context = nil
        // Breaks the handler ↔ session reference cycle; late replies find a closed connection.
        subscriber = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS failures from scanners and plain-text clients are routine: keep them at debug.
        logger.debug("connection error", metadata: ["error": "\(error)"])
        close()
    }

    private func close() {
        guard let context, phase != .closed, !closing else { return }
        closing = true
        context.close(promise: nil)
    }

    // MARK: - Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let block = unwrapInboundIn(data)
        lastInbound = context.eventLoop.now
        switch phase {
        case .closed:
            return
        case _ where closing:
            return
        case .awaitingHello:
            guard let parts = try? BlockCodec.decode(block), parts.count == 1,
                  let hello = try? ClientHello.decode(parts[0]),
                  hello.version >= RelayLimits.minimumVersion, hello.version <= RelayLimits.currentVersion
            else {
                logger.info("closing connection: bad client hello")
                core.noteProtocolError()
                return close()
            }
            phase = .ready
        case .ready:
            if commandReads < 2 { commandReads += 1 }
            if commandReads > 1 { endGrace() }
            let parts: [ByteBuffer]
            do {
                parts = try BlockCodec.decode(block)
            } catch {
                logger.info("closing connection: malformed block")
                core.noteProtocolError()
                enqueue(.error(.block), correlationId: [], entityId: [])
                flushOutbox()
                return close()
            }
            // Each authorised transmission costs a signature check: at most so many per block.
            let authorized = parts.reduce(0) { n, part in n + ((part.getInteger(at: part.readerIndex, as: UInt8.self) ?? 0) > 0 ? 1 : 0) }
            guard authorized <= RelayLimits.maxAuthorizedPerBlock else {
                logger.info("closing connection: too many authorised transmissions in a block")
                core.noteProtocolError()
                core.noteRefusal(.authorizedPerBlock)
                enqueue(.error(.block), correlationId: [], entityId: [])
                flushOutbox()
                return close()
            }
            inbox.append(contentsOf: parts)
            dispatchInbox()
        }
    }

    /// Dispatches what waits in the inbox, one transmission at a time, until the connection goes
    /// over one of its rates (or has too many commands in progress): its budget is checked after
    /// every transmission, not after every read, so a block of 64 badly signed commands costs at
    /// most the signature checks its `AUTH` budget allows before the rest waits for the budget.
    fileprivate func dispatchInbox() {
        // Answers given at once call back in here (through `Session.reply`): the outer loop goes on.
        guard !dispatching else { return }
        dispatching = true
        defer { dispatching = false }
        // Work outside the meter's events (answers from the store's thread, timers) is timed here.
        let timed = standing != .proven && workTally.map { $0.timing && !$0.metering } == true
        let cpuStart = timed ? WorkTally.threadCPUNanoseconds() : 0
        let start = DispatchTime.now().uptimeNanoseconds
        while !inbox.isEmpty, phase == .ready, !closing, throttleTimer == nil,
              pendingCommands < configuration.maxPendingCommandsPerConnection {
            dispatch(inbox.removeFirst())
            checkBudget()
            // An unproven connection's pile of transmissions is dispatched in slices, so that one
            // read of it does not hold the event loop (and other connections' reads) for long.
            if standing != .proven, !inbox.isEmpty, throttleTimer == nil,
               DispatchTime.now().uptimeNanoseconds &- start > configuration.unprovenSliceNanoseconds {
                yieldToOtherConnections()
            }
        }
        if timed { chargeWork(WorkTally.threadCPUNanoseconds() &- cpuStart) }
    }

    /// Continues dispatching the inbox a moment later, after the event loop has served other
    /// connections' reads (a timer due later than now ends the loop's turn; a task due now would not).
    /// While the run of unproven work is in debt, it continues once that is paid.
    private func yieldToOtherConnections(in pause: TimeAmount = yieldPause) {
        guard let context else { return }
        throttleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: pause) { [self] in
            throttleTimer = nil
            if standing != .proven, !inbox.isEmpty, let wait = core.globalBudget.debt(.unprovenRun) {
                core.noteThrottled(.unprovenRun)
                return yieldToOtherConnections(in: wait)
            }
            checkBudget()
            dispatchInbox()
            resumeReadingIfPossible()
        }
    }

    static let yieldPause = TimeAmount.microseconds(100)

    /// An answer: an error answer (`AUTH`, `QUOTA`) demotes the connection; any other answer to a
    /// command authorised by a key the relay already held proves it, unless it was demoted.
    fileprivate func noteAnswer(_ response: ServerResponse, proves: Bool) {
        switch response {
        case .error(.auth), .error(.quota): demote()
        case .error: break
        default:
            if proves, standing == .unproven {
                standing = .proven
                newcomer = false
                workTally?.timing = false
                // What its handshake and first commands took from the budget of new connections
                // (relay-wide and its source's) goes back.
                budget.proven()
                workTally?.source?.proven()
            }
        }
    }

    private func demote() {
        standing = .demoted
        newcomer = false
        workTally?.timing = true
        workTally?.source?.demoted()
    }

    /// The grace is over: what the connection prepaid to its source and did not use goes back.
    private func endGrace() {
        guard newcomer else { return }
        newcomer = false
        workTally?.source?.graceEnded()
    }

    /// Event-loop time spent on this connection; taken from the relay-wide budget of unproven work
    /// unless the connection is proven.
    fileprivate func chargeWork(_ nanoseconds: Int64) {
        guard standing != .proven, phase != .closed, !closing, let context else { return }
        let micros = budget.chargeUnprovenWork(nanoseconds: nanoseconds, newcomer: newcomer, now: context.eventLoop.now)
        if newcomer { workTally?.source?.charge(micros) }
        if graceEnding { endGrace() }
        checkBudget()
    }

    /// Counts an `AUTH` answer; a connection with more than `maxAuthFailures` of them within
    /// `authFailureWindow` is closed once the answer is written.
    fileprivate func noteAuthFailure() {
        guard phase == .ready, !closing, let context else { return }
        let now = context.eventLoop.now
        budget.chargeAuthFailure(now: now)
        let window = TimeAmount.nanoseconds(configuration.authFailureWindow.timeAmountNanoseconds)
        authFailures.append(now)
        if let firstRecent = authFailures.firstIndex(where: { now - $0 <= window }), firstRecent > 0 {
            authFailures.removeFirst(firstRecent)
        }
        guard authFailures.count > configuration.maxAuthFailures else { return }
        logger.info("closing connection: repeated authorisation failures")
        core.noteRefusal(.authFailures)
        flushOutbox()
        close()
    }

    /// Takes one `NEW` from this connection's budget for the current window.
    private func takeNewQueueBudget(now: NIODeadline) -> Bool {
        if now - newQueueWindowStart > TimeAmount.nanoseconds(configuration.newQueueWindow.timeAmountNanoseconds) {
            newQueueWindowStart = now
            newQueuesInWindow = 0
        }
        guard newQueuesInWindow < configuration.maxNewQueuesPerConnection else { return false }
        newQueuesInWindow += 1
        return true
    }

    private func dispatch(_ raw: ByteBuffer) {
        let t: Transmission
        do {
            t = try Transmission.decode(raw)
        } catch {
            core.noteProtocolError()
            demote()
            return enqueue(.error(error), correlationId: [], entityId: [])
        }
        guard !t.correlationId.isEmpty, t.correlationId.count <= RelayLimits.correlationIdLength else {
            core.noteProtocolError()
            demote()
            return enqueue(.error(.syntax), correlationId: [], entityId: t.entityId)
        }
        guard [0, Ed25519.signatureLength, BoxKey.authenticatorLength].contains(t.signature.count) else {
            core.noteProtocolError()
            demote()
            return enqueue(.error(.syntax), correlationId: t.correlationId, entityId: t.entityId)
        }
        let command: ClientCommand
        do {
            command = try ClientCommand.decode(t.command)
        } catch {
            core.noteProtocolError()
            demote()
            return enqueue(.error(error), correlationId: t.correlationId, entityId: t.entityId)
        }
        guard let subscriber, let context else { return }
        let now = context.eventLoop.now
        budget.charge(command, signed: !t.signature.isEmpty, now: now)
        if case .new = command, !takeNewQueueBudget(now: now) {
            core.noteRefusal(.queuesPerConnection)
            demote()
            return enqueue(.error(.quota), correlationId: t.correlationId, entityId: t.entityId)
        }
        pendingCommands += 1
        let corr = t.correlationId
        let entity = t.entityId
        // Authorised by a key the relay already held: a recipient's key, or a sender's (a signed
        // `SEND` to a secured queue, a `SKEY` at a sender ID). `NEW` brings its own key; `PING`,
        // `LGET` and unsigned `SEND`s carry none.
        let proves: Bool
        switch command {
        case .send, .secureBySender: proves = !t.signature.isEmpty
        default: proves = command.party == .recipient
        }
        core.handle(t, command, session: session, from: subscriber) { response in
            subscriber.reply(response, correlationId: corr, entityId: entity, proves: proves)
        }
    }

    // MARK: - Outbound

    fileprivate func enqueue(_ response: ServerResponse, correlationId: [UInt8], entityId: [UInt8]) {
        guard phase != .closed, let context else { return }
        let t = Transmission(correlationId: correlationId, entityId: entityId, command: response.encoded(allocator: context.channel.allocator))
        enqueueRaw(t.encoded(allocator: context.channel.allocator))
    }

    private func enqueueRaw(_ transmission: ByteBuffer) {
        guard let context else { return }
        outbox.append(transmission)
        guard !flushScheduled else { return }
        flushScheduled = true
        // Flush at the end of this loop tick, so everything produced meanwhile shares blocks.
        context.eventLoop.assumeIsolated().execute { [self] in flushOutbox() }
    }

    private func flushOutbox() {
        flushScheduled = false
        guard let context, !outbox.isEmpty else { return }
        let timed = standing != .proven && workTally.map { $0.timing && !$0.metering } == true
        let cpuStart = timed ? WorkTally.threadCPUNanoseconds() : 0
        // The first answers to commands end the grace once their flush is charged.
        if commandReads > 0 { graceEnding = true }
        let blocks = BlockCodec.encode(outbox, allocator: context.channel.allocator)
        outbox.removeAll(keepingCapacity: true)
        for block in blocks { context.write(wrapOutboundOut(block), promise: nil) }
        // Encoding, TLS encryption and the socket write are work for this connection too.
        context.flush()
        if timed { chargeWork(WorkTally.threadCPUNanoseconds() &- cpuStart) }
    }

    // MARK: - Backpressure

    private var shouldHoldReads: Bool {
        guard let context else { return false }
        return !context.channel.isWritable || pendingCommands >= configuration.maxPendingCommandsPerConnection || throttleTimer != nil
            || !inbox.isEmpty
    }

    /// Over one of its rates, the connection is not read from until the rate's bucket is back in
    /// credit: what it already sent is served, what it sends meanwhile waits in its socket.
    fileprivate func checkBudget() {
        guard throttleTimer == nil, phase != .closed, !closing, let context,
              let (wait, limit) = budget.wait(now: context.eventLoop.now) else { return }
        core.noteThrottled(limit)
        if limit.demotes { demote() }
        throttleTimer = context.eventLoop.assumeIsolated().scheduleTask(in: wait) { [self] in
            throttleTimer = nil
            checkBudget()
            dispatchInbox()
            resumeReadingIfPossible()
        }
    }

    func read(context: ChannelHandlerContext) {
        if shouldHoldReads {
            readHeld = true
        } else {
            context.read()
        }
    }

    fileprivate func resumeReadingIfPossible() {
        guard readHeld, !shouldHoldReads, let context else { return }
        readHeld = false
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stallTimer?.cancel()
            stallTimer = nil
            resumeReadingIfPossible()
        } else if stallTimer == nil {
            let limit = TimeAmount.nanoseconds(configuration.writeStallTimeout.timeAmountNanoseconds)
            stallTimer = context.eventLoop.assumeIsolated().scheduleTask(in: limit) { [self] in
                logger.info("closing connection: client stopped reading")
                close()
            }
        }
        context.fireChannelWritabilityChanged()
    }
}
