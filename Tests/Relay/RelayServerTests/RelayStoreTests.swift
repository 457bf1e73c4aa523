import Foundation
import GRDB
import NIOConcurrencyHelpers
import RelayClient
import RelayPostgres
import RelayProtocol
@testable import RelayServer
import SwiftplexCrypto
import SwiftplexSQL
import SwiftplexSQLPostgres
import TestSupport
import Testing

/// The store seam: a relay process killed mid-stream on either store, queue metadata on demand in
/// a bounded cache (PostgreSQL), and `swiftplex-relay store copy` between SQLite and PostgreSQL.
@Suite(.timeLimit(.minutes(3))) struct RelayStoreTests {
    /// `--store` arguments for a relay process on `kind` with its data in `dir` (the same schema for the same directory).
    private func storeArguments(_ kind: RelayStoreKind, _ dir: URL) throws -> [String] {
        guard kind == .postgres else { return [] }
        return ["--store", try #require(TestPostgres.url(schema: TestPostgres.schema(for: dir.path)))]
    }

    @Test(arguments: RelayStoreKind.all) func aRelayKilledMidStreamLosesNoAcknowledgedMessage(store: RelayStoreKind) async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let args = try storeArguments(store, dir.url)
        var relay = try await RelayProcess.start(dataDirectory: dir.url, arguments: args)
        var queue: RecipientQueue
        let count = 400
        let acknowledged = NIOLockedValueBox<Set<Int>>([])
        do {
            let c = try await RelayConnection.connect(to: relay.address)
            queue = try await c.createQueue()
            let key = AuthPrivateKey.newX25519()
            try await c.secureAsSender(senderId: queue.senderId, senderKey: key)
            let senderId = queue.senderId
            // Sends keep going from several tasks while the relay is killed once some have been answered OK.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<8 {
                    group.addTask {
                        for i in stride(from: lane, to: count, by: 8) {
                            do {
                                try await c.sendMessage(senderId: senderId, key: key, body: [UInt8(i >> 8), UInt8(i & 0xff)])
                                acknowledged.withLockedValue { _ = $0.insert(i) }
                            } catch { return } // the relay is gone: not acknowledged, may or may not be stored
                        }
                    }
                }
                try await eventually("some SENDs are acknowledged") { acknowledged.withLockedValue { $0.count } >= 60 }
                relay.kill9()
                try await group.waitForAll()
            }
        }
        let acked = acknowledged.withLockedValue { $0 }
        #expect(acked.count < count, "the relay was killed after every SEND was answered: not mid-stream")
        relay = try await RelayProcess.start(dataDirectory: dir.url, arguments: args)
        queue.relay = relay.address
        let c = try await RelayConnection.connect(to: relay.address)
        let inbox = EventInbox(c)
        try await c.subscribe(queue)
        var received = Set<Int>()
        // Everything acknowledged arrives (and perhaps some committed before their OK was sent).
        while !acked.isSubset(of: received) {
            let m = try await inbox.nextMessage(for: queue)
            received.insert(Int(m.body[0]) << 8 | Int(m.body[1]))
            try await c.acknowledge(queue, messageId: m.id)
        }
        #expect(acked.isSubset(of: received))
        await c.close()
        #expect(await relay.terminate() == 0)
    }

    @Test(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)))
    func queuesAreLoadedOnDemandIntoABoundedCacheAndExpireByQuery() async throws {
        let clock = ManualClock()
        let capacity = 4
        try await withRelay(store: .postgres, configure: { $0.queueCacheSize = capacity; $0.messageTTL = .seconds(3600); $0.clock = clock }) { relay in
            let recipient = try await RelayConnection.connect(to: relay.address)
            let sender = try await RelayConnection.connect(to: relay.address)
            var queues: [RecipientQueue] = []
            for i in 0..<20 {
                let q = try await recipient.createQueue()
                try await sender.sendMessage(senderId: q.senderId, key: nil, body: [UInt8(i)])
                queues.append(q)
            }
            // No subscriptions: only the most recently used stay in memory.
            #expect(relay.core.residentQueues <= capacity + max(1, capacity / 8))
            #expect(relay.stats.queues == 20 && relay.stats.storedMessages == 20)
            // Each queue is loaded again when used, with its message waiting.
            let inbox = EventInbox(recipient)
            for (i, q) in queues.enumerated() {
                try await recipient.subscribe(q)
                let m = try await inbox.nextMessage(for: q)
                #expect(m.body == [UInt8(i)])
                if i % 2 == 0 { try await recipient.acknowledge(q, messageId: m.id) }
            }
            await recipient.close()
            // Once the relay has dropped the recipient's subscriptions, its queues may leave memory.
            try await eventually("the relay saw the recipient's connection close") { relay.stats.connections == 1 }
            // The unacknowledged ten expire while their queues are not in memory: the sweep is a query and counts them.
            let other = try await RelayConnection.connect(to: relay.address)
            for _ in 0..<capacity + 2 { _ = try await other.createQueue() }
            #expect(relay.core.residentQueues <= capacity + max(1, capacity / 8))
            clock.advance(seconds: 7200)
            #expect(try await relay.sweepExpired() == 10)
            #expect(relay.stats.storedMessages == 0)
            await other.close()
            await sender.close()
        }
    }

    @Test(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)))
    func storeCopyFromSQLiteToPostgreSQLAndBackIsIdentical() async throws {
        let dir = TempDirectory()
        let back = TempDirectory()
        defer { dir.cleanup(); back.cleanup() }
        // A relay on SQLite with queues of every kind and waiting messages.
        let (waiting, fingerprintQueue) = try await withRelay(dataDirectory: dir.url) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let secured = try await c.createQueue()
            let key = AuthPrivateKey.newX25519()
            try await c.secureAsSender(senderId: secured.senderId, senderKey: key)
            for i in 0..<25 { try await c.sendMessage(senderId: secured.senderId, key: key, body: Array("message \(i)".utf8)) }
            let contact = try await c.createQueue(mode: .contact)
            _ = try await c.setLinkData(contact, data: Array("link data".utf8))
            try await c.sendMessage(senderId: contact.senderId, key: nil, body: Array("request".utf8))
            let disabled = try await c.createQueue()
            try await c.disable(disabled)
            await c.close()
            return (25, secured)
        }
        let relayBinary = RelayProcess.executable("swiftplex-relay").path
        let pg = try #require(TestPostgres.url())
        let sqlite = dir.appendingPathComponent("relay.db").path
        let there = try runProgram(relayBinary, ["store", "copy", "--from", sqlite, "--to", pg, "--batch", "7"])
        #expect(there.status == 0, "\(there.errors)")
        #expect(there.output.contains("queues: 3/3") && there.output.contains("messages: 26/26"))
        // A destination that is not empty is refused (nothing changes), unless --force.
        let again = try runProgram(relayBinary, ["store", "copy", "--from", sqlite, "--to", pg])
        #expect(again.status != 0)
        #expect(again.errors.contains("not empty"))
        let forced = try runProgram(relayBinary, ["store", "copy", "--from", sqlite, "--to", pg, "--force"])
        #expect(forced.status == 0, "\(forced.errors)")
        let copy = back.appendingPathComponent("relay.db").path
        let home = try runProgram(relayBinary, ["store", "copy", "--from", pg, "--to", copy])
        #expect(home.status == 0, "\(home.errors)")

        // Row for row the same, sequence numbers included.
        let original = try openSQLiteRelayStore(URL(fileURLWithPath: sqlite))
        let roundTrip = try openSQLiteRelayStore(URL(fileURLWithPath: copy))
        #expect(try await original.copyQueues(after: nil, limit: 100) == roundTrip.copyQueues(after: nil, limit: 100))
        #expect(try await original.copyMessages(after: 0, limit: 100) == roundTrip.copyMessages(after: 0, limit: 100))
        let counts = try await roundTrip.copyCounts()
        #expect(counts.queues == 3 && counts.messages == 26)
        try await original.closeStore()
        try await roundTrip.closeStore()

        // The relay runs on the PostgreSQL copy: the waiting messages arrive in order.
        let relay = try await RelayProcess.start(dataDirectory: dir.url, arguments: ["--store", pg])
        var queue = fingerprintQueue
        queue.relay = relay.address
        let c = try await RelayConnection.connect(to: relay.address)
        let inbox = EventInbox(c)
        try await c.subscribe(queue)
        for i in 0..<waiting {
            let m = try await inbox.nextMessage(for: queue)
            #expect(m.body == Array("message \(i)".utf8))
            try await c.acknowledge(queue, messageId: m.id)
        }
        await c.close()
        #expect(await relay.terminate() == 0)
    }

    @Test(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)))
    func aSecondRelayOnTheSameSchemaIsRefused() async throws {
        let url = try #require(TestPostgres.url())
        let first = try await PostgresRelayStore.open(try PostgresLocation.relay(url: url), logger: testLogger)
        await #expect(throws: RelayServerError.self) {
            _ = try await PostgresRelayStore.open(try PostgresLocation.relay(url: url), lockWait: .zero, logger: testLogger)
        }
        try await first.closeStore()
        // Once the first is gone, a standby takes over.
        let second = try await PostgresRelayStore.open(try PostgresLocation.relay(url: url), logger: testLogger)
        try await second.closeStore()
    }

    /// `OK` means on disk: the writer flushes the log at every commit (`synchronous = FULL`, which
    /// GRDB's pool would otherwise turn down to NORMAL on its writer).
    @Test func theSQLiteWriterFlushesEveryCommit() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try RelayStore(path: dir.appendingPathComponent("relay.db"))
        defer { try? store.close() }
        let level = try await store.perform { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        #expect(level == 2) // FULL
        let mode = try await store.perform { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    @Test func postgresURLsAreCheckedWithClearErrors() throws {
        let ok = try PostgresLocation.relay(url: "postgresql://relay:secret@db.example:6432/swiftplex?schema=relay_a&sslmode=require", environment: [:])
        #expect(ok.host == "db.example" && ok.port == 6432 && ok.user == "relay" && ok.password == "secret")
        #expect(ok.database == "swiftplex" && ok.schema == "relay_a" && ok.sslMode == "require")
        #expect(!ok.description.contains("secret"))
        #expect(try PostgresLocation.relay(url: "postgres://relay@h/db", environment: ["PGPASSWORD": "pw"]).password == "pw")
        for bad in ["postgresql://h/db", "postgresql://u@h", "postgresql://u@h/db?schema=Bad-Name", "postgresql://u@h/db?what=1",
                    "postgresql://u@h/db?sslmode=maybe", "mysql://u@h/db"] {
            #expect(throws: RelayServerError.self, "\(bad)") { _ = try PostgresLocation.relay(url: bad, environment: [:]) }
        }
    }
}
