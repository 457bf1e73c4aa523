import Foundation
import GRDB
import SwiftplexBase

/// Opening of the engine's SQLite files: created 0600 before SQLite touches them (its WAL and
/// shared-memory files inherit the mode), WAL journal, foreign keys on, `secure_delete` on, then migrated.
public enum PrivateDatabase {
    public static func open(path: URL, label: String, migrator: DatabaseMigrator) throws -> DatabaseQueue {
        Blocking.willWait("PrivateDatabase.open (file I/O and migrations)")
        let fd = Foundation.open(path.path, O_RDWR | O_CREAT, 0o600)
        if fd >= 0 {
            fchmod(fd, 0o600)
            close(fd)
        }
        var config = Configuration()
        config.label = label
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            // In WAL mode NORMAL survives a crash of the process (kill -9) with every committed
            // transaction; only a power loss can lose the last ones. (The relay, whose OK to a
            // SEND is a promise to a remote party, keeps FULL.)
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            // Deleted rows (spent ratchet states, consumed messages, removed contacts) are
            // overwritten with zeros instead of lingering in free pages of the file and the WAL.
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        let queue = try DatabaseQueue(path: path.path, configuration: config)
        try migrator.migrate(queue)
        return queue
    }

    /// The migrations of `migrator` not yet applied to the database at `path` (all of them if
    /// the file does not exist). Opens nothing for writing.
    public static func pendingMigrations(_ migrator: DatabaseMigrator, at path: URL) throws -> [String] {
        guard FileManager.default.fileExists(atPath: path.path) else { return migrator.migrations }
        let db = try DatabaseQueue(path: path.path)
        defer { try? db.close() }
        let applied = try db.read { try migrator.appliedIdentifiers($0) }
        return migrator.migrations.filter { !applied.contains($0) }
    }
}
