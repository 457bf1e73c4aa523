import Foundation
import RelayProtocol
import TestSupport
import Testing
@testable import Agent

/// A peer's relay that completed every handshake and then stopped answering (the last
/// stall path of silent peer relays: the chat's event loop sent the welcome message and waited on the relay's answer).
@Suite(.timeLimit(.minutes(2))) struct SilentPeerRelayTests {
    @Test func aSendReturnsOnceCommittedWhileThePeersRelayIsSilentAndArrivesWhenItAnswers() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            // Bob's queues are on the same relay, reached through a proxy that can go silent.
            let proxy = try FreezableProxy(to: relay.address.port)
            defer { proxy.close() }
            var bobsRelay = relay.address
            bobsRelay.port = proxy.port
            try await withAgent(dir.url.appendingPathComponent("alice_agent.db"), relay: relay.address) { alice, aliceInbox in
                try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: bobsRelay) { bob, bobInbox in
                    let (a, _) = try await connect(alice, aliceInbox, bob, bobInbox)
                    proxy.freeze()
                    // The relay's request timeout is 30 s: a send that waited for the relay
                    // would lose this race; one that returns at its commit wins it at once.
                    let seq = try await returnsWithin(.seconds(10), "alice.send to return while the peer's relay is silent") {
                        try await alice.send(a, "through the silence".bytes)
                    }
                    proxy.thaw()
                    let m = try await bobInbox.message(timeout: .seconds(30))
                    #expect(m.body == "through the silence".bytes && m.seq == seq)
                    _ = try await aliceInbox.next("sent") { if case let .sent(c, s) = $0, c == a, s == seq { true } else { nil } }
                }
            }
        }
    }
}
