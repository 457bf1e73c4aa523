import Foundation
import TestSupport
import Testing
@testable import PluginHost

@Suite(.timeLimit(.minutes(2))) struct PluginManagerTests {
    let dir = temporaryDirectory()

    func manager(_ log: CommandLog, menu: (@Sendable ([[String: String]]) -> Void)? = nil) throws -> PluginManager {
        PluginManager(storage: try PluginStorage(path: dir.appendingPathComponent("plugins.db")), runCommand: log.runner,
                      runnerExecutable: Build.runner, logger: quiet, commandsChanged: menu ?? { _ in })
    }

    @Test func aCPluginGetsEveryEventInOrder() async throws {
        let log = CommandLog()
        let m = try manager(log)
        let outcome = await m.apply([testSpec("t", config: #"{"tag":"a"}"#)])
        guard case let .started(info) = outcome[0].outcome else { throw TestFailure("\(outcome)") }
        #expect(info.name == "test-plugin" && info.version == "1.0.0" && info.events == ["*"])
        for n in 1...300 { m.dispatch(type: "newChatItems", json: event(n)) }
        await m.drain()
        #expect(log.seen("a") == Array(1...300))
        #expect(m.statuses()[0].stats.delivered == 300)
        await m.stopAll()
    }

    @Test func severalInstancesOfOnePluginWithTheirOwnConfigs() async throws {
        let log = CommandLog()
        let m = try manager(log)
        let results = await m.apply([testSpec("greeter-en", config: #"{"tag":"en"}"#), testSpec("greeter-de", config: #"{"tag":"de"}"#)])
        #expect(results.allSatisfy { if case .started = $0.outcome { true } else { false } })
        for n in 1...20 { m.dispatch(type: "newChatItems", json: event(n)) }
        await m.drain()
        #expect(log.seen("en") == Array(1...20))
        #expect(log.seen("de") == Array(1...20))
        await m.stopAll()
    }

    @Test func aSlowPluginDelaysOnlyItself() async throws {
        let log = CommandLog()
        let m = try manager(log)
        await m.apply([testSpec("slow", config: #"{"tag":"slow"}"#), testSpec("fast", config: #"{"tag":"fast"}"#)])
        for n in 1...5 { m.dispatch(type: "newChatItems", json: event(n, #","text":"slow-slow""#)) }
        // The slow instance sleeps 300 ms per event; the fast one handles all five meanwhile.
        try await log.wait { $0.seen("fast").count == 5 }
        #expect(log.seen("slow").count < 5)
        await m.drain()
        #expect(log.seen("slow") == Array(1...5))
        await m.stopAll()
    }

    @Test func eachLoadFailureIsReportedAndOthersKeepRunning() async throws {
        let log = CommandLog()
        let m = try manager(log)
        let notELF = dir.appendingPathComponent("libjunk.so")
        try Data("this is not a shared object".utf8).write(to: notELF)
        let noEntry = try compilePlugin("int something = 1;", named: "noentry", in: dir)
        let wrongABI = try compilePlugin("""
            #include "swiftplex_plugin.h"
            static const swiftplex_plugin_descriptor d = { .abi_version = 99, .struct_size = sizeof(d), .name = "future" };
            const swiftplex_plugin_descriptor *swiftplex_plugin_entry(void) { return &d; }
            """, named: "wrongabi", in: dir)
        let badConfig = PluginSpec(name: "badconfig", path: Build.testPlugin, configFingerprint: "x",
                                   configure: { _ in .failure(PluginError(.invalidConfig, "bot.yaml:7:9: unknown key 'tga'")) })
        let results = await m.apply([
            testSpec("good", config: #"{"tag":"good"}"#),
            testSpec("missing", config: "{}", path: dir.appendingPathComponent("nope.so").path),
            testSpec("junk", config: "{}", path: notELF.path),
            testSpec("noentry", config: "{}", path: noEntry),
            testSpec("wrongabi", config: "{}", path: wrongABI),
            badConfig,
            testSpec("failstart", config: #"{"fail_start":true}"#),
        ])
        func loadCode(_ i: Int) -> PluginLoadError.Code? {
            if case let .failed(e) = results[i].outcome { (e as? PluginLoadError)?.code } else { nil }
        }
        func message(_ i: Int) -> String { if case let .failed(e) = results[i].outcome { "\(e)" } else { "" } }
        #expect(loadCode(1) == .fileNotFound)
        #expect(loadCode(2) == .notLoadable)
        #expect(loadCode(3) == .missingEntryPoint)
        #expect(loadCode(4) == .abiMismatch)
        #expect(message(4).contains("version 99") && message(4).contains("version 1"))
        #expect(message(5).contains("bot.yaml:7:9"))
        #expect(message(6).contains("configured to fail at start"))
        #expect(m.statuses().map(\.name) == ["good"])
        m.dispatch(type: "newChatItems", json: event(1))
        await m.drain()
        #expect(log.seen("good") == [1])
        await m.stopAll()
    }

    @Test func handlerErrorsAreCountedAndTheQueueGoesOn() async throws {
        let log = CommandLog()
        let m = try manager(log)
        await m.apply([testSpec("t", config: #"{"tag":"t"}"#)])
        m.dispatch(type: "newChatItems", json: event(1))
        m.dispatch(type: "newChatItems", json: event(2, #","text":"fail-now""#))
        m.dispatch(type: "newChatItems", json: event(3))
        await m.drain()
        #expect(log.seen("t") == [1, 3])
        #expect(m.statuses()[0].stats.failed == 1)
        await m.stopAll()
    }

    @Test func aFullQueueDropsAndCountsNewEvents() async throws {
        let log = CommandLog()
        let m = try manager(log)
        await m.apply([testSpec("t", config: #"{"tag":"t"}"#, queueLimit: 2)])
        m.dispatch(type: "newChatItems", json: event(1, #","text":"slow-t""#))
        for n in 2...10 { m.dispatch(type: "newChatItems", json: event(n)) }
        await m.drain()
        let stats = m.statuses()[0].stats
        #expect(stats.dropped >= 7)
        #expect(stats.delivered + stats.dropped == 10)
        await m.stopAll()
    }

    @Test func reloadKeepsUnchangedRollsBackFailuresAndLosesNoEvent() async throws {
        let log = CommandLog()
        let m = try manager(log)
        await m.apply([testSpec("a", config: #"{"tag":"v1"}"#), testSpec("b", config: #"{"tag":"b"}"#)])
        // A new config that fails to start: the old version comes back.
        let failing = await m.apply([testSpec("a", config: #"{"tag":"v2","fail_start":true}"#), testSpec("b", config: #"{"tag":"b"}"#)])
        guard case .rolledBack = failing[0].outcome else { throw TestFailure("\(failing)") }
        guard case .unchanged = failing[1].outcome else { throw TestFailure("\(failing)") }
        m.dispatch(type: "newChatItems", json: event(1))
        await m.drain()
        #expect(log.seen("v1") == [1])
        // A good new config replaces it; events sent during the reload reach the new version.
        let reload = Task { await m.apply([testSpec("a", config: #"{"tag":"v3"}"#), testSpec("b", config: #"{"tag":"b"}"#)]) }
        for n in 2...50 { m.dispatch(type: "newChatItems", json: event(n)) }
        let results = await reload.value
        guard case .started = results[0].outcome else { throw TestFailure("\(results)") }
        for n in 51...60 { m.dispatch(type: "newChatItems", json: event(n)) }
        await m.drain()
        let a = (log.seen("v1") + log.seen("v3")).sorted()
        #expect(a == Array(1...60))
        #expect(log.seen("v3").last == 60)
        #expect(log.seen("b") == Array(1...60))
        // Removing an instance stops it.
        let removed = await m.apply([testSpec("b", config: #"{"tag":"b"}"#)])
        guard case .stopped = removed.first(where: { $0.name == "a" })?.outcome else { throw TestFailure("\(removed)") }
        await m.stopAll()
    }

    @Test func storageTimersAndTheCommandMenu() async throws {
        let log = CommandLog()
        let menus = CommandMenus()
        let m = try manager(log, menu: menus.record)
        await m.apply([testSpec("t", config: #"{"tag":"t","timer":"tick"}"#), testSpec("u", config: #"{"tag":"u"}"#)])
        try await log.wait { $0.all.contains { $0.hasPrefix("/seen t ") && $0.contains(#""type":"swiftplex.timer""#) && $0.contains(#""name":"tick""#) } }
        for n in 1...3 { m.dispatch(type: "newChatItems", json: event(n)) }
        await m.drain()
        #expect(menus.last.map { $0["keyword"] ?? "" } == ["t", "u"])
        let storage = try PluginStorage(path: dir.appendingPathComponent("plugins.db"))
        #expect(try storage.get(instance: "t", key: "count") == "4")  // the timer event and three messages
        #expect(try storage.get(instance: "u", key: "count") == "3")
        await m.stopAll()
    }
}

final class CommandMenus: @unchecked Sendable {
    private let lock = NSLock()
    private var menus: [[[String: String]]] = []
    var record: @Sendable ([[String: String]]) -> Void { { [self] m in lock.withLock { menus.append(m) } } }
    var last: [[String: String]] { lock.withLock { menus.last ?? [] } }
}
