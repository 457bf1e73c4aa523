import Foundation
import SwiftplexSQL
import SwiftplexSQLPostgres
import TestSupport
import Testing

/// The SQL layer's contract, for every backend: SQLite, and PostgreSQL when a server was given
/// (``TestPostgres``; each test on a schema of its own).
@Suite struct SQLStoreTests {
    static let migrations = [
        SQLMigration("v1", sqlite: """
            CREATE TABLE item (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE, n INTEGER, x REAL, data BLOB);
            """, postgres: """
            CREATE TABLE item (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, n BIGINT, x DOUBLE PRECISION, data BYTEA);
            """),
        // The same SQL for both: PostgreSQL runs it translated.
        SQLMigration("v2", sqlite: "ALTER TABLE item ADD COLUMN note TEXT", postgres: "ALTER TABLE item ADD COLUMN note TEXT"),
    ]

    /// A fresh store of each backend, and how to open the same database again.
    static func backends(_ dir: TemporaryDirectory) throws -> [(name: String, open: () throws -> any SQLStore)] {
        let path = dir.url.appendingPathComponent("t.db")
        var backends: [(name: String, open: () throws -> any SQLStore)] = [("sqlite", { try SQLiteStore(path: path, label: "t", migrations: migrations) })]
        TestPostgres.noteSkippedOnce()
        if let url = TestPostgres.url() {
            backends.append(("postgres", { try PostgresStore(url: url, label: "t", migrations: migrations, lockWait: .zero) }))
        }
        return backends
    }

    @Test func valuesOfEveryKindRoundTrip() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        for backend in try Self.backends(dir) {
            let store = try backend.open()
            let blob: [UInt8] = [0, 1, 0xFF, 0x80, 0]
            let id = try await store.write { db in
                try db.insert("INSERT INTO item (name, n, x, data, note) VALUES (?, ?, ?, ?, ?)", "a", Int64.max, 2.5, blob, String?.none)
            }
            let row = try #require(try await store.read { db in try db.row("SELECT id, name, n, x, data, note FROM item WHERE id = ?", id) })
            #expect(try row.get("id", as: Int64.self) == id)
            #expect(try row.get("name", as: String.self) == "a")
            #expect(try row.get("n", as: Int64.self) == Int64.max)
            #expect(try row.get("x", as: Double.self) == 2.5)
            #expect(try row.get("data", as: [UInt8].self) == blob)
            #expect(try row.get("note", as: String?.self) == nil)
            // NULL is not a String, and a name that is not a column is a typed error.
            #expect(throws: SQLError.self) { try row.get("note", as: String.self) }
            #expect(throws: SQLError.self) { try row.get("nope", as: String?.self) }
            #expect(throws: SQLError.self) { try row.get("name", as: Int64.self) }
            #expect(try store.readNow { try $0.value(Int.self, "SELECT COUNT(*) FROM item") } == 1, "\(backend.name)")
            try store.close()
        }
    }

    /// Statements are prepared once per SQL text and kept: a statement that failed runs again,
    /// empty text and blobs stay empty (not NULL), a wrong number of arguments is a typed error,
    /// and a cached `SELECT *` sees a column added after it was first run.
    @Test func cachedStatementsStayCorrect() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        for backend in try Self.backends(dir) {
            let store = try backend.open()
            let insert = "INSERT INTO item (name, data, note) VALUES (?, ?, ?)"
            try await store.write { db in try db.execute(insert, "", [UInt8](), "") }
            await #expect(throws: SQLError.self) { try await store.write { db in try db.execute(insert, "", [UInt8](), "") } }  // UNIQUE
            try await store.write { db in try db.execute(insert, "b", [UInt8]([1]), String?.none) }
            await #expect(throws: SQLError.self) { try await store.write { db in try db.execute(insert, "c") } }
            let rows = try await store.read { db in try db.rows("SELECT * FROM item ORDER BY id") }
            #expect(rows.map { try? $0.get("name", as: String.self) } == ["", "b"], "\(backend.name)")
            #expect(try rows[0].get("data", as: [UInt8].self) == [], "\(backend.name)")
            #expect(try rows[0].get("note", as: String?.self) == "", "\(backend.name)")
            #expect(try rows[1].get("note", as: String?.self) == nil, "\(backend.name)")
            try await store.write { db in try db.execute("ALTER TABLE item ADD COLUMN extra TEXT", [SQLValue]()) }
            try await store.write { db in try db.execute("UPDATE item SET extra = ? WHERE name = ?", "x", "b") }
            let again = try await store.read { db in try db.rows("SELECT * FROM item ORDER BY id") }
            #expect(try again[1].get("extra", as: String?.self) == "x", "\(backend.name)")
            try store.close()
        }
    }

    @Test func aThrowingWriteChangesNothing() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        struct Stop: Error {}
        for backend in try Self.backends(dir) {
            let store = try backend.open()
            try await store.write { db in try db.execute("INSERT INTO item (name, n) VALUES (?, ?)", "kept", 1) }
            await #expect(throws: Stop.self) {
                try await store.write { db in
                    try db.execute("UPDATE item SET n = ? WHERE name = ?", 2, "kept")
                    try db.execute("INSERT INTO item (name) VALUES (?)", "gone")
                    throw Stop()
                }
            }
            // A statement the database refuses is a typed error and rolls back the transaction too.
            await #expect(throws: SQLError.self) {
                try await store.write { db in
                    try db.execute("UPDATE item SET n = ? WHERE name = ?", 3, "kept")
                    try db.execute("INSERT INTO item (name) VALUES (?)", "kept")  // UNIQUE
                }
            }
            let rows = try await store.read { db in try db.rows("SELECT name, n FROM item ORDER BY id") }
            #expect(rows.count == 1, "\(backend.name)")
            #expect(try rows.first?.get("n", as: Int.self) == 1)
            try store.close()
        }
    }

    @Test func migrationsRunOnceAndTheFileIsPrivate() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        for backend in try Self.backends(dir) {
            var store = try backend.open()
            try await store.write { db in try db.execute("INSERT INTO item (name, note) VALUES (?, ?)", "a", "v2 ran") }
            try store.close()
            // Opening again applies nothing twice (v1's CREATE TABLE would fail) and keeps the rows.
            store = try backend.open()
            #expect(try await store.read { db in try db.value(String.self, "SELECT note FROM item WHERE name = ?", "a") } == "v2 ran")
            try store.close()
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: dir.url.appendingPathComponent("t.db").path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }

    @Test func greatestAndUpsertInEveryDialect() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        for backend in try Self.backends(dir) {
            let store = try backend.open()
            for n in [5, 3, 9, 7] {
                try await store.write { db in
                    try db.execute("""
                        INSERT INTO item (name, n) VALUES (?, ?)
                        ON CONFLICT(name) DO UPDATE SET n = \(db.dialect.greatest("item.n", "excluded.n"))
                        """, "mark", n)
                }
            }
            #expect(try await store.read { db in try db.value(Int.self, "SELECT n FROM item WHERE name = ?", "mark") } == 9, "\(backend.name)")
            try store.close()
        }
    }
}
