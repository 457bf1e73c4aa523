import ArgumentParser
import Foundation
import Logging
import PluginHost

/// `swiftplex-bench dispatch`: the cost of delivering one chat event to a plugin — in process
/// (its own thread) and isolated (a child process over pipes) — against a direct Swift function
/// call, all in one run, with the C test plugin counting events.
struct DispatchBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dispatch",
        abstract: "Per-event cost of dispatch to an in-process and an isolated plugin against a direct call."
    )

    @Option(help: "Events per batch.") var batch: Int = 2000
    @Option(help: "Batches per mode (the p50 is over batches).") var batches: Int = 40
    @Option(help: "Single-event round trips per mode.") var roundTrips: Int = 2000

    func validate() throws {
        guard batch > 0, batches > 0, roundTrips > 0 else { throw ValidationError("counts must be positive") }
    }

    /// A typical `newChatItems` event (about 1 KB), as the engine emits it.
    static let event = #"{"type":"newChatItems","user":{"userId":1,"agentUserId":"1","userContactId":1,"localDisplayName":"bot","profile":{"profileId":1,"displayName":"bot","fullName":"","peerType":"bot","localAlias":""},"activeUser":true,"activeOrder":1,"showNtfs":true,"sendRcptsContacts":true,"sendRcptsSmallGroups":true,"autoAcceptMemberContacts":false},"chatItems":[{"chatInfo":{"type":"direct","contact":{"contactId":7,"localDisplayName":"alice","profile":{"profileId":9,"displayName":"alice","fullName":"","localAlias":""},"activeConn":{"connId":12,"connStatus":"ready"},"contactUsed":true,"contactStatus":"active","chatSettings":{"enableNtfs":"all","favorite":false},"createdAt":"2026-11-23T02:00:00Z","updatedAt":"2026-11-23T02:00:00Z"}},"chatItem":{"chatDir":{"type":"directRcv"},"meta":{"itemId":42,"itemTs":"2026-11-23T02:00:01Z","itemText":"hello there, bot","itemStatus":{"type":"rcvNew"},"createdAt":"2026-11-23T02:00:01Z","updatedAt":"2026-11-23T02:00:01Z","itemEdited":false,"editable":false,"deletable":true},"content":{"type":"rcvMsgContent","msgContent":{"type":"text","text":"hello there, bot"}},"formattedText":null,"reactions":[]}}]}"#

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        let bin = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        let plugin = bin.appendingPathComponent("libswiftplex-test-plugin.so").path
        let runner = bin.appendingPathComponent("swiftplex-plugin-runner")
        guard FileManager.default.fileExists(atPath: plugin), FileManager.default.isExecutableFile(atPath: runner.path) else {
            throw ValidationError("needs \(plugin) and \(runner.path): build the products swiftplex-test-plugin and swiftplex-plugin-runner")
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-bench-dispatch-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var logger = Logger(label: "bench.dispatch")
        logger.logLevel = .critical
        print("dispatch benchmark: \(batches) batches of \(batch) events (\(Self.event.utf8.count)-byte newChatItems) per mode, p50 over batches; \(roundTrips) single-event round trips; C test plugin counting events")

        // Baseline: a direct call of a Swift function with the event text.
        let sink = CountingSink()
        var direct: [Double] = []
        for _ in 0..<batches {
            let t0 = ContinuousClock.now
            for _ in 0..<batch { sink.handle(Self.event) }
            direct.append(micros(ContinuousClock.now - t0) / Double(batch))
        }

        let manager = PluginManager(storage: try PluginStorage(path: dir.appendingPathComponent("plugins.db")),
                                    runCommand: { _ in "{}" }, runnerExecutable: runner, logger: logger)
        var lines = ["direct".padding(toLength: 11, withPad: " ", startingAt: 0) + String(format: "%8.3f µs/event   (p50 over batches; sink saw %d)", median(direct), sink.count)]
        var results: [String: Double] = [:]
        for isolation in [PluginSpec.Isolation.inProcess, .process] {
            let spec = PluginSpec(name: "bench", path: plugin, isolation: isolation, queueLimit: batch * 2, configFingerprint: "\(isolation)",
                                  configure: { _ in .success(#"{"count_only":true}"#) })
            let outcome = await manager.apply([spec])
            guard case .started = outcome[0].outcome else { throw ValidationError("cannot start the test plugin: \(outcome[0].outcome)") }
            // Warm up.
            for _ in 0..<batch { manager.dispatch(type: "newChatItems", json: Self.event) }
            await manager.drain()
            var perEvent: [Double] = []
            for _ in 0..<batches {
                let t0 = ContinuousClock.now
                for _ in 0..<batch { manager.dispatch(type: "newChatItems", json: Self.event) }
                await manager.drain()
                perEvent.append(micros(ContinuousClock.now - t0) / Double(batch))
            }
            var single: [Double] = []
            for _ in 0..<roundTrips {
                let t0 = ContinuousClock.now
                manager.dispatch(type: "newChatItems", json: Self.event)
                await manager.drain()
                single.append(micros(ContinuousClock.now - t0))
            }
            let delivered = manager.statuses()[0].stats.delivered
            let name = isolation == .inProcess ? "in-process" : "isolated"
            results[name] = median(perEvent)
            lines.append(name.padding(toLength: 11, withPad: " ", startingAt: 0)
                + String(format: "%8.3f µs/event   (p50 over batches; round trip p50 %.1f µs, p99 %.1f µs; plugin handled %d)",
                         median(perEvent), percentile(single, 0.5), percentile(single, 0.99), delivered))
            await manager.stopAll()
        }
        lines.forEach { print($0) }
        print(String(format: "goal in-process ≤ 5 µs: %@; isolated ≤ 100 µs: %@",
                     (results["in-process"]! <= 5 ? "met" : "NOT met") as NSString, (results["isolated"]! <= 100 ? "met" : "NOT met") as NSString))
        print(String(format: "ratio in-process/direct %.1f isolated/direct %.1f", results["in-process"]! / median(direct), results["isolated"]! / median(direct)))
    }

    private func micros(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
    }

    private func median(_ xs: [Double]) -> Double { percentile(xs, 0.5) }

    private func percentile(_ xs: [Double], _ p: Double) -> Double {
        let s = xs.sorted()
        guard !s.isEmpty else { return .nan }
        return s[min(s.count - 1, max(0, Int((Double(s.count) * p).rounded(.up)) - 1))]
    }
}

/// The baseline's handler: what the C test plugin does with an event, in Swift.
final class CountingSink: @unchecked Sendable {
    private(set) var count = 0
    @inline(never) func handle(_ event: String) {
        event.utf8.withContiguousStorageIfAvailable { if !$0.isEmpty { count += 1 } }
    }
}
