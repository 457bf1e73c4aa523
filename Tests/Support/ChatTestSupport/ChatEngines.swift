import Agent
import ChatAPI
import ChatCore
import Foundation
import Logging
import NIOPosix
import RelayProtocol
import RelayServer
import SwiftplexBase
import TestSupport
import Testing

/// Helpers for tests that run chat engines on an in-process relay (ChatAPITests, ChatModelTests).

public var silent: Logger {
    var l = Logger(label: "chat-test")
    l.logLevel = .critical
    return l
}

/// A Chat API's events, awaited as they arrive (an `AsyncInbox` over `api.events`), taken by type.
public final class ChatInbox: Sendable {
    public let events: AsyncInbox<JSONValue>

    public init(_ api: ChatAPI) {
        events = AsyncInbox(api.events, describe: { $0["type"]?.stringValue ?? "?" })
    }

    /// Takes the first event of `type` that `predicate` accepts (others stay for later waits).
    public func next(_ type: String, where predicate: @escaping @Sendable (JSONValue) -> Bool = { _ in true }, timeout: Duration = .seconds(15)) async throws -> JSONValue {
        try await events.first(where: { $0["type"]?.stringValue == type && predicate($0) }, type, timeout: timeout)
    }

    /// Whether an event of `type` matching `predicate` has arrived (and is not yet taken).
    public func contains(_ type: String, where predicate: @Sendable (JSONValue) -> Bool = { _ in true }) -> Bool {
        events.pending.contains { $0["type"]?.stringValue == type && predicate($0) }
    }
}

/// Where a test engine named `name` under `dir` keeps its databases: SQLite files
/// `<dir>/<name>_chat.db` and `_agent.db`; or, when `SWIFTPLEX_TEST_ENGINE_DB=postgres` and a test
/// server is given (``TestPostgres``), schemas on it named after `dir` and `name` (the same engine
/// opened again finds them).
public func testDatabase(_ dir: URL, _ name: String) throws -> EngineDatabase {
    let prefix = dir.appendingPathComponent(name).path
    guard ProcessInfo.processInfo.environment["SWIFTPLEX_TEST_ENGINE_DB"] == "postgres" else { return .sqlite(prefix: prefix) }
    guard let url = TestPostgres.serverURL else {
        throw TestFailure("SWIFTPLEX_TEST_ENGINE_DB=postgres needs a server in \(TestPostgres.environmentVariable)")
    }
    return try EngineDatabase.postgres(connection: url, schemaPrefix: TestPostgres.schema(for: prefix))
}

/// Runs an engine on `<dir>/<name>` (``testDatabase(_:_:)``) for the duration of `body`.
public func withEngine<T: Sendable>(_ dir: URL, _ name: String, relays: [RelayAddress], agentOptions: AgentOptions = AgentOptions(),
                                    _ body: (ChatAPI, ChatInbox) async throws -> T) async throws -> T {
    try await withEngine(database: try testDatabase(dir, name), relays: relays, agentOptions: agentOptions, body)
}

/// Runs an engine on `database` for the duration of `body`, and closes it.
public func withEngine<T: Sendable>(database: EngineDatabase, relays: [RelayAddress], agentOptions: AgentOptions = AgentOptions(),
                                    _ body: (ChatAPI, ChatInbox) async throws -> T) async throws -> T {
    let controller = try await ChatController.open(database: database, defaultRelays: relays, logger: silent, agentOptions: agentOptions)
    let api = ChatAPI(controller: controller)
    let inbox = ChatInbox(api)
    do {
        let result = try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try? await controller.run() }
            defer { group.cancelAll() }
            return try await body(api, inbox)
        }
        // Closed, so that the same engine can be opened again by the test (a restart).
        await controller.close()
        return result
    } catch {
        await controller.close()
        throw error
    }
}

/// The type of a `chatCmdError`'s error: its `errorType` (a `ChatError` of kind `error`), or
/// its `storeError` (kind `errorStore`); nil for an answer that is no error.
public func errorType(_ r: JSONValue) -> String? {
    r["chatError"]?["errorType"]?["type"]?.stringValue ?? r["chatError"]?["storeError"]?["type"]?.stringValue
}

public func text(_ item: JSONValue?) -> String? { item?["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue }

/// The `/_create user` command for a plain profile.
public func createUser(_ name: String) -> String {
    #"/_create user {"profile": {"displayName": "\#(name)", "fullName": ""}, "pastTimestamp": false, "userChatRelay": false, "clientService": false}"#
}

/// Creates a user and starts the engine.
public func startUser(_ api: ChatAPI, _ name: String) async {
    _ = await api.execute(createUser(name))
    _ = await api.execute("/_start")
}

/// Two engines connected through a one-time invitation; returns each one's id of the other.
public func connectPair(_ a: ChatAPI, _ aInbox: ChatInbox, _ b: ChatAPI, _ bInbox: ChatInbox) async throws -> (bInA: Int, aInB: Int) {
    await startUser(a, "anna")
    await startUser(b, "ben")
    let link = try #require(await a.execute("/_connect 1")["connLinkInvitation"]?["connFullLink"]?.stringValue)
    _ = await b.execute("/_connect 1 \(link)")
    let ben = try #require(try await aInbox.next("contactConnected")["contact"]?["contactId"]?.intValue)
    let anna = try #require(try await bInbox.next("contactConnected")["contact"]?["contactId"]?.intValue)
    return (ben, anna)
}

/// Suites that run engines on an in-process relay over loopback TLS, in a temporary directory.
public protocol LiveRelaySuite {}

extension LiveRelaySuite {
    /// A fresh temporary directory (0700); the test removes it.
    public func tempDir() -> URL { TemporaryDirectory(prefix: "swiftplex-chat").url }

    public func relay(_ dir: URL) async throws -> RelayServer {
        try await RelayServer.start(configuration: RelayConfiguration(dataDirectory: dir.appendingPathComponent("relay"), host: "127.0.0.1", port: 0),
                                    group: MultiThreadedEventLoopGroup.singleton, logger: silent)
    }

    /// Runs `body` with a fresh temporary directory and an in-process relay whose data is in it;
    /// afterwards the relay is shut down (awaited) and the directory removed, whatever `body` did.
    public func withLiveRelay<T>(_ body: (URL, RelayServer) async throws -> T) async throws -> T {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        return try await withRelay(dir.appendingPathComponent("relay")) { relay in try await body(dir, relay) }
    }

    /// Runs `body` with an in-process relay whose data is in `dataDirectory`; afterwards the relay
    /// is shut down (awaited), whatever `body` did.
    public func withRelay<T>(_ dataDirectory: URL, _ body: (RelayServer) async throws -> T) async throws -> T {
        let relay = try await RelayServer.start(configuration: RelayConfiguration(dataDirectory: dataDirectory, host: "127.0.0.1", port: 0),
                                                group: MultiThreadedEventLoopGroup.singleton, logger: silent)
        do {
            let result = try await body(relay)
            await relay.shutdown()
            return result
        } catch {
            await relay.shutdown()
            throw error
        }
    }
}

extension JSONValue {
    public var arrayFirst: JSONValue? { if case let .array(a) = self { a.first } else { nil } }
    public var arrayCount: Int? { if case let .array(a) = self { a.count } else { nil } }
}

extension LiveRelaySuite {
    /// The preamble of most two-engine tests: a live relay, engine `a` with user `anna` and engine
    /// `b` with user `ben`, both started (not yet connected to each other).
    public func withAnnaAndBen<T: Sendable>(_ body: (_ dir: URL, _ relay: RelayServer, _ a: ChatAPI, _ aInbox: ChatInbox, _ b: ChatAPI, _ bInbox: ChatInbox) async throws -> T)
        async throws -> T {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "a", relays: [relay.address]) { a, aInbox in
                try await withEngine(dir, "b", relays: [relay.address]) { b, bInbox in
                    await startUser(a, "anna")
                    await startUser(b, "ben")
                    return try await body(dir, relay, a, aInbox, b, bInbox)
                }
            }
        }
    }
}
