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

        /// The `limit` label of `swiftplex_relay_throttled_total`.
        var label: ConnectionBudget.Limit {
            switch self {
            case .newQueues: .globalNewQueues
            case .unsignedSendBytes: .globalUnsignedSendBytes
            case .authFailures: .globalAuthFailures
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
        /// Not a connection's: the listener paused accepting (``AcceptPacer``).
        case accepts
    }

    private var buckets: [TokenBucket]
    private let global: GlobalBudget?
    /// Until when this connection waits for each relay-wide budget it overdrew (by `GlobalBudget.Limit`).
    private var heldUntil: [NIODeadline?] = Array(repeating: nil, count: GlobalBudget.Limit.allCases.count)

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
/// and, while that bucket is in debt, does not read (accept) from the listening socket — new
/// connections wait in the kernel's backlog until the rate allows.
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
        guard let wait = bucket.debtClears(now: context.eventLoop.now) else { return context.read() }
        core.noteThrottled(.accepts)
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
