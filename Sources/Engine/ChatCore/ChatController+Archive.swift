import ChatModel
import Foundation
import SwiftplexBackup
import SwiftplexBase
import Synchronization

/// `ArchiveConfig` of `/_db export` and `/_db import`: `archivePath`, and SimpleX's
/// `disableCompression` and `parentTempDirectory`, which are read and not needed here (entries are
/// always deflated; the unpacked files stay beside the databases, so they move in by rename).
public struct ArchiveConfig: Sendable, Equatable {
    public var archivePath: String

    public init(archivePath: String) { self.archivePath = archivePath }

    public init(_ json: JSONValue) throws {
        guard let path = json["archivePath"]?.stringValue, !path.isEmpty else {
            throw ChatFailure(commandError: "ArchiveConfig needs an archivePath (a file path string)")
        }
        for key in ["disableCompression"] where json[key] != nil && json[key]?.boolValue == nil && json[key] != .null {
            throw ChatFailure(commandError: "ArchiveConfig.\(key) must be a boolean")
        }
        archivePath = path
    }
}

/// Set once the databases were replaced or deleted under the running controller.
final class StoreChange: Sendable {
    private let changed = Mutex(false)
    var isChanged: Bool { changed.withLock { $0 } }
    func set() { changed.withLock { $0 = true } }
}

extension ChatController {
    /// True once `/_db import` or `/_db delete` replaced the databases: every command is then
    /// refused with `chatStoreChanged` until the store is opened again.
    public nonisolated var storeChanged: Bool { storeChange.isChanged }

    /// `/_db export`: a consistent snapshot of both databases in a Swiftplex backup archive
    /// (``DatabaseArchive``). As in SimpleX, the chat must be stopped (`/_stop`).
    public func exportArchive(_ config: ArchiveConfig) async throws -> ChatResponse {
        guard !started else { throw ChatFailure.chat(.chatNotStopped) }
        let prefix = try sqlitePrefix("/_db export")
        do {
            _ = try await Self.offActor { try DatabaseArchive.export(prefix: prefix, to: URL(fileURLWithPath: config.archivePath)) }
        } catch let e as BackupError {
            throw ChatFailure.chat(.exception(message: e.description))
        }
        logger.info("exported the databases", metadata: ["archive": "\(config.archivePath)"])
        return .archiveExported(archiveErrors: [])
    }

    /// `/_db import`: the archive's databases replace this controller's. The chat must be
    /// stopped. The archive is unpacked and checked first; only then are the databases closed and
    /// replaced (each old one kept as `<file>.bak`). Afterwards every command answers
    /// `chatStoreChanged`: close the store and open it again (`chat_close_store`,
    /// `chat_migrate_init`), as with SimpleX.
    public func importArchive(_ config: ArchiveConfig) async throws -> ChatResponse {
        guard !started else { throw ChatFailure.chat(.chatNotStopped) }
        let prefix = try sqlitePrefix("/_db import")
        let prepared: DatabaseArchive.PreparedImport
        do {
            prepared = try await Self.offActor { try DatabaseArchive.prepareImport(from: URL(fileURLWithPath: config.archivePath), prefix: prefix) }
        } catch let e as BackupError {
            throw ChatFailure.chat(.exception(message: e.description))
        }
        await closeStores()
        do {
            try await Self.offActor { try prepared.install() }
        } catch {
            throw ChatFailure.chat(.exception(message: "the databases were closed but not replaced: \(error)"))
        }
        logger.info("imported the databases; the store must be opened again", metadata: ["archive": "\(config.archivePath)"])
        return .archiveImported(archiveErrors: prepared.skipped.map { .fileError(file: $0, fileError: "not imported: an engine's import takes only its two databases") })
    }

    /// `/_db delete`: closes and deletes both databases (the chat must be stopped): the SQLite
    /// files, or the two PostgreSQL schemas; afterwards every command answers `chatStoreChanged`.
    public func deleteStorage() async throws -> ChatResponse {
        guard !started else { throw ChatFailure.chat(.chatNotStopped) }
        let (chat, agentDB) = (try database.chat, try database.agent)
        await closeStores()
        try await Self.offActor {
            for location in [chat, agentDB] { try location.destroy() }
        }
        logger.info("deleted the databases")
        return .cmdOk(user: nil)
    }

    /// The SQLite files' prefix; on PostgreSQL the archive commands are refused (the server's own
    /// tools back up and restore its schemas: docs/postgres.md).
    private func sqlitePrefix(_ command: String) throws -> String {
        switch database {
        case let .sqlite(prefix): return prefix
        case let .postgres(location):
            throw ChatFailure.chat(.exception(message: "\(command) works on SQLite files; these databases are in PostgreSQL (\(location)): use pg_dump and pg_restore on the schemas \(location.schema)_chat_schema and \(location.schema)_agent_schema"))
        }
    }

    /// Closes both databases for good (the agent's work stops with them) and marks the store
    /// changed. `close()` may follow: closing twice is harmless.
    private func closeStores() async {
        storeChange.set()
        closing = true
        await stopRunning()
        for task in background.values { task.cancel() }
        for task in background.values { await task.value }
        await agent.close()
        let db = store.db
        await Blocking.run("chat-store-close") { try? db.close() }
        userCache = nil
    }

    /// File work off the actor's executor.
    private static func offActor<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await Blocking.run("chat-archive", body)
    }
}
