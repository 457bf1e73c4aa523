import Foundation
import RelayProtocol

/// Everything a relay needs to run. Defaults are the documented ones: quota 128 messages per
/// queue, messages kept 21 days, and the resource limits below (docs/relay.md, "Robustness and limits").
public struct RelayConfiguration: Sendable {
    /// Directory (created 0700) holding the identity and the queue database (files 0600).
    public var dataDirectory: URL
    /// Address to bind. Port 0 binds an ephemeral port (tests).
    public var host: String
    public var port: Int
    /// Host name clients use to reach this relay; printed in its `smp://` address.
    /// Defaults to `host`.
    public var publicHost: String?
    /// Maximum number of undelivered messages per queue.
    public var queueQuota: Int
    /// Messages older than this are deleted.
    public var messageTTL: Duration
    /// How often expired messages are swept.
    public var sweepInterval: Duration
    /// A connection that has not completed the relay hello in this time is closed.
    public var handshakeTimeout: Duration
    /// A connection from which nothing has arrived for this long is closed (clients PING).
    public var idleTimeout: Duration
    /// A connection that does not read what the relay writes for this long is closed.
    public var writeStallTimeout: Duration
    /// At most this many commands per connection may be in progress before the relay stops reading from it.
    public var maxPendingCommandsPerConnection: Int
    /// Bytes of message bodies kept in memory for subscribed queues, so that the next message
    /// after an ACK is delivered without reading the database. Messages are always durable in
    /// the database; this only saves reads.
    public var deliveryCacheBytes: Int
    /// The wall clock for message timestamps and expiry (tests substitute a manual one).
    public var clock: any RelayClock
    /// On a store that loads queues on demand (PostgreSQL): how many queues are kept in memory
    /// besides those in use (least recently used dropped first). The SQLite store keeps every queue.
    public var queueCacheSize: Int = 100_000

    // MARK: Resource limits (each refusal is counted in `swiftplex_relay_limit_refusals_total{limit=…}`)

    /// Connections open at once (TLS handshakes included); more are closed as they are accepted.
    /// Keep it below the process's open-file limit (`ulimit -n`).
    public var maxConnections: Int
    /// Queues in total; `NEW` beyond gets `QUOTA`. On SQLite each queue's metadata is kept in
    /// memory; on PostgreSQL only ``queueCacheSize`` of them (and those in use).
    public var maxQueues: Int
    /// `NEW`s one connection may send in any ``newQueueWindow``; more get `QUOTA`.
    public var maxNewQueuesPerConnection: Int
    public var newQueueWindow: Duration
    /// Undelivered messages stored in total, over all queues; `SEND` beyond gets `QUOTA` (so that
    /// unsigned `SEND`s to one's own unsecured queues cannot fill the disk).
    public var maxStoredMessages: Int
    /// Bytes of undelivered message bodies stored in total; `SEND` beyond gets `QUOTA`.
    public var maxStoredBytes: Int
    /// A connection whose commands are answered `AUTH` more than this many times within
    /// ``authFailureWindow`` is closed (after the answer). Every `AUTH` counts, whatever its cause,
    /// so that the closing reveals nothing about which queues exist.
    public var maxAuthFailures: Int
    public var authFailureWindow: Duration
    /// Rates per connection (token buckets holding `burst`, refilled at `perSecond`). A connection
    /// over any of them is not refused: the relay serves what it already read, then stops reading
    /// from it until the bucket is back in credit (backpressure), so a flood costs the relay no
    /// more than its rate. Defaults are well above what a bot's connection does (the relay
    /// benchmark with one sender connection for 64 queues makes ~9,500 commands/s): commands 20,000/s, `NEW`s 50/s,
    /// `SEND` bodies 32 MiB/s, `AUTH` answers 10/s — each with a burst of two seconds' worth.
    public var commandRate: RateLimit
    public var newQueueRate: RateLimit
    public var sendByteRate: RateLimit
    public var authFailureRate: RateLimit
    /// Relay-wide rates, shared by all connections (a per-connection rate cannot bound what 200
    /// connections do together): `NEW`s 200/s, bodies of unsigned `SEND`s (to unsecured queues:
    /// confirmations and contact requests; a secured queue's sender signs) 8 MiB/s, `AUTH` answers
    /// 500/s — each with a burst of two seconds' worth. A connection that takes from an overdrawn
    /// one is held like one over its own rate, until the debt as it stood after its take is paid;
    /// connections that do not use that rate are not held.
    public var globalNewQueueRate: RateLimit
    public var globalUnsignedSendByteRate: RateLimit
    public var globalAuthFailureRate: RateLimit
    /// Connections accepted per second, relay-wide (default 200, burst 400): beyond it the relay
    /// stops accepting for a while and new connections wait in the listen backlog, so that
    /// clients that reconnect in a loop (each a TLS handshake) cost at most this many handshakes.
    public var acceptRate: RateLimit
    /// The event-loop time, in microseconds per second, that connections which have not proven
    /// themselves may cost the relay together after their grace (default 25 ms/s, burst 5 ms):
    /// TLS decryption, block decoding, dispatch and the answers' encryption and writes, measured as
    /// they happen (the handshake, hello and first read of commands are ``handshakeWorkRate``'s).
    /// A connection is proven by an answered command authorised by a key the relay already held (a
    /// recipient command on its queue, a signed `SEND` or `SKEY` to a queue's sender ID) and loses
    /// that for good with its first `AUTH`, `QUOTA`, malformed command, or hold by one of its own
    /// flood rates (commands, `SEND` bytes, `AUTH` answers; `ConnectionBudget.Limit.demotes`). Proven
    /// connections never take from this budget; an unproven one that takes from it while it is
    /// overdrawn is held like one over a relay-wide rate (until it proves itself). So
    /// well-behaved clients keep the event loops while misbehaving connections share a bounded
    /// slice of them, and new connections are still accepted.
    public var unprovenWorkRate: RateLimit = RateLimit(perSecond: 25_000, burst: 5_000)
    /// The event-loop time, in microseconds per second, that new connections which do not prove
    /// themselves may cost the relay together (default 10 ms/s, burst 50 ms — the handshakes of a
    /// few hundred clients reconnecting at once, before their `SUB`s give it back): their TLS
    /// handshakes, hellos and first reads of commands (a connection's grace, in which a
    /// reconnecting client proves itself with its first `SUB`). A connection that proves itself
    /// gives back what it took, so honest clients reconnecting after a restart are paced by
    /// ``acceptRate`` alone, while connections that never prove themselves (clients that reconnect
    /// in a loop to misbehave) cost at most this. While it is overdrawn the listener accepts
    /// nothing; no connection is held by it.
    public var handshakeWorkRate: RateLimit = RateLimit(perSecond: 10_000, burst: 50_000)
    /// The runs of unproven work (handshakes included), in microseconds: a burst of 300 µs, then
    /// such work waits while the bucket is in debt (refilled at 400 ms a second), so that proven
    /// connections' reads are served in the gaps instead of after every unproven connection that
    /// was ready in the same event-loop turn. Not a budget of how much, which the two above are.
    /// (No command-line option; benchmarks compare with it off.)
    public var unprovenRunRate: RateLimit = RateLimit(perSecond: 400_000, burst: 300)
    /// The share of ``handshakeWorkRate`` one source may use, in microseconds per second (default
    /// 5 ms/s with a burst of 50 ms, ``sourceHandshakeWorkRate(msPerSecond:)``; unlimited turns
    /// per-source accounting off). A source is an IPv4 address or an IPv6 prefix
    /// (``sourcePrefixLengthIPv4``, ``sourcePrefixLengthIPv6``). A new connection's grace takes from
    /// its source's bucket as from the relay-wide one, and a connection that proves itself gives it
    /// back; while a source's bucket is in debt, its new connections wait before their TLS handshake:
    /// accepted, not read from, and not yet active for the relay, so their handshake timeout does not
    /// run (at most ``maxWaitingPerSource`` of them; one more is closed). So a source that reconnects
    /// in a loop without proving itself spends its own share and, below the relay-wide budget, never
    /// pauses the listener for other sources' clients. It cannot tell apart clients behind one
    /// address (a NAT, a proxy): they get in in turn with each other, as they would at the relay-wide
    /// budget (behind a proxy that hides clients' addresses, set it unlimited); nor does it help
    /// against attackers on many sources.
    public var sourceHandshakeWorkRate: RateLimit = RelayConfiguration.sourceHandshakeWorkRate(msPerSecond: 5)
    /// Connections from one source that may wait at its gate at once (``sourceHandshakeWorkRate``):
    /// enough for the clients behind a busy NAT reconnecting together; bounds what one source can hold.
    public var maxWaitingPerSource = 256
    /// The prefix lengths that make a source (default /32: an IPv4 address; /64: an IPv6 network).
    public var sourcePrefixLengthIPv4 = 32
    public var sourcePrefixLengthIPv6 = 64
    /// What a connection takes from its source's bucket when let through to its handshake, before its
    /// work is measured (used up by that work first, the rest given back when its grace ends), so that
    /// connections waiting for one source's debt go through one at a time.
    var sourceHandshakePrepaidMicroseconds = 1000
    /// How long an unproven connection's transmissions are dispatched at once before the rest
    /// waits for the event loop's next turn (tests that move the loop's clock by hand turn it off).
    var unprovenSliceNanoseconds: UInt64 = 200_000
    /// When set, `NEW` must carry this password (`smp://fingerprint:password@host`); without it
    /// or with another one the answer is `AUTH`. For private relays.
    public var newQueuePassword: String?

    public init(
        dataDirectory: URL,
        host: String = "127.0.0.1",
        port: Int = RelayAddress.defaultPort,
        publicHost: String? = nil,
        queueQuota: Int = 128,
        messageTTL: Duration = .seconds(21 * 24 * 3600),
        sweepInterval: Duration = .seconds(60),
        handshakeTimeout: Duration = .seconds(10),
        idleTimeout: Duration = .seconds(600),
        writeStallTimeout: Duration = .seconds(30),
        maxPendingCommandsPerConnection: Int = 1024,
        deliveryCacheBytes: Int = 64 << 20,
        clock: any RelayClock = SystemRelayClock(),
        maxConnections: Int = 4096,
        maxQueues: Int = 1_000_000,
        maxNewQueuesPerConnection: Int = 1000,
        newQueueWindow: Duration = .seconds(600),
        maxStoredMessages: Int = 10_000_000,
        maxStoredBytes: Int = 16 << 30,
        maxAuthFailures: Int = 100,
        authFailureWindow: Duration = .seconds(10),
        newQueuePassword: String? = nil,
        commandRate: RateLimit = RateLimit(perSecond: 20_000),
        newQueueRate: RateLimit = RateLimit(perSecond: 50),
        sendByteRate: RateLimit = RateLimit(perSecond: 32 << 20),
        authFailureRate: RateLimit = RateLimit(perSecond: 10),
        globalNewQueueRate: RateLimit = RateLimit(perSecond: 200),
        globalUnsignedSendByteRate: RateLimit = RateLimit(perSecond: 8 << 20),
        globalAuthFailureRate: RateLimit = RateLimit(perSecond: 500),
        acceptRate: RateLimit = RateLimit(perSecond: 200)
    ) {
        self.acceptRate = acceptRate
        self.globalNewQueueRate = globalNewQueueRate
        self.globalUnsignedSendByteRate = globalUnsignedSendByteRate
        self.globalAuthFailureRate = globalAuthFailureRate
        self.commandRate = commandRate
        self.newQueueRate = newQueueRate
        self.sendByteRate = sendByteRate
        self.authFailureRate = authFailureRate
        self.maxConnections = maxConnections
        self.maxQueues = maxQueues
        self.maxNewQueuesPerConnection = maxNewQueuesPerConnection
        self.newQueueWindow = newQueueWindow
        self.maxStoredMessages = maxStoredMessages
        self.maxStoredBytes = maxStoredBytes
        self.maxAuthFailures = maxAuthFailures
        self.authFailureWindow = authFailureWindow
        self.newQueuePassword = newQueuePassword
        self.deliveryCacheBytes = deliveryCacheBytes
        self.clock = clock
        self.dataDirectory = dataDirectory
        self.host = host
        self.port = port
        self.publicHost = publicHost
        self.queueQuota = queueQuota
        self.messageTTL = messageTTL
        self.sweepInterval = sweepInterval
        self.handshakeTimeout = handshakeTimeout
        self.idleTimeout = idleTimeout
        self.writeStallTimeout = writeStallTimeout
        self.maxPendingCommandsPerConnection = maxPendingCommandsPerConnection
    }
}

extension RelayConfiguration {
    /// Turns every rate limit off, per connection and relay-wide (benchmarks compare with and without).
    public mutating func unlimitRates() {
        commandRate = .unlimited
        newQueueRate = .unlimited
        sendByteRate = .unlimited
        authFailureRate = .unlimited
        globalNewQueueRate = .unlimited
        globalUnsignedSendByteRate = .unlimited
        globalAuthFailureRate = .unlimited
        acceptRate = .unlimited
        unprovenWorkRate = .unlimited
        handshakeWorkRate = .unlimited
        unprovenRunRate = .unlimited
        sourceHandshakeWorkRate = .unlimited
    }
}

extension RelayConfiguration {
    /// ``sourceHandshakeWorkRate`` from milliseconds a second (a burst of ten times it, at least 50 ms;
    /// 0: unlimited, per-source accounting off), as `--max-handshake-ms-per-second-per-source` takes it.
    public static func sourceHandshakeWorkRate(msPerSecond: Int) -> RateLimit {
        msPerSecond == 0 ? .unlimited : RateLimit(perSecond: msPerSecond * 1000, burst: max(msPerSecond * 10_000, 50_000))
    }

    /// Puts the pacing of connections back to the defaults (after ``unlimitRates()``): the accept
    /// rate, the budgets of new connections' and of unproven work, and the runs of unproven work.
    public mutating func restoreConnectionPacing() {
        let defaults = RelayConfiguration(dataDirectory: dataDirectory)
        acceptRate = defaults.acceptRate
        handshakeWorkRate = defaults.handshakeWorkRate
        unprovenWorkRate = defaults.unprovenWorkRate
        unprovenRunRate = defaults.unprovenRunRate
        sourceHandshakeWorkRate = defaults.sourceHandshakeWorkRate
    }
}

/// A rate limit: `perSecond` on average, with up to `burst` at once.
public struct RateLimit: Sendable, Equatable, CustomStringConvertible {
    public var perSecond: Int
    public var burst: Int

    /// `burst` defaults to two seconds' worth.
    public init(perSecond: Int, burst: Int? = nil) {
        self.perSecond = max(perSecond, 1)
        self.burst = max(burst ?? (perSecond > Int.max / 2 ? Int.max : perSecond * 2), 1)
    }

    /// No limit.
    public static let unlimited = RateLimit(perSecond: .max, burst: .max)

    var isUnlimited: Bool { perSecond == .max }

    public var description: String { isUnlimited ? "unlimited" : "\(perSecond)/s (burst \(burst))" }
}

extension Duration {
    /// Nanoseconds, saturating (a duration beyond ~292 years is "for ever" for a timer).
    var timeAmountNanoseconds: Int64 {
        let (s, atto) = components
        let (ns, overflow) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return s < 0 ? .min : .max }
        let (sum, overflow2) = ns.addingReportingOverflow(atto / 1_000_000_000)
        return overflow2 ? .max : sum
    }
}

/// Seconds since 1970, as the relay stamps and expires messages.
public protocol RelayClock: Sendable {
    func now() -> Int64
}

/// The system wall clock.
public struct SystemRelayClock: RelayClock {
    public init() {}
    public func now() -> Int64 { Int64(Date().timeIntervalSince1970) }
}
