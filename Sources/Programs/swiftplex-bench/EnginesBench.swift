import ArgumentParser
import Foundation
import Logging
import SwiftplexPluginTesting

/// `swiftplex-bench engines`: a plugin's round trip — a person's message in, the echo plugin's
/// answer out — with the bot host on each engine it can drive: Swiftplex's embedded one (the
/// baseline), `libsimplex.so` loaded by path, and a `swiftplex-chat -p` process over the
/// WebSocket API. The same plugins (auto-accept, auto-reply echoing), the same person (an engine
/// of their own in this process), one run.
struct EnginesBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engines",
        abstract: "Plugin round trip (message in, plugin answer out) on each engine backend, as ratios to the embedded engine."
    )

    @Option(help: "Round trips measured one at a time (latency), per engine.") var messages: Int = 300
    @Option(help: "Then messages sent at once, timed until every answer is in (throughput), per engine.") var burst: Int = 300
    @Option(help: "Round trips before measuring, per engine.") var warmup: Int = 30

    func validate() throws {
        guard messages > 0, burst > 0, warmup >= 0 else { throw ValidationError("--messages and --burst must be positive, --warmup not negative") }
    }

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        for product in ["libsimplex.so", "swiftplex-chat", "libauto-accept.so", "libauto-reply.so", "swiftplex-plugin-runner"] {
            guard FileManager.default.fileExists(atPath: PluginTestBench.product(product)) else {
                throw ValidationError("needs \(PluginTestBench.product(product)): build the products simplex, swiftplex-chat, auto-accept, auto-reply and swiftplex-plugin-runner in the same configuration")
            }
        }
        print("engines benchmark: \(messages) round trips one at a time and a burst of \(burst) per engine (after \(warmup) warm-up); "
              + "auto-accept + auto-reply echo plugins in process; one person on their own engine; a relay on loopback")
        var results: [(PluginTestBench.Engine, Summary, Double)] = []
        for engine in PluginTestBench.Engine.allCases {
            let (latency, throughput) = try await measure(engine)
            print(latency.line(engine.description) + String(format: "   burst %8.0f msg/s", throughput))
            results.append((engine, latency, throughput))
        }
        guard let base = results.first(where: { $0.0 == .embedded }) else { return }
        print("ratios to the embedded engine (same run):")
        for (engine, latency, throughput) in results where engine != .embedded {
            print(String(format: "  %-10@ p50 latency %5.2fx   p99 latency %5.2fx   burst throughput %5.2fx",
                         engine.description as NSString, latency.p50ms / base.1.p50ms, latency.p99ms / base.1.p99ms, throughput / base.2))
        }
    }

    /// Latency of sequential round trips, then the rate of a burst, on `engine`.
    private func measure(_ engine: PluginTestBench.Engine) async throws -> (Summary, Double) {
        let plugins: [PluginTestBench.Plugin] = [
            .init(name: "welcome", path: PluginTestBench.product("libauto-accept.so"), config: #"{"welcome": "hello"}"#),
            .init(name: "echo", path: PluginTestBench.product("libauto-reply.so"), config: #"{"echo": true}"#),
        ]
        return try await PluginTestBench.withBench(plugins: plugins, logLevel: .critical, engine: engine) { bench in
            let person = try await bench.connect("person", timeout: .seconds(60))
            guard try await person.nextMessage(timeout: .seconds(60)) == "hello" else { throw BenchFailure("no welcome on \(engine)") }
            for n in 0..<warmup { try await roundTrip(person, "w\(n)") }
            let recorder = Recorder(capacity: messages)
            let start = ContinuousClock.now
            for n in 0..<messages {
                let t0 = monotonicNanos()
                try await roundTrip(person, "m\(n)")
                recorder.record(monotonicNanos() - t0)
            }
            let latency = recorder.summary(elapsed: ContinuousClock.now - start)

            let burstStart = ContinuousClock.now
            let answers = Task {
                var got = 0
                while got < burst {
                    // One event may carry several answers (one line each).
                    got += try await person.nextMessage(timeout: .seconds(120)).split(separator: "\n").count
                }
            }
            for n in 0..<burst { try await person.send("b\(n)") }
            try await answers.value
            return (latency, Double(burst) / (ContinuousClock.now - burstStart).seconds)
        }
    }

    private func roundTrip(_ person: ScriptedContact, _ text: String) async throws {
        try await person.send(text)
        let answer = try await person.nextMessage(timeout: .seconds(60))
        guard answer == text else { throw BenchFailure("sent \(text), the plugin answered \(answer)") }
    }
}
