import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RelayClient
import RelayProtocol
@testable import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing

/// Issue 9's load goal: connections that have proven themselves (an answered command authorised by
/// a key the relay already held) keep the event loops, while the event-loop time of all the others
/// together is bounded by the relay-wide budget of unproven work (`unprovenWorkRate`). Over real
/// TLS on loopback. Each test puts that budget a few seconds in debt by hand (as a crowd of
/// misbehaving connections would), then waits for events, never for a fixed time.
@Suite(.timeLimit(.minutes(1))) struct RelayUnprovenWorkTests {
    /// Puts the relay-wide budget of unproven work `seconds` in debt (as if unproven connections had just cost that much).
    private func overdrawUnprovenWork(_ relay: RelayServer, seconds: Int) {
        let rate = relay.configuration.unprovenWorkRate
        _ = relay.core.globalBudget.take(.unprovenWork, rate.burst + seconds * rate.perSecond)
    }

    /// A round trip on `connection`'s own queue: an unsigned `SEND`, then `GET` and `ACK`, which its
    /// recipient key signs (the `GET`'s answer proves the connection).
    private func roundTrip(_ connection: RelayConnection, _ q: RecipientQueue, _ byte: UInt8) async throws {
        try await connection.sendMessage(senderId: q.senderId, key: nil, body: [byte])
        let m = try #require(try await connection.get(q))
        #expect(m.body == [byte])
        try await connection.acknowledge(q, messageId: m.id)
    }

    @Test func aProvenConnectionIsServedWhileUnprovenOnesWaitForTheirBudget() async throws {
        try await withRelay { relay in
            let good = try await RelayConnection.connect(to: relay.address)
            let q = try await good.createQueue()
            try await roundTrip(good, q, 1) // proven from here on
            let unproven = try await RelayConnection.connect(to: relay.address)
            try await unproven.ping() // answered: PINGs carry no key, so it stays unproven
            let throttledBefore = relay.stats.throttled

            overdrawUnprovenWork(relay, seconds: 4)
            // The unproven connection's next PING is read (its cost then takes from the overdrawn
            // budget); the one after it waits unread until the debt is paid.
            let pings = NIOLockedValueBox(0)
            let unprovenPings = Task {
                for _ in 0..<2 {
                    try await unproven.ping()
                    pings.withLockedValue { $0 += 1 }
                }
            }
            // A new connection does not get through its TLS handshake meanwhile (the listener
            // stops accepting; one already accepted is held once its handshake's first read is charged).
            let connected = NIOLockedValueBox(false)
            let newcomer = Task {
                let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(30))
                connected.withLockedValue { $0 = true }
                return c
            }
            try await eventually("the unproven connection is held") { relay.stats.throttled > throttledBefore }

            // The proven connection is served at once, every command of it.
            try await roundTrip(good, q, 2)
            try await good.ping()
            #expect(pings.withLockedValue { $0 } < 2, "the unproven connection's second PING was read at once")
            #expect(!connected.withLockedValue { $0 }, "a new connection was accepted while the unproven budget was overdrawn")

            // Slowed, not refused: both are served once the debt is paid.
            try await unprovenPings.value
            let late = try await newcomer.value
            try await late.ping()
            #expect(unproven.isActive)
            #expect(relay.stats.limitRefusals == 0)
            await late.close()
            await unproven.close()
            await good.close()
        }
    }

    @Test func aProvenConnectionThatIsAnsweredAuthLosesItsStanding() async throws {
        try await withRelay { relay in
            let client = try await RelayConnection.connect(to: relay.address)
            let q = try await client.createQueue()
            try await roundTrip(client, q, 1) // proven
            overdrawUnprovenWork(relay, seconds: 3)
            try await client.ping() // proven: nothing is taken from the overdrawn budget
            let throttledBefore = relay.stats.throttled
            #expect(throttledBefore == 0)

            // An AUTH answer (a SKEY at a sender ID that does not exist) demotes it for good.
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await client.secureAsSender(senderId: Sodium.randomBytes(24), senderKey: .newX25519())
            }
            let pinged = NIOLockedValueBox(0)
            let pings = Task {
                for _ in 0..<2 {
                    try await client.ping()
                    pinged.withLockedValue { $0 += 1 }
                }
            }
            // Its work is now taken from the overdrawn budget: it is held like any unproven connection.
            try await eventually("the demoted connection is held") { relay.stats.throttled > throttledBefore }
            #expect(pinged.withLockedValue { $0 } < 2)
            try await pings.value
            #expect(client.isActive)
            await client.close()
        }
    }

    @Test func anUnprovenConnectionsPileIsAnsweredCompletelyAndInOrderAcrossSlices() async throws {
        // A slice of 1 ns: every transmission after the first of each read waits for a later turn.
        try await withRelay(configure: { $0.unprovenSliceNanoseconds = 1 }) { relay in
            let client = try await RelayConnection.connect(to: relay.address)
            let q = try await client.createQueue()
            // 40 unsigned SENDs pipelined (in few blocks): each answered OK, stored in order.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<40 {
                    group.addTask { try await client.sendMessage(senderId: q.senderId, key: nil, body: [UInt8(i)]) }
                }
                try await group.waitForAll()
            }
            #expect(relay.stats.storedMessages == 40)
            // Ordered per connection as the client wrote them: read them back.
            var bodies: [UInt8] = []
            while let m = try await client.get(q) {
                bodies.append(contentsOf: m.body)
                try await client.acknowledge(q, messageId: m.id)
            }
            #expect(bodies.count == 40)
            #expect(Set(bodies) == Set(0..<40))
            await client.close()
        }
    }
}
