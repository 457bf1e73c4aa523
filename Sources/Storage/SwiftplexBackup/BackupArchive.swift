import Foundation
import GRDB
import SwiftplexBase
import ZIPFoundation

/// The Swiftplex backup archive: a zip file with `swiftplex-backup.json` (the manifest) at its root,
/// the data files under `data/` and, optionally, a configuration file under `config/`.
///
/// One format for every way a bot's data leaves its machine: `swiftplex backup` / `restore` (a
/// host's whole data directory, `HostBackup` in the bot host) and the Chat API's `/_db export` /
/// `/_db import` (an engine's two databases, ``DatabaseArchive``), so each reads the other's
/// archives. Databases always go in through SQLite's online backup API (``snapshot(_:to:)``),
/// never as a copy of a live file and its WAL; everything read back is checked before it
/// replaces anything; every file written is 0600 in directories 0700.
public enum BackupArchive {
    /// The archive format this build writes and the newest it reads.
    public static let formatVersion = 1
    public static let manifestName = "swiftplex-backup.json"
    public static let dataPrefix = "data/"
    public static let configPrefix = "config/"

    /// What an archive holds (`swiftplex-backup.json`).
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

        /// A manifest of this build, made now.
        public init(databases: [String], files: [String], config: String?) {
            self.init(formatVersion: BackupArchive.formatVersion, swiftplexVersion: SwiftplexVersion.current,
                      createdAt: Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date()),
                      databases: databases, files: files, config: config)
        }

        public init(formatVersion: Int, swiftplexVersion: String, createdAt: String, databases: [String], files: [String], config: String?) {
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
                throw BackupError("the archive's \(BackupArchive.manifestName) is not a Swiftplex backup manifest")
            }
            self.init(formatVersion: Int(format), swiftplexVersion: version, createdAt: created,
                      databases: dbs.compactMap(\.stringValue), files: files.compactMap(\.stringValue), config: v["config"]?.stringValue)
        }
    }

    // MARK: Writing

    /// Writes an archive (0600) to `archiveURL`: the manifest, each of `manifest.databases` and
    /// `manifest.files` from `staging` (paths relative to it) under `data/`, and `configFile`
    /// under `config/`. Written inside `staging` first, then renamed into place.
    public static func write(_ manifest: Manifest, from staging: URL, configFile: URL?, to archiveURL: URL) throws {
        let fm = FileManager.default
        let partial = staging.appendingPathComponent(".archive.partial")
        do {
            let archive = try Archive(url: partial, accessMode: .create)
            let manifestData = Data((manifest.json.description + "\n").utf8)
            try archive.addEntry(with: manifestName, type: .file, uncompressedSize: Int64(manifestData.count),
                                 provider: { position, size in manifestData.subdata(in: Data.Index(position)..<Data.Index(position) + size) })
            for relative in (manifest.databases + manifest.files).sorted() {
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
    }

    /// A consistent copy of a database that may be in use (SQLite's online backup API).
    public static func snapshot(_ source: URL, to target: URL) throws {
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
    public static func dataFiles(_ dataDirectory: URL) throws -> [String] {
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
            if isTransient(name) { continue }
            let full = url.standardizedFileURL.resolvingSymlinksInPath().path
            guard full.hasPrefix(base + "/") else { continue }
            out.append(String(full.dropFirst(base.count + 1)))
        }
        return out.sorted()
    }

    /// Lock, pid, WAL, shared-memory, journal and temporary files: never part of a backup.
    public static func isTransient(_ name: String) -> Bool {
        [".lock", "-wal", "-shm", "-journal", ".pid", ".tmp", ".partial"].contains { name.hasSuffix($0) }
    }

    public static func isSQLite(_ url: URL) throws -> Bool {
        guard let handle = FileHandle(forReadingAtPath: url.path) else { throw BackupError("cannot read \(url.path)") }
        defer { try? handle.close() }
        let head = try handle.read(upToCount: 16) ?? Data()
        return head == Data("SQLite format 3\u{0}".utf8)
    }

    // MARK: Reading

    /// The archive and its manifest; refused when it is not a backup or of a newer format.
    public static func open(_ archiveURL: URL) throws -> (Archive, Manifest) {
        guard FileManager.default.fileExists(atPath: archiveURL.path) else { throw BackupError("\(archiveURL.path) does not exist") }
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

    /// Extracts the data file `relative` (a path under `data/`) to `target` (0600), its
    /// directories made 0700 up to `root`, within `budget` (``extract(_:of:to:budget:)``).
    public static func extract(_ relative: String, of archive: Archive, to target: URL, under root: URL, budget: inout Int64) throws {
        guard isSafe(relative) else { throw BackupError("the archive holds an unsafe path: \(dataPrefix)\(relative)") }
        guard let entry = archive[dataPrefix + relative], entry.type == .file else {
            throw BackupError("the archive lacks \(dataPrefix)\(relative)")
        }
        try makePrivateDirectories(target.deletingLastPathComponent(), under: root)
        try extract(entry, of: archive, to: target, budget: &budget)
    }

    /// Bytes an archive may unpack to beside `directory`: the space free on its file system,
    /// less a reserve of 256 MiB, so that no archive can fill the disk.
    public static func extractionBudget(near directory: URL) -> Int64 {
        var stats = statvfs()
        guard statvfs(directory.path, &stats) == 0 else { return 0 }
        let free = Int64(stats.f_bavail) * Int64(stats.f_frsize)
        return max(0, free - (256 << 20))
    }

    /// Extracts `entry` to a new file `target` (0600), bounded twice: the entry may not inflate
    /// beyond the size its header declares (a zip bomb's lie), and what it declares must fit in
    /// `budget`, which it then uses up. Past either, the extraction stops, the partial file is
    /// removed and a ``BackupError`` names the entry.
    public static func extract(_ entry: Entry, of archive: Archive, to target: URL, budget: inout Int64) throws {
        let declared = Int64(entry.uncompressedSize)
        guard declared <= budget else {
            throw BackupError("\(entry.path) would unpack to \(declared) bytes, more than the \(budget) bytes left for this archive (the free disk space, less a reserve): refused")
        }
        let fd = Glibc.open(target.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw BackupError("cannot create \(target.path): \(String(cString: strerror(errno)))") }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        var written: Int64 = 0
        do {
            _ = try archive.extract(entry, skipCRC32: false) { chunk in
                written += Int64(chunk.count)
                guard written <= declared else {
                    throw BackupError("\(entry.path) inflates beyond the \(declared) bytes its header declares (a zip bomb?): refused")
                }
                try handle.write(contentsOf: chunk)
            }
            try handle.synchronize()
            try handle.close()
        } catch {
            try? handle.close()
            try? FileManager.default.removeItem(at: target)
            throw error as? BackupError ?? BackupError("cannot unpack \(entry.path): \(error)")
        }
        budget -= written
    }

    public static func read(_ entry: Entry, of archive: Archive, limit: Int) throws -> Data {
        guard entry.uncompressedSize <= Int64(limit) else { throw BackupError("\(entry.path) in the archive is too large") }
        var data = Data()
        _ = try archive.extract(entry, skipCRC32: false) { chunk in
            guard data.count + chunk.count <= limit, Int64(data.count + chunk.count) <= Int64(entry.uncompressedSize) else {
                throw BackupError("\(entry.path) inflates beyond its declared size (a zip bomb?): refused")
            }
            data.append(chunk)
        }
        return data
    }

    /// A relative path with no `..`, no absolute start, nothing empty.
    public static func isSafe(_ relative: String) -> Bool {
        let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
        return !relative.isEmpty && !relative.hasPrefix("/") && parts.allSatisfy { !$0.isEmpty && $0 != ".." && $0 != "." }
    }

    /// Refuses a database that SQLite's `quick_check` does not pass.
    public static func check(_ db: URL) throws {
        do {
            let queue = try DatabaseQueue(path: db.path)
            defer { try? queue.close() }
            let result = try queue.read { try String.fetchOne($0, sql: "PRAGMA quick_check") }
            guard result == "ok" else { throw BackupError("\(result ?? "no answer")") }
        } catch {
            throw BackupError("the archive's \(db.lastPathComponent) is not a sound database: \(error)")
        }
    }

    // MARK: Files

    public static func makePrivateDirectories(_ directory: URL, under root: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var d = directory.standardizedFileURL
        while d.path.count > root.standardizedFileURL.path.count {
            chmod(d.path, 0o700)
            d = d.deletingLastPathComponent()
        }
    }

    public static func write(_ data: Data, to url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw BackupError("cannot write \(url.path)")
        }
        chmod(url.path, 0o600)
    }

    /// A new 0700 directory next to `url` (same file system, so files move in by rename).
    public static func privateTemporaryDirectory(near url: URL) throws -> URL {
        let parent = url.standardizedFileURL.deletingLastPathComponent()
        let dir = parent.appendingPathComponent(".swiftplex-backup-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return dir
    }
}

/// Why a backup, a restore, an export or an import did not happen (nothing was changed).
public struct BackupError: CodedError {
    public enum Code: Sendable, Hashable { case failed }
    public var code: Code { .failed }
    public let message: String
    public init(_ message: String) { self.message = message }
}
