import Foundation
import GRDB
import SwiftplexSQL
import GroupProtocol
import TestSupport
import Testing
@testable import ChatCore

/// Delivery statuses of the user's group items (`group_snd_status`) on a real SQLite file: made
/// for every recipient with the send, so that the item's status only ever moves forward.
@Suite struct GroupDeliveryStatusTests {
    static let ts = "2026-01-01T00:00:00.000Z"
    static let members = ["bWVtYmVyLWE", "bWVtYmVyLWI", "bWVtYmVyLWM"].map { MemberId($0)! }

    /// A user, a group with three members and the user's own item `msg-1`: (group, item).
    func makeGroup(_ db: any SQLConnection) throws -> (group: Int64, item: Int64) {
        let user = try db.insert(sql: "INSERT INTO \"user\" (display_name, profile, active, created_at) VALUES ('bot', ?, 1, ?)",
                                 arguments: [#"{"displayName":"bot","fullName":""}"#, Self.ts])
        let group = try db.insert(sql: "INSERT INTO chat_group (user_id, local_display_name, profile, created_at, updated_at) VALUES (?, 'g', '{}', ?, ?)",
                                  arguments: [user, Self.ts, Self.ts])
        for (i, m) in Self.members.enumerated() {
            try db.execute(sql: """
                INSERT INTO group_member (group_id, member_id, role, status, category, agent_conn_id, created_at, updated_at)
                VALUES (?, ?, 'member', 'connected', 'invitee', ?, ?, ?)
                """, arguments: [group, m.text, 100 + i, Self.ts, Self.ts])
        }
        // Plain SQL: the migration test makes this on an earlier schema than the record's.
        let item = try db.insert(sql: """
            INSERT INTO group_item (user_id, group_id, content, shared_msg_id, status, blocked, created_at)
            VALUES (?, ?, '{"type":"text","text":"hi"}', 'msg-1', 'sndNew', 0, ?)
            """, arguments: [user, group, Self.ts])
        return (group, item)
    }

    func status(_ db: any SQLConnection, _ item: Int64) throws -> ItemStatus? {
        try ItemStatus.fetchOne(db, sql: "SELECT status FROM group_item WHERE id = ?", arguments: [item])
    }

    /// The agent message of one member's copy, then a relay or receipt event moving it (as
    /// `trackGroupSend` and `groupDelivery` do), then the item's status refreshed.
    func move(_ db: any SQLConnection, _ item: Int64, member: Int, to status: ItemStatus) throws -> Bool {
        try db.execute(sql: """
            UPDATE group_snd_status SET agent_conn_id = ?, seq = 1, status = ?
            WHERE item_id = ? AND member_row_id = (SELECT id FROM group_member WHERE member_id = ?)
            """, arguments: [100 + member, status, item, Self.members[member].text])
        #expect(db.changesCount == 1)
        return try ChatController.refreshGroupItemStatus(db, itemId: item)
    }

    @Test func everyRecipientHasAStatusFromTheSendAndTheItemOnlyMovesForward() throws {
        try withTemporaryDirectory(prefix: "swiftplex-snd-status") { dir in
            let store = try ChatStore(path: dir.appendingPathComponent("test_chat.db"))
            try store.db.writeNow { db in
                let (group, item) = try makeGroup(db)
                // The send's transaction: a status per recipient, none with its agent message yet;
                // an x.msg.new that is no item of the user's makes none.
                try ChatController.expectGroupSends(db, groupId: group, Self.members.map { ("msg-1", $0) } + [("not-an-item", Self.members[0])])
                let rows = try SQLRow.fetchAll(db, sql: "SELECT agent_conn_id, seq, status FROM group_snd_status WHERE item_id = ?", arguments: [item])
                #expect(rows.count == 3)
                #expect(rows.allSatisfy { ($0["agent_conn_id"] as Int64?) == nil && ($0["seq"] as Int64?) == nil && ($0["status"] as String) == "sndNew" })
                #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM group_snd_status") == 3)
                #expect(try ChatController.refreshGroupItemStatus(db, itemId: item) == false)

                // Sent to the first member only: partial, not complete (the other two are counted).
                #expect(try move(db, item, member: 0, to: .sndSent))
                #expect(try status(db, item) == .sndSentPartial)
                #expect(try move(db, item, member: 1, to: .sndSent) == false)
                #expect(try move(db, item, member: 2, to: .sndSent))
                #expect(try status(db, item) == .sndSent)
                #expect(try move(db, item, member: 1, to: .sndRcvd))
                #expect(try status(db, item) == .sndRcvdPartial)
                #expect(try move(db, item, member: 0, to: .sndRcvd) == false)
                #expect(try move(db, item, member: 2, to: .sndRcvd))
                #expect(try status(db, item) == .sndRcvd)
            }
        }
    }

    /// Statuses stored before the agent columns could be empty are kept by the migration.
    @Test func theMigrationKeepsEarlierStatuses() throws {
        let dir = TemporaryDirectory(prefix: "swiftplex-snd-status")
        defer { dir.cleanup() }
        let path = dir.appendingPathComponent("old_chat.db").path
        do {
            let old = try DatabaseQueue(path: path)
            try SQLiteStore.migrator(ChatStore.migrations).migrate(old, upTo: "v6-history: group item times")
            try SQLiteStore(wrapping: old).writeNow { db in
                let (_, item) = try makeGroup(db)
                try db.execute(sql: """
                    INSERT INTO group_snd_status (item_id, member_row_id, agent_conn_id, seq, status)
                    SELECT ?, id, agent_conn_id, 7, 'sndSent' FROM group_member
                    """, arguments: [item])
                #expect(throws: DatabaseError.self) {
                    try db.execute(sql: "INSERT INTO group_snd_status (item_id, member_row_id, agent_conn_id, seq, status) VALUES (?, 99, NULL, NULL, 'sndNew')",
                                   arguments: [item])
                }
            }
            try old.close()
        }
        let store = try ChatStore(path: URL(fileURLWithPath: path))
        try store.db.readNow { db in
            let rows = try SQLRow.fetchAll(db, sql: "SELECT agent_conn_id, seq, status FROM group_snd_status ORDER BY member_row_id")
            #expect(rows.map { $0["agent_conn_id"] as Int64? } == [100, 101, 102])
            #expect(rows.allSatisfy { ($0["seq"] as Int64?) == 7 && ($0["status"] as String) == "sndSent" })
            let plan = try SQLRow.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT * FROM group_snd_status WHERE agent_conn_id = 1 AND seq = 2")
            #expect(plan.contains { ($0["detail"] as String).contains("group_snd_status_by_msg") }, "\(plan)")
        }
    }
}
