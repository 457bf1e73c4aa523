import Foundation
import GRDB
import TestSupport
import Testing
@testable import Agent

/// `sendMany`: one body to many connections in one transaction (a channel relay's fan-out), each
/// send with its idempotency key; the outboxes delivered together.
@Suite(.timeLimit(.minutes(2))) struct SendManyTests {
    @Test func oneBodyReachesEveryConnectionOnceAndARepeatSendsNothing() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            let alicePath = dir.url.appendingPathComponent("alice_agent.db")
            try await withAgent(alicePath, relay: relay.address) { alice, aliceInbox in
                try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: relay.address) { bob, bobInbox in
                    try await withAgent(dir.url.appendingPathComponent("carol_agent.db"), relay: relay.address) { carol, carolInbox in
                        let (toBob, _) = try await connect(alice, aliceInbox, bob, bobInbox)
                        let (toCarol, _) = try await connect(alice, aliceInbox, carol, carolInbox)
                        let unknown: Int64 = 9_999

                        let outcomes = try await alice.sendMany("post".bytes, to: [(toBob, "job:1:bob"), (unknown, "job:1:x"), (toCarol, "job:1:carol")])
                        guard case let .sent(bobSeq) = outcomes[0], case let .sent(carolSeq) = outcomes[2] else { throw TestFailure("\(outcomes)") }
                        #expect(outcomes[1] == .refused(.unknownConnection))
                        let atBob = try await bobInbox.message()
                        let atCarol = try await carolInbox.message()
                        #expect(atBob.body == "post".bytes && atBob.seq == bobSeq)
                        #expect(atCarol.body == "post".bytes && atCarol.seq == carolSeq)
                        for (conn, seq) in [(toBob, bobSeq), (toCarol, carolSeq)] {
                            try await aliceInbox.next("sent") { if case let .sent(c, s) = $0, c == conn, s == seq { () } else { nil } }
                        }

                        // The same keys again (a job resumed after a crash): nothing is sent.
                        let again = try await alice.sendMany("post".bytes, to: [(toBob, "job:1:bob"), (toCarol, "job:1:carol")])
                        #expect(again == [.repeated(bobSeq), .repeated(carolSeq)])
                        try await alice.send(toBob, "next".bytes)
                        let next = try await bobInbox.message()
                        #expect(next.body == "next".bytes && next.seq == bobSeq + 1, "the repeat must not have sent a second copy")
                        // A connection named twice is refused as a whole.
                        await #expect(throws: AgentError.self) { try await alice.sendMany("x".bytes, to: [(toBob, "a"), (toBob, "b")]) }

                        // Every outbox delivered and emptied.
                        let store = try DatabaseQueue(path: alicePath.path)
                        try await eventually("alice's outbox to be empty") {
                            (try? await store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pending") }) == 0
                        }
                    }
                }
            }
        }
    }
}
