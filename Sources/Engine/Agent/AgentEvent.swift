import RelayProtocol

/// How a received message relates to the ones before it on its connection.
public enum MessageIntegrity: Sendable, Equatable {
    case ok
    /// Messages `from...to` never arrived (the sender's numbering jumped).
    case skipped(from: UInt64, to: UInt64)
    /// A number at or below the last one received.
    case duplicate
    /// The hash of the previous message does not match what was received before.
    case badHash
}

/// What the agent reports, in order.
public enum AgentEvent: Sendable, Equatable {
    /// Inviter: a joiner confirmed; `info` is what it sent. Call `allow` to accept.
    case confirmation(connection: Int64, info: [UInt8])
    /// Both sides can now exchange messages; `info` is the peer's.
    case connected(connection: Int64, info: [UInt8])
    case message(connection: Int64, seq: UInt64, body: [UInt8], integrity: MessageIntegrity)
    /// A message from `send` reached the peer's relay.
    case sent(connection: Int64, seq: UInt64)
    /// The peer confirmed (with a delivery receipt) that it received these messages of ours.
    case delivered(connection: Int64, seqs: [UInt64])
    /// Something arrived on the connection that could not be opened (tampered, replayed or corrupt).
    case rejected(connection: Int64, reason: String)
    /// Someone sent a contact request to an address; accept or reject it by `request`.
    case contactRequest(address: Int64, request: Int64, info: [UInt8])
    /// The agent database refused a write while something was received (disk full, a fault):
    /// nothing was acknowledged to the relay, and the agent tries again (`connection` is nil for
    /// a contact request).
    case storeError(connection: Int64?, message: String)
    /// The peer's queue refused our messages with `AUTH`: it was deleted (or disabled) without a
    /// goodbye. The envelopes still waiting (`seqs` of the numbered ones) are dropped rather than
    /// retried for ever — each retry would count against the relay's limit on `AUTH` answers.
    case undeliverable(connection: Int64, seqs: [UInt64])
    case hostConnected(RelayAddress)
    case hostDisconnected(RelayAddress)
    /// Every receiving queue on `relay` was subscribed (at start, and after each reconnection):
    /// the connections now receiving, and those whose queue the relay refused (it no longer has
    /// it). Address queues are subscribed too but not listed.
    case subscriptions(relay: RelayAddress, active: [Int64], removed: [SubscriptionFailure])
}

/// A connection whose receiving queue could not be subscribed: the relay's error code.
public struct SubscriptionFailure: Sendable, Equatable {
    public var connection: Int64
    public var error: String

    public init(connection: Int64, error: String) {
        self.connection = connection
        self.error = error
    }
}

extension AgentEvent {
    /// The connection the event is about, if it is about one.
    public var connectionId: Int64? {
        switch self {
        case let .confirmation(c, _), let .connected(c, _), let .message(c, _, _, _), let .sent(c, _), let .delivered(c, _), let .rejected(c, _),
             let .undeliverable(c, _):
            c
        case .contactRequest, .storeError, .hostConnected, .hostDisconnected, .subscriptions:
            nil
        }
    }
}
