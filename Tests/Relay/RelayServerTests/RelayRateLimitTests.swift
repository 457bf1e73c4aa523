import Foundation
import NIOConcurrencyHelpers
import NIOCore
import RelayClient
import RelayProtocol
@testable import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing

/// The relay's load goal: per-connection rates (commands, `NEW`s, `SEND` bytes, `AUTH` answers) that
/// slow a flooding connection — the relay stops reading from it — while every other connection is
/// served; and a store writer that does not make a small write wait for another connection's pile
/// of large ones. Over real TLS on loopback, and a real SQLite file.
///
/// Light by design (they share a test process with every other live suite): each test gives the
/// relay a tiny budget, so that a few dozen commands put a connection ~6 s in debt; floods are
/// bounded in count; every wait is for an event (the throttle counter moving, an answer arriving).
@Suite(.timeLimit(.minutes(1))) struct RelayRateLimitTests {
    /// A round trip on the good connection's own queue (3 commands, 1 byte of `SEND`).
    private func roundTrip(_ good: RelayConnection, _ q: RecipientQueue, _ byte: UInt8) async throws {
        try await good.sendMessage(senderId: q.senderId, key: nil, body: [byte])
        let m = try #require(try await good.get(q))
        #expect(m.body == [byte])
        try await good.acknowledge(q, messageId: m.id)
    }

    /// The shape of every test here. `flood` — a bounded number of commands, all issued at once on
    /// one connection (or a few) — puts it over its budget; once the relay has counted `throttles`
    /// throttles, `late` (one more command on each flooding connection) is issued: it stays unread
    /// while a good connection's round trip completes, and is answered once the budget refills, as
    /// is every command of the flood (slowed, not refused).
    private func floodIsHeldWhileAnotherConnectionIsServed(
        _ relay: RelayServer,
        throttles: Int = 1,
        flood: @escaping @Sendable () async throws -> Void,
        late: [@Sendable () async throws -> Void]
    ) async throws {
        let good = try await RelayConnection.connect(to: relay.address)
        let q = try await good.createQueue()
        let before = relay.stats.throttled
        let flooding = Task { try await flood() }
        // Fails here if the budget were not applied: nothing else counts a throttle.
        try await eventually("the flooding connection is throttled") { relay.stats.throttled >= before + throttles }
        let lateAnswered = NIOLockedValueBox(0)
        let lateCommands = late.map { command in
            Task {
                try await command()
                lateAnswered.withLockedValue { $0 += 1 }
            }
        }
        // The other connection is served while the flooder's late command waits in its socket.
        try await roundTrip(good, q, 1)
        // (With several flooders, the one that overdrew the shared budget last is certainly still held.)
        #expect(lateAnswered.withLockedValue { $0 } < late.count, "the throttled connection's next command was read at once")
        try await flooding.value
        for command in lateCommands { try await command.value }
        try await roundTrip(good, q, 2)
        await good.close()
    }

    @Test func aCommandFloodIsSlowedNotRefusedWhileAnotherConnectionIsServed() async throws {
        // 70 PINGs against 10/s with a burst of 10: ~6 s in debt (margin for a loaded machine).
        try await withRelay(configure: { $0.commandRate = RateLimit(perSecond: 10, burst: 10) }) { relay in
            let flooder = try await RelayConnection.connect(to: relay.address)
            try await floodIsHeldWhileAnotherConnectionIsServed(relay, flood: {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<70 { group.addTask { try await flooder.ping() } }
                    try await group.waitForAll()
                }
            }, late: [{ try await flooder.ping() }])
            // Slowed, not refused: every PING was answered, and the connection stays open.
            #expect(flooder.isActive)
            #expect(relay.stats.limitRefusals == 0)
            await flooder.close()
        }
    }

    @Test func sendBytesAreRateLimitedPerConnection() async throws {
        // 6 × 3,000 bytes against 2 KiB/s with a burst of 4 KiB: ~7 s in debt.
        try await withRelay(configure: { $0.sendByteRate = RateLimit(perSecond: 2 << 10, burst: 4 << 10) }) { relay in
            let flooder = try await RelayConnection.connect(to: relay.address)
            let own = try await flooder.createQueue()
            try await floodIsHeldWhileAnotherConnectionIsServed(relay, flood: {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<6 {
                        group.addTask { try await flooder.sendMessage(senderId: own.senderId, key: nil, body: Sodium.randomBytes(3000)) }
                    }
                    try await group.waitForAll()
                }
            }, late: [{ try await flooder.sendMessage(senderId: own.senderId, key: nil, body: [9]) }])
            // Every SEND was stored and answered OK (the good connection's two were acknowledged).
            #expect(relay.stats.storedMessages == 7)
            await flooder.close()
        }
    }

    @Test func newQueuesAreRateLimitedPerConnection() async throws {
        // 14 NEWs against 2/s with a burst of 2: ~6 s in debt.
        try await withRelay(configure: { $0.newQueueRate = RateLimit(perSecond: 2, burst: 2) }) { relay in
            let flooder = try await RelayConnection.connect(to: relay.address)
            try await floodIsHeldWhileAnotherConnectionIsServed(relay, flood: {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<14 { group.addTask { _ = try await flooder.createQueue() } }
                    try await group.waitForAll()
                }
            }, late: [{ _ = try await flooder.createQueue() }])
            // The good connection's queue, the flood's 14 and the late one: nothing refused.
            #expect(relay.stats.queues == 16)
            #expect(relay.stats.limitRefusals == 0)
            await flooder.close()
        }
    }

    @Test func authFailuresAreRateLimitedPerConnection() async throws {
        // 14 AUTH answers against 2/s with a burst of 2: ~6 s in debt.
        try await withRelay(configure: {
            $0.authFailureRate = RateLimit(perSecond: 2, burst: 2)
            $0.maxAuthFailures = 1000
        }) { relay in
            let attacker = try await RelayConnection.connect(to: relay.address)
            try await floodIsHeldWhileAnotherConnectionIsServed(relay, flood: {
                await withTaskGroup(of: Void.self) { group in
                    for _ in 0..<14 {
                        group.addTask {
                            await #expect(throws: RelayClientError.relay(.auth)) {
                                try await attacker.secureAsSender(senderId: Sodium.randomBytes(24), senderKey: .newX25519())
                            }
                        }
                    }
                }
            }, late: [{ try await attacker.ping() }])
            // Slowed, not closed (it stayed under --max-auth-failures).
            #expect(attacker.isActive)
            await attacker.close()
        }
    }

    @Test func newQueuesFromAllConnectionsShareARelayWideRate() async throws {
        // 2 connections × 7 NEWs against a relay-wide 2/s with a burst of 1 (each connection's own
        // rate is the default, far above): the one that takes last ~6.5 s in debt.
        try await withRelay(configure: { $0.globalNewQueueRate = RateLimit(perSecond: 2, burst: 1) }) { relay in
            let a = try await RelayConnection.connect(to: relay.address)
            let b = try await RelayConnection.connect(to: relay.address)
            try await floodIsHeldWhileAnotherConnectionIsServed(relay, throttles: 2, flood: {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for c in [a, b] {
                        for _ in 0..<7 { group.addTask { _ = try await c.createQueue() } }
                    }
                    try await group.waitForAll()
                }
                // Both overdrew the shared budget, so both are held; the good connection, which
                // sends no NEW while they flood, is not.
            }, late: [{ _ = try await a.createQueue() }, { _ = try await b.createQueue() }])
            #expect(relay.stats.queues == 17)
            #expect(relay.stats.limitRefusals == 0)
            await a.close()
            await b.close()
        }
    }

    @Test func connectionsBeyondTheAcceptRateWaitInTheBacklog() async throws {
        // 5 TCP connections against 1 accept/s with a burst of 1: once in debt the listener stops
        // accepting, and the rest wait in the kernel's backlog for a second or more.
        try await withRelay(configure: {
            $0.acceptRate = RateLimit(perSecond: 1, burst: 1)
            // These clients never start TLS: keep them open (and counted) however slow the machine is.
            $0.handshakeTimeout = .seconds(120)
        }) { relay in
            // Opened at once, so that all five are in the backlog within the same second however
            // loaded the machine is (opened one after another, a slow machine could space them a
            // second apart and the bucket would never be in debt).
            let clients = try await withThrowingTaskGroup(of: RawClient.self) { group in
                for _ in 0..<5 { group.addTask { try await RawClient(host: relay.address.host, port: relay.address.port, tls: false) } }
                return try await group.reduce(into: [RawClient]()) { $0.append($1) }
            }
            // Fails here if the rate were not applied: the counter moves only when the listener,
            // in debt, withholds its next accept. (How many were accepted by then depends on the
            // machine, so it is not asserted.)
            try await eventually("the listener is throttled") { relay.stats.throttled >= 1 }
            // Held, not refused: all are accepted in the end.
            try await eventually(timeout: .seconds(30), "every connection accepted") { relay.stats.connections == 5 }
            for c in clients { await c.close() }
        }
    }

    @Test func aSmallWriteDoesNotWaitForAnotherConnectionsPileOfLargeOnes() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let (store, rid) = try await storeWithOneQueue(dir.appendingPathComponent("relay.db"))
        let completed = NIOLockedValueBox<[(owner: UInt64, seq: Int64)]>([])
        // The order in which the writer runs the writes (their statements, inside its groups):
        // completions come later, on a queue of their own, so they cannot tell what had run.
        let executed = NIOLockedValueBox<[UInt64]>([])
        let large = [UInt8](repeating: 7, count: 16_000)
        // Connection 1 piles up 64 large writes, then connection 2 submits a small one.
        for _ in 0..<64 {
            store.submit(owner: 1, bytes: large.count, { db in
                executed.withLockedValue { $0.append(1) }
                return try RelayStore.insertMessage(db, recipientId: rid, id: Sodium.randomBytes(24), timestamp: 0, flags: 0, body: large)
            }) { result in completed.withLockedValue { $0.append((1, (try? result.get()) ?? -1)) } }
        }
        // On a loaded machine some groups may run while the pile is still being submitted: what
        // counts is how many run after the small write was submitted.
        let executedBefore = executed.withLockedValue { $0.count }
        store.submit(owner: 2, bytes: 1, { db in
            executed.withLockedValue { $0.append(2) }
            return try RelayStore.insertMessage(db, recipientId: rid, id: Sodium.randomBytes(24), timestamp: 0, flags: 0, body: [1])
        }) { result in completed.withLockedValue { $0.append((2, (try? result.get()) ?? -1)) } }
        // The barrier runs after everything submitted before it.
        await store.barrier()
        let done = completed.withLockedValue { $0 }
        #expect(done.count == 65)
        #expect(!done.contains { $0.seq < 0 })
        // The small write went into the next group — one of small writes only — so it waited for
        // at most the rest of the group under way, not for the pile nor for a group full of large writes.
        let perGroup = RelayStore.batchBytes / large.count
        let order = executed.withLockedValue { $0 }
        let position = try #require(order.firstIndex(of: 2))
        #expect(position - executedBefore <= perGroup, "the small write waited behind \(position - executedBefore) large ones")
        // Completions come in commit order.
        #expect(done.firstIndex { $0.owner == 2 } == position)
        // One connection's writes commit in the order it submitted them.
        let seqs = done.filter { $0.owner == 1 }.map(\.seq)
        #expect(seqs == seqs.sorted())
        try store.close()
    }

    @Test func theRelaysOwnOperationBehindAPileOfLargeWritesStillRuns() async throws {
        // A fence (the relay's own operation: sweep, barrier) counts as small, but must wait for
        // the older large writes: a group of small writes only would be empty, and the writer
        // must then take the large ones rather than stop.
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let (store, rid) = try await storeWithOneQueue(dir.appendingPathComponent("relay.db"))
        let large = [UInt8](repeating: 7, count: 16_000)
        for _ in 0..<24 {
            store.submit(owner: 1, bytes: large.count, { db in
                _ = try RelayStore.insertMessage(db, recipientId: rid, id: Sodium.randomBytes(24), timestamp: 0, flags: 0, body: large)
            }) { _ in }
        }
        await store.barrier()
        let stored = try await store.perform { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM message") ?? 0 }
        #expect(stored == 24)
        try store.close()
    }

    @Test func theWriteAheadLogIsCopiedIntoTheDatabaseBesideTheWriter() async throws {
        // SQLite's own checkpoint (inside a commit) is off: the store's checkpointer copies the log
        // into the database once ~1,000 pages were written. 300 × 16 KB (~1,500 pages) in groups.
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.appendingPathComponent("relay.db")
        let (store, rid) = try await storeWithOneQueue(path)
        let sizeBefore = try #require(try FileManager.default.attributesOfItem(atPath: path.path)[.size] as? Int)
        let large = [UInt8](repeating: 7, count: 16_000)
        for _ in 0..<300 {
            store.submit(owner: 1, bytes: large.count, { db in
                try RelayStore.insertMessage(db, recipientId: rid, id: Sodium.randomBytes(24), timestamp: 0, flags: 0, body: large)
            }) { _ in }
        }
        await store.barrier()
        // The checkpoint runs on its own queue: wait for the database file to hold the messages.
        try await eventually("the log is copied into the database") {
            let size = (try? FileManager.default.attributesOfItem(atPath: path.path)[.size] as? Int) ?? 0
            return size > sizeBefore + (2 << 20)
        }
        let stored = try await store.perform { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM message") ?? 0 }
        #expect(stored == 300)
        try store.close()
    }

    @Test func theWriteAheadLogStaysBoundedWhileReadsNeverStop() async throws {
        // Two readers take turns so that one is always inside a read: a PASSIVE checkpoint can then
        // never reset the log, which grew without bound (3.5 GB in a 100-member group bench). With
        // a 64-page hard limit, 600 × 16 KB (~2,700 pages) must leave a log far below that.
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let path = dir.appendingPathComponent("relay.db")
        let (store, rid) = try await storeWithOneQueue(path, walHardLimitPages: 64)
        // Each reader leaves a read only once the other has entered a newer one, so one is always
        // inside a read (no timing involved).
        let overlap = ReadRelay()
        let readers = (0..<2).map { me in
            Task.detached {
                while overlap.isReading {
                    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                        store.read({ db in
                            _ = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM message")
                            overlap.holdUntilTheOtherEnters(me)
                        }) { _ in done.resume() }
                    }
                }
            }
        }
        let large = [UInt8](repeating: 7, count: 16_000)
        for _ in 0..<600 {
            store.submit(owner: 1, bytes: large.count, { db in
                try RelayStore.insertMessage(db, recipientId: rid, id: Sodium.randomBytes(24), timestamp: 0, flags: 0, body: large)
            }) { _ in }
        }
        await store.barrier()
        // Writes go on (small ones, while the readers still overlap) until the log is back under a
        // few hard limits' worth (64 pages = 256 KiB): the writer, past the limit, must empty it
        // although a reader is always inside a read. With a checkpoint that gives way to readers
        // the file stays at the ~9.6 MB written.
        try await eventually("the log is emptied despite the readers") {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                store.submit(owner: 1, bytes: 100, { db in
                    try RelayStore.insertMessage(db, recipientId: rid, id: Sodium.randomBytes(24), timestamp: 0, flags: 0, body: [UInt8](repeating: 1, count: 100))
                }) { _ in done.resume() }
            }
            let wal = (try? FileManager.default.attributesOfItem(atPath: path.path + "-wal")[.size] as? Int) ?? 0
            return wal < 4 << 20
        }
        overlap.stop()
        for r in readers { await r.value }
        let stored = try await store.perform { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM message") ?? 0 }
        #expect(stored >= 600)
        try store.close()
    }

    @Test func aRelayWideBudgetHoldsOnlyTheConnectionsThatTakeFromItWhenOverdrawn() throws {
        var config = RelayConfiguration(dataDirectory: URL(fileURLWithPath: "/nonexistent"))
        config.globalNewQueueRate = RateLimit(perSecond: 10, burst: 2)
        let global = GlobalBudget(config)
        let now = NIODeadline.now()
        var a = ConnectionBudget(config, global: global, now: now)
        var b = ConnectionBudget(config, global: global, now: now)
        let new = ClientCommand.new(recipientKey: AuthPrivateKey.newX25519().publicKey, recipientDhKey: X25519.PrivateKey().publicKey)
        // The burst: no wait.
        a.charge(new, now: now)
        a.charge(new, now: now)
        let inCredit = a.wait(now: now)
        #expect(inCredit?.0 == nil)
        // A overdraws by one NEW (0.1 s at 10/s); B, sending only PINGs, does not wait for it.
        a.charge(new, now: now)
        b.charge(.ping, now: now)
        let aHeld = a.wait(now: now)
        let aWait = try #require(aHeld)
        #expect(aWait.1 == .globalNewQueues)
        #expect(aWait.0 > .milliseconds(50) && aWait.0 <= .milliseconds(101))
        let bFree = b.wait(now: now)
        #expect(bFree?.0 == nil)
        // B's NEW now overdraws further: B waits for the debt after its take (~0.2 s), A does not wait longer.
        b.charge(new, now: now)
        let bHeld = b.wait(now: now)
        let bWait = try #require(bHeld)
        #expect(bWait.0 > .milliseconds(150) && bWait.0 <= .milliseconds(201))
        let aStill = a.wait(now: now)
        #expect(aStill.map { $0.0 <= aWait.0 } == true)
        // Once its wait has passed, A is free again.
        let aLater = a.wait(now: now + .milliseconds(102))
        #expect(aLater?.0 == nil)
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

/// A relay store at `path` holding one messaging queue (its recipient id returned).
private func storeWithOneQueue(_ path: URL, walHardLimitPages: Int = RelayStore.walHardLimitPages) async throws -> (RelayStore, [UInt8]) {
    let store = try RelayStore(path: path, walHardLimitPages: walHardLimitPages)
    let rid = Sodium.randomBytes(24)
    try await store.perform { db in
        try RelayStore.insertQueue(db, StoredQueue(recipientId: rid, senderId: Sodium.randomBytes(24), recipientKey: [UInt8](repeating: 1, count: 33),
                                                   boxKey: [UInt8](repeating: 2, count: 32), senderKey: nil, enabled: true, linkId: nil,
                                                   mode: .messaging), now: 0)
    }
    return (store, rid)
}

/// Two readers that take turns inside reads: reader `me` (0 or 1) returns from
/// `holdUntilTheOtherEnters` only after the other has entered a read since `me` entered its own,
/// so at every moment one of them is inside a read; `stop()` releases both.
private final class ReadRelay: @unchecked Sendable {  // guarded by `condition`
    private let condition = NSCondition()
    private var entries = [0, 0]
    private var reading = true

    var isReading: Bool { condition.withLock { reading } }

    func holdUntilTheOtherEnters(_ me: Int) {
        condition.lock()
        defer { condition.unlock() }
        entries[me] += 1
        condition.broadcast()
        let seen = entries[1 - me]
        while reading && entries[1 - me] == seen { condition.wait() }
    }

    func stop() {
        condition.withLock { reading = false }
        condition.broadcast()
    }
}
