import NIOConcurrencyHelpers
import NIOCore

/// Where connections come from, for the per-source budget of new connections' work
/// (``RelayConfiguration/sourceHandshakeWorkRate``): an IPv4 address or an IPv6 prefix (by
/// default /32 and /64 — one host, one customer's IPv6 network), masked to
/// ``RelayConfiguration/sourcePrefixLengthIPv4`` / ``RelayConfiguration/sourcePrefixLengthIPv6``.
/// An IPv4-mapped IPv6 address counts as the IPv4 address.
struct SourceKey: Hashable, Sendable, CustomStringConvertible {
    /// The address's bytes (4 or 16), masked to the prefix.
    let bytes: [UInt8]

    init?(_ address: SocketAddress?, prefixIPv4: Int, prefixIPv6: Int) {
        switch address {
        case let .v4(a):
            let raw = withUnsafeBytes(of: a.address.sin_addr) { Array($0) }
            bytes = Self.mask(raw, prefix: prefixIPv4)
        case let .v6(a):
            let raw = withUnsafeBytes(of: a.address.sin6_addr) { Array($0) }
            if raw.prefix(10).allSatisfy({ $0 == 0 }), raw[10] == 0xFF, raw[11] == 0xFF {
                bytes = Self.mask(Array(raw[12...]), prefix: prefixIPv4)
            } else {
                bytes = Self.mask(raw, prefix: prefixIPv6)
            }
        default:
            return nil
        }
    }

    init(bytes: [UInt8]) { self.bytes = bytes }

    static func mask(_ raw: [UInt8], prefix: Int) -> [UInt8] {
        let bits = min(max(prefix, 0), raw.count * 8)
        return raw.enumerated().map { i, byte in
            let kept = min(max(bits - i * 8, 0), 8)
            return kept == 8 ? byte : byte & ~(UInt8(0xFF) >> kept)
        }
    }

    var description: String {
        bytes.count == 4 ? bytes.map(String.init).joined(separator: ".") : bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// The per-source budgets of new connections' work: each source (``SourceKey``) has a token
/// bucket of event-loop microseconds that its connections' graces (TLS handshake, hello, first
/// commands) take from — as they take from the relay-wide ``GlobalBudget/Limit/handshakeWork`` —
/// and that a connection which proves itself gives back. While a source's bucket is in debt, a new
/// connection from it waits before its TLS handshake (``SourceGate``): a source that reconnects
/// in a loop without ever proving itself spends its own share, not the relay-wide budget that
/// pauses the listener for everyone. At most ``maxWaiting`` connections from one source wait; one
/// more is refused. Sources with no open connection and a full bucket are forgotten (at most every
/// time the table has doubled since the last pass).
final class SourceBudgets: Sendable {
    private struct Entry {
        var bucket: TokenBucket
        var connections = 0
        /// Connections from the source held at its gate now.
        var waiting = 0
    }

    /// What the gate does with a new connection (``admit(_:waiting:)``).
    enum Admission: Equatable {
        /// Let through to its handshake, ``prepaid`` taken.
        case admitted
        /// The source's bucket is in debt: wait this long, then ask again.
        case wait(TimeAmount)
        /// The source's bucket is in debt and ``maxWaiting`` of its connections already wait.
        case refused
    }

    private struct State {
        var entries: [SourceKey: Entry] = [:]
        var pruneAt = 1024
    }

    let rate: RateLimit
    let prefixIPv4: Int
    let prefixIPv6: Int
    /// What a connection takes from its source's bucket when it is let through to its handshake,
    /// before its work is measured (that work then uses it up first; what is left goes back when
    /// the grace ends): so that connections from one source waiting for its debt are let through
    /// one at a time, not all at once when it is paid.
    let prepaid: Int
    /// Connections from one source that may wait at its gate at once.
    let maxWaiting: Int
    private let state = NIOLockedValueBox(State())

    init(rate: RateLimit, prefixIPv4: Int, prefixIPv6: Int, prepaid: Int, maxWaiting: Int) {
        self.rate = rate
        self.prefixIPv4 = prefixIPv4
        self.prefixIPv6 = prefixIPv6
        self.prepaid = prepaid
        self.maxWaiting = maxWaiting
    }

    func key(for address: SocketAddress?) -> SourceKey? {
        SourceKey(address, prefixIPv4: prefixIPv4, prefixIPv6: prefixIPv6)
    }

    /// Sources tracked now.
    var count: Int { state.withLockedValue { $0.entries.count } }

    /// A connection from `key` was accepted. Returns the sources tracked.
    @discardableResult
    func opened(_ key: SourceKey) -> Int {
        let now = NIODeadline.now()
        return state.withLockedValue { s in
            s.entries[key, default: Entry(bucket: TokenBucket(rate, now: now))].connections += 1
            guard s.entries.count >= s.pruneAt else { return s.entries.count }
            s.entries = s.entries.filter { _, e in
                var bucket = e.bucket
                return e.connections > 0 || !bucket.isFull(now: now)
            }
            s.pruneAt = max(1024, s.entries.count * 2)
            return s.entries.count
        }
    }

    /// A connection from `key` closed.
    func closed(_ key: SourceKey) {
        state.withLockedValue { s in
            guard var e = s.entries[key] else { return }
            e.connections -= 1
            s.entries[key] = e
        }
    }

    /// Lets a new connection from `key` through to its handshake (``prepaid`` taken) unless the
    /// source's bucket is in debt: then it waits — counted among the source's waiting connections
    /// from its first ask (`waiting` false) until it is let through or ``leftWaiting(_:)`` — or,
    /// with ``maxWaiting`` already waiting, it is refused.
    func admit(_ key: SourceKey, waiting: Bool) -> Admission {
        let now = NIODeadline.now()
        return state.withLockedValue { s in
            guard var e = s.entries[key] else { return .admitted }
            defer { s.entries[key] = e }
            if let wait = e.bucket.debtClears(now: now) {
                if waiting { return .wait(wait) }
                guard e.waiting < maxWaiting else { return .refused }
                e.waiting += 1
                return .wait(wait)
            }
            if waiting { e.waiting -= 1 }
            e.bucket.take(prepaid, now: now)
            return .admitted
        }
    }

    /// A connection that waited at the gate closed before it was let through.
    func leftWaiting(_ key: SourceKey) {
        state.withLockedValue { s in s.entries[key]?.waiting -= 1 }
    }

    /// Connections from `key` waiting at its gate now.
    func waiting(_ key: SourceKey) -> Int {
        state.withLockedValue { $0.entries[key]?.waiting ?? 0 }
    }

    func take(_ key: SourceKey, _ amount: Int) {
        guard amount > 0 else { return }
        let now = NIODeadline.now()
        state.withLockedValue { s in s.entries[key, default: Entry(bucket: TokenBucket(rate, now: now))].bucket.take(amount, now: now) }
    }

    func giveBack(_ key: SourceKey, _ amount: Int) {
        guard amount > 0 else { return }
        let now = NIODeadline.now()
        state.withLockedValue { s in s.entries[key]?.bucket.giveBack(amount, now: now) }
    }

    /// How long until `key`'s bucket is back in credit (nil while it is, or for an unknown source).
    func debt(_ key: SourceKey) -> TimeAmount? {
        let now = NIODeadline.now()
        return state.withLockedValue { s in s.entries[key]?.bucket.debtClears(now: now) }
    }
}

/// One connection's account with its source (confined to the connection's event loop, through
/// its ``WorkTally``): what it prepaid when let through, and what its grace took since.
struct SourceAccount {
    let budgets: SourceBudgets
    let key: SourceKey
    /// Prepaid and not yet used up by measured work.
    private(set) var prepaid = 0
    /// Let through to its handshake: only work from then on is the source's (setting the
    /// connection up on accept is the relay-wide budget's, which the accept rate bounds).
    private var isAdmitted = false
    /// Taken from the source's bucket by the grace's measured work (beyond the prepaid part too).
    private var taken = 0

    init(budgets: SourceBudgets, key: SourceKey) {
        self.budgets = budgets
        self.key = key
    }

    mutating func admitted() {
        isAdmitted = true
        prepaid = budgets.prepaid
    }

    /// Work of the connection's grace: what was prepaid is used up first.
    mutating func charge(_ micros: Int) {
        guard micros > 0, isAdmitted else { return }
        let fromPrepaid = min(prepaid, micros)
        prepaid -= fromPrepaid
        budgets.take(key, micros - fromPrepaid)
        taken += micros
    }

    /// The grace is over (or the connection closed): what is left of the prepaid part goes back.
    mutating func graceEnded() {
        budgets.giveBack(key, prepaid)
        prepaid = 0
    }

    /// The connection proved itself: everything its grace took goes back.
    mutating func proven() {
        budgets.giveBack(key, prepaid + taken)
        prepaid = 0
        taken = 0
    }

    /// Demoted: its grace's cost stays with the source.
    mutating func demoted() {
        graceEnded()
        taken = 0
    }
}

/// First in a connection's pipeline when per-source budgets are on: while its source's budget of
/// new connections' work is in debt (``SourceBudgets``) the connection is accepted but held — not
/// read from, so its TLS handshake does not start, and not shown active to the handlers behind,
/// so its handshake timeout does not run either — rechecking when the debt is due to be paid. A
/// connection past the source's bound of waiting connections is closed at once. Once let through
/// the gate removes itself.
final class SourceGate: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let tally: WorkTally
    private let noteWait: () -> Void
    private let noteRefused: () -> Void
    private var timer: Scheduled<Void>?
    private var readWanted = false
    private var activeHeld = false
    private var admitted = false
    /// Counted among its source's waiting connections.
    private var waiting = false

    init(tally: WorkTally, noteWait: @escaping () -> Void, noteRefused: @escaping () -> Void) {
        self.tally = tally
        self.noteWait = noteWait
        self.noteRefused = noteRefused
    }

    func handlerAdded(context: ChannelHandlerContext) {
        // Added to a connection already active: the handlers behind have seen it; not gated.
        if context.channel.isActive { admitted = true }
    }

    func channelActive(context: ChannelHandlerContext) {
        guard admitted || tryAdmit(context: context) else {
            activeHeld = true
            return
        }
        context.fireChannelActive()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        if admitted { return context.read() }
        readWanted = true
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopWaiting()
        context.fireChannelInactive()
    }

    /// Whether the connection was let through now; otherwise it waits (a recheck scheduled) or was refused.
    private func tryAdmit(context: ChannelHandlerContext) -> Bool {
        guard let account = tally.source else {
            admitted = true
            return true
        }
        switch account.budgets.admit(account.key, waiting: waiting) {
        case .admitted:
            waiting = false
            admitted = true
            tally.source?.admitted()
            return true
        case let .wait(wait):
            // Counted once per connection (its rechecks are not new waits).
            if !waiting {
                waiting = true
                noteWait()
            }
            timer = context.eventLoop.assumeIsolated().scheduleTask(in: wait) { [self] in
                timer = nil
                guard context.channel.isActive, tryAdmit(context: context) else { return }
                letThrough(context: context)
            }
            return false
        case .refused:
            noteRefused()
            context.close(promise: nil)
            return false
        }
    }

    private func letThrough(context: ChannelHandlerContext) {
        if activeHeld {
            activeHeld = false
            context.fireChannelActive()
        }
        if readWanted {
            readWanted = false
            context.read()
        }
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    private func stopWaiting() {
        timer?.cancel()
        timer = nil
        if waiting, let account = tally.source {
            waiting = false
            account.budgets.leftWaiting(account.key)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopWaiting()
    }
}
