import Agent
import ChatCore
import Foundation
@testable import SwiftplexSQL
import SwiftplexSQLPostgres
import TestSupport
import Testing

/// The schema as `SQLSchema` reads it (what `swiftplex store copy` copies), and `SQLStoreCopy`
/// between the backends: values of every kind byte for byte, id counters past deleted rows.
@Suite struct SQLStoreCopyTests {
    /// The tables the migrations' SQLite scripts leave (created, minus dropped, renamed): found
    /// here from the scripts, so that a migration adding a table is checked without a list.
    static func tablesMade(by migrations: [SQLMigration]) -> Set<String> {
        var tables: Set<String> = []
        for m in migrations {
            let script: String
            switch m.step {
            case let .scripts(sqlite, _), let .sqlite(sqlite), let .sqliteThenCode(sqlite, _): script = sqlite
            case .code: continue
            }
            for statement in script.split(separator: ";") {
                let words = statement.split(whereSeparator: { $0.isWhitespace || $0 == "(" }).map(String.init)
                let upper = words.map { $0.uppercased() }
                func name(_ i: Int) -> String { words[i].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
                if upper.starts(with: ["CREATE", "TABLE"]) {
                    tables.insert(name(upper.count > 4 && upper[2] == "IF" ? 5 : 2))
                } else if upper.starts(with: ["DROP", "TABLE"]) {
                    tables.remove(name(upper.count > 4 && upper[2] == "IF" ? 4 : 2))
                } else if upper.starts(with: ["ALTER", "TABLE"]), upper.count >= 6, upper[3] == "RENAME", upper[4] == "TO" {
                    tables.remove(name(2))
                    tables.insert(name(5))
                }
            }
        }
        return tables
    }

    @Test func theEnginesSchemasAreReadWholeAndAlikeOnBothBackends() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        TestPostgres.noteSkippedOnce()
        for (name, migrations) in [("chat", ChatController.databaseMigrations), ("agent", Agent.databaseMigrations)] {
            let sqlite = try SQLiteStore(path: dir.url.appendingPathComponent("\(name).db"), label: name, migrations: migrations)
            defer { try? sqlite.close() }
            let tables = try await sqlite.read { try SQLSchema.tables($0) }
            let made = Self.tablesMade(by: migrations)
            #expect(made.count > 3)
            #expect(Set(tables.map(\.name)) == made, "\(name): \(Set(tables.map(\.name)).symmetricDifference(made))")
            // Parents first; ids with counters found.
            for (i, t) in tables.enumerated() {
                #expect(t.references.isSubset(of: Set(tables[..<i].map(\.name))), "\(name).\(t.name) before its parents")
                #expect(!t.columns.isEmpty && !t.primaryKey.isEmpty, "\(name).\(t.name)")
            }
            #expect(tables.first { $0.name == (name == "chat" ? "contact" : "connection") }?.counterColumn == "id")
            guard let url = TestPostgres.url() else { continue }
            let pg = try PostgresStore(url: url, label: name, migrations: migrations, lockWait: .zero)
            defer { try? pg.close() }
            let theirs = try await pg.read { try SQLSchema.tables($0) }
            #expect(theirs.map(\.name) == tables.map(\.name))
            for (a, b) in zip(tables, theirs) {
                #expect(Set(a.columns) == Set(b.columns) && a.primaryKey == b.primaryKey && a.references == b.references, "\(name).\(a.name)")
                #expect(a.counterColumn == b.counterColumn && (b.counterColumn == nil) == (b.sequence == nil), "\(name).\(a.name)")
            }
        }
    }

    @Test func foreignKeysInACycleAreRefused() throws {
        let a = SQLTable(name: "a", columns: ["id"], primaryKey: ["id"], references: ["b"])
        let b = SQLTable(name: "b", columns: ["id"], primaryKey: ["id"], references: ["a"])
        let c = SQLTable(name: "c", columns: ["id"], primaryKey: ["id"], references: [])
        #expect(throws: SQLError.self) { try SQLSchema.dependencyOrder([a, b, c]) }
        let child = SQLTable(name: "a_child", columns: ["id"], primaryKey: ["id"], references: ["z_parent"])
        let parent = SQLTable(name: "z_parent", columns: ["id"], primaryKey: ["id"], references: [])
        #expect(try SQLSchema.dependencyOrder([child, parent]).map(\.name) == ["z_parent", "a_child"])
    }

    static let migrations = [
        SQLMigration("v1", sql: """
            CREATE TABLE parent (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, n INTEGER, x REAL, data BLOB);
            CREATE TABLE child (parent_id INTEGER NOT NULL REFERENCES parent(id) ON DELETE CASCADE, k TEXT NOT NULL, v BLOB,
                                PRIMARY KEY (parent_id, k)) WITHOUT ROWID;
            """),
    ]

    /// Every row, in an order of their own (text sorts differently on the two servers).
    static func rows(_ store: any SQLStore) async throws -> [[SQLValue]] {
        try await store.read { db in
            try db.rows("SELECT id, name, n, x, data FROM parent", [SQLValue]()).map(\.values)
                + db.rows("SELECT parent_id, k, v FROM child", [SQLValue]()).map(\.values)
        }.sorted { "\($0)" < "\($1)" }
    }

    @Test(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)))
    func valuesOfEveryKindGoBothWaysByteForByteAndIdsAreNotHandedOutAgain() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let files = try SQLiteStore(path: dir.url.appendingPathComponent("a.db"), label: "a", migrations: Self.migrations)
        defer { try? files.close() }
        let blobs: [[UInt8]] = [[], [0], [0, 0xFF, 0x5C, 0x27, 0], Array(0...255), [UInt8](repeating: 0x5C, count: 3000)]
        try await files.write { db in
            for (i, blob) in blobs.enumerated() {
                let id = try db.insert("INSERT INTO parent (name, n, x, data) VALUES (?, ?, ?, ?)", "p'\\\(i) ✓", i == 0 ? Int64.min : Int64.max - Int64(i), Double(i) / 3, blob)
                for k in ["a", "B", "ä", "a b"] { try db.execute("INSERT INTO child (parent_id, k, v) VALUES (?, ?, ?)", id, k, blob) }
            }
            try db.execute("INSERT INTO parent (name, n, x, data) VALUES ('nulls', NULL, NULL, NULL)", [SQLValue]())
            // The last two rows go: their ids are not to be handed out again.
            try db.execute("INSERT INTO parent (name) VALUES ('gone 1'), ('gone 2')", [SQLValue]())
            try db.execute("DELETE FROM parent WHERE name LIKE 'gone%'", [SQLValue]())
        }
        let pg = try PostgresStore(url: try #require(TestPostgres.url()), label: "b", migrations: Self.migrations, lockWait: .zero)
        defer { try? pg.close() }
        let copy = try await SQLStoreCopy.prepare(label: "t", from: files, to: pg)
        #expect(copy.tables.map(\.name) == ["parent", "child"] && copy.sourceTotal == 6 + 20 && copy.destinationTotal == 0)
        try await copy.copy(batch: 4) { _ in }
        let original = try await Self.rows(files)
        #expect(try await Self.rows(pg) == original)
        let next = try await pg.write { db in try db.insert("INSERT INTO parent (name) VALUES (?)", "new") }
        #expect(next == 9, "past the deleted rows' ids 7 and 8")

        // Back into a new file: the same rows and the same counter.
        let back = try SQLiteStore(path: dir.url.appendingPathComponent("back.db"), label: "back", migrations: Self.migrations)
        defer { try? back.close() }
        try await SQLStoreCopy.prepare(label: "t", from: pg, to: back).copy(batch: 1000) { _ in }
        #expect(try await Self.rows(back) == Self.rows(pg))
        #expect(try await back.write { db in try db.insert("INSERT INTO parent (name) VALUES (?)", "newer") } == 10)
        // A destination with rows says so (the caller refuses or clears it).
        let again = try await SQLStoreCopy.prepare(label: "t", from: pg, to: back)
        #expect(again.destinationTotal == 28)
        try await again.clearDestination()
        try await again.copy(batch: 7) { _ in }
        #expect(try await Self.rows(back) == Self.rows(pg))
    }
}
