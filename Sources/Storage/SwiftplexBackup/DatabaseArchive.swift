import Foundation

/// An engine's two databases (`<prefix>_chat.db`, `<prefix>_agent.db`) in a Swiftplex backup
/// archive: the Chat API's `/_db export` and `/_db import`.
///
/// An export holds the two databases under their own names (`data/<name>_chat.db`, …); an import
/// takes the one `…_chat.db` and the one `…_agent.db` an archive lists, whatever their prefix,
/// so an archive of `swiftplex backup` (a host's `bot_chat.db`, `bot_agent.db`) imports into a
/// libsimplex bot and an export restores into a host.
public enum DatabaseArchive {
    /// Writes an archive of the databases at `prefix` to `archiveURL` (0600): the chat database
    /// first and the agent's last, each a consistent snapshot (the engine may have them open).
    @discardableResult
    public static func export(prefix: String, to archiveURL: URL) throws -> BackupArchive.Manifest {
        let name = URL(fileURLWithPath: prefix).lastPathComponent
        let databases = [name + "_chat.db", name + "_agent.db"]
        let directory = URL(fileURLWithPath: prefix).deletingLastPathComponent()
        for db in databases where !FileManager.default.fileExists(atPath: directory.appendingPathComponent(db).path) {
            throw BackupError("there is no database to export at \(directory.appendingPathComponent(db).path)")
        }
        let staging = try BackupArchive.privateTemporaryDirectory(near: archiveURL)
        defer { try? FileManager.default.removeItem(at: staging) }
        for db in databases {
            try BackupArchive.snapshot(directory.appendingPathComponent(db), to: staging.appendingPathComponent(db))
        }
        let manifest = BackupArchive.Manifest(databases: databases, files: [], config: nil)
        try BackupArchive.write(manifest, from: staging, configFile: nil, to: archiveURL)
        return manifest
    }

    /// An archive's two databases unpacked and checked beside their destination, ready to
    /// replace the engine's once it has closed them (``install()``), or to be dropped
    /// (``discard()``). Nothing at the destination has changed yet.
    public final class PreparedImport: @unchecked Sendable {  // used by one caller at a time
        public let manifest: BackupArchive.Manifest
        /// What the archive holds that an engine's import leaves out (a host's other data files).
        public let skipped: [String]
        let staging: URL
        let prefix: String

        init(manifest: BackupArchive.Manifest, skipped: [String], staging: URL, prefix: String) {
            self.manifest = manifest
            self.skipped = skipped
            self.staging = staging
            self.prefix = prefix
        }

        /// Moves the databases into place: each existing one is kept as `<file>.bak` first (as
        /// SimpleX's import does), and its WAL and shared-memory files go (they belong to the
        /// old file). Call only when no connection to the databases is open.
        public func install() throws {
            let fm = FileManager.default
            defer { discard() }
            for suffix in ["_chat.db", "_agent.db"] {
                let target = URL(fileURLWithPath: prefix + suffix)
                let backup = URL(fileURLWithPath: prefix + suffix + ".bak")
                if fm.fileExists(atPath: target.path) {
                    if fm.fileExists(atPath: backup.path) { try fm.removeItem(at: backup) }
                    try fm.moveItem(at: target, to: backup)
                    chmod(backup.path, 0o600)
                }
                for transient in ["-wal", "-shm", "-journal"] where fm.fileExists(atPath: target.path + transient) {
                    try fm.removeItem(atPath: target.path + transient)
                }
                try fm.moveItem(at: staging.appendingPathComponent("import" + suffix), to: target)
                chmod(target.path, 0o600)
            }
        }

        /// Drops the unpacked files.
        public func discard() { try? FileManager.default.removeItem(at: staging) }
    }

    /// Unpacks and checks the archive's chat and agent databases next to `prefix`.
    public static func prepareImport(from archiveURL: URL, prefix: String) throws -> PreparedImport {
        let (archive, manifest) = try BackupArchive.open(archiveURL)
        func one(_ suffix: String) throws -> String {
            let found = manifest.databases.filter { URL(fileURLWithPath: $0).lastPathComponent.hasSuffix(suffix) }
            guard found.count == 1 else {
                throw BackupError("the archive holds \(found.count) databases named …\(suffix) (\(manifest.databases.joined(separator: ", "))); an import takes exactly one")
            }
            return found[0]
        }
        let chat = try one("_chat.db")
        let agent = try one("_agent.db")
        let directory = URL(fileURLWithPath: prefix).deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let staging = try BackupArchive.privateTemporaryDirectory(near: URL(fileURLWithPath: prefix))
        do {
            var budget = BackupArchive.extractionBudget(near: staging)
            for (entry, suffix) in [(chat, "_chat.db"), (agent, "_agent.db")] {
                let target = staging.appendingPathComponent("import" + suffix)
                try BackupArchive.extract(entry, of: archive, to: target, under: staging, budget: &budget)
                try BackupArchive.check(target)
            }
        } catch {
            try? FileManager.default.removeItem(at: staging)
            throw error
        }
        let skipped = (manifest.databases + manifest.files).filter { $0 != chat && $0 != agent }.sorted()
        return PreparedImport(manifest: manifest, skipped: skipped, staging: staging, prefix: prefix)
    }
}
