import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO
import RelayProtocol
import RelayServer
import SwiftplexSQL
import SwiftplexSQLPostgres

/// The relay's queues and messages in PostgreSQL (`swiftplex-relay --store postgresql://…`).
///
/// The same guarantees as the SQLite store (docs/relay.md, "Durability and the store"): writes are
/// committed in groups on one writer connection (``GroupCommitSchedule``, fair between
/// connections), each completion runs after `COMMIT` returned (PostgreSQL's default
/// `synchronous_commit = on`: the commit is on disk), in commit order. PostgreSQL aborts a whole
/// transaction on an error, so a group with a failing statement is rolled back and its operations
/// run again each in a transaction of its own: the failing one fails alone. Reads run on reader
/// connections beside the writer. Queue metadata is loaded on demand (``loadsOnDemand``).
///
/// One relay per schema: the writer holds a session advisory lock on the schema's name, and a
/// second relay (or a `store copy`) on the same schema is refused while the first holds it.
package final class PostgresRelayStore: RelayQueueStore {
    package let location: PostgresLocation
    private let logger: Logger
    private let eventLoopGroup: any EventLoopGroup
    private let writer: Connection
    private let readers: [Connection]
    private let nextReader = NIOLockedValueBox(0)

    private struct Operation: Sendable {
        let run: @Sendable (PostgresConnection) async throws -> Void
        let complete: @Sendable (Error?) -> Void
    }
    private let pending = NIOLockedValueBox(GroupCommitSchedule<Operation>())

    package var loadsOnDemand: Bool { true }

    /// Readers beside the writer.
    static let readerCount = 2

    /// Connects (writer and readers), creates the schema and tables if missing and takes the
    /// schema's lock. Throws ``RelayServerError`` `.database` with a clear message.
    ///
    /// `lockWait`: how long to wait for the schema's lock — a relay that was just killed holds it
    /// until PostgreSQL notices its connection is gone (usually at once).
    package static func open(_ location: PostgresLocation, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                             lockWait: Duration = .seconds(10), logger: Logger) async throws -> PostgresRelayStore {
        let writer = Connection(location: location, group: group, logger: logger, isWriter: true)
        do {
            let conn = try await writer.get()
            let deadline = ContinuousClock.now + lockWait
            while try await !lock(conn, location: location, logger: logger) {
                guard ContinuousClock.now < deadline else {
                    throw RelayServerError(.database, "another relay (or store copy) is using the schema \(location.schema) of \(location)")
                }
                try await Task.sleep(for: .milliseconds(200))
            }
            try await migrate(conn, location: location, logger: logger)
        } catch let e as RelayServerError {
            await writer.close()
            throw e
        } catch {
            await writer.close()
            throw RelayServerError(.database, "cannot open the relay store \(location): \(PostgresRelayStore.describe(error))")
        }
        let readers = (0..<readerCount).map { _ in Connection(location: location, group: group, logger: logger, isWriter: false) }
        return PostgresRelayStore(location: location, group: group, logger: logger, writer: writer, readers: readers)
    }

    private init(location: PostgresLocation, group: any EventLoopGroup, logger: Logger, writer: Connection, readers: [Connection]) {
        self.location = location
        self.eventLoopGroup = group
        self.logger = logger
        self.writer = writer
        self.readers = readers
    }

    /// A PostgreSQL error with its server message (postgres-nio's description hides it).
    static func describe(_ error: Error) -> String {
        if let e = error as? PSQLError {
            let message = e.serverInfo?[.message] ?? ""
            let detail = e.serverInfo?[.detail].map { " (\($0))" } ?? ""
            return message.isEmpty ? "\(e.code)" : "\(message)\(detail)"
        }
        return "\(error)"
    }

    /// One relay per schema: a session lock the writer holds until it disconnects.
    private static func lock(_ conn: PostgresConnection, location: PostgresLocation, logger: Logger) async throws -> Bool {
        let locked = try await conn.query("SELECT pg_try_advisory_lock(hashtext(\(location.schema)))", logger: logger).collect()
        guard let row = locked.first else { return false }
        return try row.decode(Bool.self)
    }

    private static func migrate(_ conn: PostgresConnection, location: PostgresLocation, logger: Logger) async throws {
        let schema = location.quotedSchema
        _ = try await conn.query(PostgresQuery(unsafeSQL: """
            CREATE SCHEMA IF NOT EXISTS \(schema);
            """), logger: logger).collect()
        _ = try await conn.query(PostgresQuery(unsafeSQL: "SET search_path TO \(schema)"), logger: logger).collect()
        // The same tables as SQLite (RelayStore), in PostgreSQL's types.
        for statement in [
            """
            CREATE TABLE IF NOT EXISTS queue (
                recipient_id BYTEA PRIMARY KEY,
                sender_id BYTEA NOT NULL UNIQUE,
                recipient_key BYTEA NOT NULL,
                box_key BYTEA NOT NULL,
                sender_key BYTEA,
                enabled BIGINT NOT NULL DEFAULT 1,
                link_id BYTEA UNIQUE,
                link_data BYTEA,
                created_at BIGINT NOT NULL,
                mode TEXT NOT NULL DEFAULT 'M' CHECK (mode IN ('M', 'C'))
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS message (
                seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
                recipient_id BYTEA NOT NULL REFERENCES queue(recipient_id) ON DELETE CASCADE,
                message_id BYTEA NOT NULL,
                created_at BIGINT NOT NULL,
                flags BIGINT NOT NULL,
                body BYTEA NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS message_by_queue ON message(recipient_id, seq)",
            "CREATE INDEX IF NOT EXISTS message_by_time ON message(created_at)",
        ] {
            _ = try await conn.query(PostgresQuery(unsafeSQL: statement), logger: logger).collect()
        }
    }

    // MARK: - Connections

    /// A connection opened when first needed and again after it was lost (the writer takes the
    /// schema's lock again, so a relay that lost its connection while another took over fails
    /// its writes rather than writing beside it).
    final class Connection: Sendable {
        let location: PostgresLocation
        let group: any EventLoopGroup
        let logger: Logger
        let isWriter: Bool
        private let current = NIOLockedValueBox<PostgresConnection?>(nil)
        private let connecting = NIOLockedValueBox<Task<PostgresConnection, Error>?>(nil)

        init(location: PostgresLocation, group: any EventLoopGroup, logger: Logger, isWriter: Bool) {
            self.location = location
            self.group = group
            self.logger = logger
            self.isWriter = isWriter
        }

        func get() async throws -> PostgresConnection {
            if let c = current.withLockedValue({ $0 }), !c.isClosed { return c }
            let task = connecting.withLockedValue { t -> Task<PostgresConnection, Error> in
                if let t { return t }
                let new = Task { [self] in try await connect() }
                t = new
                return new
            }
            defer { connecting.withLockedValue { if $0 == task { $0 = nil } } }
            let c = try await task.value
            current.withLockedValue { $0 = c }
            return c
        }

        private func connect() async throws -> PostgresConnection {
            let config = try location.connectionConfiguration()
            let c = try await PostgresConnection.connect(on: group.next(), configuration: config, id: isWriter ? 1 : 2, logger: logger).get()
            do {
                if isWriter, current.withLockedValue({ $0 }) != nil {
                    // A reconnect: the schema's lock again (the first is taken by `migrate`).
                    let locked = try await c.query("SELECT pg_try_advisory_lock(hashtext(\(location.schema)))", logger: logger).collect()
                    guard let row = locked.first, try row.decode(Bool.self) else {
                        throw RelayServerError(.database, "another relay took over the schema \(location.schema) of \(location)")
                    }
                }
                _ = try await c.query(PostgresQuery(unsafeSQL: "SET search_path TO \(location.quotedSchema)"), logger: logger).collect()
            } catch {
                try? await c.close()
                throw error
            }
            return c
        }

        func close() async {
            let c = current.withLockedValue { c -> PostgresConnection? in defer { c = nil }; return c }
            try? await c?.close()
        }
    }

    // MARK: - Group commit

    private func submit<T: Sendable>(owner: UInt64 = GroupCommit.globalOwner, bytes: Int = 0,
                                     _ body: @escaping @Sendable (PostgresConnection) async throws -> T,
                                     completion: @escaping @Sendable (Result<T, Error>) -> Void) {
        let result = NIOLockedValueBox<T?>(nil)
        let op = Operation(
            run: { conn in result.withLockedValue { $0 = nil }; let v = try await body(conn); result.withLockedValue { $0 = v } },
            complete: { error in
                if let error { completion(.failure(error)) } else { completion(.success(result.withLockedValue { $0! })) }
            }
        )
        let startDrain = pending.withLockedValue { state -> Bool in
            state.append(op, bytes: bytes, owner: owner)
            if state.draining { return false }
            state.draining = true
            return true
        }
        if startDrain { Task { await self.drain() } }
    }

    private func perform<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { cont in
            submit(body) { cont.resume(with: $0) }
        }
    }

    private func drain() async {
        while true {
            let batch = pending.withLockedValue { state -> [GroupCommitSchedule<Operation>.Operation] in
                let ops = state.nextBatch()
                if ops.isEmpty { state.draining = false }
                return ops
            }
            if batch.isEmpty { return }
            var errors = [Error?](repeating: nil, count: batch.count)
            do {
                let conn = try await writer.get()
                do {
                    _ = try await conn.query("BEGIN", logger: logger)
                    for op in batch { try await op.payload.run(conn) }
                    _ = try await conn.query("COMMIT", logger: logger)
                } catch {
                    // PostgreSQL aborted the group: each operation again, in a transaction of its
                    // own (autocommit), so that only the failing ones fail.
                    _ = try? await conn.query("ROLLBACK", logger: logger)
                    for (i, op) in batch.enumerated() {
                        do { try await op.payload.run(conn) } catch { errors[i] = error }
                    }
                }
            } catch {
                for i in errors.indices where errors[i] == nil { errors[i] = error }
            }
            for (i, op) in batch.enumerated() { op.payload.complete(errors[i].map { Self.storeError($0) }) }
        }
    }

    private static func storeError(_ error: Error) -> Error {
        error is RelayServerError ? error : RelayServerError(.database, "PostgreSQL: \(describe(error))")
    }

    /// Runs a read on a reader connection, concurrently with the writer.
    private func read<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T,
                                   completion: @escaping @Sendable (Result<T, Error>) -> Void) {
        let reader = readers[nextReader.withLockedValue { n in defer { n = (n + 1) % readers.count }; return n }]
        Task {
            do { completion(.success(try await body(try await reader.get()))) } catch { completion(.failure(Self.storeError(error))) }
        }
    }

    package func barrier() async {
        _ = try? await perform { _ in () }
    }

    package func closeStore() async throws {
        await writer.close()
        for r in readers { await r.close() }
    }

    // MARK: - Statements

    private static func buffer(_ bytes: [UInt8]) -> ByteBuffer { ByteBuffer(bytes: bytes) }
    private static func bytes(_ buffer: ByteBuffer?) -> [UInt8]? { buffer.map { Array($0.readableBytesView) } }

    package func loadAll() async throws -> (LoadedQueues, [[UInt8]: (count: Int, bytes: Int)]) {
        throw RelayServerError(.database, "the PostgreSQL store loads queues on demand")
    }

    package func totals() async throws -> RelayStoreTotals {
        try await perform { [logger] conn in
            let q = try await conn.query("SELECT COUNT(*) FROM queue", logger: logger).collect()
            let m = try await conn.query("SELECT COUNT(*), COALESCE(SUM(octet_length(body)), 0)::BIGINT FROM message", logger: logger).collect()
            var (n, bytes): (Int64, Int64) = (0, 0)
            if let row = m.first { (n, bytes) = try row.decode((Int64, Int64).self) }
            return RelayStoreTotals(queues: Int(try q.first?.decode(Int64.self) ?? 0), messages: Int(n), bytes: Int(bytes))
        }
    }

    package func loadQueue(_ key: QueueKey, owner: UInt64, completion: @escaping @Sendable (Result<LoadedQueue?, Error>) -> Void) {
        submit(owner: owner, { [logger] conn -> LoadedQueue? in
            let rows: [PostgresRow]
            switch key {
            case let .recipient(id):
                rows = try await conn.query("""
                    SELECT recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, link_id, mode FROM queue WHERE recipient_id = \(Self.buffer(id))
                    """, logger: logger).collect()
            case let .sender(id):
                rows = try await conn.query("""
                    SELECT recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, link_id, mode FROM queue WHERE sender_id = \(Self.buffer(id))
                    """, logger: logger).collect()
            }
            guard let row = rows.first else { return nil }
            let (rid, sid, rk, box, sk, enabled, link, modeText) = try row.decode(
                (ByteBuffer, ByteBuffer, ByteBuffer, ByteBuffer, ByteBuffer?, Int64, ByteBuffer?, String).self)
            let ridBytes = Self.bytes(rid)!
            let counts = try await conn.query("""
                SELECT COUNT(*), COALESCE(SUM(octet_length(body)), 0)::BIGINT FROM message WHERE recipient_id = \(rid)
                """, logger: logger).collect()
            var (n, bytes): (Int64, Int64) = (0, 0)
            if let row = counts.first { (n, bytes) = try row.decode((Int64, Int64).self) }
            let idLength = RelayLimits.entityIdLength
            let sidBytes = Self.bytes(sid)!, rkBytes = Self.bytes(rk)!, skBytes = Self.bytes(sk), linkBytes = Self.bytes(link)
            guard ridBytes.count == idLength, sidBytes.count == idLength, rkBytes.count == 33, enabled == 0 || enabled == 1,
                  let mode = QueueMode(letter: modeText), skBytes.map({ $0.count == 33 }) ?? true, linkBytes.map({ $0.count == idLength }) ?? true
            else { return LoadedQueue(queue: nil, count: Int(n), bytes: Int(bytes)) }
            let q = StoredQueue(recipientId: ridBytes, senderId: sidBytes, recipientKey: rkBytes, boxKey: Self.bytes(box)!, senderKey: skBytes,
                                enabled: enabled == 1, linkId: linkBytes, mode: mode)
            return LoadedQueue(queue: q, count: Int(n), bytes: Int(bytes))
        }, completion: completion)
    }

    package func insertQueue(_ q: StoredQueue, now: Int64, owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, { [logger] conn in
            _ = try await conn.query("""
                INSERT INTO queue (recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, created_at, mode)
                VALUES (\(Self.buffer(q.recipientId)), \(Self.buffer(q.senderId)), \(Self.buffer(q.recipientKey)), \(Self.buffer(q.boxKey)),
                        \(q.senderKey.map(Self.buffer)), 1, \(now), \(q.mode.letter))
                """, logger: logger).collect()
        }, completion: completion)
    }

    package func setSenderKey(recipientId: [UInt8], key: [UInt8], owner: UInt64, completion: @escaping @Sendable (Result<Bool, Error>) -> Void) {
        submit(owner: owner, { [logger] conn in
            let rows = try await conn.query("""
                UPDATE queue SET sender_key = \(Self.buffer(key))
                WHERE recipient_id = \(Self.buffer(recipientId)) AND sender_key IS NULL AND enabled = 1 AND mode = 'M' RETURNING 1
                """, logger: logger).collect()
            return !rows.isEmpty
        }, completion: completion)
    }

    package func disable(recipientId: [UInt8], owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, { [logger] conn in
            _ = try await conn.query("UPDATE queue SET enabled = 0 WHERE recipient_id = \(Self.buffer(recipientId))", logger: logger).collect()
        }, completion: completion)
    }

    package func deleteQueue(recipientId: [UInt8], owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, { [logger] conn in
            _ = try await conn.query("DELETE FROM queue WHERE recipient_id = \(Self.buffer(recipientId))", logger: logger).collect()
        }, completion: completion)
    }

    package func setLink(recipientId: [UInt8], linkId: [UInt8]?, data: [UInt8]?, owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, bytes: data?.count ?? 0, { [logger] conn in
            _ = try await conn.query("""
                UPDATE queue SET link_id = \(linkId.map(Self.buffer)), link_data = \(data.map(Self.buffer)) WHERE recipient_id = \(Self.buffer(recipientId))
                """, logger: logger).collect()
        }, completion: completion)
    }

    package func insertMessage(recipientId: [UInt8], id: [UInt8], timestamp: Int64, flags: UInt8, body: [UInt8], owner: UInt64,
                               completion: @escaping @Sendable (Result<Int64, Error>) -> Void) {
        submit(owner: owner, bytes: body.count, { [logger] conn in
            let rows = try await conn.query("""
                INSERT INTO message (recipient_id, message_id, created_at, flags, body)
                VALUES (\(Self.buffer(recipientId)), \(Self.buffer(id)), \(timestamp), \(Int64(flags)), \(Self.buffer(body))) RETURNING seq
                """, logger: logger).collect()
            guard let seq = try rows.first?.decode(Int64.self) else { throw RelayServerError(.database, "no sequence number returned") }
            return seq
        }, completion: completion)
    }

    package func deleteMessage(seq: Int64, owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        submit(owner: owner, { [logger] conn in
            _ = try await conn.query("DELETE FROM message WHERE seq = \(seq)", logger: logger).collect()
        }, completion: completion)
    }

    package func deleteExpired(before cutoff: Int64, completion: @escaping @Sendable (Result<[ExpiredMessage], Error>) -> Void) {
        submit({ [logger] conn in
            let rows = try await conn.query("""
                DELETE FROM message WHERE created_at < \(cutoff) RETURNING recipient_id, seq, octet_length(body)::BIGINT
                """, logger: logger).collect()
            return try rows.map { row in
                let (rid, seq, bytes) = try row.decode((ByteBuffer, Int64, Int64).self)
                return ExpiredMessage(recipientId: Self.bytes(rid)!, seq: seq, bytes: Int(bytes))
            }
        }, completion: completion)
    }

    package func oldestMessage(recipientId: [UInt8], after: Int64, notBefore: Int64,
                               completion: @escaping @Sendable (Result<StoredMessage?, Error>) -> Void) {
        read({ [logger] conn in
            let rows = try await conn.query("""
                SELECT seq, message_id, created_at, flags, body FROM message
                WHERE recipient_id = \(Self.buffer(recipientId)) AND seq > \(after) AND created_at >= \(notBefore) ORDER BY seq LIMIT 1
                """, logger: logger).collect()
            guard let row = rows.first else { return nil }
            let (seq, id, ts, flags, body) = try row.decode((Int64, ByteBuffer, Int64, Int64, ByteBuffer).self)
            let idBytes = Self.bytes(id)!
            // A damaged row is delivered as an empty message rather than trapping the relay (as on SQLite).
            return StoredMessage(seq: seq, id: idBytes.count == RelayLimits.entityIdLength ? idBytes : [UInt8](repeating: 0, count: RelayLimits.entityIdLength),
                                 timestamp: ts, flags: UInt8(truncatingIfNeeded: flags), body: Self.bytes(body)!)
        }, completion: completion)
    }

    package func linkData(linkId: [UInt8], completion: @escaping @Sendable (Result<[UInt8]?, Error>) -> Void) {
        read({ [logger] conn in
            let rows = try await conn.query("SELECT link_data FROM queue WHERE link_id = \(Self.buffer(linkId)) AND enabled = 1", logger: logger).collect()
            return try rows.first.flatMap { Self.bytes(try $0.decode(ByteBuffer?.self)) }
        }, completion: completion)
    }

    // MARK: - Benchmarks and tests

    /// Benchmarks only: adds `count` queues in one statement on the server (ids from a hash of
    /// their number, every queue with the same valid keys), as fast as PostgreSQL inserts rows.
    package func insertSyntheticQueues(count: Int, recipientKey: [UInt8], boxKey: [UInt8]) async throws {
        try await perform { [logger] conn in
            _ = try await conn.query("""
                INSERT INTO queue (recipient_id, sender_id, recipient_key, box_key, enabled, created_at, mode)
                SELECT substring(sha256(int8send(i)) for 24), substring(sha256(int8send(-i)) for 24), \(Self.buffer(recipientKey)), \(Self.buffer(boxKey)), 1, 0, 'M'
                FROM generate_series(1::BIGINT, \(Int64(count))) AS i
                """, logger: logger).collect()
        }
    }

    /// Drops the schema and everything in it (benchmarks and tests clean up with it).
    package func dropSchema() async throws {
        try await perform { [logger, location] conn in
            _ = try await conn.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(location.quotedSchema) CASCADE"), logger: logger).collect()
        }
    }

    // MARK: - Copy

    package func copyCounts() async throws -> (queues: Int, messages: Int) {
        let counts = try await perform { [logger] conn in
            let q = try await conn.query("SELECT COUNT(*) FROM queue", logger: logger).collect()
            let m = try await conn.query("SELECT COUNT(*) FROM message", logger: logger).collect()
            return [Int(try q.first?.decode(Int64.self) ?? 0), Int(try m.first?.decode(Int64.self) ?? 0)]
        }
        return (counts[0], counts[1])
    }

    package func copyQueues(after: [UInt8]?, limit: Int) async throws -> [CopiedQueue] {
        try await perform { [logger] conn in
            let rows = try await conn.query("""
                SELECT recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, link_id, link_data, created_at, mode
                FROM queue WHERE recipient_id > \(Self.buffer(after ?? [])) ORDER BY recipient_id LIMIT \(Int64(limit))
                """, logger: logger).collect()
            return try rows.map { row in
                let (rid, sid, rk, box, sk, enabled, link, linkData, created, mode) = try row.decode(
                    (ByteBuffer, ByteBuffer, ByteBuffer, ByteBuffer, ByteBuffer?, Int64, ByteBuffer?, ByteBuffer?, Int64, String).self)
                return CopiedQueue(recipientId: Self.bytes(rid)!, senderId: Self.bytes(sid)!, recipientKey: Self.bytes(rk)!, boxKey: Self.bytes(box)!,
                                   senderKey: Self.bytes(sk), enabled: enabled, linkId: Self.bytes(link), linkData: Self.bytes(linkData),
                                   createdAt: created, mode: mode)
            }
        }
    }

    package func copyMessages(after: Int64, limit: Int) async throws -> [CopiedMessage] {
        try await perform { [logger] conn in
            let rows = try await conn.query("""
                SELECT seq, recipient_id, message_id, created_at, flags, body FROM message WHERE seq > \(after) ORDER BY seq LIMIT \(Int64(limit))
                """, logger: logger).collect()
            return try rows.map { row in
                let (seq, rid, id, created, flags, body) = try row.decode((Int64, ByteBuffer, ByteBuffer, Int64, Int64, ByteBuffer).self)
                return CopiedMessage(seq: seq, recipientId: Self.bytes(rid)!, messageId: Self.bytes(id)!, createdAt: created, flags: flags,
                                     body: Self.bytes(body)!)
            }
        }
    }

    /// Rows per multi-row `INSERT` (PostgreSQL takes at most 65,535 parameters per statement).
    static let copyRowsPerStatement = 500

    package func copyWrite(queues: [CopiedQueue], messages: [CopiedMessage]) async throws {
        try await perform { [logger] conn in
            _ = try await conn.query("BEGIN", logger: logger).collect()
            do {
                for chunk in stride(from: 0, to: queues.count, by: Self.copyRowsPerStatement) {
                    let rows = queues[chunk..<min(chunk + Self.copyRowsPerStatement, queues.count)]
                    var binds = PostgresBindings(capacity: rows.count * 10)
                    var values: [String] = []
                    for q in rows {
                        let n = binds.count
                        values.append("(" + (1...10).map { "$\(n + $0)" }.joined(separator: ", ") + ")")
                        binds.append(Self.buffer(q.recipientId)); binds.append(Self.buffer(q.senderId))
                        binds.append(Self.buffer(q.recipientKey)); binds.append(Self.buffer(q.boxKey))
                        binds.append(q.senderKey.map(Self.buffer)); binds.append(q.enabled)
                        binds.append(q.linkId.map(Self.buffer)); binds.append(q.linkData.map(Self.buffer))
                        binds.append(q.createdAt); binds.append(q.mode)
                    }
                    _ = try await conn.query(PostgresQuery(unsafeSQL: """
                        INSERT INTO queue (recipient_id, sender_id, recipient_key, box_key, sender_key, enabled, link_id, link_data, created_at, mode)
                        VALUES \(values.joined(separator: ", "))
                        """, binds: binds), logger: logger).collect()
                }
                for chunk in stride(from: 0, to: messages.count, by: Self.copyRowsPerStatement) {
                    let rows = messages[chunk..<min(chunk + Self.copyRowsPerStatement, messages.count)]
                    var binds = PostgresBindings(capacity: rows.count * 6)
                    var values: [String] = []
                    for m in rows {
                        let n = binds.count
                        values.append("(" + (1...6).map { "$\(n + $0)" }.joined(separator: ", ") + ")")
                        binds.append(m.seq); binds.append(Self.buffer(m.recipientId)); binds.append(Self.buffer(m.messageId))
                        binds.append(m.createdAt); binds.append(m.flags); binds.append(Self.buffer(m.body))
                    }
                    _ = try await conn.query(PostgresQuery(unsafeSQL: """
                        INSERT INTO message (seq, recipient_id, message_id, created_at, flags, body) VALUES \(values.joined(separator: ", "))
                        """, binds: binds), logger: logger).collect()
                }
                // New messages continue after the copied ones.
                _ = try await conn.query("SELECT setval(pg_get_serial_sequence('message', 'seq'), GREATEST((SELECT MAX(seq) FROM message), 1))",
                                     logger: logger).collect()
                _ = try await conn.query("COMMIT", logger: logger).collect()
            } catch {
                _ = try? await conn.query("ROLLBACK", logger: logger)
                throw RelayServerError(.database, "PostgreSQL: \(Self.describe(error))")
            }
        }
    }

    package func copyClear() async throws {
        try await perform { [logger] conn in
            _ = try await conn.query("BEGIN", logger: logger).collect()
            _ = try await conn.query("DELETE FROM message", logger: logger).collect()
            _ = try await conn.query("DELETE FROM queue", logger: logger).collect()
            _ = try await conn.query("COMMIT", logger: logger).collect()
        }
    }
}

extension PostgresLocation {
    /// The schema a relay's store uses when its URL names none.
    package static let relayDefaultSchema = "swiftplex_relay"

    /// A relay's `--store` (or `store copy`) URL: the shared parser (``PostgresLocation``), its
    /// errors as ``RelayServerError`` `.configuration`.
    package static func relay(url: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> PostgresLocation {
        do { return try PostgresLocation(url: url, defaultSchema: relayDefaultSchema, environment: environment) } catch let e as SQLError {
            throw RelayServerError(.configuration, e.message)
        }
    }
}
