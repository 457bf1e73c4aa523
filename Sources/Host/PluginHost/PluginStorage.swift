import SwiftplexBase
import Foundation
import SwiftplexSQL

/// Per-instance key-value storage for plugins, and each instance's dispatch cursor: the host's
/// `plugins.db` (0600), through the SQL layer (its statements are the same on every backend).
/// Called from plugins' C ABI calls on plain threads, so its transactions block their caller.
public final class PluginStorage: Sendable {
    private let store: any SQLStore

    static let migrations = [
        SQLMigration("v1 plugin storage", sqlite: """
            CREATE TABLE plugin_kv (
              instance TEXT NOT NULL,
              key TEXT NOT NULL,
              value TEXT NOT NULL,
              PRIMARY KEY (instance, key)
            ) WITHOUT ROWID
            """, postgres: """
            CREATE TABLE plugin_kv (
              instance TEXT NOT NULL,
              key TEXT NOT NULL,
              value TEXT NOT NULL,
              PRIMARY KEY (instance, key)
            )
            """),
        // Per instance: the last received chat item whose `newChatItems` event it finished
        // handling. After a restart the host replays the received items after it.
        SQLMigration("v2 dispatch cursor", sqlite: """
            CREATE TABLE plugin_cursor (
              instance TEXT PRIMARY KEY,
              item_id INTEGER NOT NULL
            ) WITHOUT ROWID
            """, postgres: """
            CREATE TABLE plugin_cursor (
              instance TEXT PRIMARY KEY,
              item_id BIGINT NOT NULL
            )
            """),
    ]

    public convenience init(path: URL, quota: Quota = Quota()) throws {
        self.init(store: try SQLiteStore(path: path, label: "plugins", migrations: Self.migrations), quota: quota)
    }

    /// On a store opened by the caller with ``migrations``.
    public init(store: any SQLStore, quota: Quota = Quota()) {
        self.store = store
        self.quota = quota
    }

    /// What each instance may keep.
    public let quota: Quota

    /// The last received chat item an instance finished handling, or nil for a new instance.
    public func handledMark(instance: String) throws -> Int64? {
        try store.readNow { try $0.value(Int64.self, "SELECT item_id FROM plugin_cursor WHERE instance = ?", instance) }
    }

    /// Records that an instance finished handling received item `itemId` (the mark only grows).
    public func setHandledMark(instance: String, itemId: Int64) throws {
        try store.writeNow { db in try Self.writeMark(db, instance, itemId) }
    }

    /// ``handledMark(instance:)`` for async callers: the read waits off Swift's pool.
    public func handledMark(instance: String) async throws -> Int64? {
        try await store.read { try $0.value(Int64.self, "SELECT item_id FROM plugin_cursor WHERE instance = ?", instance) }
    }

    /// ``setHandledMark(instance:itemId:)`` for async callers.
    public func setHandledMark(instance: String, itemId: Int64) async throws {
        try await store.write { db in try Self.writeMark(db, instance, itemId) }
    }

    private static func writeMark(_ db: any SQLConnection, _ instance: String, _ itemId: Int64) throws {
        try db.execute("""
            INSERT INTO plugin_cursor (instance, item_id) VALUES (?, ?)
            ON CONFLICT(instance) DO UPDATE SET item_id = \(db.dialect.greatest("plugin_cursor.item_id", "excluded.item_id"))
            """, instance, itemId)
    }

    public func get(instance: String, key: String) throws -> String? {
        try store.readNow { try $0.value(String.self, "SELECT value FROM plugin_kv WHERE instance = ? AND key = ?", instance, key) }
    }

    /// What one instance may keep: keys, characters of all its values together, and of one key.
    public struct Quota: Sendable, Equatable {
        public var maxKeys: Int
        public var maxValueCharacters: Int
        public var maxKeyCharacters: Int
        public init(maxKeys: Int = 10_000, maxValueCharacters: Int = 16 << 20, maxKeyCharacters: Int = 1024) {
            self.maxKeys = maxKeys
            self.maxValueCharacters = maxValueCharacters
            self.maxKeyCharacters = maxKeyCharacters
        }
    }

    /// A write refused because it would take an instance past its ``Quota``; nothing was written.
    public struct QuotaExceeded: CodedError {
        public enum Code: Sendable, Hashable { case quota }
        public var code: Code { .quota }
        public let message: String
    }

    /// Sets (or with nil removes) `key` of `instance`, within ``quota``: a write that would take
    /// the instance past it is refused with ``QuotaExceeded`` and changes nothing.
    public func set(instance: String, key: String, value: String?) throws {
        let quota = quota
        if value != nil, key.count > quota.maxKeyCharacters {
            throw QuotaExceeded(message: "plugin storage: a key of \(key.count) characters is longer than \(quota.maxKeyCharacters)")
        }
        try store.writeNow { db in
            if let value {
                let row = try db.row("SELECT COUNT(*), COALESCE(SUM(LENGTH(value)), 0) FROM plugin_kv WHERE instance = ? AND key <> ?", instance, key)
                let others = try row?.get(0, as: Int.self) ?? 0
                let used = try row?.get(1, as: Int.self) ?? 0
                guard others + 1 <= quota.maxKeys else {
                    throw QuotaExceeded(message: "plugin storage of \(instance): \(quota.maxKeys) keys at most; delete some first")
                }
                guard used + value.count <= quota.maxValueCharacters else {
                    throw QuotaExceeded(message: "plugin storage of \(instance): \(quota.maxValueCharacters) characters of values at most (\(used) used by other keys, \(value.count) more asked)")
                }
                try db.execute("INSERT INTO plugin_kv (instance, key, value) VALUES (?, ?, ?) ON CONFLICT(instance, key) DO UPDATE SET value = excluded.value",
                               instance, key, value)
            } else {
                try db.execute("DELETE FROM plugin_kv WHERE instance = ? AND key = ?", instance, key)
            }
        }
    }

    /// Number of keys an instance has stored.
    public func count(instance: String) throws -> Int {
        try store.readNow { try $0.value(Int.self, "SELECT COUNT(*) FROM plugin_kv WHERE instance = ?", instance) ?? 0 }
    }
}
