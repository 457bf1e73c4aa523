import Foundation
import GRDB
import SwiftplexBase
import SwiftplexBackup
import SwiftplexStorage
import ZIPFoundation

/// `swiftplex backup` and `swiftplex restore`: a host's data directory — every bot's databases
/// (`<prefix>_chat.db`, `<prefix>_agent.db`, plugin storage) — in one zip archive.
///
/// A backup takes each SQLite database through SQLite's online backup API (GRDB's
/// `backup(to:)`): a consistent copy of every page, taken while the bot may be running (WAL
/// readers do not stop it), never a copy of a live file and its WAL. The agent database is taken
/// last, so its ratchets are never older than the chat database's view of them. Everything else
/// in the data directory (the embedded relay's identity, plugin files, the admin token) is copied
/// as it is, less lock, pid and journal files; the configuration file goes along when given.
/// `swiftplex-backup.json` at the archive's root says what is inside and which format made it.
///
/// A restore refuses an archive of a newer format, refuses a data directory a running bot holds
/// (its database lock), refuses to replace an existing bot's data unless told to, checks every
/// database before anything is replaced, and writes files 0600 in directories 0700.
public enum HostBackup {
    /// The archive format (``BackupArchive``'s).
    public static var formatVersion: Int { BackupArchive.formatVersion }
    public typealias Manifest = BackupArchive.Manifest

    // MARK: Backup

    /// Writes the archive (0600) to `archiveURL`; the bot may be running meanwhile.
    @discardableResult
    public static func create(dataDirectory: URL, configFile: URL?, to archiveURL: URL) throws -> Manifest {
        let fm = FileManager.default
        guard !botPrefixes(in: (try? fm.contentsOfDirectory(atPath: dataDirectory.path)) ?? []).isEmpty else {
            throw BackupError("\(dataDirectory.path) holds no bot (no bot_chat.db, nor another bot's <prefix>_chat.db)")
        }
        let dataPath = dataDirectory.standardizedFileURL.resolvingSymlinksInPath().path
        guard !archiveURL.deletingLastPathComponent().standardizedFileURL.resolvingSymlinksInPath().path.appending("/").hasPrefix(dataPath + "/") else {
            throw BackupError("the archive must not be written inside the data directory \(dataDirectory.path) (it would be in the next backup)")
        }
        let staging = try BackupArchive.privateTemporaryDirectory(near: archiveURL)
        defer { try? fm.removeItem(at: staging) }

        var databases: [String] = []
        var files: [String] = []
        for relative in try BackupArchive.dataFiles(dataDirectory) {
            let source = dataDirectory.appendingPathComponent(relative)
            let target = staging.appendingPathComponent(relative)
            try fm.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            if try BackupArchive.isSQLite(source) {
                databases.append(relative)
            } else {
                try fm.copyItem(at: source, to: target)
                files.append(relative)
            }
        }
        // Databases: the agent's last (see the type's comment).
        databases.sort { a, b in (a.hasSuffix("_agent.db") ? 1 : 0, a) < (b.hasSuffix("_agent.db") ? 1 : 0, b) }
        for relative in databases {
            try BackupArchive.snapshot(dataDirectory.appendingPathComponent(relative), to: staging.appendingPathComponent(relative))
        }

        let manifest = Manifest(databases: databases, files: files.sorted(), config: configFile?.lastPathComponent)
        try BackupArchive.write(manifest, from: staging, configFile: configFile, to: archiveURL)
        return manifest
    }

    // MARK: Restore

    /// Restores an archive into `dataDirectory`. With `configFile` given: written from the
    /// archive when it does not exist; when it does, it is kept, and the archive's copy is put
    /// beside it as `<name>.from-backup` if it differs.
    @discardableResult
    public static func restore(from archiveURL: URL, dataDirectory: URL, configFile: URL?, replace: Bool) throws -> Manifest {
        let fm = FileManager.default
        let (archive, manifest) = try BackupArchive.open(archiveURL)

        try fm.createDirectory(at: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        chmod(dataDirectory.path, 0o700)
        // A running bot holds its lock for its whole life: its data is never overwritten. Every
        // bot's lock is taken — those of the bots in the directory and those of the archive's.
        let archived = manifest.databases.filter { !$0.contains("/") }
        let present = (try? fm.contentsOfDirectory(atPath: dataDirectory.path)) ?? []
        let prefixes = Set([BotOptions.defaultName] + botPrefixes(in: present) + botPrefixes(in: archived)).sorted()
        var locks: [DatabaseLock] = []
        defer { for l in locks { l.release() } }
        for prefix in prefixes {
            do { locks.append(try DatabaseLock.acquire(prefix: HostedBot.databasePrefix(dataDirectory, prefix: prefix))) } catch let locked as DatabaseLocked {
                throw BackupError("\(dataDirectory.path) belongs to a running bot\(locked.holder.map { " (pid \($0))" } ?? ""); stop it before restoring")
            }
        }
        let existing = try BackupArchive.dataFiles(dataDirectory)
        if !existing.isEmpty, !replace {
            throw BackupError("\(dataDirectory.path) already holds a bot's data (\(existing.count) files); restore with --replace to overwrite it")
        }

        // Everything is unpacked and checked beside the data directory before anything in it changes.
        let staging = try BackupArchive.privateTemporaryDirectory(near: dataDirectory)
        defer { try? fm.removeItem(at: staging) }
        var restored: [String] = []
        var config: Data?
        // An engine's export (`/_db export`: two databases of another prefix, nothing else)
        // becomes this host's `bot_chat.db` and `bot_agent.db`.
        var renamed: [String: String] = [:]
        // Bounded: each entry by its declared size, all of them by the free disk space.
        var budget = BackupArchive.extractionBudget(near: staging)
        if manifest.files.isEmpty, manifest.databases.count == 2,
           let chat = manifest.databases.first(where: { $0.hasSuffix("_chat.db") && !$0.contains("/") }),
           let agent = manifest.databases.first(where: { $0.hasSuffix("_agent.db") && !$0.contains("/") }) {
            renamed = [chat: "bot_chat.db", agent: "bot_agent.db"]
        }
        for entry in archive where entry.path != BackupArchive.manifestName {
            if entry.path.hasPrefix(BackupArchive.configPrefix), manifest.config != nil {
                config = try BackupArchive.read(entry, of: archive, limit: 1 << 20)
                continue
            }
            guard entry.type == .file, entry.path.hasPrefix(BackupArchive.dataPrefix) else {
                throw BackupError("the archive holds an entry that is not a data file: \(entry.path)")
            }
            let relative = String(entry.path.dropFirst(BackupArchive.dataPrefix.count))
            guard BackupArchive.isSafe(relative) else { throw BackupError("the archive holds an unsafe path: \(entry.path)") }
            let target = staging.appendingPathComponent(renamed[relative] ?? relative)
            try BackupArchive.makePrivateDirectories(target.deletingLastPathComponent(), under: staging)
            try BackupArchive.extract(entry, of: archive, to: target, budget: &budget)
            restored.append(renamed[relative] ?? relative)
        }
        for db in manifest.databases.map({ renamed[$0] ?? $0 }) {
            guard restored.contains(db) else { throw BackupError("the archive lacks the database its manifest lists: \(db)") }
            try BackupArchive.check(staging.appendingPathComponent(db))
        }

        // Replace: the old files (and every WAL and shared-memory file, which would not fit the
        // restored databases) go; the lock files stay, held by us.
        let lockNames = Set(prefixes.map { URL(fileURLWithPath: DatabaseLock.lockFile(prefix: HostedBot.databasePrefix(dataDirectory, prefix: $0))).lastPathComponent })
        if let walker = fm.enumerator(at: dataDirectory, includingPropertiesForKeys: nil) {
            var doomed: [URL] = []
            for case let url as URL in walker where !lockNames.contains(url.lastPathComponent) {
                var isDirectory: ObjCBool = false
                if fm.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue { doomed.append(url) }
            }
            for url in doomed { try fm.removeItem(at: url) }
        }
        for relative in restored {
            let target = dataDirectory.appendingPathComponent(relative)
            try BackupArchive.makePrivateDirectories(target.deletingLastPathComponent(), under: dataDirectory)
            try fm.moveItem(at: staging.appendingPathComponent(relative), to: target)
            chmod(target.path, 0o600)
        }

        if let configFile, let config {
            if !fm.fileExists(atPath: configFile.path) {
                try BackupArchive.write(config, to: configFile)
            } else if (try? Data(contentsOf: configFile)) != config {
                try BackupArchive.write(config, to: configFile.deletingLastPathComponent().appendingPathComponent(configFile.lastPathComponent + ".from-backup"))
            }
        }
        return manifest
    }

    /// The bots' file prefixes among names of a data directory's top level (`<prefix>_chat.db`).
    static func botPrefixes(in names: [String]) -> [String] {
        names.filter { $0.hasSuffix("_chat.db") && !$0.contains("/") }.map { String($0.dropLast("_chat.db".count)) }.filter { !$0.isEmpty }
    }

    /// Writes the archive's configuration file (0600) to `url`, which must not exist.
    public static func restoreConfiguration(from archiveURL: URL, to url: URL) throws {
        let (archive, _) = try BackupArchive.open(archiveURL)
        guard let entry = archive.first(where: { $0.path.hasPrefix(BackupArchive.configPrefix) && $0.type == .file }) else {
            throw BackupError("\(url.path) does not exist and the archive holds no configuration file")
        }
        guard !FileManager.default.fileExists(atPath: url.path) else { throw BackupError("\(url.path) exists") }
        try BackupArchive.write(try BackupArchive.read(entry, of: archive, limit: 1 << 20), to: url)
    }
}
