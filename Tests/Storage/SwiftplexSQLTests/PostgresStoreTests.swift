import Foundation
import Agent
import ChatCore
import SwiftplexSQL
import SwiftplexSQLPostgres
import TestSupport
import Testing

/// The PostgreSQL store on a real server (`make test`'s throwaway PostgreSQL 15, ``TestPostgres``),
/// each test on a schema of its own: what SQLStoreTests' contract does not cover — PostgreSQL's
/// own types, the schema's lock, a lost connection, translation of the engine's migrations.
@Suite(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)))
struct PostgresStoreTests {
    static let migrations = [
        SQLStoreTests.same("v1", """
            CREATE TABLE item (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, n INTEGER, flag BOOLEAN NOT NULL DEFAULT FALSE,
                               x REAL, data BLOB, note TEXT);
            """),
    ]

    func open(_ url: String, migrations: [SQLMigration] = migrations) throws -> PostgresStore {
        try PostgresStore(url: url, label: "test", migrations: migrations, lockWait: .zero)
    }

    @Test func serverTypesMapToSQLValues() async throws {
        let store = try open(try #require(TestPostgres.url()))
        defer { try? store.close() }
        let row = try #require(try await store.read { db in
            try db.row("""
                SELECT 1::int2 AS a, 2::int4 AS b, 3::int8 AS c, true AS t, false AS f, 1.5::float4 AS g, 2.25::float8 AS h,
                       12345678901234::numeric AS n, -0.125::numeric AS m, SUM(x) AS s, 'x'::varchar(3) AS v, 'ab'::char(3) AS ch,
                       'n'::name AS nm, '{"a": 1}'::json AS j, '{"a": 1}'::jsonb AS jb, '\\x00ff'::bytea AS by, NULL::text AS z,
                       COUNT(*) AS cnt, '?' AS q
                FROM (VALUES (1::bigint), (2::bigint)) AS v(x)
                """)
        })
        #expect(row.values == [.integer(1), .integer(2), .integer(3), .integer(1), .integer(0), .real(1.5), .real(2.25),
                               .integer(12_345_678_901_234), .real(-0.125), .integer(3), .text("x"), .text("ab "), .text("n"),
                               .text("{\"a\": 1}"), .text("{\"a\": 1}"), .blob([0, 0xFF]), .null, .integer(2), .text("?")])
        await #expect(throws: SQLError.self) { try await store.read { db in try db.rows("SELECT now() AS t") } }
    }

    @Test func argumentsOfEveryKindRoundTripAndTakeTheirColumnsTypes() async throws {
        let store = try open(try #require(TestPostgres.url()))
        defer { try? store.close() }
        let blob = (0...255).map { UInt8($0) }
        for (name, n, x, text) in [("a", Int64.min, -1.5e300, "it's ? $1 \\ \"q\" ünï 🎉"), ("b", Int64.max, Double.infinity, "")] {
            let id = try await store.write { db in
                try db.insert("INSERT INTO item (name, n, flag, x, data, note) VALUES (?, ?, ?, ?, ?, ?)", name, n, true, x, blob, text)
            }
            let row = try #require(try await store.read { db in try db.row("SELECT n, flag, x, data, note FROM item WHERE id = ?", id) })
            #expect(row.values == [.integer(n), .integer(1), .real(x), .blob(blob), .text(text)])
        }
        // An integer where text stands and text where an integer stands, as SQLite takes them;
        // an integer compared with a real column; NULL tested with `? IS NULL`.
        let found = try await store.write { db -> [SQLRow] in
            try db.execute("UPDATE item SET note = ? WHERE name = ?", 42, "b")
            try db.execute("UPDATE item SET n = ? WHERE name = ?", "7", "b")
            return try db.rows("SELECT name FROM item WHERE note = ? AND n = ? AND x > ? AND (? IS NULL OR name = ?)", 42, 7, 0, String?.none, "x")
        }
        #expect(found.map { $0.values } == [[.text("b")]])
        // Arguments in an INSERT … SELECT take the target columns' types.
        try await store.write { db in try db.execute("INSERT INTO item (name, n, x) SELECT ?, ?, ? WHERE NOT EXISTS (SELECT 1 FROM item WHERE name = ?)", "c", 3, 1.5, "c") }
        #expect(try await store.read { try $0.value(Int.self, "SELECT n FROM item WHERE name = ?", "c") } == 3)
        // Statements return what they changed; `changesCount` follows.
        let changed = try await store.write { db -> [Int] in
            let updated = try db.execute("UPDATE item SET flag = ? WHERE flag = ? AND name <> ?", false, true, "c")
            let ignored = try db.execute("INSERT OR IGNORE INTO item (name) VALUES (?)", "a")
            let selected = try db.execute("SELECT 1")
            return [updated, ignored, selected]
        }
        #expect(changed == [2, 0, 0])
        #expect(try store.readNow { try $0.value(Int.self, "SELECT COUNT(*) FROM item WHERE flag = ?", 0) } == 3)
    }

    @Test func aFailedStatementRollsBackEvenWhenTheClosureCatchesIt() async throws {
        let store = try open(try #require(TestPostgres.url()))
        defer { try? store.close() }
        try await store.write { db in try db.execute("INSERT INTO item (name, n) VALUES (?, ?)", "kept", 1) }
        let error = await #expect(throws: SQLError.self) {
            try await store.write { db in
                try db.execute("UPDATE item SET n = ? WHERE name = ?", 2, "kept")
                _ = try? db.execute("INSERT INTO item (name) VALUES (?)", "kept")  // UNIQUE: the transaction is aborted
                try db.execute("UPDATE item SET n = ? WHERE name = ?", 3, "kept")
            }
        }
        #expect(error?.code == .statement)
        #expect(error?.message.contains("item_name_key") == true, "\(String(describing: error))")
        // Caught and returned: still rolled back, still an error.
        await #expect(throws: SQLError.self) {
            try await store.write { db in
                try db.execute("UPDATE item SET n = ? WHERE name = ?", 4, "kept")
                _ = try? db.execute("INSERT INTO item (name) VALUES (?)", "kept")
            }
        }
        #expect(try await store.read { try $0.value(Int.self, "SELECT n FROM item WHERE name = ?", "kept") } == 1)
        // A savepoint (which SQLite takes too) is the way to go on after a failing statement.
        try await store.write { db in
            try db.execute("UPDATE item SET n = ? WHERE name = ?", 5, "kept")
            try db.execute("SAVEPOINT duplicate")
            #expect(throws: SQLError.self) { try db.execute("INSERT INTO item (name) VALUES (?)", "kept") }
            try db.execute("ROLLBACK TO SAVEPOINT duplicate")
            try db.execute("RELEASE duplicate")
            try db.execute("UPDATE item SET n = n + 1 WHERE name = ?", "kept")
        }
        #expect(try await store.read { try $0.value(Int.self, "SELECT n FROM item WHERE name = ?", "kept") } == 6)
        try await store.write { db in try db.execute("UPDATE item SET n = ? WHERE name = ?", 1, "kept") }
        // A fault that passes (here: the transaction made read-only, as on a standby) is
        // `.transient`: the work is to be retried, not dropped.
        let readOnly = await #expect(throws: SQLError.self) {
            try await store.write { db in
                try db.execute("SET TRANSACTION READ ONLY")
                try db.execute("UPDATE item SET n = ? WHERE name = ?", 9, "kept")
            }
        }
        #expect(readOnly?.code == .transient && readOnly?.isTransient == true, "\(String(describing: readOnly))")
        // A read has no transaction to abort: after a failing statement the next one runs.
        #expect(try await store.read { db in
            #expect(throws: SQLError.self) { try db.rows("SELECT nothing FROM item") }
            return try db.value(Int.self, "SELECT n FROM item WHERE name = ?", "kept")
        } == 1)
        // A read does not write; the refusal does not spoil the next transaction.
        await #expect(throws: SQLError.self) { try await store.read { db in try db.execute("DELETE FROM item") } }
        #expect(try await store.read { try $0.value(Int.self, "SELECT COUNT(*) FROM item") } == 1)
        // Too few arguments, and SQL that is not translated: typed errors that name the statement.
        let missing = await #expect(throws: SQLError.self) { try await store.write { db in try db.execute("UPDATE item SET n = ? WHERE name = ?", 1) } }
        #expect(missing?.message.contains("2 placeholders but 1 arguments") == true)
        await #expect(throws: SQLError.self) { try await store.read { db in try db.rows("SELECT rowid FROM item") } }
    }

    @Test func transactionsFromManyTasksAndPlainThreadsRunOneAfterAnother() async throws {
        let store = try open(try #require(TestPostgres.url()))
        defer { try? store.close() }
        try await store.write { db in try db.execute("INSERT INTO item (name, n) VALUES (?, ?)", "counter", 0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            defer { group.cancelAll() }
            for _ in 0..<50 {
                group.addTask {
                    try await store.write { db in
                        let n = try db.value(Int.self, "SELECT n FROM item WHERE name = ?", "counter") ?? 0
                        try db.execute("UPDATE item SET n = ? WHERE name = ?", n + 1, "counter")
                    }
                }
            }
            try await group.waitForAll()
        }
        // And from plain threads with the blocking form.
        let done = AsyncInbox<Int>()
        for _ in 0..<4 {
            Thread {
                var failures = 0
                for _ in 0..<10 {
                    do {
                        try store.writeNow { db in
                            let n = try db.value(Int.self, "SELECT n FROM item WHERE name = ?", "counter") ?? 0
                            try db.execute("UPDATE item SET n = ? WHERE name = ?", n + 1, "counter")
                        }
                    } catch { failures += 1 }
                }
                done.yield(failures)
            }.start()
        }
        for _ in 0..<4 { #expect(try await done.next() == 0) }
        #expect(try await store.read { try $0.value(Int.self, "SELECT n FROM item WHERE name = ?", "counter") } == 90)
        // A transaction inside another of the same store is refused, not a deadlock.
        await #expect(throws: SQLError.self) { try await store.write { _ in try store.readNow { _ in 1 } } }
    }

    @Test func oneStorePerSchemaAndAStandbyTakesOverWhenTheFirstIsGone() async throws {
        let url = try #require(TestPostgres.url())
        let first = try open(url)
        let refused = #expect(throws: SQLError.self) { _ = try open(url) }
        #expect(refused?.code == .locked)
        #expect(refused?.message.contains("another process holds the schema") == true)
        try await first.write { db in try db.execute("INSERT INTO item (name) VALUES (?)", "first") }
        try first.close()
        await #expect(throws: SQLError.self) { try await first.read { db in try db.rows("SELECT 1") } }
        let second = try await PostgresStore.open(location: try PostgresLocation(url: url), label: "second", migrations: Self.migrations, lockWait: .zero)
        #expect(try await second.read { try $0.value(String.self, "SELECT name FROM item") } == "first")
        // A standby started while the schema is held waits, and takes over once the holder is gone.
        let admin = try open(try #require(TestPostgres.url()))
        defer { try? admin.close() }
        let schema = try PostgresLocation(url: url).schema
        let standby = Task { try await PostgresStore.open(location: try PostgresLocation(url: url), label: "standby", migrations: Self.migrations, lockWait: .seconds(30)) }
        // (No event says the standby tried and was refused: the server's view of its session does.)
        try await eventually("the standby to try the schema's lock") {
            try await admin.read { db in
                try db.value(Int.self, "SELECT COUNT(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND query LIKE ?",
                             "%pg_try_advisory_lock(hashtext('\(schema)'))%") ?? 0
            } >= 1
        }
        try second.close()
        let third = try await standby.value
        defer { try? third.close() }
        #expect(try await third.read { try $0.value(String.self, "SELECT name FROM item") } == "first")
        // Another schema of the same database is another store.
        let other = try open(try #require(TestPostgres.url()))
        try other.close()
    }

    @Test func aLostConnectionIsATypedErrorAndTheNextTransactionReconnects() async throws {
        let url = try #require(TestPostgres.url())
        let store = try open(url)
        defer { try? store.close() }
        let admin = try open(try #require(TestPostgres.url()))
        defer { try? admin.close() }
        let lost = await #expect(throws: SQLError.self) {
            try await store.write { db in
                try db.execute("INSERT INTO item (name) VALUES (?)", "lost")
                let pid = try db.value(Int64.self, "SELECT pg_backend_pid()") ?? 0
                // The server ends this store's session mid-transaction.
                #expect(try admin.readNow { try $0.value(Bool.self, "SELECT pg_terminate_backend(?, 5000)", pid) } == true)
                try db.execute("INSERT INTO item (name) VALUES (?)", "lost too")
            }
        }
        #expect(lost?.code == .connection, "\(String(describing: lost))")
        // The next transaction reconnects (and holds the schema's lock again): nothing of the
        // failed one is there.
        #expect(try await store.read { try $0.value(Int.self, "SELECT COUNT(*) FROM item") } == 0)
        try await store.write { db in try db.execute("INSERT INTO item (name) VALUES (?)", "after") }
        #expect(throws: SQLError.self) { _ = try open(url) }
    }

    @Test func connectionFailuresAreTypedAndCarryNoPassword() throws {
        let server = try #require(TestPostgres.serverURL)
        let refused = #expect(throws: SQLError.self) { _ = try open("postgresql://postgres:sekrit@127.0.0.1:1/postgres?schema=t") }
        #expect(refused?.code == .connection)
        #expect(refused?.message.contains("sekrit") == false)
        #expect(refused?.message.contains("cannot connect to PostgreSQL postgresql://postgres@127.0.0.1:1/postgres") == true, "\(String(describing: refused))")
        let base = try PostgresLocation(url: server)
        let noDatabase = #expect(throws: SQLError.self) {
            _ = try PostgresStore(location: try PostgresLocation(url: "postgresql://postgres:sekrit@\(base.host):\(base.port)/no_such_db"),
                                  label: "t", migrations: [], lockWait: .zero)
        }
        #expect(noDatabase?.code == .connection)
        #expect(noDatabase?.message.contains("does not exist") == true, "\(String(describing: noDatabase))")
        #expect(noDatabase?.message.contains("sekrit") == false)
        let noRole = #expect(throws: SQLError.self) {
            _ = try PostgresStore(location: try PostgresLocation(url: "postgresql://nobody@\(base.host):\(base.port)/postgres"),
                                  label: "t", migrations: [], lockWait: .zero)
        }
        #expect(noRole?.message.contains("role \"nobody\" does not exist") == true, "\(String(describing: noRole))")
    }

    @Test func migrationsAreRecordedAndANewerDatabaseIsRefused() async throws {
        let url = try #require(TestPostgres.url())
        var store = try open(url)
        try store.close()
        let v2 = Self.migrations + [SQLStoreTests.same("v2", "ALTER TABLE item ADD COLUMN extra BLOB")]
        store = try open(url, migrations: v2)
        #expect(try await store.read { try $0.rows("SELECT identifier FROM swiftplex_migrations ORDER BY identifier").map { try $0.get(0, as: String.self) } } == ["v1", "v2"])
        try store.close()
        let newer = #expect(throws: SQLError.self) { _ = try open(url) }
        #expect(newer?.code == .migration)
        #expect(newer?.message.contains("migrated by a newer program") == true)
        // A migration that fails names itself and leaves nothing behind; one that is not
        // translated says so.
        let failing = v2 + [SQLStoreTests.same("v3 bad", "ALTER TABLE item ADD COLUMN more TEXT; ALTER TABLE nothing ADD COLUMN x TEXT")]
        let failed = #expect(throws: SQLError.self) { _ = try open(url, migrations: failing) }
        #expect(failed?.code == .migration)
        #expect(failed?.message.contains("\"v3 bad\"") == true && failed?.message.contains("nothing") == true, "\(String(describing: failed))")
        let untranslated = v2 + [SQLStoreTests.same("v3 glob", "CREATE INDEX i ON item(name) WHERE name GLOB 'a*'")]
        let refused = #expect(throws: SQLError.self) { _ = try open(url, migrations: untranslated) }
        #expect(refused?.message.contains("\"v3 glob\" is not translated to PostgreSQL: GLOB") == true, "\(String(describing: refused))")
        store = try open(url, migrations: v2)
        defer { try? store.close() }
        await #expect(throws: SQLError.self) { try await store.read { try $0.rows("SELECT more FROM item") } }
        // An explicit PostgreSQL script runs as written.
        try store.close()
        let explicit = v2 + [SQLMigration("v3 pg", sqlite: "CREATE TABLE t (a INTEGER)", postgres: "CREATE TABLE t (a SMALLINT); COMMENT ON TABLE t IS 'pg'")]
        store = try open(url, migrations: explicit)
        #expect(try await store.read { try $0.value(String.self, "SELECT data_type::text FROM information_schema.columns WHERE table_name = 't' AND table_schema = current_schema()") } == "smallint")
    }

    /// Every migration of the chat and agent databases, translated, on a real server; then rows
    /// written the way the engine writes them.
    @Test func theEnginesMigrationsApplyAndTakeTheEnginesRows() async throws {
        let chat = try open(try #require(TestPostgres.url()), migrations: ChatController.databaseMigrations)
        defer { try? chat.close() }
        let agent = try open(try #require(TestPostgres.url()), migrations: Agent.databaseMigrations)
        defer { try? agent.close() }
        try await chat.write { db in
            let user = try db.insert("INSERT INTO user (display_name, profile, active, created_at) VALUES (?, ?, ?, ?)", "bot", "{}", true, "2026-11-24")
            let contact = try db.insert("""
                INSERT INTO contact (user_id, agent_conn_id, status, via_address, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
                """, user, 7, "ready", false, "t", "t")
            try db.execute("INSERT INTO chat_item (user_id, contact_id, sent, content, status, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                           user, contact, true, "{}", "sndNew", "t")
        }
        let row = try #require(try await chat.read { db in
            try db.row("SELECT u.active, u.send_receipts, c.via_address, i.sent, i.edited FROM user u JOIN contact c ON c.user_id = u.id JOIN chat_item i ON i.contact_id = c.id")
        })
        #expect(row.values == [.integer(1), .integer(1), .integer(0), .integer(1), .integer(0)])
        try await agent.write { db in
            let id = try db.insert("INSERT INTO connection (rcv_id, rcv_sender_id, state, status, rcv) VALUES (?, ?, X'', ?, ?)", [UInt8]([1]), [UInt8]([2]), "new", "{\"relay\": \"r\"}")
            try db.execute("INSERT OR IGNORE INTO inbox (connection_id, seq, body) VALUES (?, ?, ?)", id, 1, [UInt8]([9]))
            try db.execute("INSERT OR IGNORE INTO inbox (connection_id, seq, body) VALUES (?, ?, ?)", id, 1, [UInt8]([9]))
            try db.execute("INSERT INTO send_key (connection_id, key, seq, created_at) VALUES (?, ?, ?, ?)", id, "k", 5, 1_700_000_000)
        }
        #expect(try await agent.read { try $0.value(Int.self, "SELECT COUNT(*) FROM inbox") } == 1)
        #expect(try await agent.read { try $0.value(String.self, "SELECT json_extract(rcv, '$.relay') FROM connection") } == "r")
        #expect(try await agent.read { try $0.value([UInt8].self, "SELECT state FROM connection") } == [])
    }
}

extension SQLStoreTests {
    /// A migration in one SQL for both backends (PostgreSQL translates it).
    static func same(_ identifier: String, _ sql: String) -> SQLMigration { SQLMigration(identifier, sqlite: sql, postgres: sql) }
}
