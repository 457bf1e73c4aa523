import Foundation
import TestSupport
import Testing
@testable import PluginHost

@Suite(.timeLimit(.minutes(2))) struct IsolationTests {
    let dir = temporaryDirectory()

    func manager(_ log: CommandLog) throws -> PluginManager {
        PluginManager(storage: try PluginStorage(path: dir.appendingPathComponent("plugins.db")), runCommand: log.runner,
                      runnerExecutable: Build.runner, logger: quiet)
    }

    @Test func anIsolatedPluginRunsOverTheSameABI() async throws {
        let log = CommandLog()
        let m = try manager(log)
        let r = await m.apply([testSpec("iso", config: #"{"tag":"iso"}"#, isolation: .process)])
        guard case let .started(info) = r[0].outcome else { throw TestFailure("\(r)") }
        #expect(info.name == "test-plugin")
        for n in 1...100 { m.dispatch(type: "newChatItems", json: event(n)) }
        await m.drain()
        #expect(log.seen("iso") == Array(1...100))
        let storage = try PluginStorage(path: dir.appendingPathComponent("plugins.db"))
        #expect(try storage.get(instance: "iso", key: "count") == "100")
        await m.stopAll()
    }

    @Test func aCrashIsContainedAndThePluginRestarted() async throws {
        let log = CommandLog()
        let m = try manager(log)
        await m.apply([testSpec("iso", config: #"{"tag":"iso"}"#, isolation: .process)])
        m.dispatch(type: "newChatItems", json: event(1))
        m.dispatch(type: "newChatItems", json: event(2, #","text":"crash-now""#))
        for n in 3...10 { m.dispatch(type: "newChatItems", json: event(n)) }
        // Generous: under a full parallel test run the restart competes for two cores.
        try await log.wait(timeout: .seconds(60)) { $0.seen("iso").last == 10 }
        // The crashing event is dropped; the others arrive once, in order, after the restart.
        #expect(log.seen("iso") == [1] + Array(3...10))
        let stats = m.statuses().first { $0.name == "iso" }!.stats
        #expect(stats.crashes == 1 && stats.restarts == 1)
        // This test process is the host: that it is still here is the point.
        await m.stopAll()
    }

    @Test func aHungPluginIsKilledAndRestarted() async throws {
        let log = CommandLog()
        let m = try manager(log)
        // 3 s: long enough that only the hanging event runs out of time on a loaded machine (the
        // restarted child's start and the second event come well within it).
        await m.apply([testSpec("iso", config: #"{"tag":"iso"}"#, isolation: .process, timeout: .seconds(3))])
        let watchdog = Task { await m.runWatchdog(every: .milliseconds(50)) }
        defer { watchdog.cancel() }
        m.dispatch(type: "newChatItems", json: event(1, #","text":"hang-now""#))
        m.dispatch(type: "newChatItems", json: event(2))
        try await log.wait { $0.seen("iso") == [2] }
        let stats = m.statuses()[0].stats
        #expect(stats.timedOut == 1 && stats.crashes == 1 && stats.restarts == 1, "\(stats)")
        await m.stopAll()
    }

    @Test func anIsolatedLoadFailureIsReported() async throws {
        let m = try manager(CommandLog())
        let wrongABI = try compilePlugin("""
            #include "swiftplex_plugin.h"
            static const swiftplex_plugin_descriptor d = { .abi_version = 7, .struct_size = sizeof(d), .name = "old" };
            const swiftplex_plugin_descriptor *swiftplex_plugin_entry(void) { return &d; }
            """, named: "oldabi", in: dir)
        let r = await m.apply([testSpec("iso", config: "{}", isolation: .process, path: wrongABI),
                               testSpec("iso2", config: #"{"fail_start":true}"#, isolation: .process)])
        guard case let .failed(e) = r[0].outcome, (e as? PluginLoadError)?.code == .abiMismatch else { throw TestFailure("\(r)") }
        guard case let .failed(e2) = r[1].outcome, "\(e2)".contains("configured to fail") else { throw TestFailure("\(r)") }
        #expect(m.statuses().isEmpty)
    }
}
