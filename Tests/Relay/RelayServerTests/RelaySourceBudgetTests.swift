import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RelayClient
import RelayProtocol
@testable import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing

/// Honest newcomers while a source reconnects in a loop: new connections' graces (TLS handshake,
/// hello, first commands) take from a budget per source (an IPv4 address, an IPv6 prefix;
/// `sourceHandshakeWorkRate`) as well as from the relay-wide one, and a connection from a source
/// whose budget is in debt waits before its handshake while other sources' connections are
/// accepted and served. Real TLS on loopback, clients bound to different loopback addresses
/// (127.0.0.2, 127.0.0.3: Linux answers the whole of 127/8 on `lo`) to stand for different hosts;
/// waits for events, never for a fixed time.
@Suite(.timeLimit(.minutes(3))) struct RelaySourceBudgetTests {
    static let attacker = "127.0.0.2"
    static let newcomer = "127.0.0.3"

    private func key(_ address: String) throws -> SourceKey {
        try #require(SourceKey(try SocketAddress(ipAddress: address, port: 0), prefixIPv4: 32, prefixIPv6: 64))
    }

    private func throttled(_ relay: RelayServer, _ limit: ConnectionBudget.Limit) -> Int {
        relay.stats.throttledByLimit[limit.rawValue] ?? 0
    }

    /// A round trip on `connection`'s own queue; the `GET`, signed by the recipient key, proves it.
    private func roundTrip(_ connection: RelayConnection, _ q: RecipientQueue, _ byte: UInt8) async throws {
        try await connection.sendMessage(senderId: q.senderId, key: nil, body: [byte])
        let m = try #require(try await connection.get(q))
        #expect(m.body == [byte])
        try await connection.acknowledge(q, messageId: m.id)
    }

    /// Connects from `source` in a task; `connected` turns true once the relay hello is done.
    private func connectInBackground(_ relay: RelayServer, from source: String, connected: NIOLockedValueBox<Bool>) -> Task<Void, any Error> {
        Task {
            let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(50), sourceAddress: source)
            connected.withLockedValue { $0 = true }
            await c.close()
        }
    }

    @Test func aSourceOverItsBudgetWaitsBeforeItsHandshakeWhileAnotherSourceIsAcceptedAndServed() async throws {
        // At the defaults: per-source accounting is on, 5 ms a second per source.
        try await withRelay { relay in
            let sources = try #require(relay.core.sourceBudgets)
            let rate = relay.configuration.sourceHandshakeWorkRate
            #expect(rate == RelayConfiguration.sourceHandshakeWorkRate(msPerSecond: 5))
            // As if 127.0.0.2 had just reconnected for two minutes' worth of its budget without proving itself.
            sources.take(try key(Self.attacker), rate.burst + 120 * rate.perSecond)
            let throttledBefore = throttled(relay, .sourceHandshakeWork)
            let connected = NIOLockedValueBox(false)
            let waiting = connectInBackground(relay, from: Self.attacker, connected: connected)
            try await eventually("127.0.0.2's connection waits for its source's budget") {
                throttled(relay, .sourceHandshakeWork) > throttledBefore
            }
            // Another source's client is accepted, proves itself and is served meanwhile.
            try await returnsWithin(.seconds(40), "a client from 127.0.0.3 connects and makes round trips") {
                let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(40), sourceAddress: Self.newcomer)
                let q = try await c.createQueue()
                for i in 0..<3 { try await roundTrip(c, q, UInt8(i)) }
                await c.close()
            }
            #expect(!connected.withLockedValue { $0 }, "a connection from a source in debt completed its handshake")
            #expect(relay.core.globalBudget.debt(.handshakeWork) == nil, "the relay-wide budget of new connections was overdrawn")
            waiting.cancel()
        }
    }

    @Test func aSourceWhoseConnectionsDoNotProveThemselvesSpendsItsOwnShare() async throws {
        // 1 µs a second per source: one handshake that is not given back puts its source in debt
        // for hours. The relay-wide budget of new connections is off, so nothing else holds anyone.
        try await withRelay(configure: {
            $0.sourceHandshakeWorkRate = RateLimit(perSecond: 1, burst: 1)
            $0.handshakeWorkRate = .unlimited
        }) { relay in
            let sources = try #require(relay.core.sourceBudgets)
            // A connection from 127.0.0.2 that stays unproven (PINGs carry no key): its handshake
            // and first commands stay charged to its source.
            let unproven = try await RelayConnection.connect(to: relay.address, sourceAddress: Self.attacker)
            try await unproven.ping()
            try await eventually("127.0.0.2's grace is charged to it") { sources.debt(try key(Self.attacker)) != nil }

            let throttledBefore = throttled(relay, .sourceHandshakeWork)
            let connected = NIOLockedValueBox(false)
            let waiting = connectInBackground(relay, from: Self.attacker, connected: connected)
            try await eventually("127.0.0.2's next connection waits") { throttled(relay, .sourceHandshakeWork) > throttledBefore }

            // 127.0.0.3's clients get in, in turn, and each gives back what its grace cost once proven.
            for i in 0..<3 {
                try await returnsWithin(.seconds(40), "client \(i) from 127.0.0.3 connects and proves itself") {
                    let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(40), sourceAddress: Self.newcomer)
                    let q = try await c.createQueue()
                    try await roundTrip(c, q, UInt8(i))
                    await c.close()
                }
                #expect(sources.debt(try key(Self.newcomer)) == nil)
            }
            #expect(!connected.withLockedValue { $0 }, "a connection from a source in debt completed its handshake")
            #expect(sources.debt(try key(Self.attacker)) != nil)
            waiting.cancel()
            await unproven.close()
        }
    }

    @Test func connectionsFromOneSourceThatProveThemselvesGiveBackWhatTheyTook() async throws {
        try await withRelay(configure: {
            $0.sourceHandshakeWorkRate = RateLimit(perSecond: 1, burst: 1)
            $0.handshakeWorkRate = .unlimited
        }) { relay in
            let sources = try #require(relay.core.sourceBudgets)
            // Each proves itself (its GET's answer) before the next connects from the same source.
            for i in 0..<4 {
                try await returnsWithin(.seconds(20), "client \(i) connects and proves itself") {
                    let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(10), sourceAddress: Self.attacker)
                    let q = try await c.createQueue()
                    try await roundTrip(c, q, UInt8(i))
                    await c.close()
                }
            }
            #expect(sources.debt(try key(Self.attacker)) == nil)
            #expect(throttled(relay, .sourceHandshakeWork) == 0)
            #expect(relay.stats.sources >= 1)
        }
    }

    @Test func aConnectionHeldAtItsSourcesGateIsNotClosedByTheHandshakeTimeout() async throws {
        // The source's debt takes 12 s to clear; the relay closes a connection that has not said
        // hello 5 s after it is shown active. Held at the gate, the connection is not active yet for
        // the relay, so it waits out the debt, then completes its handshake and is served.
        try await withRelay(configure: {
            $0.sourceHandshakeWorkRate = RateLimit(perSecond: 1000, burst: 1000)
            $0.handshakeWorkRate = .unlimited
            $0.handshakeTimeout = .seconds(5)
        }) { relay in
            let sources = try #require(relay.core.sourceBudgets)
            sources.take(try key(Self.attacker), 1000 + 12_000)
            let throttledBefore = throttled(relay, .sourceHandshakeWork)
            let start = ContinuousClock.now
            try await returnsWithin(.seconds(60), "a client held at its source's gate connects and is served") {
                let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(50), sourceAddress: Self.attacker)
                let q = try await c.createQueue()
                try await roundTrip(c, q, 1)
                await c.close()
            }
            #expect(throttled(relay, .sourceHandshakeWork) > throttledBefore, "the connection was not held at the gate")
            // It cannot have been let through before the debt was (nearly) paid: it waited longer
            // than the handshake timeout.
            #expect(ContinuousClock.now - start > .seconds(8))
            #expect(sources.waiting(try key(Self.attacker)) == 0)
        }
    }

    @Test func connectionsWaitingAtOneSourcesGateAreBoundedAndAClosedOneFreesItsPlace() async throws {
        try await withRelay(configure: {
            $0.sourceHandshakeWorkRate = RateLimit(perSecond: 1, burst: 1)
            $0.handshakeWorkRate = .unlimited
            $0.maxWaitingPerSource = 2
        }) { relay in
            let sources = try #require(relay.core.sourceBudgets)
            let attacker = try key(Self.attacker)
            // In debt for hours: every connection from 127.0.0.2 waits.
            sources.take(attacker, 10_000)
            let port = relay.address.port
            let first = try await RawClient(host: relay.address.host, port: port, tls: false, sourceAddress: Self.attacker)
            let second = try await RawClient(host: relay.address.host, port: port, tls: false, sourceAddress: Self.attacker)
            try await eventually("two connections from 127.0.0.2 wait at its gate") { sources.waiting(attacker) == 2 }
            let refusedBefore = relay.stats.limitRefusals
            // A third is closed before any TLS work.
            let third = try await RawClient(host: relay.address.host, port: port, tls: false, sourceAddress: Self.attacker)
            #expect(await third.waitForClose(timeout: .seconds(30)), "a third waiting connection from one source was kept")
            #expect(relay.stats.limitRefusals > refusedBefore)
            #expect(sources.waiting(attacker) == 2)
            // Another source is not bounded by 127.0.0.2's waiting connections.
            try await returnsWithin(.seconds(40), "a client from 127.0.0.3 connects and makes a round trip") {
                let c = try await RelayConnection.connect(to: relay.address, timeout: .seconds(40), sourceAddress: Self.newcomer)
                let q = try await c.createQueue()
                try await roundTrip(c, q, 1)
                await c.close()
            }
            // A waiting connection that closes frees its place: the next one waits instead of being closed.
            await first.close()
            try await eventually("the closed connection left the gate") { sources.waiting(attacker) == 1 }
            let fourth = try await RawClient(host: relay.address.host, port: port, tls: false, sourceAddress: Self.attacker)
            try await eventually("the next connection waits in its place") { sources.waiting(attacker) == 2 }
            #expect(second.channel.isActive && fourth.channel.isActive)
            await second.close()
            await fourth.close()
            try await eventually("no connection waits once all closed") { sources.waiting(attacker) == 0 }
        }
    }

    @Test func sourcesAreAddressesOrPrefixes() throws {
        func key(_ ip: String, v4: Int = 32, v6: Int = 64) throws -> SourceKey {
            try #require(SourceKey(try SocketAddress(ipAddress: ip, port: 443), prefixIPv4: v4, prefixIPv6: v6))
        }
        #expect(try key("192.0.2.7") != key("192.0.2.8"))
        #expect(try key("192.0.2.7", v4: 24) == key("192.0.2.200", v4: 24))
        #expect(try key("192.0.2.7", v4: 24) != key("192.0.3.7", v4: 24))
        #expect(try key("192.0.2.7", v4: 20).description == "192.0.0.0")
        // One /64 is one source; an IPv4-mapped IPv6 address is its IPv4 address.
        #expect(try key("2001:db8:1:2::1") == key("2001:db8:1:2:ffff::9"))
        #expect(try key("2001:db8:1:2::1") != key("2001:db8:1:3::1"))
        #expect(try key("::ffff:192.0.2.7") == key("192.0.2.7"))
        #expect(try key("2001:db8::1", v6: 128) != key("2001:db8::2", v6: 128))
        #expect(SourceKey(try SocketAddress(unixDomainSocketPath: "/tmp/x"), prefixIPv4: 32, prefixIPv6: 64) == nil)
    }
}
