import Foundation
import SwiftplexSQL

// Read-only counters of the channel delivery path, for `swiftplex-bench channel` and operators:
// what a relay still has to send, and what a subscriber has received.

extension ChatController {
    /// Forwards this engine's subscribers received from their relays, copies that dedup dropped
    /// included (each relay's copy of a post counts once).
    public func channelForwardsReceived() -> Int {
        channelRuntime.subscribers.values.reduce(0) { sum, s in sum + s.relays.values.reduce(0) { $0 + $1.delivered } }
    }

    /// Delivery jobs this engine's relays have committed and not finished (`channel_delivery` rows).
    public func channelDeliveryJobs() async throws -> Int {
        try await dbRead { db in try ChannelDeliveryRecord.fetchCount(db) }
    }
}
