import Foundation
import GRDB
import SwiftplexStorage

/// Per-instance key-value storage for plugins, in the host's `plugins.db` (0600).
public final class PluginStorage: Sendable {
    private let db: DatabaseQueue

    public init(path: URL) throws {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1 plugin storage") { db in
            try db.execute(sql: """
                CREATE TABLE plugin_kv (
                  instance TEXT NOT NULL,
                  key TEXT NOT NULL,
                  value TEXT NOT NULL,
                  PRIMARY KEY (instance, key)
                ) WITHOUT ROWID
                """)
        }
        migrator.registerMigration("v2 dispatch cursor") { db in
            // Per instance: the last received chat item whose `newChatItems` event it finished
            // handling. After a restart the host replays the received items after it.
            try db.execute(sql: """
                CREATE TABLE plugin_cursor (
                  instance TEXT PRIMARY KEY,
                  item_id INTEGER NOT NULL
                ) WITHOUT ROWID
                """)
        }
        db = try PrivateDatabase.open(path: path, label: "plugins", migrator: migrator)
    }

    /// The last received chat item an instance finished handling, or nil for a new instance.
    public func handledMark(instance: String) throws -> Int64? {
        try db.read { try Int64.fetchOne($0, sql: "SELECT item_id FROM plugin_cursor WHERE instance = ?", arguments: [instance]) }
    }

    /// Records that an instance finished handling received item `itemId` (the mark only grows).
    public func setHandledMark(instance: String, itemId: Int64) throws {
        try db.write { db in
            try db.execute(sql: """
                INSERT INTO plugin_cursor (instance, item_id) VALUES (?, ?)
                ON CONFLICT(instance) DO UPDATE SET item_id = max(item_id, excluded.item_id)
                """, arguments: [instance, itemId])
        }
    }

    public func get(instance: String, key: String) throws -> String? {
        try db.read { try String.fetchOne($0, sql: "SELECT value FROM plugin_kv WHERE instance = ? AND key = ?", arguments: [instance, key]) }
    }

    public func set(instance: String, key: String, value: String?) throws {
        try db.write { db in
            if let value {
                try db.execute(sql: "INSERT INTO plugin_kv (instance, key, value) VALUES (?, ?, ?) ON CONFLICT(instance, key) DO UPDATE SET value = excluded.value",
                               arguments: [instance, key, value])
            } else {
                try db.execute(sql: "DELETE FROM plugin_kv WHERE instance = ? AND key = ?", arguments: [instance, key])
            }
        }
    }

    /// Number of keys an instance has stored.
    public func count(instance: String) throws -> Int {
        try db.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM plugin_kv WHERE instance = ?", arguments: [instance]) ?? 0 }
    }
}
