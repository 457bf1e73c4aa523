import ChatModel
import Foundation
import SwiftplexSQL
import SwiftplexBase

/// `<prefix>_chat.db`: users, contacts, pending connections, addresses, contact requests and chat
/// items. Profiles, settings and message content are stored as the JSON the API exchanges.
final class ChatStore: Sendable {
    let db: any SQLStore

    convenience init(path: URL) throws { try self.init(location: .sqlite(path)) }

    init(location: DatabaseLocation) throws {
        db = try location.open(label: "chat", migrations: Self.migrations)
    }

    static var migrations: [SQLMigration] {
        var m: [SQLMigration] = []
        m.append(SQLMigration("v1", sql: """
                CREATE TABLE "user" (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    display_name TEXT NOT NULL UNIQUE,
                    profile TEXT NOT NULL,
                    active INTEGER NOT NULL DEFAULT 0,
                    relays TEXT NOT NULL DEFAULT '',
                    created_at TEXT NOT NULL
                );
                CREATE TABLE address (
                    user_id INTEGER PRIMARY KEY REFERENCES "user"(id) ON DELETE CASCADE,
                    agent_address_id INTEGER NOT NULL,
                    link TEXT NOT NULL,
                    settings TEXT NOT NULL
                );
                CREATE TABLE contact_request (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
                    agent_request_id INTEGER NOT NULL,
                    profile TEXT NOT NULL,
                    created_at TEXT NOT NULL
                );
                CREATE TABLE contact (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
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
                    user_id INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
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
                """))
        m.append(SQLMigration("v2: quotes, chat state, incognito, short links, receipts", sql: """
                ALTER TABLE "user" ADD COLUMN send_receipts INTEGER NOT NULL DEFAULT 1;
                ALTER TABLE address ADD COLUMN short_link TEXT;
                ALTER TABLE contact ADD COLUMN custom_data TEXT;
                ALTER TABLE contact ADD COLUMN user_prefs TEXT;
                ALTER TABLE contact ADD COLUMN incognito_profile TEXT;
                ALTER TABLE contact ADD COLUMN short_link TEXT;
                ALTER TABLE contact ADD COLUMN chat_ts TEXT;
                ALTER TABLE chat_item ADD COLUMN quoted TEXT;
                CREATE INDEX chat_item_by_seq ON chat_item(contact_id, agent_seq);
                CREATE INDEX chat_item_by_shared_id ON chat_item(contact_id, shared_msg_id);
                """))
        m.append(SQLMigration("v3: local display names unique per user", sql: """
                CREATE TABLE display_name (
                    user_id INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
                    local_name TEXT NOT NULL,
                    base TEXT NOT NULL,
                    suffix INTEGER NOT NULL,
                    PRIMARY KEY (user_id, local_name),
                    UNIQUE (user_id, base, suffix)
                );
                ALTER TABLE "user" ADD COLUMN local_display_name TEXT;
                ALTER TABLE contact ADD COLUMN local_display_name TEXT;
                ALTER TABLE contact_request ADD COLUMN local_display_name TEXT;
                CREATE INDEX contact_request_by_age ON contact_request(created_at);
                """) { db in
            // Existing rows get names in the order they were made: the user's own first, then its
            // contacts, then its waiting requests; a later duplicate becomes `name_1`, `name_2`, ….
            for userId in try Int64.fetchAll(db, sql: "SELECT id FROM \"user\" ORDER BY id") {
                let profile = try String.fetchOne(db, sql: "SELECT profile FROM \"user\" WHERE id = ?", arguments: [userId])
                let own = LocalNames.base(of: profile.flatMap { try? JSONValue.parse($0) }) ?? ""
                let name = try LocalNames.reserve(db, userId: userId, displayName: own)
                try db.execute(sql: "UPDATE \"user\" SET local_display_name = ? WHERE id = ?", arguments: [name, userId])
                for table in ["contact", "contact_request"] {
                    for row in try Row.fetchAll(db, sql: "SELECT id, profile FROM \(table) WHERE user_id = ? AND profile IS NOT NULL ORDER BY id", arguments: [userId]) {
                        guard let base = LocalNames.base(of: (row["profile"] as String?).flatMap { try? JSONValue.parse($0) }) else { continue }
                        let local = try LocalNames.reserve(db, userId: userId, displayName: base)
                        try db.execute(sql: "UPDATE \(table) SET local_display_name = ? WHERE id = ?", arguments: [local, row["id"] as Int64])
                    }
                }
            }
        })
        GroupStore.register(&m)
        ChannelStore.register(&m)
        GroupStore.registerItemTimes(&m)
        MemberContactStore.register(&m)
        GroupStore.registerDeliveryStatuses(&m)
        ChannelStore.registerChannels(&m)
        ChannelStore.registerChannelState(&m)
        ChannelStore.registerChannelItems(&m)
        return m
    }
}

extension ChatController {
    /// The chat database's migrations, in order (for tools and tests that apply them elsewhere).
    public static var databaseMigrations: [SQLMigration] { ChatStore.migrations }
}

/// Local display names: the name by which the bot's database knows a user, a contact or a
/// contact request, unique per user. The first `alice` is `alice`; later ones are `alice_1`,
/// `alice_2`, … (the next suffix after the highest one used for that name, skipping any taken by a
/// peer who chose a name like `alice_2` itself). The user's own name is reserved in the same space.
/// A name stays reserved until its contact or request is deleted; a rename (`x.info`) takes a new
/// one and frees the old.
enum LocalNames {
    /// The display name a stored profile asks for (`displayName`), or nil when it has none.
    static func base(of profile: JSONValue?) -> String? {
        profile?["displayName"]?.stringValue
    }

    /// Reserves and returns a unique local name for `displayName` in `userId`'s names.
    static func reserve(_ db: Database, userId: Int64, displayName base: String) throws -> String {
        let mine = DisplayNameRecord.filter(DisplayNameRecord.Columns.userId == userId)
        var suffix = try mine.filter(DisplayNameRecord.Columns.base == base)
            .select(max(DisplayNameRecord.Columns.suffix), as: Int64?.self).fetchOne(db).flatMap { $0 }.map { $0 + 1 } ?? 0
        while true {
            let name = suffix == 0 ? base : "\(base)_\(suffix)"
            if try mine.filter(DisplayNameRecord.Columns.localName == name).isEmpty(db) {
                try DisplayNameRecord(userId: userId, localName: name, base: base, suffix: suffix).insert(db)
                return name
            }
            suffix += 1
        }
    }

    /// Frees a local name (its contact or request is gone).
    static func release(_ db: Database, userId: Int64, name: String?) throws {
        guard let name else { return }
        _ = try DisplayNameRecord.deleteOne(db, key: ["user_id": userId, "local_name": name])
    }

    /// Gives `current` (a name held now, or nil) for a profile asking for `displayName`: the same
    /// name when the profile still asks for the name it was made from, else a new one (the old freed).
    static func rename(_ db: Database, userId: Int64, current: String?, displayName: String) throws -> String {
        if let current, let held = try DisplayNameRecord.fetchOne(db, key: ["user_id": userId, "local_name": current]), held.base == displayName {
            return current
        }
        try release(db, userId: userId, name: current)
        return try reserve(db, userId: userId, displayName: displayName)
    }
}

/// ISO-8601 UTC timestamps with fractional seconds, as the API prints them.
enum Timestamp {
    /// Now, to the millisecond (`2026-11-23T10:00:00.123Z`).
    static func now() -> String { ChatTimestamp.now().description }

    /// The timestamp `age` before `now`, in the same format (stored timestamps compare as text):
    /// the cutoff of a sweep of rows older than `age`.
    static func before(_ age: Duration, now: Date) -> String {
        let seconds = Double(age.components.seconds) + Double(age.components.attoseconds) / 1e18
        return ChatTimestamp(now.addingTimeInterval(-seconds)).description
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
public struct MigrationPending: CodedError {
    public enum Code: Sendable, Hashable { case pending }
    public var code: Code { .pending }
    public let dbFile: String
    public let migrations: [String]
    public var message: String { "\(dbFile) needs \(migrations.count) migration(s): \(migrations.joined(separator: ", "))" }
}

