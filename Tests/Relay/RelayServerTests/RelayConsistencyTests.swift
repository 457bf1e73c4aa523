import Foundation
import GRDB
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import Testing

/// Counts that stay right, disabled queues that answer AUTH, memory that follows the
/// disk when a write fails, and a damaged row that does not keep the relay from starting.
@Suite(.timeLimit(.minutes(2))) struct RelayConsistencyTests {
    @Test(arguments: RelayStoreKind.all) func sweepingAfterTheAckOfALaterMessageLeaksNoCountAndNoQuota(store: RelayStoreKind) async throws {
        let clock = ManualClock()
        try await withRelay(store: store, configure: { $0.messageTTL = .seconds(3600); $0.clock = clock; $0.queueQuota = 2 }) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            try await c.sendMessage(senderId: q.senderId, key: nil, body: "old".bytes)
            clock.advance(seconds: 1800)
            try await c.sendMessage(senderId: q.senderId, key: nil, body: "new".bytes)
            clock.advance(seconds: 1801)
            // The old one has expired: the new one is delivered and acknowledged first…
            let m = try #require(try await c.get(q))
            #expect(m.body == "new".bytes)
            try await c.acknowledge(q, messageId: m.id)
            // …then the sweep deletes the old one, which was never acknowledged: uncounted now.
            #expect(try await relay.sweepExpired() == 1)
            #expect(relay.stats.storedMessages == 0)
            #expect(relay.stats.storedBytes == 0)
            // The queue is empty, so its whole quota is free again.
            try await c.sendMessage(senderId: q.senderId, key: nil, body: [1])
            try await c.sendMessage(senderId: q.senderId, key: nil, body: [2])
            await #expect(throws: RelayClientError.relay(.quota)) { try await c.sendMessage(senderId: q.senderId, key: nil, body: [3]) }
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func aSweepRacingTheDeletionOfAnAcknowledgedMessageUncountsItOnce(store: RelayStoreKind) async throws {
        let clock = ManualClock()
        try await withRelay(store: store, configure: { $0.messageTTL = .seconds(60); $0.clock = clock }) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            for i in 0..<20 {
                try await c.sendMessage(senderId: q.senderId, key: nil, body: [UInt8(i)])
                let m = try #require(try await c.get(q))
                // In flight, then expired: its ACK's deletion and the sweep race for the same row.
                clock.advance(seconds: 61)
                async let swept = relay.sweepExpired()
                try await c.acknowledge(q, messageId: m.id)
                _ = try await swept
                #expect(relay.stats.storedMessages == 0)
            }
            try await relay.sweepExpired()
            #expect(relay.stats.storedMessages == 0)
            #expect(relay.stats.storedBytes == 0)
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func aDisabledQueueAnswersAUTHToSubscribeAndGet(store: RelayStoreKind) async throws {
        try await withRelay(store: store) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            try await c.sendMessage(senderId: q.senderId, key: nil, body: "waiting".bytes)
            try await c.disable(q)
            await #expect(throws: RelayClientError.relay(.auth)) { try await c.subscribe(q) }
            await #expect(throws: RelayClientError.relay(.auth)) { _ = try await c.get(q) }
            await #expect(throws: RelayClientError.relay(.auth)) { try await c.secure(q, senderKey: AuthPrivateKey.newX25519().publicKey) }
            await #expect(throws: RelayClientError.relay(.auth)) { _ = try await c.setLinkData(q, data: [1]) }
            // OFF again is fine, and the owner can still delete it.
            try await c.disable(q)
            try await c.delete(q)
            #expect(relay.stats.queues == 0)
            #expect(relay.stats.storedMessages == 0)
            await c.close()
        }
    }

    /// Real write failures, injected with SQLite triggers on the relay's own database file: every
    /// refused change leaves memory as the disk is, during the run and after a restart.
    @Test func aFailedWriteLeavesMemoryAsTheDiskIs() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let (q, linkId) = try await withRelay(dataDirectory: dir.url) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            let linkId = try await c.setLinkData(q, data: "link".bytes)
            let faults = try DatabaseQueue(path: dir.url.appendingPathComponent("relay.db").path, configuration: faultConfiguration)
            try await faults.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER fail_update BEFORE UPDATE ON queue BEGIN SELECT RAISE(ABORT, 'injected fault'); END;
                    CREATE TRIGGER fail_delete BEFORE DELETE ON queue BEGIN SELECT RAISE(ABORT, 'injected fault'); END;
                    """)
            }
            let internalError = RelayClientError.relay(.internal)
            await #expect(throws: internalError) { try await c.secureAsSender(senderId: q.senderId, senderKey: .newX25519()) }
            await #expect(throws: internalError) { try await c.secure(q, senderKey: AuthPrivateKey.newX25519().publicKey) }
            await #expect(throws: internalError) { try await c.disable(q) }
            await #expect(throws: internalError) { try await c.delete(q) }
            await #expect(throws: internalError) { try await c.send(.linkDelete, entityId: q.recipientId, key: q.recipientKey) }
            // Nothing changed: unsecured, enabled, present, linked.
            try await c.sendMessage(senderId: q.senderId, key: nil, body: "unsigned".bytes)
            #expect(try await c.linkData(linkId: linkId) == "link".bytes)
            #expect(relay.stats.queues == 1)
            try await faults.write { db in try db.execute(sql: "DROP TRIGGER fail_update; DROP TRIGGER fail_delete") }
            try faults.close()
            await c.close()
            return (q, linkId)
        }
        try await withRelay(dataDirectory: dir.url) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            var q = q
            q.relay = relay.address
            #expect(try await c.get(q)?.body == "unsigned".bytes)
            #expect(try await c.linkData(linkId: linkId) == "link".bytes)
            // Still unsecured: this sender's SKEY is the first.
            let key = AuthPrivateKey.newX25519()
            try await c.secureAsSender(senderId: q.senderId, senderKey: key)
            try await c.sendMessage(senderId: q.senderId, key: key, body: "signed".bytes)
            await c.close()
        }
    }

    @Test func aCorruptQueueRowIsSkippedAndTheRelayStarts() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let (good, bad) = try await withRelay(dataDirectory: dir.url) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let good = try await c.createQueue()
            let bad = try await c.createQueue()
            try await c.sendMessage(senderId: good.senderId, key: nil, body: "kept".bytes)
            await c.close()
            return (good, bad)
        }
        let db = try DatabaseQueue(path: dir.url.appendingPathComponent("relay.db").path, configuration: faultConfiguration)
        try await db.write { db in
            try db.execute(sql: "UPDATE queue SET recipient_key = X'00' WHERE recipient_id = ?", arguments: [Data(bad.recipientId)])
        }
        try db.close()
        try await withRelay(dataDirectory: dir.url) { relay in
            #expect(relay.stats.corruptRowsSkipped == 1)
            #expect(relay.stats.queues == 1)
            let c = try await RelayConnection.connect(to: relay.address)
            var good = good
            good.relay = relay.address
            #expect(try await c.get(good)?.body == "kept".bytes)
            var bad = bad
            bad.relay = relay.address
            await #expect(throws: RelayClientError.relay(.auth)) { _ = try await c.get(bad) }
            await c.close()
        }
    }
}

/// A second connection to a relay's database, for injecting faults: it waits for the relay's writer.
var faultConfiguration: Configuration {
    var c = Configuration()
    c.busyMode = .timeout(10)
    return c
}
