import Foundation
import RelayClient
import GRDB
import RelayProtocol
import SwiftplexCrypto
import Testing
@testable import Agent

@Suite(.timeLimit(.minutes(2))) struct AgentConnectionTests {
    @Test func invitationHandshakeAndMessagesBothWays() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            try await withAgent(dir.url.appendingPathComponent("alice_agent.db"), relay: relay.address) { alice, aliceInbox in
                try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: relay.address) { bob, bobInbox in
                    let (a, b) = try await connect(alice, aliceInbox, bob, bobInbox)
                    for i in 1...5 {
                        let seq = try await alice.send(a, "hello \(i)".bytes)
                        #expect(seq == UInt64(i))
                        let m = try await bobInbox.message()
                        #expect(m.body == "hello \(i)".bytes && m.seq == UInt64(i) && m.integrity == .ok)
                        try await bob.send(b, "reply \(i)".bytes)
                        #expect(try await aliceInbox.message().body == "reply \(i)".bytes)
                    }
                    _ = try await aliceInbox.next("sent") { if case let .sent(c, seq) = $0, c == a, seq == 5 { true } else { nil } }
                    // Own link and a link whose queue is already secured are refused.
                    let (_, ownLink) = try await alice.createInvitation()
                    await #expect(throws: AgentError(.ownLink, "")) { try await alice.join(ownLink, info: []) }
                }
            }
            // What the relay stored contains none of the plaintext.
            let db = try Data(contentsOf: dir.url.appendingPathComponent("relay/relay.db")) +
                ((try? Data(contentsOf: dir.url.appendingPathComponent("relay/relay.db-wal"))) ?? Data())
            #expect(db.range(of: Data("hello".utf8)) == nil && db.range(of: Data("reply".utf8)) == nil)
        }
    }

    @Test func messagesSentWhileThePeerIsDownArriveAfterItRestarts() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            let bobPath = dir.url.appendingPathComponent("bob_agent.db")
            try await withAgent(dir.url.appendingPathComponent("alice_agent.db"), relay: relay.address) { alice, aliceInbox in
                let (a, _) = try await withAgent(bobPath, relay: relay.address) { bob, bobInbox in
                    try await connect(alice, aliceInbox, bob, bobInbox)
                }
                // Bob's agent is stopped; Alice keeps sending.
                for i in 1...10 { try await alice.send(a, "offline \(i)".bytes) }
                _ = try await aliceInbox.next("sent 10") { if case let .sent(c, 10) = $0, c == a { true } else { nil } }
                try await withAgent(bobPath, relay: relay.address) { _, bobInbox in
                    for i in 1...10 {
                        let m = try await bobInbox.message()
                        #expect(m.body == "offline \(i)".bytes && m.integrity == .ok)
                    }
                }
            }
        }
    }
}

@Suite(.timeLimit(.minutes(2))) struct AgentTamperTests {
    @Test func replayedEnvelopesAreDroppedTamperedOnesRejectedAndTheConnectionGoesOn() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            let alicePath = dir.url.appendingPathComponent("alice_agent.db")
            let bobPath = dir.url.appendingPathComponent("bob_agent.db")
            try await withAgent(alicePath, relay: relay.address) { alice, aliceInbox in
                let (a, _) = try await withAgent(bobPath, relay: relay.address) { bob, bobInbox in
                    try await connect(alice, aliceInbox, bob, bobInbox)
                }
                // With Bob away, the envelope waits on the relay: read it as it was sent.
                try await alice.send(a, "original".bytes)
                _ = try await aliceInbox.next("sent") { if case .sent(a, 1) = $0 { true } else { nil } }
                let relayDB = try DatabaseQueue(path: dir.url.appendingPathComponent("relay/relay.db").path)
                let captured = try await relayDB.read { db in try Data.fetchOne(db, sql: "SELECT body FROM message ORDER BY seq DESC LIMIT 1") }!
                try relayDB.close()
                // Alice's sender key for Bob's queue, as an attacker who stole it would have it.
                let aliceDB = try AgentStore(path: alicePath)
                let record = try await aliceDB.db.read { db in try AgentStore.connection(db, id: a) }!
                try aliceDB.db.close()
                let snd = try QueueURI(parsing: record.sndQueue!)
                let key = try AuthPrivateKey(secretBytes: [UInt8](record.sndKey!))

                try await withAgent(bobPath, relay: relay.address) { _, bobInbox in
                    #expect(try await bobInbox.message().body == "original".bytes)
                    let raw = try await RelayConnection.connect(to: snd.relay)
                    // A replay of a processed message is dropped as a duplicate (no event);
                    // the assertion on the next message below would see it otherwise.
                    try await raw.sendMessage(senderId: snd.senderId, key: key, body: [UInt8](captured))
                    var tampered = [UInt8](captured)
                    tampered[tampered.count - 10] ^= 0x20
                    try await raw.sendMessage(senderId: snd.senderId, key: key, body: tampered)
                    _ = try await bobInbox.next("tampered rejected") { if case .rejected = $0 { true } else { nil } }
                    await raw.close()
                    // Nothing was lost or broken: the next real message arrives in sequence.
                    try await alice.send(a, "after".bytes)
                    let m = try await bobInbox.message()
                    #expect(m.body == "after".bytes && m.seq == 2 && m.integrity == .ok)
                }
            }
        }
    }
}

@Suite(.timeLimit(.minutes(2))) struct AgentAddressTests {
    @Test func contactRequestsAreAcceptedOrRejected() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            try await withAgent(dir.url.appendingPathComponent("alice_agent.db"), relay: relay.address) { alice, aliceInbox in
                try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: relay.address) { bob, bobInbox in
                    try await withAgent(dir.url.appendingPathComponent("carol_agent.db"), relay: relay.address) { carol, _ in
                        let (address, link) = try await alice.createAddress()
                        let parsed = try AgentLink(parsing: link.description)
                        guard case let .contact(contact) = parsed else { Issue.record("not a contact link"); return }
                        await #expect(throws: AgentError(.ownLink, "")) { try await alice.joinAddress(contact, info: []) }

                        let bobConn = try await bob.joinAddress(contact, info: "bob".bytes)
                        let bobRequest = try await aliceInbox.next("bob's request") {
                            if case let .contactRequest(a, r, info) = $0, a == address, info == "bob".bytes { r } else { nil }
                        }
                        _ = try await carol.joinAddress(contact, info: "carol".bytes)
                        let carolRequest = try await aliceInbox.next("carol's request") {
                            if case let .contactRequest(_, r, info) = $0, info == "carol".bytes { r } else { nil }
                        }
                        try await alice.rejectRequest(carolRequest)
                        await #expect(throws: AgentError(.unknownConnection, "")) { _ = try await alice.acceptRequest(carolRequest, info: []) }

                        let aliceConn = try await alice.acceptRequest(bobRequest, info: "alice".bytes)
                        let seenByBob = try await bobInbox.next("bob connected") { if case let .connected(c, info) = $0, c == bobConn { info } else { nil } }
                        #expect(seenByBob == "alice".bytes)
                        let seenByAlice = try await aliceInbox.next("alice connected") { if case let .connected(c, info) = $0, c == aliceConn { info } else { nil } }
                        #expect(seenByAlice == "bob".bytes)
                        try await bob.send(bobConn, "hi alice".bytes)
                        #expect(try await aliceInbox.message().body == "hi alice".bytes)
                        try await alice.send(aliceConn, "hi bob".bytes)
                        #expect(try await bobInbox.message().body == "hi bob".bytes)
                    }
                }
            }
        }
    }
}

@Suite(.timeLimit(.minutes(2))) struct AgentInvitationReuseTests {
    @Test func anInvitationCanBeUsedOnlyOnce() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            try await withAgent(dir.url.appendingPathComponent("alice_agent.db"), relay: relay.address) { alice, _ in
                try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: relay.address) { bob, _ in
                    try await withAgent(dir.url.appendingPathComponent("eve_agent.db"), relay: relay.address) { eve, _ in
                        let (_, link) = try await alice.createInvitation()
                        _ = try await bob.join(link, info: "bob".bytes)
                        // The inviter's queue is now secured with Bob's key: a second joiner is refused.
                        await #expect(throws: AgentError(.relay, "")) { _ = try await eve.join(link, info: "eve".bytes) }
                    }
                }
            }
        }
    }
}

@Suite(.timeLimit(.minutes(2))) struct AgentSubscriptionTests {
    /// A queue the relay no longer has (deleted there behind the agent's back) is reported
    /// removed at start, and the agent's other connections are still subscribed and receive.
    @Test func aQueueTheRelayRefusesDoesNotStopTheOthersFromBeingSubscribed() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            let bobPath = dir.url.appendingPathComponent("bob_agent.db")
            try await withAgent(dir.url.appendingPathComponent("alice_agent.db"), relay: relay.address) { alice, aliceInbox in
                let (first, second) = try await withAgent(bobPath, relay: relay.address) { bob, bobInbox in
                    (try await connect(alice, aliceInbox, bob, bobInbox), try await connect(alice, aliceInbox, bob, bobInbox))
                }
                // Bob's first receiving queue is deleted at the relay while bob is stopped.
                let store = try AgentStore(path: bobPath)
                let queue = try #require(try await store.db.read { db in try AgentStore.connection(db, id: first.1) }).receivingQueue
                try store.db.close()
                let bare = try await RelayConnection.connect(to: relay.address)
                try await bare.delete(queue)
                await bare.close()

                for i in 1...3 { try await alice.send(second.0, "still here \(i)".bytes) }
                try await withAgent(bobPath, relay: relay.address) { _, bobInbox in
                    let (active, removed) = try await bobInbox.next("subscriptions") {
                        if case let .subscriptions(_, active, removed) = $0 { (active, removed) } else { nil }
                    }
                    #expect(active == [second.1])
                    #expect(removed == [SubscriptionFailure(connection: first.1, error: "AUTH")])
                    for i in 1...3 { #expect(try await bobInbox.message().body == "still here \(i)".bytes) }
                }
            }
        }
    }
}
