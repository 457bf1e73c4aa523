import Metrics

/// The relay's counters, reported through swift-metrics (and so to Prometheus when the
/// executable bootstraps a Prometheus factory). Labels never carry queue IDs or addresses.
struct RelayMetrics: Sendable {
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
}

/// A point-in-time view of the relay's counters, for tests, benchmarks and logs.
public struct RelayStats: Sendable, Equatable {
    public var queues = 0
    public var storedMessages = 0
    public var messagesSent = 0
    public var messagesDelivered = 0
    public var messagesExpired = 0
    public var authFailures = 0
    public var connections = 0
}
