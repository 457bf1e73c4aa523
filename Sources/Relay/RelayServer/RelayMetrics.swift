import Metrics

/// The relay's counters, reported through swift-metrics (and so to Prometheus when the
/// executable bootstraps a Prometheus factory). Labels never carry queue IDs or addresses.
struct RelayMetrics: Sendable {
    /// A resource limit that refused something (the `limit` label of
    /// `swiftplex_relay_limit_refusals_total`).
    enum Limit: String, Sendable, CaseIterable {
        case connections
        case queuesTotal = "queues_total"
        case queuesPerConnection = "queues_per_connection"
        case storedMessages = "stored_messages"
        case storedBytes = "stored_bytes"
        case authFailures = "auth_failures"
        case authorizedPerBlock = "authorized_per_block"
        /// A new connection from a source that already had ``RelayConfiguration/maxWaitingPerSource`` waiting at its gate.
        case sourceWaiting = "source_waiting"
    }

    let queuesCreated = Counter(label: "swiftplex_relay_queues_created_total")
    let queuesDeleted = Counter(label: "swiftplex_relay_queues_deleted_total")
    let queues = Gauge(label: "swiftplex_relay_queues")
    let messagesSent = Counter(label: "swiftplex_relay_messages_sent_total")
    let messagesDelivered = Counter(label: "swiftplex_relay_messages_delivered_total")
    let messagesExpired = Counter(label: "swiftplex_relay_messages_expired_total")
    let authFailures = Counter(label: "swiftplex_relay_auth_failures_total")
    let quotaExceeded = Counter(label: "swiftplex_relay_quota_exceeded_total")
    let connections = Gauge(label: "swiftplex_relay_connections")
    let connectionsAccepted = Counter(label: "swiftplex_relay_connections_total")
    let storedMessages = Gauge(label: "swiftplex_relay_stored_messages")
    let storedBytes = Gauge(label: "swiftplex_relay_stored_bytes")
    let corruptRows = Counter(label: "swiftplex_relay_corrupt_rows_total")
    /// Sources the per-source budgets of new connections' work track (``SourceBudgets``).
    let sources = Gauge(label: "swiftplex_relay_sources")

    func throttled(_ limit: ConnectionBudget.Limit) {
        Self.throttles[limit]?.increment()
    }

    private static let throttles: [ConnectionBudget.Limit: Counter] = Dictionary(uniqueKeysWithValues: ConnectionBudget.Limit.allCases.map {
        ($0, Counter(label: "swiftplex_relay_throttled_total", dimensions: [("limit", $0.rawValue)]))
    })

    func refused(_ limit: Limit) {
        Self.refusals[limit]?.increment()
    }

    private static let refusals: [Limit: Counter] = Dictionary(uniqueKeysWithValues: Limit.allCases.map {
        ($0, Counter(label: "swiftplex_relay_limit_refusals_total", dimensions: [("limit", $0.rawValue)]))
    })
}

/// A point-in-time view of the relay's counters, for tests, benchmarks and logs.
public struct RelayStats: Sendable, Equatable {
    public var queues = 0
    public var storedMessages = 0
    /// Body bytes of the stored (undelivered or unacknowledged) messages.
    public var storedBytes = 0
    public var messagesSent = 0
    public var messagesDelivered = 0
    public var messagesExpired = 0
    public var authFailures = 0
    public var connections = 0
    /// Queue rows skipped at start because they could not be read.
    public var corruptRowsSkipped = 0
    /// Refusals by resource limit (`QUOTA` for queues and storage, closed connections otherwise).
    public var limitRefusals = 0
    /// Times a connection went over one of its rates and the relay stopped reading from it for a while.
    public var throttled = 0
    /// `throttled` by limit (the `limit` label of `swiftplex_relay_throttled_total`: `unproven_work`,
    /// `unproven_run`, `accepts`, `handshake_work`, …).
    public var throttledByLimit: [String: Int] = [:]
    /// Sources (IPv4 addresses, IPv6 prefixes) the per-source budgets of new connections' work track now.
    public var sources = 0
}
