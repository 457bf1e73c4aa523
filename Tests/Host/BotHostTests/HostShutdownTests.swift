import BotHost
import ChatCore
import Foundation
import NIOConcurrencyHelpers
import PluginHost
import RelayProtocol
import SwiftplexPluginTesting
import TestSupport
import Testing

/// The host's services (embedded relay, engine, plugins) in one `ServiceGroup`: `shutdown()`
/// returns only once they have stopped and the databases are closed, and a shutdown while the
/// engine is busy loses nothing.
@Suite(.timeLimit(.minutes(3))) struct HostShutdownTests {
    static let welcome = "hi, I echo"

    static func options(_ dir: URL, relayPort: Int = 0) -> BotHostOptions {
        let config = #"{"welcome": "\#(welcome)"}"#
        return BotHostOptions(
            dataDirectory: dir.appendingPathComponent("bot"), profile: .init(displayName: "shutdown-bot"),
            relays: .embedded(host: "127.0.0.1", port: relayPort, publicHost: nil),
            plugins: [
                PluginSpec(name: "welcome", path: PluginTestBench.product("libauto-accept.so"), configFingerprint: config,
                           configure: { _ in .success(config) }),
                PluginSpec(name: "echo", path: PluginTestBench.product("libauto-reply.so"), configFingerprint: #"{"echo": true}"#,
                           configure: { _ in .success(#"{"echo": true}"#) }),
            ],
            runnerExecutable: URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner")))
    }

    @Test func shutdownReturnsOnlyWhenTheServicesHaveStoppedAndTheDatabasesAreClosed() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let host = try await BotHost.start(Self.options(dir), logger: quiet)
        let ran = AsyncInbox<String>()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await host.run()
                ran.yield("run() returned")
            }
            let alice = try await ScriptedContact.start(name: "alice", directory: dir.appendingPathComponent("alice"),
                                                        relay: try #require(host.relayAddress))
            try await alice.connect(to: try #require(host.address))
            #expect(try await alice.nextMessage() == Self.welcome)

            await host.shutdown()
            // run() returns with it (its task is resumed when the pool gets to it: awaited, not
            // read at once, since the test runs with a one-thread pool too) ...
            #expect(try await ran.next(timeout: .seconds(30)) == "run() returned")
            // ... the engine, the relay and the plugins have stopped ...
            #expect(host.plugins.statuses().isEmpty)
            // ... and both engine databases are closed: SQLite removes a WAL database's `-wal`
            // file when its last connection closes (it is there while one is open).
            for file in ["bot_chat.db", "bot_agent.db"] {
                let wal = dir.appendingPathComponent("bot").appendingPathComponent(file + "-wal").path
                #expect(!FileManager.default.fileExists(atPath: wal), "\(file)")
            }
            // The data directory is free: a second host starts on it at once, with the same bot.
            let again = try await BotHost.start(Self.options(dir), logger: quiet)
            #expect(again.address == host.address)
            await again.shutdown()
            await alice.stop()
            try await group.waitForAll()
        }
    }

    @Test func aShutdownWhileTheEngineIsBusyLosesNothing() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = try await BotHost.start(Self.options(dir), logger: quiet)
        let relay = try #require(first.relayAddress)
        let alice = try await ScriptedContact.start(name: "alice", directory: dir.appendingPathComponent("alice"), relay: relay)
        let texts = (1...20).map { "message \($0)" }
        var echoed: Set<String> = []
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await first.run() }
            try await alice.connect(to: try #require(first.address))
            #expect(try await alice.nextMessage() == Self.welcome)
            for text in texts { try await alice.send(text) }
            // The bot is busy with them (receiving, storing, echoing) when it is shut down.
            echoed.formUnion(try await alice.nextMessage().split(separator: "\n").map(String.init))
            await first.shutdown()
            try await group.waitForAll()
        }
        // The same bot again, its relay on the same port: every message is echoed, none lost.
        let second = try await BotHost.start(Self.options(dir, relayPort: relay.port), logger: quiet)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await second.run() }
            while !echoed.isSuperset(of: texts) {
                echoed.formUnion(try await alice.nextMessage(timeout: .seconds(60)).split(separator: "\n").map(String.init))
            }
            #expect(echoed == Set(texts))
            await alice.stop()
            await second.shutdown()
            try await group.waitForAll()
        }
    }

    @Test func withBenchShutsTheBenchDownAndWaitsEvenWhenTheBodyThrows() async throws {
        struct Planned: Error {}
        let directory = NIOLockedValueBox<URL?>(nil)
        await #expect(throws: Planned.self) {
            try await PluginTestBench.withBench(plugins: []) { bench in
                directory.withLockedValue { $0 = bench.directory }
                _ = try await bench.request("alice")  // a contact of its own to stop as well
                throw Planned()
            }
        }
        // Removed by `shutdown()` after the host and the contact had stopped: it has run, awaited.
        let dir = try #require(directory.withLockedValue { $0 })
        #expect(!FileManager.default.fileExists(atPath: dir.path))
    }
}
