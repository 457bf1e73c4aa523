import Agent
import ChatAPI
import ChatCore
import ChatTestSupport
import Foundation
import SwiftplexBase
import SwiftplexSQL
import SwiftplexSQLPostgres
import SwiftplexStorage
import TestSupport
import Testing

/// `swiftplex store copy` (``EngineStoreCopy``): a bot's engine moved from SQLite files to
/// PostgreSQL and back with its user, contact, messages and ratchets (it goes on talking to its
/// contact over a real relay), every row compared; and the refusals.
@Suite(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)), .timeLimit(.minutes(5)))
struct EngineStoreCopyTests: LiveRelaySuite {
    static func postgres() throws -> EngineDatabase {
        try EngineDatabase.postgres(connection: try #require(TestPostgres.serverURL), schemaPrefix: TestPostgres.schema(for: UUID().uuidString))
    }

    static func send(_ api: ChatAPI, _ contact: Int, _ text: String) async -> JSONValue {
        await api.execute(#"/_send @\#(contact) json [{"msgContent": {"type": "text", "text": "\#(text)"}, "mentions": {}}]"#)
    }

    static func texts(_ r: JSONValue) -> [String] {
        guard case let .array(items)? = r["chat"]?["chatItems"] else { return [] }
        return items.compactMap { $0["content"]?["msgContent"]?["text"]?.stringValue }
    }

    /// Every row of every table (in key order) and every id counter of one database.
    struct Snapshot: Equatable {
        var rows: [String: [[SQLValue]]]
        var counters: [String: Int64]
    }

    static func snapshot(_ location: DatabaseLocation, _ migrations: [SQLMigration]) async throws -> Snapshot {
        let store = try await Blocking.run("snapshot-open") { try location.open(label: "snapshot", migrations: migrations) }
        do {
            let snapshot = try await read(store)
            await Blocking.run("snapshot-close") { try? store.close() }
            return snapshot
        } catch {
            await Blocking.run("snapshot-close") { try? store.close() }
            throw error
        }
    }

    private static func read(_ store: any SQLStore) async throws -> Snapshot {
        try await store.read { db in
            var snapshot = Snapshot(rows: [:], counters: [:])
            for t in try SQLSchema.tables(db) {
                // The columns and the rows in one order for both backends (text sorts differently
                // on the two servers).
                let columns = t.columns.sorted()
                snapshot.rows[t.name] = try db.rows("SELECT \(columns.map(quoted).joined(separator: ", ")) FROM \(quoted(t.name))", [SQLValue]())
                    .map(\.values).sorted { "\($0)" < "\($1)" }
                snapshot.counters[t.name] = try SQLSchema.counter(db, t)
            }
            return snapshot
        }
    }

    /// Both databases of an engine.
    static func snapshot(_ database: EngineDatabase) async throws -> [Snapshot] {
        [try await snapshot(try database.chat, ChatController.databaseMigrations), try await snapshot(try database.agent, Agent.databaseMigrations)]
    }

    /// The ``StoreCopyError`` `body` throws (nil when it throws none).
    static func copyError(_ body: () async throws -> Void) async -> StoreCopyError? {
        do {
            try await body()
            return nil
        } catch let e as StoreCopyError {
            return e
        } catch {
            Issue.record("not a StoreCopyError: \(error)")
            return nil
        }
    }

    static func dropSchemas(_ database: EngineDatabase) async {
        for location in [try? database.chat, try? database.agent] {
            if case let .postgres(l)? = location { try? await PostgresStore.dropSchema(at: l) }
        }
    }

    /// Runs `body`, then drops `database`'s schemas whatever it did.
    static func droppingSchemas(_ database: EngineDatabase, _ body: () async throws -> Void) async throws {
        do { try await body() } catch {
            await dropSchemas(database)
            throw error
        }
        await dropSchemas(database)
    }

    static func mode(_ path: String) throws -> Int { try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? -1 }

    @Test func aBotMovesToPostgreSQLAndBackWithItsContactMessagesAndRatchets() async throws {
        let pg = try Self.postgres()
        try await Self.droppingSchemas(pg) { try await withLiveRelay { dir, relay in
            let sqlite = EngineDatabase.sqlite(prefix: dir.appendingPathComponent("anna").path)
            let back = EngineDatabase.sqlite(prefix: dir.appendingPathComponent("back/anna").path)
            try await withEngine(database: .sqlite(prefix: dir.appendingPathComponent("ben").path), relays: [relay.address]) { b, bInbox in
                // Anna on SQLite: a contact, messages both ways, an address.
                let (ben, anna) = try await withEngine(database: sqlite, relays: [relay.address]) { a, aInbox in
                    let ids = try await connectPair(a, aInbox, b, bInbox)
                    for i in 1...3 {
                        _ = await Self.send(a, ids.bInA, "a\(i)")
                        _ = try await bInbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "a\(i)" })
                        _ = await Self.send(b, ids.aInB, "b\(i)")
                        _ = try await aInbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "b\(i)" })
                    }
                    #expect(await a.execute("/_address 1")["type"]?.stringValue == "userContactLinkCreated")
                    return ids
                }

                // Copied to PostgreSQL (a few rows per batch, so each table takes several): every
                // row and id counter as in the files.
                let lines = AsyncLog<String>()
                let summary = try await EngineStoreCopy.copy(from: sqlite, to: pg, force: false, batch: 3) { line in lines.append(line) }
                #expect(lines.all.contains { $0.hasPrefix("chat: chat_item 3/") }, "progress per batch: \(lines.all)")
                let original = try await Self.snapshot(sqlite)
                #expect(summary.totalRows == original.reduce(0) { $0 + $1.rows.values.reduce(0) { $0 + $1.count } } && summary.totalRows >= 10,
                        "\(summary.databases)")
                #expect(try await Self.snapshot(pg) == original)
                #expect(original[0].rows["chat_item"]?.count ?? 0 >= 6 && (original[0].counters["chat_item"] ?? 0) >= 6)
                #expect(original[1].rows["connection"]?.isEmpty == false)

                // A second copy onto it is refused (it holds the bot now); --force replaces it.
                let again = await Self.copyError { _ = try await EngineStoreCopy.copy(from: sqlite, to: pg, force: false) { _ in } }
                #expect(again?.code == .notEmpty && again?.message.contains("chat_item") == true, "\(String(describing: again))")
                _ = try await EngineStoreCopy.copy(from: sqlite, to: pg, force: true) { _ in }
                #expect(try await Self.snapshot(pg) == original)

                // Anna on PostgreSQL: the same user, contact and messages, and her ratchets went
                // with them: a new message each way.
                try await withEngine(database: pg, relays: [relay.address]) { a, aInbox in
                    #expect(await a.execute("/_start")["type"]?.stringValue == "chatStarted")
                    #expect(await a.execute("/user")["user"]?["profile"]?["displayName"]?.stringValue == "anna")
                    #expect(Self.texts(await a.execute("/_get chat @\(ben) count=10")) == ["a1", "b1", "a2", "b2", "a3", "b3"])

                    // While she runs, her schemas are not copied.
                    let busy = await Self.copyError {
                        _ = try await EngineStoreCopy.copy(from: pg, to: .sqlite(prefix: dir.appendingPathComponent("busy").path), force: false,
                                                           lockWait: .milliseconds(300)) { _ in }
                    }
                    #expect(busy?.code == .inUse && busy?.message.contains("another process holds the schema") == true, "\(String(describing: busy))")

                    _ = await Self.send(a, ben, "after the move")
                    _ = try await bInbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "after the move" })
                    _ = await Self.send(b, anna, "welcome")
                    _ = try await aInbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "welcome" })
                }

                // Back to SQLite files (made 0600), row for row what PostgreSQL holds; she opens there too.
                _ = try await EngineStoreCopy.copy(from: pg, to: back, force: false) { _ in }
                let moved = try await Self.snapshot(pg)
                #expect(try await Self.snapshot(back) == moved)
                #expect(moved != original, "the messages after the move are in it")
                for file in ["anna_chat.db", "anna_agent.db", "anna.lock"] {
                    #expect(try Self.mode(dir.appendingPathComponent("back/\(file)").path) == 0o600, "\(file)")
                }
                try await withEngine(database: back, relays: [relay.address]) { a, aInbox in
                    _ = await a.execute("/_start")
                    #expect(Self.texts(await a.execute("/_get chat @\(ben) count=10")) == ["a1", "b1", "a2", "b2", "a3", "b3", "after the move", "welcome"])
                    _ = await Self.send(b, anna, "still there?")
                    _ = try await aInbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "still there?" })
                }
            }
        } }
    }

    @Test func badInputAndABusySourceAreRefusedWithWhatIsWrong() async throws {
        let dir = TemporaryDirectory(prefix: "swiftplex-copy").url
        defer { try? FileManager.default.removeItem(at: dir) }
        let pg = try Self.postgres()
        try await Self.droppingSchemas(pg) { try await badInputAndABusySource(dir, pg) }
    }

    private func badInputAndABusySource(_ dir: URL, _ pg: EngineDatabase) async throws {
        let files = EngineDatabase.sqlite(prefix: dir.appendingPathComponent("bot").path)

        // No files, no schemas, no server.
        let missing = await Self.copyError { _ = try await EngineStoreCopy.copy(from: files, to: pg, force: false) { _ in } }
        #expect(missing?.code == .sourceMissing && missing?.message.contains("bot_chat.db") == true, "\(String(describing: missing))")
        let noSchemas = await Self.copyError { _ = try await EngineStoreCopy.copy(from: pg, to: files, force: false) { _ in } }
        #expect(noSchemas?.code == .sourceMissing, "\(String(describing: noSchemas))")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("bot_chat.db").path), "nothing was made")
        let unreachable = try EngineDatabase.postgres(connection: "postgresql://postgres@127.0.0.1:1/postgres", schemaPrefix: "x")
        let refused = await Self.copyError { _ = try await EngineStoreCopy.copy(from: unreachable, to: files, force: false) { _ in } }
        #expect(refused?.code == .connection && refused?.message.contains("cannot connect") == true, "\(String(describing: refused))")
        let same = await Self.copyError { _ = try await EngineStoreCopy.copy(from: pg, to: pg, force: false) { _ in } }
        #expect(same?.code == .badLocation)

        // A bot on the files (no relay needed: a user alone).
        let controller = try await ChatController.open(database: files, defaultRelays: [], logger: silent)
        #expect(await ChatAPI(controller: controller).execute(createUser("filed"))["type"]?.stringValue == "activeUser")
        await controller.close()
        // Held as every process running an engine on them holds them (the bot host, swiftplex-chat,
        // libsimplex): refused at once.
        let lock = try await DatabaseLock.acquire(prefix: dir.appendingPathComponent("bot").path)
        let busy = await Self.copyError { _ = try await EngineStoreCopy.copy(from: files, to: pg, force: false) { _ in } }
        #expect(busy?.code == .inUse && busy?.message.contains("database locked") == true, "\(String(describing: busy))")
        lock.release()
        _ = try await EngineStoreCopy.copy(from: files, to: pg, force: false) { _ in }
        #expect(try await Self.snapshot(pg) == Self.snapshot(files))
        let controllerOnPostgres = try await ChatController.open(database: pg, defaultRelays: [], logger: silent)
        #expect(await ChatAPI(controller: controllerOnPostgres).execute("/user")["user"]?["profile"]?["displayName"]?.stringValue == "filed")
        await controllerOnPostgres.close()
    }
}
