import ChatModel
import Foundation
import GRDB
import SwiftplexBase

// The channel tables of the chat database: the chat relays an owner registered (`chat_relay`),
// and which users are chat relays (`user.chat_relay`).

enum ChannelStore {
    static func register(_ m: inout DatabaseMigrator) {
        m.registerMigration("channels 1: chat relays, relay users") { db in
            try db.execute(sql: """
                ALTER TABLE user ADD COLUMN chat_relay INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE chat_relay (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    address TEXT NOT NULL,
                    relay_profile TEXT NOT NULL,
                    domains TEXT NOT NULL DEFAULT '[]',
                    preset INTEGER NOT NULL DEFAULT 0,
                    tested INTEGER,
                    enabled INTEGER NOT NULL DEFAULT 1,
                    deleted INTEGER NOT NULL DEFAULT 0,
                    created_at TEXT NOT NULL,
                    UNIQUE (user_id, address)
                );
                """)
        }
    }
}

/// `chat_relay`: a chat relay a user registered (`/relays name=<name> <address>`). A relay
/// dropped from the list is kept `deleted` (channels may still name it, as SimpleX keeps it);
/// registering its address again brings it back under the new name.
struct ChatRelayRecord: ChatRecord {
    static let databaseTableName = "chat_relay"
    var id: Int64?
    var userId: Int64
    var name: String
    var address: String
    /// ``RelayProfile`` as JSON.
    var relayProfile: String
    /// `[String]` as JSON.
    var domains: String = "[]"
    var preset: Bool = false
    var tested: Bool?
    var enabled: Bool = true
    var deleted: Bool = false
    var createdAt: String

    enum Columns {
        static let id = Column("id")
        static let userId = Column("user_id")
        static let address = Column("address")
        static let deleted = Column("deleted")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }

    /// The relay as the API shows it.
    var model: UserChatRelay {
        UserChatRelay(chatRelayId: id ?? 0, address: address,
                      relayProfile: Stored.json(relayProfile) ?? .object([("displayName", .string(name)), ("fullName", "")]),
                      domains: Stored.decode([String].self, domains) ?? [], preset: preset, tested: tested, enabled: enabled, deleted: deleted)
    }
}
