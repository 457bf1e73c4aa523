import SwiftplexBase

/// A chat relay's status in a channel (SimpleX `Types/Shared.hs` `RelayStatus`): the owner's view
/// of each relay (`GroupRelay.relayStatus`), and a relay's view of itself (`relayOwnStatus`).
/// JSON names as the bot API (PY 7.0.2) writes them; the store's text is ``storeText``.
public enum RelayStatus: String, Sendable, Hashable, CaseIterable {
    /// Owner only: the relay's member record exists, the invitation is not sent yet.
    case new
    /// `x.grp.relay.inv` sent (owner) / received and stored (relay).
    case invited
    /// `x.grp.relay.acpt` received and the relay's link data checked (owner) / the owner's request
    /// accepted (relay).
    case accepted
    /// The relay acknowledged the owner's roster (`x.grp.roster.ack`; not used by Swiftplex, which
    /// has no roster yet — kept so the value round-trips).
    case acknowledgedRoster
    /// The relay's link is in the channel's published link data: subscribers join through it.
    case active
    /// No longer serving: removed by the owner, or its link dropped from the link data.
    case inactive
    /// The relay refused the invitation (`x.grp.relay.reject`), or (relay's own view) its operator
    /// left the channel.
    case rejected

    /// The store's text (`relayStatusText`): as the JSON name except `acknowledged_roster`.
    public var storeText: String { self == .acknowledgedRoster ? "acknowledged_roster" : rawValue }

    public init?(storeText: String) {
        if storeText == "acknowledged_roster" { self = .acknowledgedRoster; return }
        guard storeText != "acknowledgedRoster" else { return nil }
        self.init(rawValue: storeText)
    }

    /// Whether the relay still takes part (everything but `inactive` and `rejected`).
    public var isCurrent: Bool { self != .inactive && self != .rejected }
}

/// What moves a relay's status (owner's view), SimpleX `Subscriber.hs`/`Commands.hs`: the
/// transitions of ``RelayStatus/next(on:)``.
public enum RelayStatusEvent: Sendable, Hashable {
    /// The contact request with `x.grp.relay.inv` went out (`addRelays`).
    case invitationSent
    /// `x.grp.relay.acpt` came and the relay's link data names the relay's member id.
    case acceptedAndVerified
    /// `x.grp.relay.reject` came.
    case rejectedByRelay
    /// `x.grp.roster.ack` without error.
    case rosterAcknowledged
    /// `x.grp.roster.ack` with an error.
    case rosterRefused
    /// The owner's link data was published (agent `LINK`) with (`true`) or without the relay's link.
    case linkDataPublished(containsRelay: Bool)
    /// The owner removed the relay (`/_remove #g <relay>`), or the relay left (`x.grp.leave`).
    case removed
}

extension RelayStatus {
    /// The owner's state machine (docs/channels.md "RelayStatus"):
    /// ```
    /// new ─invitationSent→ invited ─acceptedAndVerified→ accepted ─rosterAcknowledged→ acknowledgedRoster
    /// invited ─rejectedByRelay→ rejected          accepted ─rosterRefused→ rejected
    /// accepted|acknowledgedRoster ─linkDataPublished(true)→ active
    /// active ─linkDataPublished(false)→ inactive  any but rejected ─removed→ inactive
    /// ```
    /// Nil when the event does not move this status (the input is out of order or repeated: the
    /// caller refuses it, or for `linkDataPublished` keeps the status).
    public func next(on event: RelayStatusEvent) -> RelayStatus? {
        switch (self, event) {
        case (.new, .invitationSent): .invited
        case (.invited, .acceptedAndVerified): .accepted
        case (.invited, .rejectedByRelay): .rejected
        case (.accepted, .rosterAcknowledged): .acknowledgedRoster
        case (.accepted, .rosterRefused): .rejected
        case (.accepted, .linkDataPublished(true)), (.acknowledgedRoster, .linkDataPublished(true)): .active
        case (.active, .linkDataPublished(false)): .inactive
        case (.new, .removed), (.invited, .removed), (.accepted, .removed), (.acknowledgedRoster, .removed), (.active, .removed): .inactive
        default: nil
        }
    }
}
