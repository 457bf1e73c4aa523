import Agent
import Foundation
import SwiftplexBase
import SwiftplexSQL
import SwiftplexStorage

/// Moves an engine's two databases (chat and agent) from one ``EngineDatabase`` to another —
/// SQLite files to PostgreSQL schemas or back (`swiftplex store copy`, docs/postgres.md "Moving a
/// bot between SQLite and PostgreSQL"):
///
/// - the source must hold both databases and must not be in use: on SQLite its lock file
///   (``DatabaseLock``, which every engine process holds) is taken, on PostgreSQL each schema's
///   advisory lock (which the engine's stores hold) — a running bot is refused with what holds it;
/// - the destination is locked the same way, created if missing, and migrated to this program's
///   schema (the source too, if it is behind: as the bot's next start would);
/// - a destination that holds rows is refused unless `force` (then emptied first);
/// - every table the migrated schema has is copied, rows as stored (ids kept, blobs byte for
///   byte), `batch` rows per transaction, parents before the tables that point to them; the
///   destination's id counters are set past the source's; then the counts of every table are
///   compared. Any failure is thrown as a ``StoreCopyError``: nothing half-written is reported as done.
public enum EngineStoreCopy {
    /// What was copied: per database (`chat`, `agent`), its tables and their rows.
    public struct Summary: Sendable {
        public var databases: [(label: String, rows: [(table: String, rows: Int)])]
        public var totalRows: Int { databases.reduce(0) { $0 + $1.rows.reduce(0) { $0 + $1.rows } } }
    }

    public static func copy(from source: EngineDatabase, to destination: EngineDatabase, force: Bool, batch: Int = 5000,
                            lockWait: Duration = .seconds(2), progress: @Sendable (String) -> Void) async throws -> Summary {
        guard batch > 0 else { throw StoreCopyError(.badLocation, "the batch must be at least 1 row") }
        let from = try locations(source, "source")
        let to = try locations(destination, "destination")
        guard from.chat.description != to.chat.description else {
            throw StoreCopyError(.badLocation, "the source and the destination are the same (\(source))")
        }

        // Locking, opening and migrating block: on a thread of their own, not Swift's pool.
        let opened = try await Blocking.run("store-copy-open") { try open(source, destination, from, to, lockWait: lockWait) }
        for note in opened.notes { progress(note) }
        do {
            let summary = try await copy(opened, source: source, destination: destination, force: force, batch: batch, progress: progress)
            await opened.close()
            return summary
        } catch {
            await opened.close()
            throw error
        }
    }

    /// The locks and open stores of a copy, and what opening them had to say.
    private struct Opened: Sendable {
        var locks: [DatabaseLock] = []
        var stores: [any SQLStore] = []
        var notes: [String] = []

        func close() async {
            await Blocking.run("store-copy-close") {
                for s in stores { try? s.close() }
                for l in locks { l.release() }
            }
        }
    }

    /// Takes the SQLite files' locks (a PostgreSQL schema's is taken by opening its store), then
    /// opens (and migrates) the source's chat and agent stores and the destination's, in that order.
    private static func open(_ source: EngineDatabase, _ destination: EngineDatabase, _ from: (chat: DatabaseLocation, agent: DatabaseLocation),
                             _ to: (chat: DatabaseLocation, agent: DatabaseLocation), lockWait: Duration) throws -> Opened {
        try checkSourceExists(from, source)
        var opened = Opened()
        do {
            for (database, role) in [(source, "source"), (destination, "destination")] {
                guard case let .sqlite(prefix) = database else { continue }
                if role == "destination" { try makeParentDirectory(of: prefix) }
                do { opened.locks.append(try DatabaseLock.acquire(prefix: prefix)) } catch let e as DatabaseLocked {
                    throw StoreCopyError(.inUse, "the \(role) \(prefix) is in use: \(e) — stop the bot first")
                } catch {
                    throw StoreCopyError(.connection, "cannot lock the \(role) \(prefix): \(error)")
                }
            }
            func openStore(_ location: DatabaseLocation, _ label: String, _ migrations: [SQLMigration], _ role: String) throws {
                do {
                    opened.stores.append(try location.open(label: "copy-\(label)", migrations: migrations, lockWait: lockWait))
                } catch let e as SQLError where e.code == .locked {
                    throw StoreCopyError(.inUse, "the \(role) \(location) is in use: \(e.message) — stop the bot first")
                } catch let e as SQLError where e.code == .migration {
                    throw StoreCopyError(.schema, "the \(role) \(location): \(e.message)")
                } catch {
                    throw StoreCopyError(.connection, "cannot open the \(role) \(location): \(error)")
                }
            }
            for (location, migrations, label) in [(from.chat, ChatStore.migrations, "chat"), (from.agent, Agent.databaseMigrations, "agent")] {
                let pending = try pendingMigrations(migrations, at: location, role: "source")
                if !pending.isEmpty { opened.notes.append("\(label): migrating the source (\(pending.joined(separator: ", "))), as the bot's next start would") }
            }
            try openStore(from.chat, "chat", ChatStore.migrations, "source")
            try openStore(from.agent, "agent", Agent.databaseMigrations, "source")
            try openStore(to.chat, "chat", ChatStore.migrations, "destination")
            try openStore(to.agent, "agent", Agent.databaseMigrations, "destination")
            return opened
        } catch {
            for s in opened.stores { try? s.close() }
            for l in opened.locks { l.release() }
            throw error
        }
    }

    private static func copy(_ opened: Opened, source: EngineDatabase, destination: EngineDatabase, force: Bool, batch: Int,
                             progress: @Sendable (String) -> Void) async throws -> Summary {
        let (sourceChat, sourceAgent, destinationChat, destinationAgent) = (opened.stores[0], opened.stores[1], opened.stores[2], opened.stores[3])
        let copies = [
            try await prepare("chat", sourceChat, destinationChat),
            try await prepare("agent", sourceAgent, destinationAgent),
        ]
        let held = copies.filter { $0.destinationTotal > 0 }
        if !held.isEmpty {
            var parts: [String] = []
            for c in held {
                var tables: [String] = []
                for t in c.tables {
                    if let n = c.destinationRows[t.name], n > 0 { tables.append("\(t.name) \(n)") }
                }
                parts.append("\(c.label): " + tables.joined(separator: ", "))
            }
            let what = parts.joined(separator: "; ")
            guard force else {
                throw StoreCopyError(.notEmpty, "the destination \(destination) is not empty (\(what) rows); --force deletes what it holds first")
            }
            progress("deleting what the destination holds (\(what) rows)")
            for c in held {
                do { try await c.clearDestination() } catch {
                    throw StoreCopyError(.copy, "\(c.label): cannot empty the destination: \(error)")
                }
            }
        }
        for c in copies {
            progress("\(c.label): copying \(c.sourceTotal) rows in \(c.tables.count) tables")
            do { try await c.copy(batch: batch, progress: progress) } catch let e as StoreCopyError {
                throw StoreCopyError(e.code, e.message + " — the destination is incomplete: run the copy again with --force")
            } catch {
                throw StoreCopyError(.copy, "\(c.label): \(error) — the destination is incomplete: run the copy again with --force")
            }
        }
        var databases: [(label: String, rows: [(table: String, rows: Int)])] = []
        for c in copies {
            var rows: [(table: String, rows: Int)] = []
            for t in c.tables { rows.append((table: t.name, rows: c.sourceRows[t.name] ?? 0)) }
            databases.append((label: c.label, rows: rows))
        }
        return Summary(databases: databases)
    }

    private static func prepare(_ label: String, _ source: any SQLStore, _ destination: any SQLStore) async throws -> SQLStoreCopy {
        do { return try await SQLStoreCopy.prepare(label: label, from: source, to: destination) } catch let e as StoreCopyError {
            throw e
        } catch {
            throw StoreCopyError(.connection, "\(label): cannot read the schemas: \(error)")
        }
    }

    private static func locations(_ database: EngineDatabase, _ role: String) throws -> (chat: DatabaseLocation, agent: DatabaseLocation) {
        do { return (try database.chat, try database.agent) } catch {
            throw StoreCopyError(.badLocation, "the \(role) \(database): \(error)")
        }
    }

    /// Both of the source's databases are there: its files, or its schemas with their record of
    /// migrations (a server that cannot be reached fails here, before anything is opened).
    private static func checkSourceExists(_ from: (chat: DatabaseLocation, agent: DatabaseLocation), _ source: EngineDatabase) throws {
        for (location, migrations) in [(from.chat, ChatStore.migrations), (from.agent, Agent.databaseMigrations)] {
            switch location {
            case let .sqlite(path):
                guard FileManager.default.fileExists(atPath: path.path) else {
                    throw StoreCopyError(.sourceMissing, "the source \(source) has no \(path.lastPathComponent) (\(path.path))")
                }
            case .postgres:
                let pending = try pendingMigrations(migrations, at: location, role: "source")
                guard pending.count < migrations.count else {
                    throw StoreCopyError(.sourceMissing, "the source \(source) holds no engine database in \(location)")
                }
            }
        }
    }

    private static func pendingMigrations(_ migrations: [SQLMigration], at location: DatabaseLocation, role: String) throws -> [String] {
        do { return try EngineDatabase.pending(migrations, at: location) } catch {
            throw StoreCopyError(.connection, "cannot read the \(role) \(location): \(error)")
        }
    }

    /// The directory an SQLite destination's files go in (0700 when made here).
    private static func makeParentDirectory(of prefix: String) throws {
        let dir = URL(fileURLWithPath: prefix).deletingLastPathComponent()
        guard !FileManager.default.fileExists(atPath: dir.path) else { return }
        do { try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) } catch {
            throw StoreCopyError(.badLocation, "cannot make the directory \(dir.path): \(error)")
        }
    }
}
