import Foundation
import GRDB
import NIOPosix
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing
@testable import Agent

/// Peer relays that never answer, that the options refuse, or that never worked.
@Suite(.timeLimit(.minutes(2))) struct AgentRelayPolicyTests {
    @Test func aJoinThroughARelayThatNeverAnswersFailsWithATimeoutWithinItsBound() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let hole = try SilentListener()
        try await withTestRelay(dir.url) { relay in
            // The dial's own handshake timeout (60 s) is far longer than the join's bound (2 s):
            // only the bound can end this join, with `timeout`.
            let options = AgentOptions(peerRelayTimeout: .seconds(2), connectTimeout: .seconds(60))
            try await withAgent(dir.url.appendingPathComponent("bot_agent.db"), relay: relay.address, options: options) { bot, _ in
                let start = ContinuousClock.now
                await #expect(throws: AgentError(.timeout, "")) { try await bot.join(invitation(on: hole.address), info: []) }
                let took = ContinuousClock.now - start
                #expect(took < .seconds(20), "the join took \(took)") // 2 s, and slack for a loaded machine
                try await hole.waitForConnections(1)
                // The agent still works: a connection on its own relay.
                _ = try await bot.createInvitation()
            }
        }
        hole.close()
    }

    @Test func refusedRelaysAreRefusedBeforeAnySocketIsOpened() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let hole = try SilentListener()
        try await withTestRelay(dir.url) { relay in
            // Private addresses refused: the black hole is on loopback. Our own relay is on
            // loopback too, and stays usable.
            let strict = AgentOptions(refusePrivateAddresses: true)
            try await withAgent(dir.url.appendingPathComponent("a_agent.db"), relay: relay.address, options: strict) { agent, _ in
                await #expect(throws: AgentError(.relayRefused, "")) { try await agent.join(invitation(on: hole.address), info: []) }
                var named = hole.address
                named.host = "localhost"
                await #expect(throws: AgentError(.relayRefused, "")) { try await agent.join(invitation(on: named), info: []) }
                await #expect(throws: AgentError(.relayRefused, "")) {
                    try await agent.joinAddress(ContactAddressLink(queue: invitation(on: hole.address).queue), info: [])
                }
                _ = try await agent.createInvitation()
            }
            // An allow-list without the black hole's host.
            let listed = AgentOptions(allowedHosts: ["relay.example.org"])
            try await withAgent(dir.url.appendingPathComponent("b_agent.db"), relay: relay.address, options: listed) { agent, _ in
                await #expect(throws: AgentError(.relayRefused, "")) { try await agent.join(invitation(on: hole.address), info: []) }
            }
            #expect(hole.connections == 0)
            // Listed by host and port, it is dialled.
            let allowed = AgentOptions(allowedHosts: ["127.0.0.1:\(hole.port)"], peerRelayTimeout: .seconds(1))
            try await withAgent(dir.url.appendingPathComponent("c_agent.db"), relay: relay.address, options: allowed) { agent, _ in
                await #expect(throws: AgentError(.timeout, "")) { try await agent.join(invitation(on: hole.address), info: []) }
            }
            try await hole.waitForConnections(1)
            #expect(hole.connections == 1)
        }
        hole.close()
    }

    /// The peer's relay drops every connection before the handshake, so each dial fails at once.
    /// (Not a silent relay with a short connect timeout: that timeout would also bound the dial of
    /// the agent's own relay, which a loaded machine cannot always finish in it — the join would
    /// fail on our own relay without ever dialling the peer's.)
    @Test func aRelayThatNeverCompletedAHandshakeIsGivenUpAfterItsFailedDials() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let hole = try SilentListener(hangUp: true)
        try await withTestRelay(dir.url) { relay in
            let options = AgentOptions(peerRelayTimeout: .seconds(30), newRelayMaxFailures: 2)
            try await withAgent(dir.url.appendingPathComponent("a_agent.db"), relay: relay.address, options: options) { agent, _ in
                for _ in 0..<2 {
                    await #expect(throws: AgentError(.relay, "")) { try await agent.join(invitation(on: hole.address), info: []) }
                }
                try await hole.waitForConnections(2)
                #expect(hole.connections == 2)
                await #expect(throws: AgentError(.relayUnreachable, "")) { try await agent.join(invitation(on: hole.address), info: []) }
                #expect(hole.connections == 2)
            }
        }
        hole.close()
    }

    /// Alice's own relay is R1, Bob's R2: Alice only sends to R2. When R2 goes away, Bob (whose
    /// queues are there) keeps trying to reconnect; Alice does not keep a loop dialling it — she
    /// dials it again when she has something to send.
    @Test func aPeerRelayThatGoesAwayIsDialledAgainOnlyToSend() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let r2Dir = dir.url.appendingPathComponent("r2/relay")
        try await withTestRelay(dir.url.appendingPathComponent("r1")) { r1 in
            var r2 = try await RelayServer.start(configuration: RelayConfiguration(dataDirectory: r2Dir, host: "127.0.0.1", port: 0),
                                                 group: MultiThreadedEventLoopGroup.singleton, logger: quietLogger)
            let r2Address = r2.address
            try await withAgent(dir.url.appendingPathComponent("alice_agent.db"), relay: r1.address) { alice, aliceInbox in
                try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: r2Address) { bob, bobInbox in
                    let (a, _) = try await connect(alice, aliceInbox, bob, bobInbox)
                    let aliceDialsBefore = await alice.dialAttempts[r2Address] ?? 0
                    let bobDialsBefore = await bob.dialAttempts[r2Address] ?? 0
                    await r2.shutdown()
                    _ = try await aliceInbox.next("alice loses R2") { if case let .hostDisconnected(r) = $0, r == r2Address { true } else { nil } }
                    // Bob's reconnection loop dials at 100 ms, 300 ms, 700 ms after losing R2; a
                    // loop of Alice's, started at the same moment, would have dialled twice by
                    // Bob's third attempt.
                    try await eventually(timeout: .seconds(15), "bob's third reconnection attempt") { (await bob.dialAttempts[r2Address] ?? 0) >= bobDialsBefore + 3 }
                    #expect(await alice.dialAttempts[r2Address] ?? 0 == aliceDialsBefore, "Alice keeps dialling a relay she only sends to")
                    // Something to send: now she dials it (and keeps the message until R2 is back).
                    try await alice.send(a, "hello again".bytes)
                    try await eventually(timeout: .seconds(15), "alice dials R2 to send") { (await alice.dialAttempts[r2Address] ?? 0) > aliceDialsBefore }
                    r2 = try await RelayServer.start(configuration: RelayConfiguration(dataDirectory: r2Dir, host: "127.0.0.1", port: r2Address.port),
                                                     group: MultiThreadedEventLoopGroup.singleton, logger: quietLogger)
                    let m = try await bobInbox.message(timeout: .seconds(45))
                    #expect(m.body == "hello again".bytes)
                }
            }
            await r2.shutdown()
        }
    }

    @Test func nonPublicAddressesAreRecognised() {
        for text in ["127.0.0.1", "10.1.2.3", "172.20.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
                     "::1", "::", "fe80::1", "fd00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "[::1]"] {
            let a = RelayPolicy.parseLiteral(text)
            #expect(a != nil && RelayPolicy.isNonPublic(a!), "\(text)")
        }
        for text in ["8.8.8.8", "1.1.1.1", "172.32.0.1", "2001:4860:4860::8888", "::ffff:8.8.8.8"] {
            let a = RelayPolicy.parseLiteral(text)
            #expect(a != nil && !RelayPolicy.isNonPublic(a!), "\(text)")
        }
        #expect(RelayPolicy.parseLiteral("relay.example.org") == nil)
    }
}

/// What the agent receives is acknowledged to the relay only once it is committed.
@Suite(.timeLimit(.minutes(2))) struct AgentStoreFaultTests {
    @Test func aMessageTheDatabaseRefusesIsNotAcknowledgedAndArrivesOnceWhenTheFaultClears() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            let bobPath = dir.url.appendingPathComponent("bob_agent.db")
            try await withAgent(dir.url.appendingPathComponent("alice_agent.db"), relay: relay.address) { alice, aliceInbox in
                try await withAgent(bobPath, relay: relay.address) { bob, bobInbox in
                    let (a, _) = try await connect(alice, aliceInbox, bob, bobInbox)
                    // A fault in Bob's database: every new inbox row is refused.
                    let fault = try DatabaseQueue(path: bobPath.path)
                    try await fault.write { db in
                        try db.execute(sql: "CREATE TRIGGER fault BEFORE INSERT ON inbox BEGIN SELECT RAISE(ABORT, 'injected fault'); END")
                    }
                    try await alice.send(a, "one".bytes)
                    _ = try await bobInbox.next("store error") { if case .storeError = $0 { true } else { nil } }
                    try await fault.write { db in try db.execute(sql: "DROP TRIGGER fault") }
                    try fault.close()
                    let first = try await bobInbox.message()
                    #expect(first.body == "one".bytes && first.seq == 1 && first.integrity == .ok)
                    try await alice.send(a, "two".bytes)
                    // The next message is the second: the first came exactly once.
                    let second = try await bobInbox.message()
                    #expect(second.body == "two".bytes && second.seq == 2 && second.integrity == .ok)
                    let rejected = try? await bobInbox.next(timeout: .milliseconds(1), "rejected") { if case .rejected = $0 { true } else { nil } }
                    #expect(rejected == nil)
                }
            }
        }
    }
}
