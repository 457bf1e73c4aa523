import ArgumentParser
import ChatCore
import Foundation

/// Where `swiftplex-chat` keeps the engine's data, chosen from its flags:
///
/// - `-d PREFIX` (SimpleX's `-d`): SQLite files `<PREFIX>_chat.db` and `<PREFIX>_agent.db`; a
///   missing directory of the prefix is created 0700, an existing one is left as it is.
/// - `--data-dir DIR`: the prefix `DIR/chat`, the directory created (or tightened to) 0700.
/// - `--postgres URL`, `-d postgresql://…` or `SWIFTPLEX_DATABASE`: PostgreSQL; with `--data-dir`
///   the directory holds the lock file, otherwise the store's own advisory lock is the only one.
/// - none of these: the prefix `~/.swiftplex/simplex_v1` (SimpleX's default is
///   `~/.simplex/simplex_v1`; another directory keeps the two programs' databases apart).
struct ChatStorage: CustomStringConvertible {
    let database: EngineDatabase
    /// The prefix of the lock file (`<prefix>.lock`) that keeps a second client off these databases.
    let lockPrefix: String?
    /// A directory to create before opening; `tighten` makes an existing one 0700 too (a
    /// directory of our own: `--data-dir`, the default).
    let directory: URL?
    let tighten: Bool
    let description: String

    static let defaultDirectory = ".swiftplex"
    static let defaultPrefix = "simplex_v1"

    static func isPostgres(_ value: String) -> Bool {
        value.hasPrefix("postgresql://") || value.hasPrefix("postgres://")
    }

    static func choose(database: String?, dataDirectory: String?, postgres: String?, environment: String?, home: URL) throws -> ChatStorage {
        var url = postgres
        var prefix: String?
        if let database {
            guard !database.isEmpty else { throw ValidationError("-d needs a file prefix (or a postgresql:// URL)") }
            if isPostgres(database) {
                guard postgres == nil else { throw ValidationError("give the PostgreSQL URL once: -d postgresql://… or --postgres, not both") }
                url = database
            } else {
                guard dataDirectory == nil else { throw ValidationError("-d \(database) and --data-dir \(dataDirectory!) both say where the databases are; give one") }
                guard postgres == nil else { throw ValidationError("-d \(database) names SQLite files; --postgres names a PostgreSQL database; give one") }
                prefix = database
            }
        }
        // SWIFTPLEX_DATABASE applies unless the command line names SQLite files.
        if url == nil, prefix == nil { url = environment }
        if let url {
            let engine: EngineDatabase
            do { engine = try EngineDatabase.postgres(connection: url, schemaPrefix: nil) } catch {
                throw ValidationError("invalid PostgreSQL URL: \(error) (expected postgresql://user@host:5432/db?schema=name)")
            }
            let dir = dataDirectory.map { URL(fileURLWithPath: $0) }
            return ChatStorage(database: engine, lockPrefix: dir?.appendingPathComponent("chat").path, directory: dir, tighten: true,
                               description: "\(engine)")
        }
        if let prefix {
            let path = URL(fileURLWithPath: prefix).path
            return ChatStorage(database: .sqlite(prefix: path), lockPrefix: path, directory: URL(fileURLWithPath: path).deletingLastPathComponent(),
                               tighten: false, description: "\(path)_chat.db, \(path)_agent.db")
        }
        let dir = dataDirectory.map { URL(fileURLWithPath: $0) } ?? home.appendingPathComponent(defaultDirectory)
        let path = dir.appendingPathComponent(dataDirectory == nil ? defaultPrefix : "chat").path
        return ChatStorage(database: .sqlite(prefix: path), lockPrefix: path, directory: dir, tighten: true,
                           description: "\(path)_chat.db, \(path)_agent.db")
    }

    /// Creates the directory (0700); an existing one is tightened to 0700 only when it is ours.
    func prepareDirectory() throws {
        guard let directory else { return }
        do {
            if !FileManager.default.fileExists(atPath: directory.path) {
                try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } else if tighten {
                try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
            }
        } catch {
            throw ClientFailure("cannot create the data directory \(directory.path): \(error.localizedDescription)")
        }
    }
}
