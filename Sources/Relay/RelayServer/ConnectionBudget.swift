#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import NIOConcurrencyHelpers
import NIOCore
import RelayProtocol

/// A token bucket: holds at most `burst` tokens, refilled at `perSecond`. Taking may overdraw it —
/// what the relay has already read is served — and the owner then waits until the balance is back
/// to zero before it reads more.
struct TokenBucket {
    let limit: RateLimit
    private(set) var balance: Double
    private var updated: NIODeadline

    init(_ limit: RateLimit, now: NIODeadline) {
        self.limit = limit
        balance = Double(limit.burst)
        updated = now
    }

    private mutating func refill(now: NIODeadline) {
        guard now > updated else { return }
        let elapsed = Double((now - updated).nanoseconds) / 1e9
        balance = min(Double(limit.burst), balance + elapsed * Double(limit.perSecond))
        updated = now
    }

    mutating func take(_ amount: Int, now: NIODeadline) {
        guard !limit.isUnlimited, amount > 0 else { return }
        refill(now: now)
        balance -= Double(amount)
    }

    /// Gives back what was taken (up to the burst).
    mutating func giveBack(_ amount: Int, now: NIODeadline) {
        guard !limit.isUnlimited, amount > 0 else { return }
        refill(now: now)
        balance = min(Double(limit.burst), balance + Double(amount))
    }

    /// Whether the bucket holds its whole burst (an unlimited one always does).
    mutating func isFull(now: NIODeadline) -> Bool {
        guard !limit.isUnlimited else { return true }
        refill(now: now)
        return balance >= Double(limit.burst)
    }

    /// Nil while in credit; otherwise how long until the balance is back to zero.
    mutating func debtClears(now: NIODeadline) -> TimeAmount? {
        guard !limit.isUnlimited else { return nil }
        refill(now: now)
        guard balance < 0 else { return nil }
        let seconds = -balance / Double(limit.perSecond)
        return .nanoseconds(Int64(min(seconds, 3600) * 1e9) + 1)
    }
}

/// The relay-wide rates (``RelayConfiguration/globalNewQueueRate`` and the others), shared by all
/// connections: a per-connection rate cannot bound what 200 connections do together.
///
/// A connection that takes from an overdrawn relay-wide bucket is not read from until the debt as
/// it stood after its own take is paid back; later takes by others lengthen their waits, not its.
/// Only connections that use the rate wait: one that sends no `NEW` never waits for the `NEW` budget.
final class GlobalBudget: Sendable {
    enum Limit: Int, CaseIterable, Sendable {
        case newQueues, unsignedSendBytes, authFailures
        /// Event-loop microseconds spent on connections that have not proven themselves (after
        /// their grace: the handshake and first commands are ``handshakeWork``).
        case unprovenWork
        /// Event-loop microseconds of new connections: their TLS handshake, hello and first read
        /// of commands. Paces the listener (``AcceptPacer``); no connection is held by it.
        case handshakeWork
        /// Event-loop microseconds of all work for connections that are not proven, handshakes
        /// included, with a burst of a fraction of a millisecond: while it is in debt, such work
        /// waits (``WorkMeter``), so that it comes in short runs with gaps in which proven
        /// connections are served at once.
        case unprovenRun

        /// The `limit` label of `swiftplex_relay_throttled_total`.
        var label: ConnectionBudget.Limit {
            switch self {
            case .newQueues: .globalNewQueues
            case .unsignedSendBytes: .globalUnsignedSendBytes
            case .authFailures: .globalAuthFailures
            case .unprovenWork: .unprovenWork
            case .handshakeWork: .handshakeWork
            case .unprovenRun: .unprovenRun
            }
        }
    }

    private let buckets: NIOLockedValueBox<[TokenBucket]>
    let isUnlimited: Bool

    init(_ configuration: RelayConfiguration, now: NIODeadline = .now()) {
        let limits = Limit.allCases.map { limit in
            switch limit {
            case .newQueues: configuration.globalNewQueueRate
            case .unsignedSendBytes: configuration.globalUnsignedSendByteRate
            case .authFailures: configuration.globalAuthFailureRate
            case .unprovenWork: configuration.unprovenWorkRate
            case .handshakeWork: configuration.handshakeWorkRate
            case .unprovenRun: configuration.unprovenRunRate
            }
        }
        isUnlimited = limits.allSatisfy(\.isUnlimited)
        buckets = NIOLockedValueBox(limits.map { TokenBucket($0, now: now) })
    }

    /// Takes `amount`; returns how long the taker must wait (nil while the bucket is in credit).
    /// Relay-wide buckets run on the monotonic clock whatever the connection's loop says.
    func take(_ limit: Limit, _ amount: Int) -> TimeAmount? {
        guard amount > 0, !isUnlimited else { return nil }
        let now = NIODeadline.now()
        return buckets.withLockedValue { b in
            b[limit.rawValue].take(amount, now: now)
            return b[limit.rawValue].debtClears(now: now)
        }
    }

    /// Gives back `amount` taken before (a connection that has proven itself gives back what its
    /// handshake took from the budget of new connections' work).
    func giveBack(_ limit: Limit, _ amount: Int) {
        guard amount > 0, !isUnlimited else { return }
        let now = NIODeadline.now()
        buckets.withLockedValue { $0[limit.rawValue].giveBack(amount, now: now) }
    }

    /// How long until `limit`'s bucket is back in credit (nil while it is), without taking.
    func debt(_ limit: Limit) -> TimeAmount? {
        guard !isUnlimited else { return nil }
        let now = NIODeadline.now()
        return buckets.withLockedValue { $0[limit.rawValue].debtClears(now: now) }
    }
}

/// One connection's rate limits (``RelayConfiguration/commandRate`` and the others): what it has
/// used, and how long it must wait before the relay reads from it again — including its waits for
/// relay-wide budgets it overdrew (``GlobalBudget``).
struct ConnectionBudget {
    /// Which rate a connection went over (the `limit` label of `swiftplex_relay_throttled_total`).
    enum Limit: String, CaseIterable, Sendable {
        case commands
        case newQueues = "new_queues"
        case sendBytes = "send_bytes"
        case authFailures = "auth_failures"
        case globalNewQueues = "global_new_queues"
        case globalUnsignedSendBytes = "global_unsigned_send_bytes"
        case globalAuthFailures = "global_auth_failures"
        /// The relay-wide budget of event-loop time for unproven connections (``RelayConfiguration/unprovenWorkRate``).
        case unprovenWork = "unproven_work"
        /// Not a hold: an unproven connection's read waited for a gap in the run of unproven work
        /// (``RelayConfiguration/unprovenRunRate``).
        case unprovenRun = "unproven_run"
        /// Not a connection's: the budget of new connections' work (``RelayConfiguration/handshakeWorkRate``) paused the listener.
        case handshakeWork = "handshake_work"
        /// Not a connection's: the listener paused accepting (``AcceptPacer``).
        case accepts
        /// A new connection waited before its TLS handshake for its source's budget of new
        /// connections' work (``RelayConfiguration/sourceHandshakeWorkRate``, ``SourceGate``).
        case sourceHandshakeWork = "source_handshake_work"

        /// Whether being held by this limit demotes a connection for good. Only the connection's
        /// own floods do (commands, `SEND` bytes, authorisation failures). Not the new-queue rate,
        /// which a busy honest client reaches (a bot making contacts) and which holding alone
        /// bounds; not the relay-wide buckets, which others drain (an attacker making queues
        /// would otherwise demote every honest client that made one meanwhile); not the budgets
        /// of unproven work, which only unproven connections take from.
        var demotes: Bool {
            switch self {
            case .commands, .sendBytes, .authFailures: true
            case .newQueues, .globalNewQueues, .globalUnsignedSendBytes, .globalAuthFailures,
                 .unprovenWork, .unprovenRun, .handshakeWork, .accepts, .sourceHandshakeWork: false
            }
        }
    }

    private var buckets: [TokenBucket]
    private let global: GlobalBudget?
    /// Until when this connection waits for each relay-wide budget it overdrew (by `GlobalBudget.Limit`).
    private var heldUntil: [NIODeadline?] = Array(repeating: nil, count: GlobalBudget.Limit.allCases.count)
    /// Unproven work below a microsecond, not yet taken.
    private var workCarry: Int64 = 0
    /// Microseconds taken from the budget of new connections' work (given back if the connection proves itself).
    private var newcomerTaken = 0

    init(_ configuration: RelayConfiguration, global: GlobalBudget? = nil, now: NIODeadline) {
        self.global = global
        buckets = [configuration.commandRate, configuration.newQueueRate, configuration.sendByteRate, configuration.authFailureRate]
            .map { TokenBucket($0, now: now) }
    }

    /// Charges one command (and, for `NEW` and `SEND`, their own rates). `signed` tells whether the
    /// transmission carried an authorisation (an unsigned `SEND` also takes from the relay-wide budget).
    mutating func charge(_ command: ClientCommand, signed: Bool = true, now: NIODeadline) {
        buckets[0].take(1, now: now)
        switch command {
        case .new:
            buckets[1].take(1, now: now)
            takeGlobal(.newQueues, 1, now: now)
        case let .send(_, body):
            buckets[2].take(body.count, now: now)
            if !signed { takeGlobal(.unsignedSendBytes, body.count, now: now) }
        default: break
        }
    }

    /// Nanoseconds of event-loop work done for a connection that has not proven itself, taken in
    /// whole microseconds (the remainder carried to the next charge) from the run of unproven work
    /// and from the relay-wide budget of unproven work — or, while the connection is new
    /// (`newcomer`), from the budget of new connections, which holds no connection (it paces the
    /// listener). Returns the whole microseconds charged (a newcomer's also go to its source's
    /// budget, ``SourceAccount``).
    @discardableResult
    mutating func chargeUnprovenWork(nanoseconds: Int64, newcomer: Bool, now: NIODeadline) -> Int {
        guard nanoseconds > 0 else { return 0 }
        workCarry += nanoseconds
        let micros = Int(workCarry / 1000)
        workCarry -= Int64(micros) * 1000
        guard micros > 0, let global else { return micros }
        _ = global.take(.unprovenRun, micros)
        if newcomer {
            _ = global.take(.handshakeWork, micros)
            newcomerTaken += micros
        } else {
            takeGlobal(.unprovenWork, micros, now: now)
        }
        return micros
    }

    /// The connection has just proven itself: what its handshake and first commands took from the
    /// budget of new connections' work is given back (a client that reconnects and proves itself
    /// costs that budget nothing; one that never does keeps its cost there).
    mutating func proven() {
        global?.giveBack(.handshakeWork, newcomerTaken)
        newcomerTaken = 0
    }

    mutating func chargeAuthFailure(now: NIODeadline) {
        buckets[3].take(1, now: now)
        takeGlobal(.authFailures, 1, now: now)
    }

    private mutating func takeGlobal(_ limit: GlobalBudget.Limit, _ amount: Int, now: NIODeadline) {
        guard let wait = global?.take(limit, amount) else { return }
        let until = now + wait
        if let held = heldUntil[limit.rawValue], held >= until { return }
        heldUntil[limit.rawValue] = until
    }

    /// Nil while every rate is in credit; otherwise the longest wait and the rate it is for.
    mutating func wait(now: NIODeadline) -> (TimeAmount, Limit)? {
        var longest: (TimeAmount, Limit)?
        for (i, limit) in [Limit.commands, .newQueues, .sendBytes, .authFailures].enumerated() {
            if let w = buckets[i].debtClears(now: now), w > (longest?.0 ?? .zero) { longest = (w, limit) }
        }
        for limit in GlobalBudget.Limit.allCases {
            guard let until = heldUntil[limit.rawValue] else { continue }
            if until <= now { heldUntil[limit.rawValue] = nil; continue }
            let w = until - now
            if w > (longest?.0 ?? .zero) { longest = (w, limit.label) }
        }
        return longest
    }
}

/// On the listening channel: counts accepted connections against ``RelayConfiguration/acceptRate``
/// and, while that bucket (or the relay-wide budget of new connections' work, which their TLS
/// handshakes and first commands take from) is in debt, does not read (accept) from the listening
/// socket — new connections wait in the kernel's backlog until the rate allows. The budget of
/// unproven work does not pause it: connections that misbehave after their first commands wait
/// for that one, newcomers do not.
final class AcceptPacer: ChannelDuplexHandler {
    typealias InboundIn = any Channel
    typealias InboundOut = any Channel
    typealias OutboundIn = Never

    private var bucket: TokenBucket
    private let core: RelayCore
    private var timer: Scheduled<Void>?

    init(rate: RateLimit, core: RelayCore) {
        bucket = TokenBucket(rate, now: .now())
        self.core = core
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        bucket.take(1, now: context.eventLoop.now)
        context.fireChannelRead(data)
    }

    func read(context: ChannelHandlerContext) {
        guard timer == nil else { return } // the timer reads when it fires
        let wait: TimeAmount
        if let w = bucket.debtClears(now: context.eventLoop.now) {
            core.noteThrottled(.accepts)
            wait = w
        } else if let w = core.globalBudget.debt(.handshakeWork) {
            core.noteThrottled(.handshakeWork)
            wait = w
        } else {
            return context.read()
        }
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: wait) { [self] in
            timer = nil
            read(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
    }
}

/// First in a connection's pipeline (before TLS): times what the relay does on the event loop for
/// the connection's inbound events — the TLS handshake and decryption, block decoding, dispatch and
/// the answers given at once — in the thread's CPU time (a preempted thread is not charged for the
/// wait), and reports it to the connection's ``WorkTally``. A proven connection is not timed.
///
/// Until the connection is proven, a read that arrives while the relay-wide run of unproven work
/// is in debt (``GlobalBudget/Limit/unprovenRun``) waits here, unprocessed, and the connection is
/// not read from, until that debt is paid: unproven work comes in runs of a fraction of a
/// millisecond with gaps between them, in which the event loops serve proven connections' reads
/// at once instead of after every unproven connection that was ready in the same turn.
final class WorkMeter: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer

    private let tally: WorkTally
    /// Reads waiting for a gap in the run of unproven work (oldest first).
    private var waiting = CircularBuffer<NIOAny>()
    private var readCompleteWaiting = false
    /// The connection asked for a read while reads waited here.
    private var readWanted = false
    private var resumeTimer: Scheduled<Void>?

    init(tally: WorkTally) { self.tally = tally }

    @inline(__always) private func timed(_ body: () -> Void) {
        guard tally.timing, !tally.metering else { return body() }
        tally.metering = true
        let start = WorkTally.threadCPUNanoseconds()
        body()
        tally.metering = false
        tally.add(WorkTally.threadCPUNanoseconds() &- start)
    }

    /// How long unproven work must wait for its run's debt to be paid (nil: go ahead).
    private var runWait: TimeAmount? {
        guard tally.timing, let global = tally.global else { return nil }
        return global.debt(.unprovenRun)
    }

    func channelActive(context: ChannelHandlerContext) {
        timed { context.fireChannelActive() }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !waiting.isEmpty || resumeTimer != nil {
            waiting.append(data)
        } else if let wait = runWait {
            waiting.append(data)
            tally.noteWait?()
            schedule(context: context, in: wait)
        } else {
            timed { context.fireChannelRead(data) }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if waiting.isEmpty {
            timed { context.fireChannelReadComplete() }
        } else {
            readCompleteWaiting = true
        }
    }

    func read(context: ChannelHandlerContext) {
        if waiting.isEmpty {
            context.read()
        } else {
            readWanted = true
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        // What waited is dropped with the connection, as unread bytes in its socket would be.
        resumeTimer?.cancel()
        resumeTimer = nil
        waiting.removeAll()
        readCompleteWaiting = false
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        resumeTimer?.cancel()
        resumeTimer = nil
    }

    private func schedule(context: ChannelHandlerContext, in wait: TimeAmount) {
        resumeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: wait) { [self] in
            resumeTimer = nil
            resume(context: context)
        }
    }

    /// Processes what waited, one read at a time, while the run allows (all of it once proven).
    private func resume(context: ChannelHandlerContext) {
        while let data = waiting.first {
            if let wait = runWait {
                return schedule(context: context, in: wait)
            }
            waiting.removeFirst()
            timed { context.fireChannelRead(data) }
            guard context.channel.isActive else { return }
        }
        if readCompleteWaiting {
            readCompleteWaiting = false
            timed { context.fireChannelReadComplete() }
        }
        if readWanted {
            readWanted = false
            context.read()
        }
    }
}

/// Where a connection's ``WorkMeter`` reports (confined to the connection's event loop): the
/// connection's handler takes the time from the relay-wide budgets.
final class WorkTally {
    var report: ((Int64) -> Void)?
    /// Counts a read that waited for a gap in the run of unproven work.
    var noteWait: (() -> Void)?
    /// The relay-wide budgets (nil in tests that build a pipeline by hand).
    let global: GlobalBudget?
    /// False once the connection is proven (its work is no longer timed).
    var timing = true
    /// True while the meter times an event (work done within it is not timed again).
    var metering = false
    /// The connection's account with its source's budget of new connections' work (nil when
    /// per-source budgets are off).
    var source: SourceAccount?

    init(global: GlobalBudget? = nil) { self.global = global }

    func add(_ nanoseconds: Int64) { report?(nanoseconds) }

    /// The calling thread's CPU time.
    static func threadCPUNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
