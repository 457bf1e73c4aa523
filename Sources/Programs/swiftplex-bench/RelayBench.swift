import ArgumentParser
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexCrypto

/// `swiftplex-bench relay`: messages through a durable relay vs. a raw TLS echo on the same stack.
struct RelayBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "N senders and N receivers over many queues through an in-process relay (durable), against a TLS echo baseline."
    )

    @Option(help: "Sender connections (and as many receiver connections).") var connections: Int = 8
    @Option(name: .customLong("queues-per-connection"), help: "Queues per sender/receiver pair; each is one closed-loop flow.") var queuesPerConnection: Int = 8
    @Option(help: "Messages per run.") var messages: Int = 20_000
    @Option(help: "Message body size in bytes.") var size: Int = 1024
    @Option(help: "Event loop threads.") var threads: Int = System.coreCount
    @Option(help: "Measured rounds of each (the median is reported).") var rounds: Int = 3
    @Option(name: .customLong("recipient-keys"), help: "Kind of recipient key: x25519 (authenticators, the client library's default) or ed25519 (signatures).")
    var recipientKeys: String = "x25519"
    @Option(help: "Then the relay again (a fresh one each) at these message counts (ascending, comma-separated; 'none' to skip), and how its time and memory grow.")
    var growth: String = "2000,20000"
    @Flag(name: .customLong("unlimited-rates"), help: "Turn off every rate limit of the relay — per connection, relay-wide and the accept rate (to see what they cost).")
    var unlimitedRates = false
    @Option(help: "Run one side only, for profiling (perf, callgrind): 'relay' or 'tls-echo' (no ratio, no growth).")
    var only: String?

    func validate() throws {
        guard connections > 0, queuesPerConnection > 0, messages > 0, rounds > 0 else { throw ValidationError("counts must be positive") }
        guard only == nil || ["relay", "tls-echo"].contains(only!) else { throw ValidationError("--only is relay or tls-echo") }
        guard ["ed25519", "x25519"].contains(recipientKeys) else { throw ValidationError("--recipient-keys is ed25519 or x25519") }
        guard size >= 8, size <= RelayLimits.maxMessageBodyLength else { throw ValidationError("--size must be 8…\(RelayLimits.maxMessageBodyLength)") }
        let g = growthSizes
        guard growth == "none" || (g.count == growth.split(separator: ",").count && g.allSatisfy { $0 > 0 } && g == g.sorted()) else {
            throw ValidationError("--growth is 'none' or ascending positive counts, e.g. 2000,20000")
        }
    }

    var growthSizes: [Int] { growth == "none" ? [] : growth.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let flows = connections * queuesPerConnection
        print("relay benchmark: \(connections) senders, \(connections) receivers, \(flows) queues, \(messages) messages of \(size) bytes; durable (SQLite WAL, synchronous=FULL); \(recipientKeys) recipient keys, x25519 sender keys; \(threads) event-loop threads")

        if let only {
            // One side alone (a profiler then sees only its work): a warm-up, then the rounds.
            let run = { (n: Int) async throws -> Summary in
                only == "relay" ? try await runRelay(group: group, messages: n)
                    : try await TLSEcho.run(group: group, connections: connections, inFlight: queuesPerConnection, messages: n, bodySize: size)
            }
            _ = try await run(min(2000, messages))
            for round in 1...rounds { print(try await run(messages).line("\(only) round \(round)")) }
            return try await group.shutdownGracefully()
        }
        // Warm up both paths, then alternate rounds so that both see the same machine; report
        // the median round of each.
        _ = try await TLSEcho.run(group: group, connections: connections, inFlight: queuesPerConnection, messages: min(2000, messages), bodySize: size)
        _ = try await runRelay(group: group, messages: min(2000, messages))
        var echoes: [Summary] = []
        var relays: [Summary] = []
        for round in 1...rounds {
            let e = try await TLSEcho.run(group: group, connections: connections, inFlight: queuesPerConnection, messages: messages, bodySize: size)
            let r = try await runRelay(group: group, messages: messages)
            print("round \(round): tls-echo \(Int(e.perSecond)) msg/s, relay \(Int(r.perSecond)) msg/s")
            echoes.append(e)
            relays.append(r)
        }
        let echo = echoes.sorted { $0.perSecond < $1.perSecond }[rounds / 2]
        let relay = relays.sorted { $0.perSecond < $1.perSecond }[rounds / 2]
        print(echo.line("tls-echo"))
        print(relay.line("relay"))
        print(String(format: "ratio relay/tls-echo %.2f", relay.perSecond / echo.perSecond))
        var points: [GrowthPoint] = []
        for n in growthSizes {
            let r = try await runRelay(group: group, messages: n)
            print(r.line("relay \(n)"))
            points.append(GrowthPoint(work: n, seconds: Double(r.count) / r.perSecond, residentBytes: residentBytes()))
        }
        Growth.report("the relay (a fresh relay each)", unit: "message", points)
        try await group.shutdownGracefully()
    }

    /// One run through an in-process relay on `store` (nil: SQLite in a temporary directory).
    func runRelay(group: any EventLoopGroup, messages: Int, store: (any RelayQueueStore)? = nil) async throws -> Summary {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var logger = Logger(label: "bench.relay")
        logger.logLevel = .warning
        var config = RelayConfiguration(dataDirectory: dir, host: "127.0.0.1", port: 0, queueQuota: 1024)
        if unlimitedRates { config.unlimitRates() }
        let server = try await RelayServer.start(configuration: config, store: store, group: group, logger: logger)

        struct Pair {
            var sender: RelayConnection
            var receiver: RelayConnection
            var queues: [RecipientQueue]
            var keys: [AuthPrivateKey]
        }
        var pairs: [Pair] = []
        for _ in 0..<connections {
            let s = try await RelayConnection.connect(to: server.address, group: group)
            let r = try await RelayConnection.connect(to: server.address, group: group)
            var qs: [RecipientQueue] = []
            var ks: [AuthPrivateKey] = []
            for _ in 0..<queuesPerConnection {
                let q = try await r.createQueue(recipientKey: recipientKeys == "x25519" ? .newX25519() : .newEd25519())
                let k = AuthPrivateKey.newX25519()
                try await s.secureAsSender(senderId: q.senderId, senderKey: k)
                try await r.subscribe(q)
                qs.append(q)
                ks.append(k)
            }
            pairs.append(Pair(sender: s, receiver: r, queues: qs, keys: ks))
        }

        let recorder = Recorder(capacity: messages)
        let remaining = NIOLockedValueBox(messages)
        let bodySize = size
        let start = ContinuousClock.now
        let elapsed = try await withThrowingTaskGroup(of: Void.self) { group -> Duration in
            for pair in pairs {
                // Receiver: open, record, acknowledge.
                let byId = Dictionary(uniqueKeysWithValues: pair.queues.map { ($0.recipientId, $0) })
                group.addTask {
                    try await withThrowingTaskGroup(of: Void.self) { acks in
                        for await event in pair.receiver.events {
                            guard case let .message(rid, id, sealed) = event, let q = byId[rid] else { continue }
                            let m = try q.open(messageId: id, sealed: sealed)
                            recorder.record(monotonicNanos() &- m.body.stamp)
                            acks.addTask { try await pair.receiver.acknowledge(q, messageId: id) }
                            if recorder.count >= messages { break }
                        }
                        try await acks.waitForAll()
                    }
                }
                // Senders: one closed loop per queue.
                for (q, k) in zip(pair.queues, pair.keys) {
                    group.addTask {
                        while remaining.withLockedValue({ r -> Bool in guard r > 0 else { return false }; r -= 1; return true }) {
                            try await pair.sender.sendMessage(senderId: q.senderId, key: k, body: .stamped(size: bodySize))
                        }
                    }
                }
            }
            // Wait until every message arrived, then stop the receivers.
            while recorder.count < messages { try await Task.sleep(for: .milliseconds(1)) }
            let elapsed = ContinuousClock.now - start
            for p in pairs {
                await p.receiver.close()
                await p.sender.close()
            }
            try? await group.waitForAll()
            return elapsed
        }
        await server.shutdown()
        return recorder.summary(elapsed: elapsed)
    }
}
