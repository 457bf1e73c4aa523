import Dispatch
import Foundation
import GRDB
import NIOConcurrencyHelpers
import NIOCore
import RelayProtocol

/// A queue as persisted by the relay.
struct StoredQueue: Sendable {
    var recipientId: [UInt8]
    var senderId: [UInt8]
    var recipientKey: [UInt8]
    var boxKey: [UInt8]
    var senderKey: [UInt8]?
    var enabled: Bool
    var linkId: [UInt8]?
    var mode: QueueMode
}

/// What loading the queue table found: the queues that could be read, and how many rows could
/// not (each skipped, so that one damaged row does not keep the relay from starting).
struct LoadedQueues: Sendable {
    var queues: [StoredQueue]
    var corruptRows: Int
}

/// A message as persisted by the relay (as the sender sent it; sealed again on delivery).
struct StoredMessage: Sendable {
    /// Position in the relay's global insertion order; per queue, delivery follows it.
    var seq: Int64
    var id: [UInt8]
    var timestamp: Int64
    var flags: UInt8
    var body: [UInt8]
}

/// Durable storage of queues and messages in SQLite (WAL, `synchronous=FULL`).
///
/// All access goes through one serial writer that commits in groups: operations submitted while a
/// commit is in progress are run together in the next transaction, so a burst of N SENDs costs one
/// fsync instead of N. Each operation is a single statement, so one failure does not undo the
/// others; its completion is called only after the transaction is durable.
///
/// Fairness: each operation belongs to an owner (a connection; ``globalOwner`` for the relay's own
/// work). A group takes operations from the owners round-robin, each owner's in the order it
/// submitted them, and holds at most ``batchBytes`` of large writes (message bodies over
/// ``smallWriteBytes``): one connection's pile of 16 KB `SEND`s fills its share of a group, not
/// the group, and a small write waits for at most the commit under way and its own.
/// ``globalOwner``'s operations are fences: they run only after everything submitted before them.
final class RelayStore: Sendable {
    /// The owner of operations that are not a connection's (load, expiry sweep, barrier).
    static let globalOwner: UInt64 = 0
    /// Large-write bytes one group transaction takes at most (one large write always fits).
    static let batchBytes = 128 << 10
    /// Writes up to this size are small: they are never held back by the byte budget.
    static let smallWriteBytes = 2 << 10
    /// Operations one group transaction takes at most.
    static let maxBatchOperations = 4096

    private struct Operation: Sendable {
        let run: @Sendable (Database) throws -> Void
        let complete: @Sendable (Error?) -> Void
        let bytes: Int
        /// Submission order over all owners (for fences).
        let order: UInt64
    }

    /// Operations waiting for a group, per owner; `owners` in round-robin order.
    private struct Pending {
        var lanes: [UInt64: CircularBuffer<Operation>] = [:]
        var owners: [UInt64] = []
        var draining = false
        var submitted: UInt64 = 0
        /// The last group took only small writes while large ones waited (the next one takes both).
        var lastWasSmallOnly = false

        mutating func append(_ op: Operation, owner: UInt64) {
            if lanes[owner] == nil {
                lanes[owner] = CircularBuffer()
                owners.append(owner)
            }
            lanes[owner]!.append(op)
        }

        /// One operation per owner per round, until nothing more fits (with `smallOnly`, no large write).
        private mutating func collect(smallOnly: Bool) -> [Operation] {
            var batch: [Operation] = []
            var largeBytes = 0
            var candidates = owners
            while !candidates.isEmpty, batch.count < RelayStore.maxBatchOperations {
                var next: [UInt64] = []
                var took = false
                for owner in candidates {
                    guard batch.count < RelayStore.maxBatchOperations, let op = lanes[owner]?.first else { continue }
                    if owner == RelayStore.globalOwner,
                       lanes.contains(where: { $0.key != owner && ($0.value.first?.order ?? .max) < op.order }) {
                        next.append(owner) // a fence: only once nothing older waits
                        continue
                    }
                    let large = op.bytes > RelayStore.smallWriteBytes
                    if large, smallOnly { continue }
                    // Over the budget: this owner's turn in this group is over (its later operations wait behind it).
                    if large, largeBytes > 0, largeBytes + op.bytes > RelayStore.batchBytes { continue }
                    if large { largeBytes += op.bytes }
                    batch.append(lanes[owner]!.removeFirst())
                    took = true
                    if !lanes[owner]!.isEmpty { next.append(owner) }
                }
                if !took { break }
                candidates = next
            }
            return batch
        }

        /// The next group: one operation per owner per round, until nothing more fits.
        mutating func nextBatch() -> [Operation] {
            // Small writes go ahead of large ones: while both wait, every other group takes only
            // small writes (each owner's up to its first large one), so a small write waits for at
            // most the group under way and a group of small writes — not a group full of 16 KB
            // bodies. Groups alternate, so large writes are never starved by a stream of small ones.
            var heads = (small: false, large: false)
            for owner in owners {
                guard let op = lanes[owner]?.first else { continue }
                if op.bytes > RelayStore.smallWriteBytes { heads.large = true } else { heads.small = true }
            }
            let smallOnly = heads.small && heads.large && !lastWasSmallOnly
            var batch = collect(smallOnly: smallOnly)
            // Nothing small could go yet (a fence waiting for older large writes): a normal group.
            if smallOnly, batch.isEmpty { batch = collect(smallOnly: false) }
            lastWasSmallOnly = smallOnly && !batch.isEmpty
            // Emptied lanes are dropped; the round-robin order moves on by one for the next group.
            owners.removeAll { owner in
                guard let lane = lanes[owner], !lane.isEmpty else { lanes[owner] = nil; return true }
                return false
            }
            if owners.count > 1 { owners.append(owners.removeFirst()) }
            return batch
        }
    }

    private let pool: DatabasePool
    private let queue = DispatchQueue(label: "swiftplex.relay.store")
    private let readers = DispatchQueue(label: "swiftplex.relay.store.read", attributes: .concurrent)
    private let pending = NIOLockedValueBox(Pending())

    /// WAL checkpoints: SQLite would run one inside the commit that takes the log past 1,000
    /// pages, holding up every operation of that group and all that wait behind it (a 4 MB copy
    /// and an fsync of the database file). Here the writer only counts what it wrote, and a
    /// separate connection copies the log into the database (`PASSIVE`: the writer goes on
    /// meanwhile) on a queue of its own. The writer restarts the log once a checkpoint has copied
    /// all of it and no reader still reads from it. Under a steady stream of overlapping reads that
    /// moment may never come (a `PASSIVE` checkpoint cannot reset the log while readers use it, and
    /// the log grew to gigabytes so), so once the log holds ``walHardLimitPages`` the writer runs a
    /// `TRUNCATE` checkpoint between groups: it waits (busy timeout) for the readers of the log to
    /// finish — new readers read the database file once it is fully copied — and empties the file.
    private let checkpointer: DatabaseQueue
    private let checkpoints = DispatchQueue(label: "swiftplex.relay.store.checkpoint")
    private struct WalState {
        /// Pages (estimated) written since the last checkpoint was started.
        var pagesSinceCheckpoint = 0
        var checkpointRunning = false
        /// The log's size in pages as the last checkpoint found it.
        var walPages = 0
    }
    private let wal = NIOLockedValueBox(WalState())
    /// A checkpoint is started once this many pages were written since the last (SQLite's own default).
    static let checkpointPages = 1000
    /// The log's size at which the writer checkpoints itself (64 MiB of 4 KiB pages).
    static let walHardLimitPages = 16_384
    private let walHardLimitPages: Int

    /// - Parameter walHardLimitPages: the log size (pages) at which the writer empties the log
    ///   itself (tests use a small one).
    init(path: URL, walHardLimitPages: Int = RelayStore.walHardLimitPages) throws {
        self.walHardLimitPages = walHardLimitPages
        var config = Configuration()
        // The hard-limit checkpoint waits for the log's readers; reads never wait on a WAL writer.
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            // Checkpoints run on a connection of their own (``checkpointer``), not inside a commit.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            // A log that was reset is cut back to the hard limit rather than kept at its peak size.
            try db.execute(sql: "PRAGMA journal_size_limit = \(walHardLimitPages * 4096)")
        }
        config.label = "relay"
        do {
            try DataDirectory.touchPrivateFile(path)
            pool = try DatabasePool(path: path.path, configuration: config)
            try Self.migrator.migrate(pool)
            var checkpointConfig = Configuration()
            checkpointConfig.label = "relay.checkpoint"
            checkpointer = try DatabaseQueue(path: path.path, configuration: checkpointConfig)
        } catch let e as RelayServerError {
            throw e
        } catch {
            throw RelayServerError(.database, "cannot open the relay database \(path.path): \(error)")
        }
    }

    private static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE queue (
                    recipient_id BLOB PRIMARY KEY NOT NULL,
                    sender_id BLOB NOT NULL UNIQUE,
                    recipient_key BLOB NOT NULL,
                    box_key BLOB NOT NULL,
                    sender_key BLOB,
                    enabled INTEGER NOT NULL DEFAULT 1,
                    link_id BLOB UNIQUE,
                    link_data BLOB,
                    created_at INTEGER NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE message (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    recipient_id BLOB NOT NULL REFERENCES queue(recipient_id) ON DELETE CASCADE,
                    message_id BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    flags INTEGER NOT NULL,
                    body BLOB NOT NULL
                );
                CREATE INDEX message_by_queue ON message(recipient_id, seq);
                CREATE INDEX message_by_time ON message(created_at);
                """)
        }
        // Queue modes (audit 1). Queues created before them cannot be told apart reliably: an
        // address and a pending invitation are both unsecured, and either may have a short link.
        // Every queue still without a sender key becomes a contact queue — a sender can then never
        // secure it, which is what protects an address; an invitation still pending across the
        // upgrade can no longer be joined (its joiner's SKEY gets AUTH) and must be created anew.
        // Secured queues are messaging queues, as before.
        m.registerMigration("v2-queue-mode") { db in
            try db.execute(sql: """
                ALTER TABLE queue ADD COLUMN mode TEXT NOT NULL DEFAULT 'M' CHECK (mode IN ('M', 'C'));
                UPDATE queue SET mode = 'C' WHERE sender_key IS NULL;
                """)
        }
        return m
    }

    // MARK: - Group commit

    /// Runs `body` in the next group transaction; `completion` gets its result once durable.
    /// `owner` is the submitting connection (``globalOwner`` for the relay's own work, which waits
    /// for everything submitted before it); `bytes` is how much it writes (a message body), for the
    /// group's budget of large writes.
    func submit<T: Sendable>(owner: UInt64 = RelayStore.globalOwner, bytes: Int = 0, _ body: @escaping @Sendable (Database) throws -> T,
                             completion: @escaping @Sendable (Result<T, Error>) -> Void) {
        let result = NIOLockedValueBox<T?>(nil)
        let startDrain = pending.withLockedValue { state -> Bool in
            state.submitted += 1
            let op = Operation(
                run: { db in result.withLockedValue { $0 = nil }; let v = try body(db); result.withLockedValue { $0 = v } },
                complete: { error in
                    if let error { completion(.failure(error)) } else { completion(.success(result.withLockedValue { $0! })) }
                },
                bytes: bytes, order: state.submitted
            )
            state.append(op, owner: owner)
            if state.draining { return false }
            state.draining = true
            return true
        }
        if startDrain { queue.async { self.drain() } }
    }

    /// Async form of ``submit(_:completion:)``.
    func perform<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { cont in
            submit(body) { cont.resume(with: $0) }
        }
    }

    private func drain() {
        while true {
            let batch = pending.withLockedValue { state -> [Operation] in
                let ops = state.nextBatch()
                if ops.isEmpty { state.draining = false }
                return ops
            }
            if batch.isEmpty { return }
            var errors = [Error?](repeating: nil, count: batch.count)
            do {
                try pool.writeWithoutTransaction { db in
                    try db.inTransaction(.immediate) {
                        // Every operation is one statement, which SQLite applies atomically, so a
                        // failing one leaves the others of the batch intact without a savepoint.
                        for (i, op) in batch.enumerated() {
                            do { try op.run(db) } catch { errors[i] = error }
                        }
                        return .commit
                    }
                }
            } catch {
                for i in errors.indices where errors[i] == nil { errors[i] = error }
            }
            // Before the completions: a checkpoint it starts is queued before `close` (after a barrier) waits for them.
            noteWritten(batch)
            for (i, op) in batch.enumerated() { op.complete(errors[i]) }
        }
    }

    /// Counts what a group wrote (a page per operation, plus its bytes) and starts a checkpoint on
    /// the checkpointer once enough was written; if the log has outgrown ``walHardLimitPages``
    /// because checkpoints beside the writer never caught up with it, empties it here, between groups.
    private func noteWritten(_ batch: [Operation]) {
        let pages = batch.reduce(0) { $0 + 1 + $1.bytes / 4096 }
        let (start, inline) = wal.withLockedValue { w -> (Bool, Bool) in
            w.pagesSinceCheckpoint += pages
            if w.walPages >= walHardLimitPages { w.walPages = 0; return (false, true) }
            guard w.pagesSinceCheckpoint >= RelayStore.checkpointPages, !w.checkpointRunning else { return (false, false) }
            w.pagesSinceCheckpoint = 0
            w.checkpointRunning = true
            return (true, false)
        }
        if inline {
            _ = try? pool.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        }
        guard start else { return }
        checkpoints.async { [checkpointer, wal] in
            let result = try? checkpointer.inDatabase { try $0.checkpoint(.passive) }
            wal.withLockedValue { w in
                w.checkpointRunning = false
                // The log's length since its last reset, copied or not: fully copied, the writer
                // restarts it at its next commit only if no reader still reads from it.
                if let result { w.walPages = result.walFrameCount }
            }
        }
    }

    /// Runs a read on a reader connection, concurrently with the writer: it sees what was
    /// committed when it starts.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T, completion: @escaping @Sendable (Result<T, Error>) -> Void) {
        readers.async { [pool] in
            completion(Result { try pool.read(body) })
        }
    }

    /// Waits until everything submitted so far is committed.
    func barrier() async {
        _ = try? await perform { _ in () }
    }

    func close() throws {
        checkpoints.sync {}
        try checkpointer.close()
        try pool.close()
    }

    // MARK: - Statements (run inside `submit`)

    /// Reads every queue row, skipping (and counting) rows that cannot be valid: a column of the
    /// wrong type or length. Nothing is decoded with a trapping accessor.
    static func loadQueues(_ db: Database) throws -> LoadedQueues {
        var out = LoadedQueues(queues: [], corruptRows: 0)
        let rows = try Row.fetchCursor(db, sql: "SELECT recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, link_id, mode FROM queue")
        while let row = try rows.next() {
            if let q = queue(from: row) { out.queues.append(q) } else { out.corruptRows += 1 }
        }
        return out
    }

    private static func blob(_ row: Row, _ column: String, length: Int? = nil) -> [UInt8]? {
        guard let data = Data.fromDatabaseValue(row[column] as DatabaseValue) else { return nil }
        if let length, data.count != length { return nil }
        return [UInt8](data)
    }

    private static func queue(from row: Row) -> StoredQueue? {
        let idLength = RelayLimits.entityIdLength
        guard let rid = blob(row, "recipient_id", length: idLength), let sid = blob(row, "sender_id", length: idLength),
              let rk = blob(row, "recipient_key", length: 33), let box = blob(row, "box_key"),
              let enabled = Int64.fromDatabaseValue(row["enabled"] as DatabaseValue), enabled == 0 || enabled == 1,
              let modeText = String.fromDatabaseValue(row["mode"] as DatabaseValue), let mode = QueueMode(letter: modeText)
        else { return nil }
        let senderKeyValue = row["sender_key"] as DatabaseValue
        let senderKey = senderKeyValue.isNull ? nil : blob(row, "sender_key", length: 33)
        guard senderKeyValue.isNull || senderKey != nil else { return nil }
        let linkValue = row["link_id"] as DatabaseValue
        let linkId = linkValue.isNull ? nil : blob(row, "link_id", length: idLength)
        guard linkValue.isNull || linkId != nil else { return nil }
        return StoredQueue(recipientId: rid, senderId: sid, recipientKey: rk, boxKey: box, senderKey: senderKey,
                           enabled: enabled == 1, linkId: linkId, mode: mode)
    }

    /// Per queue: how many messages are stored and their body bytes.
    static func messageCounts(_ db: Database) throws -> [[UInt8]: (count: Int, bytes: Int)] {
        var out: [[UInt8]: (count: Int, bytes: Int)] = [:]
        let rows = try Row.fetchCursor(db, sql: "SELECT recipient_id, COUNT(*) AS n, SUM(length(body)) AS bytes FROM message GROUP BY recipient_id")
        while let row = try rows.next() {
            guard let rid = blob(row, "recipient_id") else { continue }
            out[rid] = (Int.fromDatabaseValue(row["n"] as DatabaseValue) ?? 0, Int.fromDatabaseValue(row["bytes"] as DatabaseValue) ?? 0)
        }
        return out
    }

    static func insertQueue(_ db: Database, _ q: StoredQueue, now: Int64) throws {
        try db.execute(
            sql: "INSERT INTO queue (recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, created_at, mode) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
            arguments: [Data(q.recipientId), Data(q.senderId), Data(q.recipientKey), Data(q.boxKey), q.senderKey.map { Data($0) }, now, q.mode.letter]
        )
    }

    /// Sets the sender key of an enabled messaging queue that has none; returns whether it did.
    static func setSenderKey(_ db: Database, recipientId: [UInt8], key: [UInt8]) throws -> Bool {
        try db.execute(sql: "UPDATE queue SET sender_key = ? WHERE recipient_id = ? AND sender_key IS NULL AND enabled = 1 AND mode = 'M'",
                       arguments: [Data(key), Data(recipientId)])
        return db.changesCount > 0
    }

    static func disable(_ db: Database, recipientId: [UInt8]) throws {
        try db.execute(sql: "UPDATE queue SET enabled = 0 WHERE recipient_id = ?", arguments: [Data(recipientId)])
    }

    static func deleteQueue(_ db: Database, recipientId: [UInt8]) throws {
        try db.execute(sql: "DELETE FROM queue WHERE recipient_id = ?", arguments: [Data(recipientId)])
    }

    static func setLink(_ db: Database, recipientId: [UInt8], linkId: [UInt8]?, data: [UInt8]?) throws {
        try db.execute(sql: "UPDATE queue SET link_id = ?, link_data = ? WHERE recipient_id = ?",
                       arguments: [linkId.map { Data($0) }, data.map { Data($0) }, Data(recipientId)])
    }

    static func linkData(_ db: Database, linkId: [UInt8]) throws -> [UInt8]? {
        (try Data.fetchOne(db, sql: "SELECT link_data FROM queue WHERE link_id = ? AND enabled = 1", arguments: [Data(linkId)])).map { [UInt8]($0) }
    }

    /// Appends a message; returns its sequence number.
    static func insertMessage(_ db: Database, recipientId: [UInt8], id: [UInt8], timestamp: Int64, flags: UInt8, body: [UInt8]) throws -> Int64 {
        try db.cachedStatement(sql: "INSERT INTO message (recipient_id, message_id, created_at, flags, body) VALUES (?, ?, ?, ?, ?)")
            .execute(arguments: [Data(recipientId), Data(id), timestamp, Int(flags), Data(body)])
        return db.lastInsertedRowID
    }

    /// The oldest message of a queue after sequence number `after` that is not older than `notBefore`.
    static func oldestMessage(_ db: Database, recipientId: [UInt8], after: Int64, notBefore: Int64) throws -> StoredMessage? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT seq, message_id, created_at, flags, body FROM message WHERE recipient_id = ? AND seq > ? AND created_at >= ? ORDER BY seq LIMIT 1"),
            arguments: [Data(recipientId), after, notBefore]
        ).map { row in
            // A damaged row is delivered as an empty message rather than trapping the relay.
            StoredMessage(seq: Int64.fromDatabaseValue(row["seq"] as DatabaseValue) ?? 0,
                          id: blob(row, "message_id", length: RelayLimits.entityIdLength) ?? [UInt8](repeating: 0, count: RelayLimits.entityIdLength),
                          timestamp: Int64.fromDatabaseValue(row["created_at"] as DatabaseValue) ?? 0,
                          flags: UInt8(truncatingIfNeeded: Int64.fromDatabaseValue(row["flags"] as DatabaseValue) ?? 0),
                          body: blob(row, "body") ?? [])
        }
    }

    /// Deletes one message by its sequence number (a no-op if it had expired meanwhile).
    static func deleteMessage(_ db: Database, seq: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM message WHERE seq = ?").execute(arguments: [seq])
    }

    /// Deletes messages created before `cutoff`; returns the queue, sequence number and body size of each.
    static func deleteExpired(_ db: Database, before cutoff: Int64) throws -> [(recipientId: [UInt8], seq: Int64, bytes: Int)] {
        try Row.fetchAll(db, sql: "DELETE FROM message WHERE created_at < ? RETURNING recipient_id, seq, length(body) AS bytes", arguments: [cutoff]).compactMap {
            guard let rid = blob($0, "recipient_id"), let seq = Int64.fromDatabaseValue($0["seq"] as DatabaseValue) else { return nil }
            return (rid, seq, Int.fromDatabaseValue($0["bytes"] as DatabaseValue) ?? 0)
        }
    }
}
