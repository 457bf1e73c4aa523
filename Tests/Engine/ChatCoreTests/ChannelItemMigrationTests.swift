import Foundation
import GRDB
import SwiftplexSQL
import TestSupport
import Testing
@testable import ChatCore

/// Migration `channels 4: channel item authors` on a real SQLite file: a subscriber's posts as
/// the channel stored before it (kept under the relay that brought them) get their channel
/// author, so that the owner's later updates, deletions and reactions find them.
@Suite struct ChannelItemMigrationTests {
    static let ts = "2026-01-01T00:00:00.000Z"

    @Test func earlierChannelPostsGetTheirChannelAuthor() throws {
        let dir = TemporaryDirectory(prefix: "swiftplex-channel-items")
        defer { dir.cleanup() }
        let path = dir.appendingPathComponent("old_chat.db").path
        do {
            let old = try DatabaseQueue(path: path)
            try SQLiteStore.migrator(ChatStore.migrations).migrate(old, upTo: "channels 3: relay history, refused channels, subscriber counters, verified posts, channel actions")
            try SQLiteStore(wrapping: old).writeNow { db in
                let user = try db.insert(sql: "INSERT INTO \"user\" (display_name, profile, active, created_at) VALUES ('bot', ?, 1, ?)",
                                         arguments: [#"{"displayName":"bot","fullName":""}"#, Self.ts])
                let group = try db.insert(sql: "INSERT INTO chat_group (user_id, local_display_name, profile, created_at, updated_at) VALUES (?, 'g', '{}', ?, ?)",
                                          arguments: [user, Self.ts, Self.ts])
                var rows: [Int64] = []
                for (id, role) in [("cmVsYXk", "relay"), ("bWVtYmVy", "member")] {
                    rows.append(try db.insert(sql: """
                        INSERT INTO group_member (group_id, member_id, role, status, category, created_at, updated_at)
                        VALUES (?, ?, ?, 'connected', 'host', ?, ?)
                        """, arguments: [group, id, role, Self.ts, Self.ts]))
                }
                // A channel post (checked, under the relay), a group member's message, the user's own.
                for (row, checked) in [(rows[0] as Int64?, true), (rows[1], false), (nil, false)] {
                    let item = try db.insert(sql: """
                        INSERT INTO group_item (user_id, group_id, member_row_id, content, shared_msg_id, status, blocked, created_at)
                        VALUES (?, ?, ?, '{"type":"text","text":"hi"}', 'msg', 'rcvNew', 0, ?)
                        """, arguments: [user, group, row, Self.ts])
                    if checked {
                        try db.execute(sql: "INSERT INTO channel_item_check (item_id, msg_verified) VALUES (?, 'verified')", arguments: [item])
                    }
                }
            }
            try old.close()
        }
        let store = try ChatStore(path: URL(fileURLWithPath: path))
        try store.db.readNow { db in
            let authors = try SQLRow.fetchAll(db, sql: "SELECT channel_author FROM group_item ORDER BY id").map { $0["channel_author"] as String? }
            #expect(authors == ["#channel", nil, nil])
        }
    }
}
