import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RelayClient
import RelayProtocol
@testable import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing

/// The relay's load goal: connections that have proven themselves (an answered command authorised by
/// a key the relay already held) keep the event loops, while the event-loop time of all the others
/// together is bounded by the relay-wide budget of unproven work (`unprovenWorkRate`), new
/// connections' handshakes and first commands by a budget of their own (`handshakeWorkRate`), and
/// unproven work comes in short runs (`unprovenRunRate`). Over real TLS on loopback. Each test puts
/// one of those budgets seconds in debt by hand (as a crowd of misbehaving connections would; two
/// minutes where a test then waits up to 40 s for a served connection, so that the debt outlasts
/// any wait on a loaded machine), then waits for events, never for a fixed time.
@Suite(.timeLimit(.minutes(3))) struct RelayUnprovenWorkTests {
    /// Puts the relay-wide budget of unproven work `seconds` in debt (as if unproven connections had just cost that much).
    private func overdrawUnprovenWork(_ relay: RelayServer, seconds: Int) {
        overdraw(relay, .unprovenWork, relay.configuration.unprovenWorkRate, seconds: seconds)
    }

    /// Throttles so far with the limit `limit`.
    private func throttled(_ relay: RelayServer, _ limit: ConnectionBudget.Limit) -> Int {
        relay.stats.throttledByLimit[limit.rawValue] ?? 0
    }

    private func overdraw(_ relay: RelayServer, _ limit: GlobalBudget.Limit, _ rate: RateLimit, seconds: Int) {
        _ = relay.core.globalBudget.take(limit, rate.burst + seconds * rate.perSecond)
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
            let throttledBefore = throttled(relay, .unprovenWork)

            overdrawUnprovenWork(relay, seconds: 120)
            // The unproven connection's next PING is read (its cost then takes from the overdrawn
            // budget); the one after it waits unread until the debt is paid (two minutes: longer
            // than the proven connection's round trip can take on a loaded machine).
            let pings = NIOLockedValueBox(0)
            let unprovenPings = Task {
                for _ in 0..<2 {
                    try await unproven.ping()
                    pings.withLockedValue { $0 += 1 }
                }
            }
            try await eventually("the unproven connection is held") { throttled(relay, .unprovenWork) > throttledBefore }

            // The proven connection is served at once, every command of it.
            try await roundTrip(good, q, 2)
            try await good.ping()
            #expect(pings.withLockedValue { $0 } < 2, "the unproven connection's second PING was read at once")

            // Slowed, not refused: it is held open, unread (the bucket's own tests show when a
            // debt is paid).
            #expect(unproven.isActive)
            #expect(relay.stats.limitRefusals == 0)
            unprovenPings.cancel()
            await unproven.close()
            await good.close()
        }
    }

    @Test func aNewConnectionIsAcceptedAndProvesItselfWhileUnprovenWorkIsOverdrawn() async throws {
        try await withRelay { relay in
            // The queues of two clients that will reconnect (as after a relay restart).
            let before = try await RelayConnection.connect(to: relay.address)
            let queues = [try await before.createQueue(), try await before.createQueue()]
            await before.close()
            // A connection past its grace, which keeps unproven.
            let unproven = try await RelayConnection.connect(to: relay.address)
            try await unproven.ping()

            overdrawUnprovenWork(relay, seconds: 120)
            let throttledBefore = throttled(relay, .unprovenWork)
            let pings = NIOLockedValueBox(0)
            let unprovenPings = Task {
                for _ in 0..<2 {
                    try await unproven.ping()
                    pings.withLockedValue { $0 += 1 }
                }
            }
            try await eventually("the unproven connection is held") { throttled(relay, .unprovenWork) > throttledBefore }

            // Each reconnecting client in turn is accepted (its handshake and first commands are
            // the budget of new connections', not the overdrawn one; the listener checks before
            // each accept, so the first could get in on a check made before the debt), proves
            // itself with its SUB and is served at once from then on.
            var back: [RelayConnection] = []
            for (n, q) in queues.enumerated() {
                let (c, inbox) = try await returnsWithin(.seconds(40), "reconnecting client \(n) while the unproven budget is overdrawn") {
                    let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(40))
                    let inbox = EventInbox(c)
                    try await c.subscribe(q)
                    return (c, inbox)
                }
                back.append(c)
                try await returnsWithin(.seconds(40), "reconnected client \(n)'s round trips") {
                    for i in 0..<5 {
                        try await c.sendMessage(senderId: q.senderId, key: nil, body: [UInt8(i)])
                        let m = try await inbox.nextMessage(for: q)
                        #expect(m.body == [UInt8(i)])
                        try await c.acknowledge(q, messageId: m.id)
                    }
                }
            }
            #expect(pings.withLockedValue { $0 } < 2, "the unproven connection's second PING was read at once")
            unprovenPings.cancel()
            for c in back { await c.close() }
            await unproven.close()
        }
    }

    @Test func aNewConnectionWaitsForTheBudgetOfNewConnectionsWhileAProvenOneIsServed() async throws {
        try await withRelay { relay in
            let good = try await RelayConnection.connect(to: relay.address)
            let q = try await good.createQueue()
            try await roundTrip(good, q, 1) // proven
            overdraw(relay, .handshakeWork, relay.configuration.handshakeWorkRate, seconds: 120)
            let throttledBefore = throttled(relay, .handshakeWork)
            // The listener checks the budget before each accept: the first connection may already
            // be past that check; the one after it waits in the backlog.
            let first = try await RelayConnection.connect(to: relay.address, timeout: .seconds(10))
            try await eventually("the listener pauses") { throttled(relay, .handshakeWork) > throttledBefore }
            let connected = NIOLockedValueBox(false)
            let second = Task {
                let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(50))
                connected.withLockedValue { $0 = true }
                await c.close()
            }
            try await roundTrip(good, q, 2)
            try await good.ping()
            #expect(!connected.withLockedValue { $0 }, "a connection was accepted while the budget of new connections was overdrawn")
            second.cancel()
            await first.close()
            await good.close()
        }
    }

    @Test func newConnectionsThatProveThemselvesGiveBackTheirHandshakesCost() async throws {
        // A budget of new connections' work of 1 µs a second: one handshake puts it in debt for minutes.
        try await withRelay(configure: { $0.handshakeWorkRate = RateLimit(perSecond: 1, burst: 1) }) { relay in
            // The listener checks the budget after each accept, before the new connection's
            // handshake has cost anything: each connection's accept depends on those before it.
            // Each of these proves itself (its GET's answer) before the next connects.
            var clients: [RelayConnection] = []
            for i in 0..<4 {
                let c = try await returnsWithin(.seconds(20), "client \(i) connects and proves itself") {
                    let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(10))
                    let q = try await c.createQueue()
                    try await roundTrip(c, q, UInt8(i))
                    return c
                }
                clients.append(c)
            }
            #expect(relay.core.globalBudget.debt(.handshakeWork) == nil)
            // One that does not prove itself keeps its cost: the listener pauses.
            let throttledBefore = throttled(relay, .handshakeWork)
            let idle = try await RelayConnection.connect(to: relay.address, timeout: .seconds(10))
            try await idle.ping()
            let next = try await RelayConnection.connect(to: relay.address, timeout: .seconds(10))
            try await eventually("the listener pauses") { throttled(relay, .handshakeWork) > throttledBefore }
            #expect(relay.core.globalBudget.debt(.handshakeWork) != nil)
            await next.close()
            await idle.close()
            for c in clients { await c.close() }
        }
    }

    @Test func unprovenReadsWaitForAGapInTheRunOfUnprovenWorkWhileAProvenConnectionIsServed() async throws {
        try await withRelay { relay in
            let good = try await RelayConnection.connect(to: relay.address)
            let q = try await good.createQueue()
            try await roundTrip(good, q, 1) // proven
            let unproven = try await RelayConnection.connect(to: relay.address)
            try await unproven.ping()
            // As if unproven connections had just run for 30 s without a gap.
            overdraw(relay, .unprovenRun, relay.configuration.unprovenRunRate, seconds: 120)
            let throttledBefore = throttled(relay, .unprovenRun)
            let pinged = NIOLockedValueBox(false)
            let ping = Task {
                try await unproven.ping()
                pinged.withLockedValue { $0 = true }
            }
            // Its read waits, unprocessed (counted as a throttle with the limit `unproven_run`).
            try await eventually("the unproven connection's read waits") { throttled(relay, .unprovenRun) > throttledBefore }
            try await returnsWithin(.seconds(40), "the proven connection's round trips") {
                for i in 0..<5 { try await roundTrip(good, q, UInt8(i + 2)) }
                try await good.ping()
            }
            #expect(!pinged.withLockedValue { $0 }, "the unproven connection's PING was processed during the run's debt")
            ping.cancel()
            await unproven.close()
            await good.close()
        }
    }

    @Test func aProvenConnectionThatIsAnsweredAuthLosesItsStanding() async throws {
        try await withRelay { relay in
            let client = try await RelayConnection.connect(to: relay.address)
            let q = try await client.createQueue()
            try await roundTrip(client, q, 1) // proven
            overdrawUnprovenWork(relay, seconds: 120)
            try await client.ping() // proven: nothing is taken from the overdrawn budget
            let throttledBefore = throttled(relay, .unprovenWork)
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
            try await eventually("the demoted connection is held") { throttled(relay, .unprovenWork) > throttledBefore }
            #expect(pinged.withLockedValue { $0 } < 2)
            #expect(client.isActive)  // held, not refused
            pings.cancel()
            await client.close()
        }
    }

    @Test func aProvenConnectionHeldByTheNewQueueRatesKeepsItsStanding() async throws {
        // Four NEWs a second per connection with a burst of one, as a bot making contacts fast meets it.
        try await withRelay(configure: { $0.newQueueRate = RateLimit(perSecond: 4, burst: 1) }) { relay in
            let client = try await RelayConnection.connect(to: relay.address)
            let q = try await client.createQueue()
            try await roundTrip(client, q, 1) // proven
            // Over its own NEW rate (two at once: the second overdraws however long the round trip
            // took), then over the relay-wide one (drained by others): held by both.
            async let first = client.createQueue()
            async let second = client.createQueue()
            _ = try await (first, second)
            try await eventually("held by its new-queue rate") { throttled(relay, .newQueues) > 0 }
            // (Two seconds: the longest hold is the one counted, and its own rate's is under one.)
            overdraw(relay, .newQueues, relay.configuration.globalNewQueueRate, seconds: 2)
            _ = try await client.createQueue()
            #expect(throttled(relay, .globalNewQueues) > 0)

            // Still proven: with the budget of unproven work in debt, its PINGs take nothing from it
            // and are not held (a demoted connection is held after its first, as above).
            overdrawUnprovenWork(relay, seconds: 120)
            let before = throttled(relay, .unprovenWork)
            try await returnsWithin(.seconds(40), "the proven connection's PINGs") {
                for _ in 0..<3 { try await client.ping() }
            }
            #expect(throttled(relay, .unprovenWork) == before, "a new-queue throttle demoted the connection")
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
