import Foundation
import SwiftplexSQL
import SwiftplexSQLPostgres
import TestSupport
import Testing

/// The query interface the engine's stores are written in (records, requests, raw statements),
/// on every backend `QueryInterfaceTests.backends` opens.
@Suite struct QueryInterfaceTests {
    enum Mood: String, Codable, SQLValueConvertible { case calm, busy }

    /// A table named by a PostgreSQL keyword, with an id the database makes.
    struct Person: Codable, Equatable, FetchableRecord, MutablePersistableRecord {
        static let databaseTableName = "user"
        static func databaseColumnName(forKey key: String) -> String { key == "displayName" ? "display_name" : key }
        var id: Int64?
        var displayName: String
        var active: Bool
        var mood: Mood
        var key: Data?
        var seq: UInt64
        mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
        enum Columns {
            static let id = Column("id")
            static let displayName = Column("display_name")
            static let active = Column("active")
            static let key = Column("key")
        }
    }

    /// A composite key and no id.
    struct Tag: Codable, Equatable, FetchableRecord, PersistableRecord {
        static let databaseTableName = "tag"
        static let databasePrimaryKey = ["person", "name"]
        var person: Int64
        var name: String
        var weight: Int
    }

    static let migrations = [
        SQLMigration("v1", sql: """
            CREATE TABLE "user" (id INTEGER PRIMARY KEY AUTOINCREMENT, display_name TEXT NOT NULL, active INTEGER NOT NULL,
                                 mood TEXT NOT NULL, key BLOB, seq INTEGER NOT NULL);
            CREATE TABLE tag (person INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE, name TEXT NOT NULL,
                              weight INTEGER NOT NULL, PRIMARY KEY (person, name));
            """),
        SQLMigration("v2: data", sql: "SELECT 1") { db in
            try db.execute(sql: "INSERT INTO \"user\" (display_name, active, mood, seq) VALUES (?, ?, ?, ?)", arguments: ["root", true, Mood.calm, 0])
        },
    ]

    /// A fresh store of each backend.
    static func backends(_ dir: TemporaryDirectory) throws -> [(name: String, store: any SQLStore)] {
        var stores: [(name: String, store: any SQLStore)] = [("sqlite", try SQLiteStore(path: dir.url.appendingPathComponent("q.db"), label: "q", migrations: migrations))]
        TestPostgres.noteSkippedOnce()
        if let url = TestPostgres.url() {
            stores.append(("postgres", try PostgresStore(url: url, label: "q", migrations: migrations, lockWait: .zero)))
        }
        return stores
    }

    @Test func recordsRoundTripAndTakeTheirIds() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        for (name, store) in try Self.backends(dir) {
            let alice = try await store.write { db in
                var p = Person(id: nil, displayName: "alice", active: true, mood: .busy, key: Data([0, 0xFF]), seq: UInt64.max)
                try p.insert(db)
                return p
            }
            let id = try #require(alice.id, "\(name)")
            #expect(id == 2, "the migration's row is 1")
            #expect(try await store.read { db in try Person.fetchOne(db, key: id) } == alice, "\(name)")
            #expect(try await store.read { db in try Person.filter(Person.Columns.key == nil).fetchAll(db).map(\.displayName) } == ["root"])
            #expect(try await store.read { db in try Person.filter(Person.Columns.key != nil).fetchCount(db) } == 1)

            // save updates a row that is there and inserts one that is not; update(columns:) only those.
            try await store.write { db in
                var changed = alice
                changed.displayName = "alice2"
                try changed.save(db)
                var fresh = Person(id: nil, displayName: "bob", active: false, mood: .calm, key: nil, seq: 7)
                try fresh.save(db)
                #expect(fresh.id == 3)
                fresh.displayName = "not written"
                fresh.seq = 8
                try fresh.update(db, columns: [Column("seq")])
            }
            let names = try await store.read { db in try Person.order(Person.Columns.id.desc).fetchAll(db).map { "\($0.displayName):\($0.seq)" } }
            #expect(names == ["bob:8", "alice2:\(UInt64.max)", "root:0"], "\(name)")
            try store.close()
        }
    }

    @Test func requestsFilterOrderLimitUpdateAndDelete() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        for (name, store) in try Self.backends(dir) {
            try await store.write { db in
                for n in ["a", "b", "c", "d"] { var p = Person(id: nil, displayName: n, active: n != "c", mood: .calm, key: nil, seq: 0); try p.insert(db) }
            }
            let page = try await store.read { db in
                try Person.filter(Person.Columns.active == true && Person.Columns.id > 1).order(Person.Columns.id.desc).limit(2).fetchAll(db).map(\.displayName)
            }
            #expect(page == ["d", "b"], "\(name)")
            #expect(try await store.read { db in try Person.filter([Int64(2), 4].contains(Person.Columns.id)).fetchCount(db) } == 2)
            #expect(try await store.read { db in try Person.filter([Int64]().contains(Person.Columns.id)).isEmpty(db) })
            #expect(try await store.read { db in try Person.filter(Person.Columns.displayName == "x" || !(Person.Columns.active == true)).fetchOne(db)?.displayName } == "c")
            #expect(try await store.read { db in try Person.select(max(Person.Columns.id), as: Int64?.self).fetchOne(db) } == .some(5))
            #expect(try await store.read { db in try Person.filter(Person.Columns.id > 99).select(min(Person.Columns.id), as: Int64?.self).fetchOne(db) } == .some(nil))

            let changed = try await store.write { db in try Person.filter(Person.Columns.active == false).updateAll(db, Person.Columns.active.set(to: true), Person.Columns.key.set(to: Data([1]))) }
            #expect(changed == 1)
            #expect(try await store.read { db in try Person.filter(Person.Columns.active == false).isEmpty(db) })
            #expect(try await store.write { db in try Person.deleteOne(db, key: Int64(5)) })
            #expect(try await store.write { db in try Person.deleteOne(db, key: Int64(5)) } == false)
            #expect(try await store.write { db in try Person.filter(Person.Columns.id >= 3).deleteAll(db) } == 2)
            #expect(try await store.read { db in try Person.fetchCount(db) } == 2, "\(name)")
            try store.close()
        }
    }

    @Test func compositeKeysConflictsAndChangeCounts() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        for (name, store) in try Self.backends(dir) {
            try await store.write { db in
                try Tag(person: 1, name: "x", weight: 1).insert(db)
                try Tag(person: 1, name: "x", weight: 2).insert(db, onConflict: .ignore)
                #expect(db.changesCount == 0, "\(name): ignored")
                try Tag(person: 1, name: "y", weight: 3).insert(db, onConflict: .ignore)
                #expect(db.changesCount == 1)
                try Tag(person: 1, name: "y", weight: 4).insert(db, onConflict: .replace)
            }
            await #expect(throws: SQLError.self) { try await store.write { db in try Tag(person: 1, name: "x", weight: 9).insert(db) } }
            let tags = try await store.read { db in try Tag.order(Column("name")).fetchAll(db) }
            #expect(tags == [Tag(person: 1, name: "x", weight: 1), Tag(person: 1, name: "y", weight: 4)], "\(name)")
            #expect(try await store.read { db in try Tag.fetchOne(db, key: ["person": Int64(1), "name": "y"])?.weight } == 4)
            #expect(try await store.write { db in try Tag.deleteOne(db, key: ["person": Int64(1), "name": "x"]) })
            await #expect(throws: RecordNotFound.self) { try await store.write { db in try Tag(person: 1, name: "x", weight: 0).update(db) } }
            try store.close()
        }
    }

    @Test func rawStatementsScriptsAndTypedFailures() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        for (name, store) in try Self.backends(dir) {
            try await store.write { db in
                // Two statements without arguments run as a script; a `;` at the end is one statement.
                try db.execute(sql: "INSERT INTO tag (person, name, weight) VALUES (1, 'a', 1); INSERT INTO tag (person, name, weight) VALUES (1, 'b', 2);")
                #expect(try db.execute(sql: "UPDATE tag SET weight = weight + 1;") == 2)
                let statement = try db.cachedStatement(sql: "UPDATE tag SET weight = ? WHERE name = ?")
                #expect(try statement.execute(arguments: [10, "a"]) == 1)
                #expect(try Int.fetchAll(db, sql: "SELECT weight FROM tag ORDER BY name") == [10, 3])
                let row = try #require(try SQLRow.fetchOne(db, sql: "SELECT name, weight FROM tag WHERE weight > ?", arguments: [5]))
                #expect(row["name"] as String == "a" && row[1] as Int == 10)
                #expect(try Mood.fetchOne(db, sql: "SELECT mood FROM \"user\" WHERE id = ?", arguments: [1]) == .calm)
                #expect(try String.fetchOne(db, sql: "SELECT key FROM \"user\" WHERE id = 1") == nil, "NULL is no value")
            }
            // A NOT NULL column given NULL: the transaction fails with a typed error and leaves nothing.
            await #expect(throws: SQLError.self) {
                try await store.write { db in
                    _ = try db.insert(sql: "INSERT INTO \"user\" (display_name, active, mood, seq) VALUES (?, ?, ?, ?)", arguments: ["z", true, Mood.busy, 1])
                    _ = try db.insert(sql: "INSERT INTO \"user\" (display_name, active, mood, seq) VALUES (?, ?, ?, ?)", arguments: ["z", nil, Mood.busy, 1])
                }
            }
            #expect(try await store.read { db in try Person.filter(Person.Columns.displayName == "z").isEmpty(db) }, "\(name)")
            // A column of another kind than the record's property is a typed error naming the column.
            try await store.write { db in try db.execute(sql: "UPDATE \"user\" SET mood = ? WHERE id = 1", arguments: [42]) }
            await #expect {
                try await store.read { db in try Person.fetchOne(db, key: Int64(1)) }
            } throws: { error in
                (error as? SQLError)?.code == .column && "\(error)".contains("mood")
            }
            try store.close()
        }
    }
}
