import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOPosix
import RelayPostgres
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import SwiftplexSQL
import SwiftplexSQLPostgres
import SwiftplexSpawn

/// `swiftplex-bench relay-store --postgres postgresql://…`: the relay on PostgreSQL against the
/// relay on SQLite in the same run — throughput and latency of the `relay` benchmark's flows on
/// each store (rounds alternate), then the resident memory and start time of a `swiftplex-relay`
/// process holding 100,000 and 1,000,000 queues on each store. The queues are bulk-inserted into
/// the store (not created by `NEW`s): SQLite by one prepared statement in one transaction,
/// PostgreSQL by one `INSERT … SELECT … generate_series` on the server; every queue has the same
/// valid keys and no messages. SQLite loads every queue at start; PostgreSQL loads on demand.
struct RelayStoreBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-store",
        abstract: "The relay on PostgreSQL against the relay on SQLite: throughput, p50/p99, and memory and start time with 100k and 1M queues."
    )

    @Option(help: "The PostgreSQL server: postgresql://user@host:port/database (the benchmark uses schemas of its own and drops them).")
    var postgres: String
    @Option(help: "Sender connections (and as many receiver connections).") var connections: Int = 8
    @Option(name: .customLong("queues-per-connection"), help: "Queues per sender/receiver pair.") var queuesPerConnection: Int = 8
    @Option(help: "Messages per round.") var messages: Int = 20_000
    @Option(help: "Message body size in bytes.") var size: Int = 1024
    @Option(help: "Measured rounds on each store (the median is reported).") var rounds: Int = 3
    @Option(name: .customLong("held-queues"), help: "Queue counts for the memory part, comma-separated (empty: skip it).")
    var heldQueues: String = "100000,1000000"
    @Option(name: .customLong("queue-cache"), help: "The PostgreSQL relay's --queue-cache.") var queueCache: Int = 100_000

    func validate() throws {
        guard PostgresLocation.isPostgres(postgres) else { throw ValidationError("--postgres must be a postgresql:// URL") }
        guard connections > 0, queuesPerConnection > 0, messages > 0, rounds > 0 else { throw ValidationError("counts must be positive") }
        guard heldQueues.isEmpty || heldCounts != nil else { throw ValidationError("--held-queues is a comma-separated list of positive counts") }
    }

    private var heldCounts: [Int]? {
        let parts = heldQueues.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.allSatisfy({ ($0 ?? 0) > 0 }) else { return nil }
        return parts.compactMap { $0 }
    }

    /// The base URL with a schema of this run's own.
    private func url(schema: String) -> String {
        postgres + (postgres.contains("?") ? "&" : "?") + "schema=" + schema
    }

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        var logger = Logger(label: "bench.relay-store")
        logger.logLevel = .warning
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let base = try PostgresLocation.relay(url: postgres)
        print("relay-store benchmark: \(connections) senders, \(connections) receivers, \(connections * queuesPerConnection) queues, \(messages) messages of \(size) bytes per round; SQLite (WAL, synchronous=FULL) vs PostgreSQL (\(base.host):\(base.port)/\(base.database), synchronous_commit as the server has it)")
        print("load: \(Self.loadAverage())")

        var relayBench = try RelayBench.parse(["--connections", "\(connections)", "--queues-per-connection", "\(queuesPerConnection)",
                                               "--messages", "\(messages)", "--size", "\(size)"])
        relayBench.unlimitedRates = true
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        var sqlite: [Summary] = []
        var pg: [Summary] = []
        for round in 0...rounds {
            let warmUp = round == 0
            let n = warmUp ? min(2000, messages) : messages
            let s = try await relayBench.runRelay(group: group, messages: n)
            let location = try PostgresLocation.relay(url: url(schema: "bench_\(tag)_\(round)"))
            let store = try await PostgresRelayStore.open(location, logger: logger)
            let p = try await relayBench.runRelay(group: group, messages: n, store: store)
            let cleanup = try await PostgresRelayStore.open(location, logger: logger)
            try await cleanup.dropSchema()
            try await cleanup.closeStore()
            if warmUp { continue }
            print("round \(round): relay on SQLite \(Int(s.perSecond)) msg/s, relay on PostgreSQL \(Int(p.perSecond)) msg/s")
            sqlite.append(s)
            pg.append(p)
        }
        try await group.shutdownGracefully()
        let s = sqlite.sorted { $0.perSecond < $1.perSecond }[rounds / 2]
        let p = pg.sorted { $0.perSecond < $1.perSecond }[rounds / 2]
        print(s.line("sqlite"))
        print(p.line("postgres"))
        print(String(format: "ratio postgres/sqlite: throughput %.2f, p50 %.2f, p99 %.2f", p.perSecond / s.perSecond, p.p50ms / s.p50ms, p.p99ms / s.p99ms))
        print("load: \(Self.loadAverage())")

        guard let counts = heldCounts, !counts.isEmpty else { return }
        print("\nrelay processes holding many queues (bulk-inserted; start = until the relay prints its address; RSS 2 s after start):")
        var rows: [(store: String, queues: Int, insert: Double, start: Double, rss: Int)] = []
        let (rk, box) = Self.syntheticKeys()
        for count in counts {
            // SQLite: relay.db in a data directory of its own.
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-bench-store-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            defer { try? FileManager.default.removeItem(at: dir) }
            var t0 = ContinuousClock.now
            try insertSyntheticQueues(sqlitePath: dir.appendingPathComponent("relay.db"), count: count, recipientKey: rk, boxKey: box)
            let sqliteInsert = (ContinuousClock.now - t0).seconds
            let (sqliteStart, sqliteRSS) = try await Self.measureRelay(dataDirectory: dir, extra: [])
            rows.append(("sqlite", count, sqliteInsert, sqliteStart, sqliteRSS))
            print(Self.row(rows.last!))

            let schemaURL = url(schema: "bench_\(tag)_held_\(count)")
            let store = try await PostgresRelayStore.open(try PostgresLocation.relay(url: schemaURL), logger: logger)
            t0 = ContinuousClock.now
            try await store.insertSyntheticQueues(count: count, recipientKey: rk, boxKey: box)
            let pgInsert = (ContinuousClock.now - t0).seconds
            try await store.closeStore()
            let (pgStart, pgRSS) = try await Self.measureRelay(dataDirectory: dir, extra: ["--store", schemaURL, "--queue-cache", "\(queueCache)"])
            rows.append(("postgres", count, pgInsert, pgStart, pgRSS))
            print(Self.row(rows.last!))
            let cleanup = try await PostgresRelayStore.open(try PostgresLocation.relay(url: schemaURL), logger: logger)
            try await cleanup.dropSchema()
            try await cleanup.closeStore()
        }
        if counts.count >= 2, let small = counts.first, let large = counts.last {
            for store in ["sqlite", "postgres"] {
                guard let a = rows.first(where: { $0.store == store && $0.queues == small }),
                      let b = rows.first(where: { $0.store == store && $0.queues == large }) else { continue }
                print(String(format: "%@ growth %d → %d queues (×%.0f): start ×%.1f, RSS ×%.2f (+%.0f bytes per queue)",
                             store as NSString, small, large, Double(large) / Double(small), b.start / max(a.start, 1e-9),
                             Double(b.rss) / Double(max(a.rss, 1)), Double(b.rss - a.rss) / Double(large - small)))
            }
        }
        print("load: \(Self.loadAverage())")
    }

    private static func row(_ r: (store: String, queues: Int, insert: Double, start: Double, rss: Int)) -> String {
        String(format: "%-9@ %9d queues   bulk insert %6.1f s   relay start %6.2f s   RSS %7.1f MiB",
               r.store as NSString, r.queues, r.insert, r.start, Double(r.rss) / 1_048_576)
    }

    /// One valid key pair for every synthetic queue (the relay checks the keys when it loads a queue).
    private static func syntheticKeys() -> ([UInt8], [UInt8]) {
        let recipient = AuthPrivateKey.newEd25519().publicKey.wireBytes
        let box = (try? BoxKey(privateKey: X25519.PrivateKey(), peer: X25519.PrivateKey().publicKey))!.secretBytes
        return (recipient, box)
    }

    /// Starts `swiftplex-relay` (next to this program), waits for its address, lets it settle for
    /// two seconds, reads its resident memory, stops it.
    private static func measureRelay(dataDirectory: URL, extra: [String]) async throws -> (Double, Int) {
        let exe = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            .deletingLastPathComponent().appendingPathComponent("swiftplex-relay").path
        let start = ContinuousClock.now
        let process = try SpawnedProcess(exe, ["--data-dir", dataDirectory.path, "--listen", "127.0.0.1:0", "--log-level", "error"] + extra,
                                         stdin: .null, stderr: .inherit)
        var output = Data()
        while !output.contains(UInt8(ascii: "\n")) {
            let chunk = process.standardOutput!.availableData
            if chunk.isEmpty { throw BenchFailure("swiftplex-relay exited before printing its address (\(await process.exited()))") }
            output.append(chunk)
        }
        let started = (ContinuousClock.now - start).seconds
        try await Task.sleep(for: .seconds(2))
        let rss = residentBytes(of: process.processIdentifier)
        process.signal(SIGTERM)
        _ = await process.exited()
        return (started, rss)
    }

    static func residentBytes(of pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kb = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
        return kb * 1024
    }

    static func loadAverage() -> String {
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
    }
}
