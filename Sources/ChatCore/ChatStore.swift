import Foundation
import GRDB
import SwiftplexStorage

/// `<prefix>_chat.db`: users, contacts, pending connections, addresses, contact requests and chat
/// items. Profiles, settings and message content are stored as the JSON the API exchanges.
final class ChatStore: Sendable {
    let queue: DatabaseQueue

    init(path: URL) throws {
        queue = try PrivateDatabase.open(path: path, label: "chat", migrator: Self.migrator)
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE user (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    display_name TEXT NOT NULL UNIQUE,
                    profile TEXT NOT NULL,
                    active INTEGER NOT NULL DEFAULT 0,
                    relays TEXT NOT NULL DEFAULT '',
                    created_at TEXT NOT NULL
                );
                CREATE TABLE address (
                    user_id INTEGER PRIMARY KEY REFERENCES user(id) ON DELETE CASCADE,
                    agent_address_id INTEGER NOT NULL,
                    link TEXT NOT NULL,
                    settings TEXT NOT NULL
                );
                CREATE TABLE contact_request (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
                    agent_request_id INTEGER NOT NULL,
                    profile TEXT NOT NULL,
                    created_at TEXT NOT NULL
                );
                CREATE TABLE contact (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
                    agent_conn_id INTEGER NOT NULL UNIQUE,
                    profile TEXT,
                    status TEXT NOT NULL,
                    via_address INTEGER NOT NULL DEFAULT 0,
                    accepted INTEGER NOT NULL DEFAULT 0,
                    invitation TEXT,
                    created_at TEXT NOT NULL,
                    updated_at TEXT NOT NULL
                );
                CREATE TABLE chat_item (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
                    contact_id INTEGER NOT NULL REFERENCES contact(id) ON DELETE CASCADE,
                    sent INTEGER NOT NULL,
                    content TEXT NOT NULL,
                    shared_msg_id TEXT,
                    agent_seq INTEGER,
                    status TEXT NOT NULL,
                    edited INTEGER NOT NULL DEFAULT 0,
                    deleted INTEGER NOT NULL DEFAULT 0,
                    created_at TEXT NOT NULL,
                    updated_at TEXT
                );
                CREATE INDEX chat_item_by_contact ON chat_item(contact_id, id);
                CREATE TABLE chat_item_reaction (
                    item_id INTEGER NOT NULL REFERENCES chat_item(id) ON DELETE CASCADE,
                    sent INTEGER NOT NULL,
                    reaction TEXT NOT NULL,
                    created_at TEXT NOT NULL,
                    PRIMARY KEY (item_id, sent, reaction)
                );
                """)
        }
        m.registerMigration("v2: quotes, chat state, incognito, short links, receipts") { db in
            try db.execute(sql: """
                ALTER TABLE user ADD COLUMN send_receipts INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE address ADD COLUMN short_link TEXT;
                ALTER TABLE contact ADD COLUMN custom_data TEXT;
                ALTER TABLE contact ADD COLUMN user_prefs TEXT;
                ALTER TABLE contact ADD COLUMN incognito_profile TEXT;
                ALTER TABLE contact ADD COLUMN short_link TEXT;
                ALTER TABLE contact ADD COLUMN chat_ts TEXT;
                ALTER TABLE chat_item ADD COLUMN quoted TEXT;
                CREATE INDEX chat_item_by_seq ON chat_item(contact_id, agent_seq);
                CREATE INDEX chat_item_by_shared_id ON chat_item(contact_id, shared_msg_id);
                """)
        }
        return m
    }
}

/// ISO-8601 UTC timestamps with fractional seconds, as the API prints them.
enum Timestamp {
    static func now() -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: Date())
    }
}

/// How `chat_migrate_init` may treat pending database migrations.
public enum MigrationConfirmation: String, Sendable {
    /// Apply pending up-migrations (the default).
    case yesUp
    /// Also apply down-migrations (none exist yet, so the same as `yesUp`).
    case yesUpDown
    /// Ask on the console; a library has none, so the same as `yesUp`.
    case console
    /// Apply nothing: report pending migrations as an error.
    case error
}

/// Migrations are pending and the confirmation mode forbids applying them.
public struct MigrationPending: Error, Sendable {
    public let dbFile: String
    public let migrations: [String]
}

