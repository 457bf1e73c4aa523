import Dispatch
import Foundation
import GRDB
import NIOConcurrencyHelpers
import NIOCore
import RelayProtocol
import SwiftplexBase

/// A queue as persisted by the relay.
package struct StoredQueue: Sendable {
    package var recipientId: [UInt8]
    package var senderId: [UInt8]
    package var recipientKey: [UInt8]
    package var boxKey: [UInt8]
    package var senderKey: [UInt8]?
    package var enabled: Bool
    package var linkId: [UInt8]?
    package var mode: QueueMode

    package init(recipientId: [UInt8], senderId: [UInt8], recipientKey: [UInt8], boxKey: [UInt8], senderKey: [UInt8]?, enabled: Bool,
                 linkId: [UInt8]?, mode: QueueMode) {
        self.recipientId = recipientId
        self.senderId = senderId
        self.recipientKey = recipientKey
        self.boxKey = boxKey
        self.senderKey = senderKey
        self.enabled = enabled
        self.linkId = linkId
        self.mode = mode
    }
}

/// What loading the queue table found: the queues that could be read, and how many rows could
/// not (each skipped, so that one damaged row does not keep the relay from starting).
package struct LoadedQueues: Sendable {
    package var queues: [StoredQueue]
    package var corruptRows: Int

    package init(queues: [StoredQueue], corruptRows: Int) {
        self.queues = queues
        self.corruptRows = corruptRows
    }
}

/// A message as persisted by the relay (as the sender sent it; sealed again on delivery).
package struct StoredMessage: Sendable {
    /// Position in the relay's global insertion order; per queue, delivery follows it.
    package var seq: Int64
    package var id: [UInt8]
    package var timestamp: Int64
    package var flags: UInt8
    package var body: [UInt8]

    package init(seq: Int64, id: [UInt8], timestamp: Int64, flags: UInt8, body: [UInt8]) {
        self.seq = seq
        self.id = id
        self.timestamp = timestamp
        self.flags = flags
        self.body = body
    }
}

/// Durable storage of queues and messages in SQLite (WAL, `synchronous=FULL`): the default
/// ``RelayQueueStore``; it loads every queue's metadata at start.
///
/// All access goes through one serial writer that commits in groups: operations submitted while a
/// commit is in progress are run together in the next transaction, so a burst of N SENDs costs one
/// fsync instead of N. Each operation is a single statement, so one failure does not undo the
/// others; its completion is called only after the transaction is durable (on a serial queue of
/// completions, in commit order, while the writer goes on with the next group). Groups are formed by
/// ``GroupCommitSchedule`` (fair between connections, fences for the relay's own work), which the
/// PostgreSQL store shares.
final class RelayStore: Sendable {
    /// The owner of operations that are not a connection's (load, expiry sweep, barrier).
    static let globalOwner = GroupCommit.globalOwner
    /// Large-write bytes one group transaction takes at most (one large write always fits).
    static let batchBytes = GroupCommit.batchBytes
    /// Writes up to this size are small: they are never held back by the byte budget.
    static let smallWriteBytes = GroupCommit.smallWriteBytes
    /// Operations one group transaction takes at most.
    static let maxBatchOperations = GroupCommit.maxBatchOperations

    private struct Operation: Sendable {
        let run: @Sendable (Database) throws -> Void
        let complete: @Sendable (Error?) -> Void
    }

    private let pool: DatabasePool
    private let queue = DispatchQueue(label: "swiftplex.relay.store")
    /// Runs each group's completions, in commit order, while the writer already runs the next
    /// group: what the relay does with a committed write (answer `OK`, seal and hand a message to
    /// its subscriber) no longer lengthens the commit cycle that every waiting `SEND` shares.
    private let completer = DispatchQueue(label: "swiftplex.relay.store.complete")
    private let readers = DispatchQueue(label: "swiftplex.relay.store.read", attributes: .concurrent)
    private let pending = NIOLockedValueBox(GroupCommitSchedule<Operation>())

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
        Blocking.willWait("RelayStore.init (file I/O and migrations)")
        self.walHardLimitPages = walHardLimitPages
        var config = Configuration()
        // The hard-limit checkpoint waits for the log's readers; reads never wait on a WAL writer.
        config.busyMode = .timeout(10)
        config.prepareDatabase { db in
            // (`synchronous = FULL` is set on the writer after the pool opens, below: GRDB would
            // undo it here.)
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
            // GRDB sets `synchronous = NORMAL` on a pool's writer when it turns WAL on, after
            // `prepareDatabase`: without this a commit reached the log but not the disk (safe
            // against kill -9, not against a power cut or an OS crash) although `OK` promises it is durable.
            try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
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
        // Queue modes. Queues created before them cannot be told apart reliably: an
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
            let op = Operation(
                run: { db in result.withLockedValue { $0 = nil }; let v = try body(db); result.withLockedValue { $0 = v } },
                complete: { error in
                    if let error { completion(.failure(error)) } else { completion(.success(result.withLockedValue { $0! })) }
                }
            )
            state.append(op, bytes: bytes, owner: owner)
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
            let batch = pending.withLockedValue { state -> [GroupCommitSchedule<Operation>.Operation] in
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
                            do { try op.payload.run(db) } catch { errors[i] = error }
                        }
                        return .commit
                    }
                }
            } catch {
                for i in errors.indices where errors[i] == nil { errors[i] = error }
            }
            // Before the completions: a checkpoint it starts is queued before `close` (after a barrier) waits for them.
            noteWritten(batch)
            let completions = batch.map(\.payload.complete)
            completer.async { [errors] in
                for (complete, error) in zip(completions, errors) { complete(error) }
            }
        }
    }

    /// Counts what a group wrote (a page per operation, plus its bytes) and starts a checkpoint on
    /// the checkpointer once enough was written; if the log has outgrown ``walHardLimitPages``
    /// because checkpoints beside the writer never caught up with it, empties it here, between groups.
    private func noteWritten(_ batch: [GroupCommitSchedule<Operation>.Operation]) {
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
        Blocking.willWait("RelayStore.close")
        completer.sync {}
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

// MARK: - The store seam

extension RelayStore: RelayQueueStore {
    var loadsOnDemand: Bool { false }

    func loadAll() async throws -> (LoadedQueues, [[UInt8]: (count: Int, bytes: Int)]) {
        try await perform { db in (try Self.loadQueues(db), try Self.messageCounts(db)) }
    }

    func totals() async throws -> RelayStoreTotals {
        try await perform { db in
            let queues = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM queue") ?? 0
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS n, COALESCE(SUM(length(body)), 0) AS bytes FROM message")
            return RelayStoreTotals(queues: queues, messages: row?["n"] ?? 0, bytes: row?["bytes"] ?? 0)
        }
    }

    func loadQueue(_ key: QueueKey, owner: UInt64, completion: @escaping @Sendable (Result<LoadedQueue?, Error>) -> Void) {
        submit(owner: owner, { db -> LoadedQueue? in
            let (column, id) = switch key {
            case let .recipient(id): ("recipient_id", id)
            case let .sender(id): ("sender_id", id)
            }
            guard let row = try Row.fetchOne(db, sql: "SELECT recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, link_id, mode FROM queue WHERE \(column) = ?",
                                             arguments: [Data(id)]) else { return nil }
            let q = Self.queue(from: row)
            guard let rid = Self.blob(row, "recipient_id") else { return LoadedQueue(queue: nil, count: 0, bytes: 0) }
            let counts = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS n, COALESCE(SUM(length(body)), 0) AS bytes FROM message WHERE recipient_id = ?", arguments: [Data(rid)])
            return LoadedQueue(queue: q, count: counts?["n"] ?? 0, bytes: counts?["bytes"] ?? 0)
        }, completion: completion)
    }

    func insertQueue(_ q: StoredQueue, now: Int64, owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, { db in try Self.insertQueue(db, q, now: now) }, completion: completion)
    }

    func setSenderKey(recipientId: [UInt8], key: [UInt8], owner: UInt64, completion: @escaping @Sendable (Result<Bool, Error>) -> Void) {
        submit(owner: owner, { db in try Self.setSenderKey(db, recipientId: recipientId, key: key) }, completion: completion)
    }

    func disable(recipientId: [UInt8], owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, { db in try Self.disable(db, recipientId: recipientId) }, completion: completion)
    }

    func deleteQueue(recipientId: [UInt8], owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, { db in try Self.deleteQueue(db, recipientId: recipientId) }, completion: completion)
    }

    func setLink(recipientId: [UInt8], linkId: [UInt8]?, data: [UInt8]?, owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, bytes: data?.count ?? 0, { db in try Self.setLink(db, recipientId: recipientId, linkId: linkId, data: data) }, completion: completion)
    }

    func insertMessage(recipientId: [UInt8], id: [UInt8], timestamp: Int64, flags: UInt8, body: [UInt8], owner: UInt64,
                       completion: @escaping @Sendable (Result<Int64, Error>) -> Void) {
        submit(owner: owner, bytes: body.count, { db in
            try Self.insertMessage(db, recipientId: recipientId, id: id, timestamp: timestamp, flags: flags, body: body)
        }, completion: completion)
    }

    func deleteMessage(seq: Int64, owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, { db in try Self.deleteMessage(db, seq: seq) }, completion: completion)
    }

    func deleteExpired(before cutoff: Int64, completion: @escaping @Sendable (Result<[ExpiredMessage], Error>) -> Void) {
        submit({ db in try Self.deleteExpired(db, before: cutoff).map { ExpiredMessage(recipientId: $0.recipientId, seq: $0.seq, bytes: $0.bytes) } },
               completion: completion)
    }

    func oldestMessage(recipientId: [UInt8], after: Int64, notBefore: Int64, completion: @escaping @Sendable (Result<StoredMessage?, Error>) -> Void) {
        read({ db in try Self.oldestMessage(db, recipientId: recipientId, after: after, notBefore: notBefore) }, completion: completion)
    }

    func linkData(linkId: [UInt8], completion: @escaping @Sendable (Result<[UInt8]?, Error>) -> Void) {
        read({ db in try Self.linkData(db, linkId: linkId) }, completion: completion)
    }

    func closeStore() async throws {
        try await Blocking.run("relay-store-close") { try self.close() }
    }

    // MARK: Copy

    func copyCounts() async throws -> (queues: Int, messages: Int) {
        let counts = try await perform { db in
            [try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM queue") ?? 0, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM message") ?? 0]
        }
        return (counts[0], counts[1])
    }

    private static func bytes(_ row: Row, _ column: String) -> [UInt8]? {
        Data.fromDatabaseValue(row[column] as DatabaseValue).map { [UInt8]($0) }
    }

    func copyQueues(after: [UInt8]?, limit: Int) async throws -> [CopiedQueue] {
        try await perform { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, link_id, link_data, created_at, mode
                FROM queue WHERE recipient_id > ? ORDER BY recipient_id LIMIT ?
                """, arguments: [Data(after ?? []), limit])
            return rows.map { row in
                CopiedQueue(recipientId: Self.bytes(row, "recipient_id") ?? [], senderId: Self.bytes(row, "sender_id") ?? [],
                            recipientKey: Self.bytes(row, "recipient_key") ?? [], boxKey: Self.bytes(row, "box_key") ?? [],
                            senderKey: Self.bytes(row, "sender_key"), enabled: row["enabled"] ?? 0, linkId: Self.bytes(row, "link_id"),
                            linkData: Self.bytes(row, "link_data"), createdAt: row["created_at"] ?? 0, mode: row["mode"] ?? "M")
            }
        }
    }

    func copyMessages(after: Int64, limit: Int) async throws -> [CopiedMessage] {
        try await perform { db in
            try Row.fetchAll(db, sql: "SELECT seq, recipient_id, message_id, created_at, flags, body FROM message WHERE seq > ? ORDER BY seq LIMIT ?",
                             arguments: [after, limit]).map { row in
                CopiedMessage(seq: row["seq"] ?? 0, recipientId: Self.bytes(row, "recipient_id") ?? [], messageId: Self.bytes(row, "message_id") ?? [],
                              createdAt: row["created_at"] ?? 0, flags: row["flags"] ?? 0, body: Self.bytes(row, "body") ?? [])
            }
        }
    }

    func copyWrite(queues: [CopiedQueue], messages: [CopiedMessage]) async throws {
        // One transaction of its own (all or nothing); the copy runs with no relay on the store.
        await barrier()
        try await pool.write { db in
            for q in queues {
                try db.execute(sql: """
                    INSERT INTO queue (recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, link_id, link_data, created_at, mode)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [Data(q.recipientId), Data(q.senderId), Data(q.recipientKey), Data(q.boxKey), q.senderKey.map { Data($0) },
                                     q.enabled, q.linkId.map { Data($0) }, q.linkData.map { Data($0) }, q.createdAt, q.mode])
            }
            for m in messages {
                try db.execute(sql: "INSERT INTO message (seq, recipient_id, message_id, created_at, flags, body) VALUES (?, ?, ?, ?, ?, ?)",
                               arguments: [m.seq, Data(m.recipientId), Data(m.messageId), m.createdAt, m.flags, Data(m.body)])
            }
        }
    }

    func copyClear() async throws {
        await barrier()
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM message")
            try db.execute(sql: "DELETE FROM queue")
        }
    }
}

/// Opens (creating if missing, 0600) the SQLite store at `path` — for the relay program's
/// `--store FILE` and `store copy`, outside this module.
package func openSQLiteRelayStore(_ path: URL) throws -> any RelayQueueStore {
    try RelayStore(path: path)
}

/// Benchmarks only (`swiftplex-bench relay-store`): adds `count` queues to the SQLite store at
/// `path` in one transaction, fast — ids derived from their number, every queue with the same
/// (valid) keys — so that a relay holding a million queues can be measured without a million `NEW`s.
package func insertSyntheticQueues(sqlitePath path: URL, count: Int, recipientKey: [UInt8], boxKey: [UInt8]) throws {
    let store = try RelayStore(path: path)
    defer { try? store.close() }
    try store.insertSynthetic(count: count, recipientKey: recipientKey, boxKey: boxKey)
}

extension RelayStore {
    fileprivate func insertSynthetic(count: Int, recipientKey: [UInt8], boxKey: [UInt8]) throws {
        try pool.write { db in
            let statement = try db.makeStatement(sql: "INSERT INTO queue (recipient_id, sender_id, recipient_key, box_key, enabled, created_at, mode) VALUES (?, ?, ?, ?, 1, 0, 'M')")
            let rk = Data(recipientKey), box = Data(boxKey)
            for i in 0..<count {
                var id = [UInt8](repeating: 0, count: RelayLimits.entityIdLength)
                for b in 0..<8 { id[b + 1] = UInt8(truncatingIfNeeded: i >> (8 * b)) }
                id[0] = 0x52
                let rid = Data(id)
                id[0] = 0x53
                try statement.execute(arguments: [rid, Data(id), rk, box])
            }
        }
    }
}
