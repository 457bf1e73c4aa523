import Foundation
import GRDB
import SwiftplexSQL
import TestSupport
import Testing
@testable import ChatCore

/// Local display names on a real SQLite file: unique per user, as SimpleX's `display_names`.
@Suite struct LocalNamesTests {
    static let v2 = "v2: quotes, chat state, incognito, short links, receipts"

    func withStore(_ body: (any SQLStore) throws -> Void) throws {
        try withTemporaryDirectory(prefix: "swiftplex-names") { dir in
            let store = try ChatStore(path: dir.appendingPathComponent("test_chat.db"))
            try body(store.db)
        }
    }

    func addUser(_ db: any SQLConnection, _ name: String) throws -> Int64 {
        let id = try db.insert(sql: "INSERT INTO \"user\" (display_name, profile, active, created_at) VALUES (?, ?, 1, '2026-01-01T00:00:00.000Z')",
                               arguments: [name, #"{"displayName":"\#(name)","fullName":""}"#])
        _ = try LocalNames.reserve(db, userId: id, displayName: name)
        return id
    }

    @Test func secondAndThirdOfANameGetSuffixes() throws {
        try withStore { q in
            try q.writeNow { db in
                let u = try addUser(db, "bot")
                #expect(try LocalNames.reserve(db, userId: u, displayName: "alice") == "alice")
                #expect(try LocalNames.reserve(db, userId: u, displayName: "alice") == "alice_1")
                #expect(try LocalNames.reserve(db, userId: u, displayName: "alice") == "alice_2")
                // The user's own name is taken too.
                #expect(try LocalNames.reserve(db, userId: u, displayName: "bot") == "bot_1")
                // Another user has its own names.
                let other = try addUser(db, "other")
                #expect(try LocalNames.reserve(db, userId: other, displayName: "alice") == "alice")
            }
        }
    }

    @Test func aPeerChoosingASuffixedNameCannotCollide() throws {
        try withStore { q in
            try q.writeNow { db in
                let u = try addUser(db, "bot")
                #expect(try LocalNames.reserve(db, userId: u, displayName: "alice") == "alice")
                // Someone calls itself "alice_1" and "alice_2" outright…
                #expect(try LocalNames.reserve(db, userId: u, displayName: "alice_1") == "alice_1")
                #expect(try LocalNames.reserve(db, userId: u, displayName: "alice_2") == "alice_2")
                // …so the next "alice" skips both.
                #expect(try LocalNames.reserve(db, userId: u, displayName: "alice") == "alice_3")
                #expect(try LocalNames.reserve(db, userId: u, displayName: "alice_1") == "alice_1_1")
            }
        }
    }

    @Test func renamesKeepNamesUnique() throws {
        try withStore { q in
            try q.writeNow { db in
                let u = try addUser(db, "bot")
                let alice = try LocalNames.reserve(db, userId: u, displayName: "alice")
                let bob = try LocalNames.reserve(db, userId: u, displayName: "bob")
                // Same display name: the name stays.
                #expect(try LocalNames.rename(db, userId: u, current: bob, displayName: "bob") == "bob")
                // Bob renames to the taken "alice": alice_1, and "bob" is free again.
                #expect(try LocalNames.rename(db, userId: u, current: bob, displayName: "alice") == "alice_1")
                #expect(try LocalNames.reserve(db, userId: u, displayName: "bob") == "bob")
                // A rename to the bot's own name.
                #expect(try LocalNames.rename(db, userId: u, current: alice, displayName: "bot") == "bot_1")
                // A name once released can be taken by the next one asking for it.
                try LocalNames.release(db, userId: u, name: "bot_1")
                #expect(try LocalNames.reserve(db, userId: u, displayName: "bot") == "bot_1")
            }
        }
    }

    /// A database from before unique names (v2) with duplicate names is migrated: the first of
    /// each name keeps it, later ones get suffixes, the user's own name first.
    @Test func theMigrationDeduplicatesExistingRows() throws {
        let dir = TemporaryDirectory(prefix: "swiftplex-names")
        defer { dir.cleanup() }
        let path = dir.appendingPathComponent("old_chat.db").path
        do {
            let old = try DatabaseQueue(path: path)
            try SQLiteStore.migrator(ChatStore.migrations).migrate(old, upTo: Self.v2)
            try old.write { db in
                let ts = "2026-01-01T00:00:00.000Z"
                try db.execute(sql: "INSERT INTO user (id, display_name, profile, active, created_at) VALUES (1, 'bot', ?, 1, ?)",
                               arguments: [#"{"displayName":"bot","fullName":""}"#, ts])
                for (conn, name) in [(1, "alice"), (2, "alice"), (3, "bot"), (4, "alice")] {
                    try db.execute(sql: "INSERT INTO contact (user_id, agent_conn_id, profile, status, created_at, updated_at) VALUES (1, ?, ?, 'ready', ?, ?)",
                                   arguments: [conn, #"{"displayName":"\#(name)","fullName":""}"#, ts, ts])
                }
                try db.execute(sql: "INSERT INTO contact (user_id, agent_conn_id, profile, status, created_at, updated_at) VALUES (1, 5, NULL, 'pending', ?, ?)",
                               arguments: [ts, ts])
                try db.execute(sql: "INSERT INTO contact_request (user_id, agent_request_id, profile, created_at) VALUES (1, 1, ?, ?)",
                               arguments: [#"{"displayName":"alice","fullName":""}"#, ts])
            }
            try old.close()
        }
        let store = try ChatStore(path: URL(fileURLWithPath: path))
        try store.db.readNow { db in
            #expect(try String.fetchOne(db, sql: "SELECT local_display_name FROM user WHERE id = 1") == "bot")
            let contacts = try String?.fetchAll(db, sql: "SELECT local_display_name FROM contact ORDER BY id")
            #expect(contacts == ["alice", "alice_1", "bot_1", "alice_2", nil])
            #expect(try String.fetchOne(db, sql: "SELECT local_display_name FROM contact_request") == "alice_3")
        }
        let next = try store.db.writeNow { db in try LocalNames.reserve(db, userId: 1, displayName: "alice") }
        #expect(next == "alice_4")
    }
}
