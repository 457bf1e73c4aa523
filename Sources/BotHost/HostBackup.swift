import Foundation
import GRDB
import SwiftplexBase
import SwiftplexStorage
import ZIPFoundation

/// `swiftplex backup` and `swiftplex restore`: a bot's data directory in one zip archive.
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
    /// The archive format this build writes and the newest it reads.
    public static let formatVersion = 1
    static let manifestName = "swiftplex-backup.json"
    static let dataPrefix = "data/"
    static let configPrefix = "config/"

    public struct Manifest: Sendable, Equatable {
        public var formatVersion: Int
        public var swiftplexVersion: String
        public var createdAt: String
        /// Paths relative to the data directory.
        public var databases: [String]
        public var files: [String]
        /// The configuration file's name, when it was included.
        public var config: String?

        var json: JSONValue {
            .object([("formatVersion", .int(Int64(formatVersion))), ("swiftplexVersion", .string(swiftplexVersion)),
                     ("createdAt", .string(createdAt)), ("databases", .array(databases.map(JSONValue.string))),
                     ("files", .array(files.map(JSONValue.string))), ("config", config.map(JSONValue.string) ?? .null)])
        }

        init(formatVersion: Int, swiftplexVersion: String, createdAt: String, databases: [String], files: [String], config: String?) {
            self.formatVersion = formatVersion
            self.swiftplexVersion = swiftplexVersion
            self.createdAt = createdAt
            self.databases = databases
            self.files = files
            self.config = config
        }

        init(_ v: JSONValue) throws {
            guard let format = v["formatVersion"]?.intValue, let version = v["swiftplexVersion"]?.stringValue,
                  let created = v["createdAt"]?.stringValue, case let .array(dbs)? = v["databases"], case let .array(files)? = v["files"] else {
                throw BackupError("the archive's \(HostBackup.manifestName) is not a Swiftplex backup manifest")
            }
            self.init(formatVersion: Int(format), swiftplexVersion: version, createdAt: created,
                      databases: dbs.compactMap(\.stringValue), files: files.compactMap(\.stringValue), config: v["config"]?.stringValue)
        }
    }

    // MARK: Backup

    /// Writes the archive (0600) to `archiveURL`; the bot may be running meanwhile.
    @discardableResult
    public static func create(dataDirectory: URL, configFile: URL?, to archiveURL: URL) throws -> Manifest {
        let fm = FileManager.default
        guard fm.fileExists(atPath: BotHost.databasePrefix(dataDirectory) + "_chat.db") else {
            throw BackupError("\(dataDirectory.path) holds no bot (no bot_chat.db)")
        }
        let dataPath = dataDirectory.standardizedFileURL.resolvingSymlinksInPath().path
        guard !archiveURL.deletingLastPathComponent().standardizedFileURL.resolvingSymlinksInPath().path.appending("/").hasPrefix(dataPath + "/") else {
            throw BackupError("the archive must not be written inside the data directory \(dataDirectory.path) (it would be in the next backup)")
        }
        let staging = try privateTemporaryDirectory(near: archiveURL)
        defer { try? fm.removeItem(at: staging) }

        var databases: [String] = []
        var files: [String] = []
        for relative in try dataFiles(dataDirectory) {
            let source = dataDirectory.appendingPathComponent(relative)
            let target = staging.appendingPathComponent(relative)
            try fm.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            if try isSQLite(source) {
                databases.append(relative)
            } else {
                try fm.copyItem(at: source, to: target)
                files.append(relative)
            }
        }
        // Databases: the agent's last (see the type's comment).
        databases.sort { a, b in (a.hasSuffix("_agent.db") ? 1 : 0, a) < (b.hasSuffix("_agent.db") ? 1 : 0, b) }
        for relative in databases {
            try snapshot(dataDirectory.appendingPathComponent(relative), to: staging.appendingPathComponent(relative))
        }

        let manifest = Manifest(formatVersion: formatVersion, swiftplexVersion: SwiftplexVersion.current,
                                createdAt: Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date()),
                                databases: databases, files: files.sorted(), config: configFile?.lastPathComponent)
        // Written inside the 0700 staging directory, made 0600, then renamed into place.
        let partial = staging.appendingPathComponent(".archive.partial")
        do {
            let archive = try Archive(url: partial, accessMode: .create)
            let manifestData = Data((manifest.json.description + "\n").utf8)
            try archive.addEntry(with: manifestName, type: .file, uncompressedSize: Int64(manifestData.count),
                                 provider: { position, size in manifestData.subdata(in: Data.Index(position)..<Data.Index(position) + size) })
            for relative in (databases + files).sorted() {
                try archive.addEntry(with: dataPrefix + relative, fileURL: staging.appendingPathComponent(relative), compressionMethod: .deflate)
            }
            if let configFile {
                try archive.addEntry(with: configPrefix + configFile.lastPathComponent, fileURL: configFile, compressionMethod: .deflate)
            }
            chmod(partial.path, 0o600)
            if fm.fileExists(atPath: archiveURL.path) { try fm.removeItem(at: archiveURL) }
            try fm.moveItem(at: partial, to: archiveURL)
        } catch {
            try? fm.removeItem(at: partial)
            throw BackupError("cannot write \(archiveURL.path): \(error)")
        }
        return manifest
    }

    /// A consistent copy of a database that may be in use (SQLite's online backup API).
    static func snapshot(_ source: URL, to target: URL) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(30)
        do {
            let from = try DatabaseQueue(path: source.path, configuration: configuration)
            defer { try? from.close() }
            _ = FileManager.default.createFile(atPath: target.path, contents: nil, attributes: [.posixPermissions: 0o600])
            let to = try DatabaseQueue(path: target.path)
            defer { try? to.close() }
            try from.backup(to: to)
            // The copy stands alone: no WAL beside it.
            try to.writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        } catch {
            throw BackupError("cannot take a snapshot of \(source.path): \(error)")
        }
    }

    /// The data directory's files (relative paths) that a backup holds: not locks, pid files,
    /// WAL, shared-memory or journal files, nor temporary files.
    static func dataFiles(_ dataDirectory: URL) throws -> [String] {
        let fm = FileManager.default
        guard let walker = fm.enumerator(at: dataDirectory, includingPropertiesForKeys: [.isRegularFileKey, .isSymbolicLinkKey]) else {
            throw BackupError("cannot read \(dataDirectory.path)")
        }
        let base = dataDirectory.standardizedFileURL.resolvingSymlinksInPath().path
        var out: [String] = []
        for case let url as URL in walker {
            let values = try url.resourceValues(forKeys: [.isRegularFileKey, .isSymbolicLinkKey])
            guard values.isRegularFile == true, values.isSymbolicLink != true else { continue }
            let name = url.lastPathComponent
            if name.hasSuffix(".lock") || name.hasSuffix("-wal") || name.hasSuffix("-shm") || name.hasSuffix("-journal")
                || name.hasSuffix(".pid") || name.hasSuffix(".tmp") || name.hasSuffix(".partial") { continue }
            let full = url.standardizedFileURL.resolvingSymlinksInPath().path
            guard full.hasPrefix(base + "/") else { continue }
            out.append(String(full.dropFirst(base.count + 1)))
        }
        return out.sorted()
    }

    static func isSQLite(_ url: URL) throws -> Bool {
        guard let handle = FileHandle(forReadingAtPath: url.path) else { throw BackupError("cannot read \(url.path)") }
        defer { try? handle.close() }
        let head = try handle.read(upToCount: 16) ?? Data()
        return head == Data("SQLite format 3\u{0}".utf8)
    }

    // MARK: Restore

    /// Restores an archive into `dataDirectory`. With `configFile` given: written from the
    /// archive when it does not exist; when it does, it is kept, and the archive's copy is put
    /// beside it as `<name>.from-backup` if it differs.
    @discardableResult
    public static func restore(from archiveURL: URL, dataDirectory: URL, configFile: URL?, replace: Bool) throws -> Manifest {
        let fm = FileManager.default
        let (archive, manifest) = try open(archiveURL)

        try fm.createDirectory(at: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        chmod(dataDirectory.path, 0o700)
        // A running bot holds this lock for its whole life: its data is never overwritten.
        let lock: DatabaseLock
        do { lock = try DatabaseLock.acquire(prefix: BotHost.databasePrefix(dataDirectory)) } catch let locked as DatabaseLocked {
            throw BackupError("\(dataDirectory.path) belongs to a running bot\(locked.holder.map { " (pid \($0))" } ?? ""); stop it before restoring")
        }
        defer { lock.release() }
        let existing = try dataFiles(dataDirectory)
        if !existing.isEmpty, !replace {
            throw BackupError("\(dataDirectory.path) already holds a bot's data (\(existing.count) files); restore with --replace to overwrite it")
        }

        // Everything is unpacked and checked beside the data directory before anything in it changes.
        let staging = try privateTemporaryDirectory(near: dataDirectory)
        defer { try? fm.removeItem(at: staging) }
        var restored: [String] = []
        var config: Data?
        for entry in archive where entry.path != manifestName {
            if entry.path.hasPrefix(configPrefix), manifest.config != nil {
                config = try read(entry, of: archive, limit: 1 << 20)
                continue
            }
            guard entry.type == .file, entry.path.hasPrefix(dataPrefix) else {
                throw BackupError("the archive holds an entry that is not a data file: \(entry.path)")
            }
            let relative = String(entry.path.dropFirst(dataPrefix.count))
            guard isSafe(relative) else { throw BackupError("the archive holds an unsafe path: \(entry.path)") }
            let target = staging.appendingPathComponent(relative)
            try makePrivateDirectories(target.deletingLastPathComponent(), under: staging)
            _ = try archive.extract(entry, to: target, skipCRC32: false)
            chmod(target.path, 0o600)
            restored.append(relative)
        }
        for db in manifest.databases {
            guard restored.contains(db) else { throw BackupError("the archive lacks the database its manifest lists: \(db)") }
            try check(staging.appendingPathComponent(db))
        }

        // Replace: the old files (and every WAL and shared-memory file, which would not fit the
        // restored databases) go; the lock file stays, held by us.
        let lockName = URL(fileURLWithPath: DatabaseLock.lockFile(prefix: BotHost.databasePrefix(dataDirectory))).lastPathComponent
        if let walker = fm.enumerator(at: dataDirectory, includingPropertiesForKeys: nil) {
            var doomed: [URL] = []
            for case let url as URL in walker where url.lastPathComponent != lockName {
                var isDirectory: ObjCBool = false
                if fm.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue { doomed.append(url) }
            }
            for url in doomed { try fm.removeItem(at: url) }
        }
        for relative in restored {
            let target = dataDirectory.appendingPathComponent(relative)
            try makePrivateDirectories(target.deletingLastPathComponent(), under: dataDirectory)
            try fm.moveItem(at: staging.appendingPathComponent(relative), to: target)
            chmod(target.path, 0o600)
        }

        if let configFile, let config {
            if !fm.fileExists(atPath: configFile.path) {
                try write(config, to: configFile)
            } else if (try? Data(contentsOf: configFile)) != config {
                try write(config, to: configFile.deletingLastPathComponent().appendingPathComponent(configFile.lastPathComponent + ".from-backup"))
            }
        }
        return manifest
    }

    /// The archive and its manifest; refused when it is not a backup or of a newer format.
    static func open(_ archiveURL: URL) throws -> (Archive, Manifest) {
        let archive: Archive
        do { archive = try Archive(url: archiveURL, accessMode: .read) } catch {
            throw BackupError("\(archiveURL.path) is not a zip archive: \(error)")
        }
        guard let manifestEntry = archive[manifestName] else {
            throw BackupError("\(archiveURL.path) is not a Swiftplex backup (no \(manifestName))")
        }
        let manifest = try Manifest(try JSONValue.parse(String(decoding: try read(manifestEntry, of: archive, limit: 1 << 20), as: UTF8.self)))
        guard manifest.formatVersion <= formatVersion else {
            throw BackupError("\(archiveURL.lastPathComponent) was made by a newer Swiftplex (\(manifest.swiftplexVersion), backup format \(manifest.formatVersion)); this one (\(SwiftplexVersion.current)) reads format \(formatVersion) and older: restore it with that version or newer")
        }
        return (archive, manifest)
    }

    /// Writes the archive's configuration file (0600) to `url`, which must not exist.
    public static func restoreConfiguration(from archiveURL: URL, to url: URL) throws {
        let (archive, _) = try open(archiveURL)
        guard let entry = archive.first(where: { $0.path.hasPrefix(configPrefix) && $0.type == .file }) else {
            throw BackupError("\(url.path) does not exist and the archive holds no configuration file")
        }
        guard !FileManager.default.fileExists(atPath: url.path) else { throw BackupError("\(url.path) exists") }
        try write(try read(entry, of: archive, limit: 1 << 20), to: url)
    }

    static func read(_ entry: Entry, of archive: Archive, limit: Int) throws -> Data {
        guard entry.uncompressedSize <= Int64(limit) else { throw BackupError("\(entry.path) in the archive is too large") }
        var data = Data()
        _ = try archive.extract(entry, skipCRC32: false) { chunk in data.append(chunk) }
        return data
    }

    /// A relative path with no `..`, no absolute start, nothing empty.
    static func isSafe(_ relative: String) -> Bool {
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
        return !relative.isEmpty && !relative.hasPrefix("/") && parts.allSatisfy { !$0.isEmpty && $0 != ".." && $0 != "." }
    }

    static func check(_ db: URL) throws {
        do {
            let queue = try DatabaseQueue(path: db.path)
            defer { try? queue.close() }
            let result = try queue.read { try String.fetchOne($0, sql: "PRAGMA quick_check") }
            guard result == "ok" else { throw BackupError("\(result ?? "no answer")") }
        } catch {
            throw BackupError("the archive's \(db.lastPathComponent) is not a sound database: \(error)")
        }
    }

    static func makePrivateDirectories(_ directory: URL, under root: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var d = directory.standardizedFileURL
        while d.path.count > root.standardizedFileURL.path.count {
            chmod(d.path, 0o700)
            d = d.deletingLastPathComponent()
        }
    }

    static func write(_ data: Data, to url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw BackupError("cannot write \(url.path)")
        }
        chmod(url.path, 0o600)
    }

    /// A new 0700 directory next to `url` (same file system, so files move in by rename).
    static func privateTemporaryDirectory(near url: URL) throws -> URL {
        let parent = url.standardizedFileURL.deletingLastPathComponent()
        let dir = parent.appendingPathComponent(".swiftplex-backup-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return dir
    }
}

/// Why a backup or a restore did not happen (nothing was changed).
public struct BackupError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
