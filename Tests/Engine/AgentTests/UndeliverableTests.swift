import Foundation
import GRDB
import Testing
@testable import Agent

/// A peer whose queue is gone without a goodbye: the relay answers AUTH, for good.
@Suite(.timeLimit(.minutes(2))) struct UndeliverableTests {
    @Test func messagesToAQueueThePeerDeletedAreDroppedNotRetriedForEver() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            let alicePath = dir.url.appendingPathComponent("alice_agent.db")
            try await withAgent(alicePath, relay: relay.address) { alice, aliceInbox in
                try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: relay.address) { bob, bobInbox in
                    let (a, b) = try await connect(alice, aliceInbox, bob, bobInbox)
                    // Bob's side goes away: its receiving queue (where Alice sends) is deleted at the relay.
                    try await bob.deleteConnection(b)
                    let first = try await alice.send(a, "anyone there?".bytes)
                    let second = try await alice.send(a, "hello?".bytes)
                    var dropped: Set<UInt64> = []
                    while !dropped.isSuperset(of: [first, second]) {
                        let seqs = try await aliceInbox.next("undeliverable") { if case let .undeliverable(c, seqs) = $0, c == a { seqs } else { nil } }
                        dropped.formUnion(seqs)
                    }
                    // Nothing waits in the outbox to be retried (each retry would be another AUTH).
                    let waiting = try await DatabaseQueue(path: alicePath.path).read { db in
                        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending WHERE connection_id = ?", arguments: [a]) ?? -1
                    }
                    #expect(waiting == 0)
                }
            }
        }
    }
}
