import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import SwiftplexSQL
import SwiftplexBase

/// A schema of a PostgreSQL database as an ``SQLStore`` (docs/postgres.md, "The engine's
/// backend").
///
/// - **One thread, one connection.** Every transaction's closure runs on the store's own thread
///   (never a NIO event loop, never the Swift cooperative pool), on the store's one connection;
///   each statement waits there for its reply. Transactions of one store run one after another.
/// - **`write`** is `BEGIN … COMMIT` (`BEGIN` sent with the first statement; a write that runs
///   none costs nothing), `ROLLBACK` when the closure throws. PostgreSQL aborts a transaction at
///   its first failing statement: later statements of it fail at once, and a closure that catches
///   the error and returns still has its write rolled back and gets an error (never a silent
///   half-commit). **`read`** runs its statements without a transaction: no other process writes
///   the schema (the lock below) and this store's writes are serialised with its reads on the one
///   connection, so they see one state; a statement that would write is refused in a read.
/// - **Statements** are written in SQLite's SQL with `?` and translated once per SQL text
///   (``PostgresTranslation``). Integers and text are sent as text without a type, so the server
///   types them from where they stand, as it types literals (an integer compared with a text
///   column, a text inserted into a BIGINT column — as SQLite takes them); reals go as
///   `float8`, blobs as `bytea`, NULL untyped. Results map to ``SQLValue``: int2/4/8 and oid →
///   integer, bool → 0/1, float4/8 → real, numeric → integer when whole and in range else real,
///   text, varchar, char, name, json and jsonb → text, bytea → blob.
/// - **The schema** (created if missing) is the connection's `search_path`, and the store holds a
///   session advisory lock on its name for as long as it is open: a second store (another
///   process) on the same schema waits up to `lockWait` and fails with ``SQLError`` `.locked`.
/// - **A lost connection** fails the statement and the transaction under way with `.connection`
///   (nothing is retried: the caller cannot know whether a COMMIT it did not hear back from
///   happened); the next transaction reconnects, takes the lock again (`.locked` if another
///   process took over meanwhile) and sets the `search_path`.
/// - **Migrations** are applied in order, each in its own transaction, and recorded in
///   `swiftplex_migrations`; a database with a migration this program does not know is refused.
public final class PostgresStore: SQLStore {
    public let location: PostgresLocation
    public var dialect: SQLDialect { .postgres }
    private let worker: StoreThread
    private let session: PostgresSession

    /// Connects, takes the schema's lock (waiting up to `lockWait` for another process to let it
    /// go), creates the schema if missing and applies `migrations`. Blocks the calling thread
    /// until done. Throws ``SQLError``: `.connection` (server unreachable, authentication failed,
    /// no such database), `.locked` (another process holds the schema), `.migration`.
    ///
    /// `label` names the store's thread (`sql-pg-<label>`).
    public convenience init(location: PostgresLocation, label: String, migrations: [SQLMigration], lockWait: Duration = .seconds(10),
                            eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                            logger: Logger = Logger(label: "swiftplex.sql.postgres")) throws {
        try self.init(location: location, label: label, readingOnly: false, migrations: migrations, lockWait: lockWait,
                      eventLoopGroup: eventLoopGroup, logger: logger)
    }

    private init(location: PostgresLocation, label: String, readingOnly: Bool, migrations: [SQLMigration], lockWait: Duration,
                 eventLoopGroup: any EventLoopGroup, logger: Logger) throws {
        self.location = location
        worker = StoreThread(name: "sql-pg-\(label)")
        let session = PostgresSession(location: location, group: eventLoopGroup, logger: logger, readingOnly: readingOnly)
        self.session = session
        do {
            try worker.runAndWait {
                if readingOnly { try session.openReadingOnly() } else { try session.open(lockWait: lockWait, migrations: migrations) }
            }
        } catch {
            _ = try? worker.runAndWait { session.shutdown() }
            worker.stop()
            throw error
        }
    }

    /// The same, from a connection string (``PostgresLocation``; `defaultSchema` when it names none).
    public convenience init(url: String, defaultSchema: String = "swiftplex", label: String, migrations: [SQLMigration],
                            lockWait: Duration = .seconds(10)) throws {
        try self.init(location: try PostgresLocation(url: url, defaultSchema: defaultSchema), label: label, migrations: migrations, lockWait: lockWait)
    }

    /// The same as ``init(location:label:migrations:lockWait:eventLoopGroup:logger:)`` for an async
    /// caller: the waiting (connecting, the lock, migrations) happens on a thread of its own, not
    /// on the caller's task.
    public static func open(location: PostgresLocation, label: String, migrations: [SQLMigration], lockWait: Duration = .seconds(10),
                            eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                            logger: Logger = Logger(label: "swiftplex.sql.postgres")) async throws -> PostgresStore {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result {
                    try PostgresStore(location: location, label: label, migrations: migrations, lockWait: lockWait,
                                      eventLoopGroup: eventLoopGroup, logger: logger)
                })
            }.start()
        }
    }

    /// An existing schema opened for reading only, beside the process that holds it (for
    /// monitoring: the host's outbox gauge): no lock is taken, nothing is created or migrated,
    /// `write` is refused and the server's `default_transaction_read_only` is on. Connects on a
    /// thread of its own, not on the caller's task. Throws ``SQLError`` `.connection`.
    public static func openReadingOnly(location: PostgresLocation, label: String,
                                       eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
                                       logger: Logger = Logger(label: "swiftplex.sql.postgres")) async throws -> PostgresStore {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result {
                    try PostgresStore(location: location, label: label, readingOnly: true, migrations: [], lockWait: .zero,
                                      eventLoopGroup: eventLoopGroup, logger: logger)
                })
            }.start()
        }
    }

    deinit {
        let session = self.session
        _ = worker.submit { session.shutdown() }
        worker.stop()
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await perform(write: false, body)
    }

    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await perform(write: true, body)
    }

    private func perform<T: Sendable>(write: Bool, _ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        let session = self.session
        if write, session.readingOnly { throw PostgresSession.readingOnlyError(location) }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, Error>) in
            let accepted = worker.submit {
                continuation.resume(with: Result { try session.transaction(write: write, body) })
            }
            if !accepted { continuation.resume(throwing: PostgresSession.closedError(location)) }
        }
    }

    public func readNow<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try blocking(write: false, body)
    }

    @discardableResult
    public func writeNow<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try blocking(write: true, body)
    }

    private func blocking<T>(write: Bool, _ body: (any SQLConnection) throws -> T) throws -> T {
        guard !worker.isCurrent else {
            throw SQLError(.statement, "a transaction of the store \(location) inside another of its transactions")
        }
        let session = self.session
        if write, session.readingOnly { throw PostgresSession.readingOnlyError(location) }
        return try worker.runAndWait { try session.transaction(write: write, body) }
    }

    /// Closes the connection (which lets the schema's lock go); later transactions fail with
    /// `.connection`.
    public func close() throws {
        let session = self.session
        if worker.isCurrent {
            session.shutdown()
        } else {
            _ = try? worker.runAndWait { session.shutdown() }
        }
        worker.stop()
    }
}

// MARK: - The store's thread

/// One thread running submitted jobs in order. A job may block (it waits for the server).
final class StoreThread: @unchecked Sendable {
    // `jobs` and `stopping` are guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [() -> Void] = []
    private var stopping = false
    private var thread: Thread!

    init(name: String) {
        let t = Thread { [self] in self.loop() }
        t.name = name
        thread = t
        t.start()
    }

    var isCurrent: Bool { Thread.current === thread }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty, !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
        }
    }

    /// Queues `job`; false once the thread was stopped.
    func submit(_ job: @escaping () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Runs `body` on the thread and waits for it (never call it on the thread itself).
    func runAndWait<T>(_ body: () throws -> T) throws -> T {
        precondition(!isCurrent, "runAndWait on the store's own thread")
        Blocking.willWait("a PostgreSQL store's blocking call (runAndWait)")
        return try withoutActuallyEscaping(body) { body in
            // The job holds the closure only through `box`, which lets it go before the caller
            // resumes (so the closure does not outlive this call).
            let box = RunBox<T>(body)
            let done = DispatchSemaphore(value: 0)
            guard submit({
                box.run()
                done.signal()
            }) else { throw PostgresSession.closedError(nil) }
            done.wait()
            return try box.result!.get()
        }
    }

    /// Lets the thread end once the jobs already queued ran.
    func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }
}

private final class RunBox<T> {
    var body: (() throws -> T)?
    var result: Result<T, Error>?

    init(_ body: @escaping () throws -> T) { self.body = body }

    func run() {
        guard let body else { return }
        result = Result { try body() }
        self.body = nil
    }
}

// MARK: - The connection's state (on the store's thread only)

/// What the store's thread owns: the connection, the statement cache, whether the store is
/// closed. Touched only on that thread (hence unchecked).
final class PostgresSession: @unchecked Sendable {
    let location: PostgresLocation
    let group: any EventLoopGroup
    let logger: Logger
    private var connection: PostgresConnection?
    private var closed = false
    private var statements: [String: PostgresTranslation.Statement] = [:]
    private var lastConnectionID = 0

    /// How many translated statements are kept (SQL texts made with varying parts come and go).
    static let statementCacheSize = 2048

    /// Opened for reading only (``PostgresStore/openReadingOnly(location:label:eventLoopGroup:logger:)``):
    /// no lock, no migrations, writes refused.
    let readingOnly: Bool

    init(location: PostgresLocation, group: any EventLoopGroup, logger: Logger, readingOnly: Bool = false) {
        self.location = location
        self.group = group
        self.logger = logger
        self.readingOnly = readingOnly
    }

    static func closedError(_ location: PostgresLocation?) -> SQLError {
        SQLError(.connection, "the PostgreSQL store \(location.map { "\($0) " } ?? "")is closed")
    }

    static func readingOnlyError(_ location: PostgresLocation) -> SQLError {
        SQLError(.statement, "the PostgreSQL store \(location) was opened for reading only")
    }

    /// Connects and sets the `search_path` and read-only transactions; takes no lock, creates
    /// nothing (a schema that does not exist fails the first statement naming its tables).
    func openReadingOnly() throws {
        let conn = try connect()
        connection = conn
        _ = try raw(conn, "SET search_path TO \(location.quotedSchema)")
        _ = try raw(conn, "SET default_transaction_read_only = on")
    }

    // MARK: Opening

    func open(lockWait: Duration, migrations: [SQLMigration]) throws {
        let conn = try connect()
        connection = conn
        let deadline = ContinuousClock.now + lockWait
        while try !tryLock(conn) {
            guard ContinuousClock.now < deadline else {
                throw SQLError(.locked, "another process holds the schema \(location.schema) of \(location) (one store per schema; "
                    + "it is free again once that process closes its store or exits)")
            }
            Thread.sleep(forTimeInterval: 0.2)
        }
        let exists = try raw(conn, "SELECT 1 FROM pg_namespace WHERE nspname = '\(location.schema)'")
        if exists.isEmpty {
            _ = try raw(conn, "CREATE SCHEMA IF NOT EXISTS \(location.quotedSchema)")
        }
        _ = try raw(conn, "SET search_path TO \(location.quotedSchema)")
        try migrate(migrations)
    }

    private func tryLock(_ conn: PostgresConnection) throws -> Bool {
        // The same key as the relay's store: a relay and an engine never share a schema either.
        let rows = try raw(conn, "SELECT pg_try_advisory_lock(hashtext('\(location.schema)'))")
        return rows.first?.values.first == .integer(1)
    }

    private func connect() throws -> PostgresConnection {
        let configuration: PostgresConnection.Configuration
        do { configuration = try location.connectionConfiguration() } catch {
            throw SQLError(.connection, "cannot set up TLS for PostgreSQL \(location): \(error)")
        }
        lastConnectionID += 1
        do {
            return try PostgresConnection.connect(on: group.next(), configuration: configuration, id: lastConnectionID, logger: logger).wait()
        } catch {
            throw SQLError(.connection, "cannot connect to PostgreSQL \(location): \(Self.describe(error))")
        }
    }

    /// The open connection, or a new one after it was lost (with the schema's lock taken again
    /// and the `search_path` set).
    func connected() throws -> PostgresConnection {
        if closed { throw Self.closedError(location) }
        if let c = connection, !c.isClosed { return c }
        if let lost = connection {
            connection = nil
            try? lost.close().wait()
        }
        let c = try connect()
        if readingOnly {
            do {
                _ = try raw(c, "SET search_path TO \(location.quotedSchema)")
                _ = try raw(c, "SET default_transaction_read_only = on")
            } catch {
                try? c.close().wait()
                throw error
            }
            connection = c
            return c
        }
        do {
            guard try tryLock(c) else {
                throw SQLError(.locked, "another process took over the schema \(location.schema) of \(location) while the connection was lost")
            }
            _ = try raw(c, "SET search_path TO \(location.quotedSchema)")
        } catch {
            try? c.close().wait()
            throw error
        }
        connection = c
        return c
    }

    func shutdown() {
        closed = true
        if let c = connection {
            connection = nil
            // The schema's lock goes now, not when the server notices the closed connection: a
            // store opened on the schema right after this one closed finds it free.
            _ = try? c.query(PostgresQuery(unsafeSQL: "SELECT pg_advisory_unlock_all()"), logger: logger).wait()
            try? c.close().wait()
        }
    }

    // MARK: Transactions

    func transaction<T>(write: Bool, _ body: (any SQLConnection) throws -> T) throws -> T {
        _ = try connected()
        let c = PostgresSQLConnection(session: self, write: write)
        defer { c.valid = false }
        let value: T
        do {
            value = try body(c)
        } catch {
            if c.began { rollback() }
            throw error
        }
        if let failure = c.failure {
            if c.began { rollback() }
            throw SQLError(failure.code, "the transaction was rolled back: a statement in it failed (\(failure.message))")
        }
        if c.began {
            try c.settleBegin()
            _ = try run(PostgresTranslation.Statement(sql: "COMMIT", parameterCount: 0, isReadOnly: false), [])
        }
        return value
    }

    private func rollback() {
        guard let c = connection, !c.isClosed else { return }
        _ = try? c.query(PostgresQuery(unsafeSQL: "ROLLBACK"), logger: logger).wait()
    }

    /// The translation of `sql`, cached.
    func translated(_ sql: String) throws -> PostgresTranslation.Statement {
        if let s = statements[sql] { return s }
        let s: PostgresTranslation.Statement
        do { s = try PostgresTranslation.statement(sql) } catch {
            throw SQLError(.statement, "not translated to PostgreSQL: \(error.message) — in: \(Self.excerpt(sql))")
        }
        if statements.count >= Self.statementCacheSize { statements.removeAll(keepingCapacity: true) }
        statements[sql] = s
        return s
    }

    /// Runs one translated statement with its arguments.
    func run(_ statement: PostgresTranslation.Statement, _ arguments: [SQLValue]) throws -> PostgresQueryResult {
        guard arguments.count == statement.parameterCount else {
            throw SQLError(.statement, "\(statement.parameterCount) placeholders but \(arguments.count) arguments — in: \(Self.excerpt(statement.sql))")
        }
        let conn = try current()
        var binds = PostgresBindings(capacity: arguments.count)
        for a in arguments {
            switch a {
            case .null: binds.appendNull()
            case let .integer(i): binds.append(UntypedText(String(i)))
            case let .real(d): binds.append(d)
            case let .text(s): binds.append(UntypedText(s))
            case let .blob(b): binds.append(ByteBuffer(bytes: b))
            }
        }
        do {
            return try conn.query(PostgresQuery(unsafeSQL: statement.sql, binds: binds), logger: logger).wait()
        } catch {
            throw failure(error, conn: conn, sql: statement.sql)
        }
    }

    /// Sends a statement of the store's own without waiting for its reply (postgres-nio runs a
    /// connection's statements in the order they were sent): `BEGIN` goes with a write's first
    /// statement, and the thread wakes once for both.
    func send(_ sql: String) throws -> (PostgresConnection, EventLoopFuture<PostgresQueryResult>) {
        let conn = try current()
        return (conn, conn.query(PostgresQuery(unsafeSQL: sql), logger: logger))
    }

    /// Waits for a statement sent with ``send(_:)``.
    func settle(_ sent: (PostgresConnection, EventLoopFuture<PostgresQueryResult>), sql: String) throws {
        do { _ = try sent.1.wait() } catch { throw failure(error, conn: sent.0, sql: sql) }
    }

    /// A statement of the store's own (no translation, no arguments), as rows.
    private func raw(_ conn: PostgresConnection, _ sql: String) throws -> [SQLRow] {
        do {
            return try Self.rows(try conn.query(PostgresQuery(unsafeSQL: sql), logger: logger).wait())
        } catch let e as SQLError {
            throw e
        } catch {
            throw failure(error, conn: conn, sql: sql)
        }
    }

    /// A script as written (an explicit PostgreSQL migration): PostgreSQL's simple protocol runs
    /// all of its statements.
    func rawScript(_ sql: String) throws {
        let statements: [String]
        do throws(PostgresTranslationError) { statements = try PostgresTranslation.split(sql) } catch {
            throw SQLError(.statement, "cannot split the script into statements: \(error.message)")
        }
        let conn = try current()
        for statement in statements {
            do { _ = try conn.query(PostgresQuery(unsafeSQL: statement), logger: logger).wait() } catch { throw failure(error, conn: conn, sql: statement) }
        }
    }

    /// The connection of the transaction under way: never a new one (a transaction does not go
    /// on, on another connection, after its own was lost).
    private func current() throws -> PostgresConnection {
        if closed { throw Self.closedError(location) }
        guard let c = connection, !c.isClosed else {
            throw SQLError(.connection, "lost the connection to PostgreSQL \(location) during the transaction")
        }
        return c
    }

    /// The error for a failed statement; a lost connection is dropped (the next transaction
    /// makes a new one).
    private func failure(_ error: Error, conn: PostgresConnection, sql: String) -> SQLError {
        if Self.isConnectionLoss(error) || conn.isClosed {
            if connection === conn {
                connection = nil
                try? conn.close().wait()
            }
            return SQLError(.connection, "lost the connection to PostgreSQL \(location): \(Self.describe(error))")
        }
        return SQLError(Self.isTransient(error) ? .transient : .statement, "\(Self.describe(error)) — in: \(Self.excerpt(sql))")
    }

    /// The server's faults that go away by themselves (the work is to be retried): a
    /// serialization failure or deadlock (class 40), insufficient resources — the disk full, out
    /// of memory, too many connections (class 53) —, a server read-only for a while (a standby
    /// not yet promoted, 25006), a lock not available (55P03), the server starting up (57P03).
    static func isTransient(_ error: Error) -> Bool {
        guard let e = error as? PSQLError, let state = e.serverInfo?[.sqlState] else { return false }
        return state.hasPrefix("40") || state.hasPrefix("53") || ["25006", "55P03", "57P03"].contains(state)
    }

    static func isConnectionLoss(_ error: Error) -> Bool {
        guard let e = error as? PSQLError else { return true }
        switch e.code {
        case .serverClosedConnection, .uncleanShutdown, .connectionError, .clientClosedConnection: return true
        case .server:
            let severity = e.serverInfo?[.severity] ?? ""
            let state = e.serverInfo?[.sqlState] ?? ""
            return severity == "FATAL" || severity == "PANIC" || state.hasPrefix("08") || state.hasPrefix("57P")
        default: return false
        }
    }

    /// A PostgreSQL error with the server's message (postgres-nio's description hides it); no
    /// error of the server or of the network carries the password.
    static func describe(_ error: Error) -> String {
        if let e = error as? PSQLError {
            if let info = e.serverInfo, let message = info[.message] {
                let detail = info[.detail].map { " (\($0))" } ?? ""
                let state = info[.sqlState].map { " [\($0)]" } ?? ""
                return message + detail + state
            }
            if let underlying = e.underlying { return "\(underlying)" }
            return "\(e.code)"
        }
        return "\(error)"
    }

    static func excerpt(_ sql: String) -> String {
        let flat = sql.split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
        return flat.count > 200 ? String(flat.prefix(200)) + "…" : flat
    }

    // MARK: Results

    static func rows(_ result: PostgresQueryResult) throws -> [SQLRow] {
        guard let first = result.rows.first else { return [] }
        let columns = SQLColumns(first.map(\.columnName))
        return try result.rows.map { row in
            SQLRow(columns: columns, values: try row.map { try value($0) })
        }
    }

    /// A cell (postgres-nio asks for every column in binary) as an ``SQLValue``.
    static func value(_ cell: PostgresCell) throws -> SQLValue {
        guard var b = cell.bytes else { return .null }
        func bad() -> SQLError {
            SQLError(.column, "column \(cell.columnName) holds a malformed \(cell.dataType) value")
        }
        switch cell.dataType {
        case .bool:
            guard let v = b.readInteger(as: UInt8.self) else { throw bad() }
            return .integer(v == 0 ? 0 : 1)
        case .int2:
            guard let v = b.readInteger(as: Int16.self) else { throw bad() }
            return .integer(Int64(v))
        case .int4:
            guard let v = b.readInteger(as: Int32.self) else { throw bad() }
            return .integer(Int64(v))
        case .int8:
            guard let v = b.readInteger(as: Int64.self) else { throw bad() }
            return .integer(v)
        case .oid:
            guard let v = b.readInteger(as: UInt32.self) else { throw bad() }
            return .integer(Int64(v))
        case .float4:
            guard let v = b.readInteger(as: UInt32.self) else { throw bad() }
            return .real(Double(Float(bitPattern: v)))
        case .float8:
            guard let v = b.readInteger(as: UInt64.self) else { throw bad() }
            return .real(Double(bitPattern: v))
        case .numeric:
            guard let v = numeric(&b) else { throw bad() }
            return v
        case .text, .varchar, .bpchar, .name, .json, .char, .unknown:
            return .text(b.readString(length: b.readableBytes) ?? "")
        case .jsonb:
            guard b.readInteger(as: UInt8.self) == 1 else { throw bad() }
            return .text(b.readString(length: b.readableBytes) ?? "")
        case .bytea:
            return .blob(Array(b.readableBytesView))
        default:
            if cell.format == .text { return .text(b.readString(length: b.readableBytes) ?? "") }
            throw SQLError(.column, "column \(cell.columnName) is of PostgreSQL type \(cell.dataType), which has no SQLValue "
                + "(cast it to bigint, double precision, text or bytea)")
        }
    }

    /// PostgreSQL's binary numeric: an integer when whole and within Int64, else a real.
    static func numeric(_ b: inout ByteBuffer) -> SQLValue? {
        guard let count = b.readInteger(as: Int16.self), let weight = b.readInteger(as: Int16.self),
              let sign = b.readInteger(as: UInt16.self), let scale = b.readInteger(as: Int16.self) else { return nil }
        if sign == 0xC000 { return .real(.nan) }
        if sign == 0xD000 { return .real(.infinity) }
        if sign == 0xF000 { return .real(-.infinity) }
        var digits: [Int16] = []
        for _ in 0..<max(0, Int(count)) {
            guard let d = b.readInteger(as: Int16.self) else { return nil }
            digits.append(d)
        }
        func group(_ position: Int) -> Int16 {
            let i = Int(weight) - position
            return digits.indices.contains(i) ? digits[i] : 0
        }
        var integer = ""
        if weight >= 0 {
            for p in stride(from: Int(weight), through: 0, by: -1) {
                let g = String(group(p))
                integer += integer.isEmpty ? g : String(repeating: "0", count: 4 - g.count) + g
            }
        }
        if integer.isEmpty { integer = "0" }
        var fraction = ""
        var p = -1
        while fraction.count < Int(scale) {
            let g = String(group(p))
            fraction += String(repeating: "0", count: 4 - g.count) + g
            p -= 1
        }
        fraction = String(fraction.prefix(Int(scale)))
        let negative = sign == 0x4000
        if fraction.allSatisfy({ $0 == "0" }), let v = Int64((negative ? "-" : "") + integer) { return .integer(v) }
        return Double((negative ? "-" : "") + integer + (fraction.isEmpty ? "" : "." + fraction)).map { .real($0) }
    }

    // MARK: Migrations

    /// What a migration runs on PostgreSQL.
    enum MigrationStep {
        /// A script written for PostgreSQL: run as written.
        case postgres(String)
        /// A script in SQLite's SQL: translated.
        case sqlite(String)
        /// Statements of its own (through the translating connection).
        case code(@Sendable (any SQLConnection) throws -> Void)
        /// A script in SQLite's SQL, then statements of its own, in one transaction.
        case sqliteThenCode(String, @Sendable (any SQLConnection) throws -> Void)
    }

    /// A script for each dialect runs its `postgres` script as written (translated when it is the
    /// same text as the `sqlite` one); SQLite's SQL alone is translated.
    static func step(of migration: SQLMigration) -> MigrationStep {
        switch migration.step {
        case let .scripts(sqlite, postgres): postgres == sqlite ? .sqlite(sqlite) : .postgres(postgres)
        case let .sqlite(script): .sqlite(script)
        case let .code(body): .code(body)
        case let .sqliteThenCode(script, body): .sqliteThenCode(script, body)
        }
    }

    private static func translatedScript(_ script: String, of m: SQLMigration) throws -> [PostgresTranslation.Statement] {
        do throws(PostgresTranslationError) { return try PostgresTranslation.script(script) } catch {
            throw SQLError(.migration, "migration \(m.identifier.debugDescription) is not translated to PostgreSQL: \(error.message) (give it a postgres script)")
        }
    }

    private func migrate(_ migrations: [SQLMigration]) throws {
        guard let conn = connection else { throw Self.closedError(location) }
        _ = try raw(conn, "CREATE TABLE IF NOT EXISTS swiftplex_migrations (identifier TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        let applied = Set(try raw(conn, "SELECT identifier FROM swiftplex_migrations").map { try $0.get(0, as: String.self) })
        let known = Set(migrations.map(\.identifier))
        if let unknown = applied.subtracting(known).sorted().first {
            throw SQLError(.migration, "the schema \(location.schema) of \(location) was migrated by a newer program (migration \(unknown.debugDescription) is unknown here)")
        }
        for m in migrations where !applied.contains(m.identifier) {
            try transaction(write: true) { db in
                let c = db as! PostgresSQLConnection
                do {
                    switch Self.step(of: m) {
                    case let .postgres(script):
                        try c.begin()
                        try c.settleBegin()
                        try rawScript(script)
                    case let .sqlite(script):
                        for s in try Self.translatedScript(script, of: m) { try c.run(s, []) }
                    case let .code(body):
                        try body(c)
                    case let .sqliteThenCode(script, body):
                        for s in try Self.translatedScript(script, of: m) { try c.run(s, []) }
                        try body(c)
                    }
                } catch let e as SQLError where e.code != .migration {
                    throw SQLError(e.code == .statement ? .migration : e.code, "migration \(m.identifier.debugDescription) failed on PostgreSQL: \(e.message)")
                }
                try c.execute("INSERT INTO swiftplex_migrations (identifier, applied_at) VALUES (?, ?)", [
                    .text(m.identifier), .text(Date.ISO8601FormatStyle().format(Date())),
                ])
            }
        }
    }
}

/// A text parameter sent without a type: the server types it from where it stands, as it types
/// a literal.
private struct UntypedText: PostgresDynamicTypeEncodable {
    let value: String
    init(_ value: String) { self.value = value }
    var psqlType: PostgresDataType { PostgresDataType(0) }
    var psqlFormat: PostgresFormat { .text }
    func encode<JSONEncoder: PostgresJSONEncoder>(into byteBuffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        byteBuffer.writeString(value)
    }
}

// MARK: - The connection a transaction's closure gets

final class PostgresSQLConnection: SQLConnection {
    let session: PostgresSession
    let write: Bool
    var valid = true
    /// `BEGIN` was sent (a write's first statement).
    private(set) var began = false
    /// The first statement that failed (PostgreSQL aborted the transaction there).
    private(set) var failure: SQLError?
    /// The rows the last INSERT, UPDATE or DELETE inserted, changed or deleted.
    private(set) var changesCount = 0

    init(session: PostgresSession, write: Bool) {
        self.session = session
        self.write = write
    }

    var dialect: SQLDialect { .postgres }

    /// `BEGIN` sent, its reply not yet awaited.
    private var pendingBegin: (PostgresConnection, EventLoopFuture<PostgresQueryResult>)?

    /// Sends `BEGIN` (a write's first statement follows it at once); ``settleBegin()`` waits for it.
    func begin() throws {
        guard write, !began else { return }
        pendingBegin = try session.send("BEGIN")
        began = true
    }

    /// Waits for `BEGIN`'s reply, if it is still due.
    func settleBegin() throws {
        guard let sent = pendingBegin else { return }
        pendingBegin = nil
        do { try session.settle(sent, sql: "BEGIN") } catch let e as SQLError {
            failure = failure ?? e
            throw e
        }
    }

    @discardableResult
    func run(_ statement: PostgresTranslation.Statement, _ arguments: [SQLValue]) throws -> PostgresQueryResult {
        guard valid else { throw SQLError(.statement, "a connection used after its transaction ended") }
        // `ROLLBACK TO [SAVEPOINT] name` is what PostgreSQL still takes in an aborted transaction,
        // and it ends the abort.
        let rollsBackToSavepoint = statement.sql.prefix(12).uppercased().hasPrefix("ROLLBACK TO ")
        if let failure, !rollsBackToSavepoint {
            throw SQLError(failure.code, "an earlier statement of this transaction failed (PostgreSQL aborts the whole transaction): \(failure.message)")
        }
        if !write, !statement.isReadOnly {
            throw SQLError(.statement, "a statement that writes, in a read — in: \(PostgresSession.excerpt(statement.sql))")
        }
        do {
            try begin()
            let outcome = Result { try session.run(statement, arguments) }
            try settleBegin()
            let result = try outcome.get()
            if rollsBackToSavepoint { failure = nil }
            switch result.metadata.command {
            case "INSERT", "UPDATE", "DELETE", "MERGE": changesCount = result.metadata.rows ?? 0
            default: break
            }
            return result
        } catch let e as SQLError {
            // Only a transaction is aborted by a failing statement: a read's next one runs.
            if began { failure = failure ?? e }
            throw e
        }
    }

    @discardableResult
    func execute(_ sql: String, _ arguments: [SQLValue]) throws -> Int {
        let result = try run(try session.translated(sql), arguments)
        switch result.metadata.command {
        case "INSERT", "UPDATE", "DELETE", "MERGE": return result.metadata.rows ?? 0
        default: return 0
        }
    }

    func rows(_ sql: String, _ arguments: [SQLValue]) throws -> [SQLRow] {
        try PostgresSession.rows(try run(try session.translated(sql), arguments))
    }

    func executeScript(_ sql: String) throws {
        let statements: [PostgresTranslation.Statement]
        do { statements = try PostgresTranslation.script(sql) } catch {
            throw SQLError(.statement, "not translated to PostgreSQL: \(error.message) — in: \(PostgresSession.excerpt(sql))")
        }
        for s in statements { try run(s, []) }
    }
}
