import RelayProtocol
import SwiftplexCrypto

/// Limits and policies of an agent, for an operator to tune (the bot host reads them from its
/// YAML file; see docs/configuration.md).
public struct AgentOptions: Sendable {
    /// Hosts (`host` or `host:port`, as written in links) that a peer's link may name. `nil`
    /// allows any host. The agent's own relays, and relays that hold its receiving queues, are
    /// always allowed.
    public var allowedHosts: Set<String>?
    /// Refuses peer relays whose address is (or whose name resolves to) a loopback, private,
    /// link-local, shared, unspecified, multicast or reserved address, so that a link cannot
    /// make the agent dial into the operator's network. Off by default: tests and the embedded
    /// relay use loopback.
    public var refusePrivateAddresses: Bool
    /// The most a join, an accept, an allow, a contact request or a short-link lookup waits on
    /// a peer's relay before failing with ``AgentError/Code/timeout``.
    public var peerRelayTimeout: Duration
    /// How long one dial (TCP, TLS and the relay hello) may take.
    public var connectTimeout: Duration
    /// A relay that has never completed a handshake is given up after this many failed dials ...
    public var newRelayMaxFailures: Int
    /// ... for this long: dials fail at once with ``AgentError/Code/relayUnreachable``.
    public var newRelayRetryAfter: Duration
    /// How long the ratchet keeps keys of skipped messages.
    public var skippedKeys: DoubleRatchet.SkippedKeyLimits

    public init(allowedHosts: Set<String>? = nil, refusePrivateAddresses: Bool = false, peerRelayTimeout: Duration = .seconds(30),
                connectTimeout: Duration = .seconds(10), newRelayMaxFailures: Int = 3, newRelayRetryAfter: Duration = .seconds(600),
                skippedKeys: DoubleRatchet.SkippedKeyLimits = .default) {
        self.allowedHosts = allowedHosts.map { Set($0.map { $0.lowercased() }) }
        self.refusePrivateAddresses = refusePrivateAddresses
        self.peerRelayTimeout = peerRelayTimeout
        self.connectTimeout = connectTimeout
        self.newRelayMaxFailures = newRelayMaxFailures
        self.newRelayRetryAfter = newRelayRetryAfter
        self.skippedKeys = skippedKeys
    }
}
