import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RelayClient
import RelayProtocol
@testable import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing

/// Issue 9's load goal: per-connection rates (commands, `NEW`s, `SEND` bytes, `AUTH` answers) that
/// slow a flooding connection — the relay stops reading from it — while every other connection is
/// served; and a store writer that does not make a small write wait for another connection's pile
/// of large ones. Over real TLS on loopback, and a real SQLite file.
@Suite(.timeLimit(.minutes(2))) struct RelayRateLimitTests {
    /// A round trip on the good connection's own queue.
    private func roundTrip(_ good: RelayConnection, _ q: RecipientQueue, _ byte: UInt8) async throws {
        try await good.sendMessage(senderId: q.senderId, key: nil, body: [byte])
        let m = try #require(try await good.get(q))
        #expect(m.body == [byte])
        try await good.acknowledge(q, messageId: m.id)
    }

    /// PONGs in what a raw client received (its first block is the relay's hello).
    private func pongs(_ raw: RawClient) -> Int {
        let bytes = raw.bytesReceived
        let blocks = bytes.count / RelayLimits.blockSize
        guard blocks > 1 else { return 0 }
        var n = 0
        for i in 1..<blocks {
            let block = ByteBufferAllocator().buffer(bytes: bytes[i * RelayLimits.blockSize..<(i + 1) * RelayLimits.blockSize])
            for part in (try? BlockCodec.decode(block)) ?? [] {
                if let t = try? Transmission.decode(part), (try? ServerResponse.decode(t.command)) == .pong { n += 1 }
            }
        }
        return n
    }

    @Test func aCommandFloodIsSlowedNotRefusedWhileAnotherConnectionIsServed() async throws {
        try await withRelay(configure: { $0.commandRate = RateLimit(perSecond: 400, burst: 200) }) { relay in
            let good = try await RelayConnection.connect(to: relay.address)
            let q = try await good.createQueue()
            let flooder = try await RawClient(host: relay.address.host, port: relay.address.port, tls: true)
            let allocator = ByteBufferAllocator()
            try await flooder.write(Array(buffer: BlockCodec.encode([ClientHello(version: 1).encoded()], allocator: allocator)[0]))
            let pings = (0..<200).map { _ in
                Transmission(correlationId: Sodium.randomBytes(24), entityId: [], command: ClientCommand.ping.encoded()).encoded(allocator: allocator)
            }
            let blocks = BlockCodec.encode(pings, allocator: allocator)
            try #require(blocks.count == 1)
            for _ in 0..<10 { flooder.writeNoWait(Array(buffer: blocks[0])) }
            // 2,000 PINGs at 400/s: the relay stops reading from the flooder after its first blocks…
            try await eventually("the flooding connection is throttled") { relay.stats.throttled >= 1 }
            // …and the other connection is served meanwhile, long before the flood is.
            try await roundTrip(good, q, 1)
            #expect(pongs(flooder) < 2000)
            // Slowed, not refused: every PING is answered in the end, and the connection stays open.
            try await eventually(timeout: .seconds(30), "every PING answered") { pongs(flooder) == 2000 }
            #expect(flooder.channel.isActive)
            try await roundTrip(good, q, 2)
            await flooder.close()
            await good.close()
        }
    }

    @Test func sendBytesAreRateLimitedPerConnection() async throws {
        try await withRelay(configure: { $0.sendByteRate = RateLimit(perSecond: 64 << 10, burst: 32 << 10) }) { relay in
            let good = try await RelayConnection.connect(to: relay.address)
            let q = try await good.createQueue()
            let flooder = try await RelayConnection.connect(to: relay.address)
            let own = try await flooder.createQueue()
            let sent = NIOLockedValueBox(0)
            // 12 × 16,000 bytes of unsigned SENDs to its own queue, all at once: ~3 s at 64 KiB/s.
            let flood = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<12 {
                        group.addTask {
                            try await flooder.sendMessage(senderId: own.senderId, key: nil, body: Sodium.randomBytes(16_000))
                            sent.withLockedValue { $0 += 1 }
                        }
                    }
                    try await group.waitForAll()
                }
            }
            try await eventually("the flooding connection is throttled") { relay.stats.throttled >= 1 }
            try await roundTrip(good, q, 1)
            #expect(sent.withLockedValue { $0 } < 12)
            // Every SEND is stored and answered OK in the end.
            try await flood.value
            #expect(relay.stats.storedMessages == 12)
            await flooder.close()
            await good.close()
        }
    }

    @Test func newQueuesAreRateLimitedPerConnection() async throws {
        try await withRelay(configure: { $0.newQueueRate = RateLimit(perSecond: 10, burst: 5) }) { relay in
            let good = try await RelayConnection.connect(to: relay.address)
            let flooder = try await RelayConnection.connect(to: relay.address)
            let created = NIOLockedValueBox(0)
            let flood = Task {
                for _ in 0..<30 {
                    _ = try await flooder.createQueue()
                    created.withLockedValue { $0 += 1 }
                }
            }
            try await eventually("the flooding connection is throttled") { relay.stats.throttled >= 1 }
            // Another connection has its own rate: its NEW is answered at once.
            let q = try await good.createQueue()
            #expect(created.withLockedValue { $0 } < 30)
            try await roundTrip(good, q, 1)
            try await flood.value
            #expect(relay.stats.queues == 31)
            #expect(relay.stats.limitRefusals == 0)
            await flooder.close()
            await good.close()
        }
    }

    @Test func authFailuresAreRateLimitedPerConnection() async throws {
        try await withRelay(configure: {
            $0.authFailureRate = RateLimit(perSecond: 5, burst: 2)
            $0.maxAuthFailures = 1000
        }) { relay in
            let good = try await RelayConnection.connect(to: relay.address)
            let q = try await good.createQueue()
            let attacker = try await RelayConnection.connect(to: relay.address)
            let refused = NIOLockedValueBox(0)
            let attack = Task {
                for _ in 0..<20 {
                    await #expect(throws: RelayClientError.relay(.auth)) {
                        try await attacker.secureAsSender(senderId: Sodium.randomBytes(24), senderKey: .newX25519())
                    }
                    refused.withLockedValue { $0 += 1 }
                }
            }
            try await eventually("the failing connection is throttled") { relay.stats.throttled >= 1 }
            try await roundTrip(good, q, 1)
            #expect(refused.withLockedValue { $0 } < 20)
            await attack.value
            // Slowed, not closed (it stayed under --max-auth-failures).
            try await attacker.ping()
            await attacker.close()
            await good.close()
        }
    }

    @Test func aSmallWriteDoesNotWaitForAnotherConnectionsPileOfLargeOnes() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let store = try RelayStore(path: dir.appendingPathComponent("relay.db"))
        let rid = Sodium.randomBytes(24)
        try await store.perform { db in
            try RelayStore.insertQueue(db, StoredQueue(recipientId: rid, senderId: Sodium.randomBytes(24), recipientKey: [UInt8](repeating: 1, count: 33),
                                                       boxKey: [UInt8](repeating: 2, count: 32), senderKey: nil, enabled: true, linkId: nil,
                                                       mode: .messaging), now: 0)
        }
        let completed = NIOLockedValueBox<[(owner: UInt64, seq: Int64)]>([])
        let large = [UInt8](repeating: 7, count: 16_000)
        // Connection 1 piles up 64 large writes, then connection 2 submits a small one.
        for _ in 0..<64 {
            store.submit(owner: 1, bytes: large.count, { db in
                try RelayStore.insertMessage(db, recipientId: rid, id: Sodium.randomBytes(24), timestamp: 0, flags: 0, body: large)
            }) { result in completed.withLockedValue { $0.append((1, (try? result.get()) ?? -1)) } }
        }
        store.submit(owner: 2, bytes: 1, { db in
            try RelayStore.insertMessage(db, recipientId: rid, id: Sodium.randomBytes(24), timestamp: 0, flags: 0, body: [1])
        }) { result in completed.withLockedValue { $0.append((2, (try? result.get()) ?? -1)) } }
        // The barrier runs after everything submitted before it.
        await store.barrier()
        let done = completed.withLockedValue { $0 }
        #expect(done.count == 65)
        #expect(!done.contains { $0.seq < 0 })
        // The small write went into the first or second group, not after the whole pile.
        let perGroup = RelayStore.batchBytes / large.count
        let position = try #require(done.firstIndex { $0.owner == 2 })
        #expect(position <= 2 * perGroup, "the small write waited behind \(position) large ones")
        // One connection's writes commit in the order it submitted them.
        let seqs = done.filter { $0.owner == 1 }.map(\.seq)
        #expect(seqs == seqs.sorted())
        try store.close()
    }

    @Test func aTokenBucketServesItsBurstThenItsRate() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var bucket = TokenBucket(RateLimit(perSecond: 10, burst: 5), now: start)
        bucket.take(5, now: start)
        let inCredit = bucket.debtClears(now: start)
        #expect(inCredit == nil)
        bucket.take(3, now: start)
        // 3 in debt at 10/s: 0.3 s.
        let wait = bucket.debtClears(now: start)
        #expect(wait.map { abs($0.nanoseconds - 300_000_000) < 1_000_000 } == true)
        let later = bucket.debtClears(now: start + .milliseconds(301))
        #expect(later == nil)
        // Credit never exceeds the burst: 6 at once after a long pause is 1 in debt.
        bucket.take(6, now: start + .seconds(100))
        let afterPause = bucket.debtClears(now: start + .seconds(100))
        #expect(afterPause.map { abs($0.nanoseconds - 100_000_000) < 1_000_000 } == true)
        var unlimited = TokenBucket(.unlimited, now: start)
        unlimited.take(.max, now: start)
        let never = unlimited.debtClears(now: start)
        #expect(never == nil)
    }
}
