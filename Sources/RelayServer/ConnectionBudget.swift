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

/// One connection's rate limits (``RelayConfiguration/commandRate`` and the others): what it has
/// used, and how long it must wait before the relay reads from it again.
struct ConnectionBudget {
    /// Which rate a connection went over (the `limit` label of `swiftplex_relay_throttled_total`).
    enum Limit: String, CaseIterable, Sendable {
        case commands
        case newQueues = "new_queues"
        case sendBytes = "send_bytes"
        case authFailures = "auth_failures"
    }

    private var buckets: [TokenBucket]

    init(_ configuration: RelayConfiguration, now: NIODeadline) {
        buckets = Limit.allCases.map { limit in
            switch limit {
            case .commands: TokenBucket(configuration.commandRate, now: now)
            case .newQueues: TokenBucket(configuration.newQueueRate, now: now)
            case .sendBytes: TokenBucket(configuration.sendByteRate, now: now)
            case .authFailures: TokenBucket(configuration.authFailureRate, now: now)
            }
        }
    }

    /// Charges one command (and, for `NEW` and `SEND`, their own rates).
    mutating func charge(_ command: ClientCommand, now: NIODeadline) {
        buckets[0].take(1, now: now)
        switch command {
        case .new: buckets[1].take(1, now: now)
        case let .send(_, body): buckets[2].take(body.count, now: now)
        default: break
        }
    }

    mutating func chargeAuthFailure(now: NIODeadline) {
        buckets[3].take(1, now: now)
    }

    /// Nil while every rate is in credit; otherwise the longest wait and the rate it is for.
    mutating func wait(now: NIODeadline) -> (TimeAmount, Limit)? {
        var longest: (TimeAmount, Limit)?
        for (i, limit) in Limit.allCases.enumerated() {
            if let w = buckets[i].debtClears(now: now), w > (longest?.0 ?? .zero) { longest = (w, limit) }
        }
        return longest
    }
}
