import Agent
import ArgumentParser
import ChatAPI
import ChatCore
import SwiftplexSQLPostgres
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexBase
import SwiftplexSpawn

/// `swiftplex-bench contacts`: a bot with N contacts restarts. In one process with one durable
/// relay, a bot engine makes N contacts with one user of a peer engine (N one-time invitations);
/// the bot is closed, and a child process (a fresh bot process, `contacts-restart`) opens its
/// files and runs it until every contact's queue is subscribed (the engine's `subscriptionStatus`
/// events), then reports the time and its resident memory once idle. The baseline, in the same
/// run, is another child subscribing the same N queues with a bare `RelayConnection` (pipelined,
/// as fast as the relay answers), the queues read from the bot's agent database before its clock
/// starts.
struct ContactsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contacts",
        abstract: "A bot with N contacts restarts (time until every queue is subscribed, idle memory, against a bare client subscribing the same queues), then answers one contact while others load it.",
        discussion: """
            Prints, for each N: the set-up (N contacts made through the Chat API), the bot's restart \
            (a new process: databases opened, agent started, every queue subscribed) and its resident \
            memory when idle, the bare client's subscription of the same queues, and the ratio bare / bot \
            (goal ≥ 0.5; 1 would be a restart as fast as the subscriptions alone). A list \
            (--contacts 1000,10000) prints how time and memory grow with N. Last, the bot (in this \
            process again) answers every text: one contact's probe round trips are timed idle, then while \
            up to 1,000 other contacts send --load-rate messages a second.
            """
    )

    @Option(help: "Contact count(s): N, or a list such as 1000,10000.") var contacts: String = "1000,10000"
    @Option(help: "Invitations under way at once while making the contacts.") var window: Int = 64
    @Option(help: "Seconds without progress before giving up.") var stall: Int = 120
    @Option(help: "Load phase: messages per second sent to the bot, spread over up to 1,000 of its contacts.") var loadRate: Int = 50
    @Option(help: "Probe round trips (a message, then the bot's answer) in each of the idle and the loaded phase.") var probes: Int = 50
    @Option(help: "Also run each size with the bot's data in PostgreSQL (a connection string; a fresh schema per size, dropped after), against SQLite in the same run.") var postgres: String?

    var sizes: [Int] { contacts.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func validate() throws {
        let list = contacts.split(separator: ",")
        guard !list.isEmpty, sizes.count == list.count, sizes.allSatisfy({ $0 >= 1 }) else { throw ValidationError("--contacts: positive counts, comma-separated") }
        guard window > 0, stall > 0, loadRate > 0, probes > 0 else { throw ValidationError("--window, --stall, --load-rate and --probes must be positive") }
        guard sizes.allSatisfy({ $0 >= 2 }) else { throw ValidationError("--contacts: at least 2 (a probe and a loader)") }
    }

    struct Result {
        var n: Int
        var store: String
        var setupSeconds: Double
        var restart: ChildReport
        var bare: ChildReport
        var probe: ProbeResult
        var ratio: Double { bare.seconds / restart.seconds }
    }

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        print("contacts benchmark: one in-process relay (durable); contacts made through the Chat API; restart and baseline in child processes")
        var results: [Result] = []
        for n in sizes {
            results.append(try await measure(n, postgres: nil))
            if let postgres { results.append(try await measure(n, postgres: postgres)) }
        }
        print("\ngrowth with N (restart = new bot process until every queue is subscribed; bare = the same queues, bare client):")
        print("      N  store       setup s   restart s   bare s   ratio bare/restart   bot RSS idle MB   bare RSS MB")
        for r in results {
            print(String(format: "%7d  %@  %8.1f  %10.2f  %7.2f  %19.2f  %16.1f  %12.1f",
                         r.n, r.store.padding(toLength: 10, withPad: " ", startingAt: 0), r.setupSeconds, r.restart.seconds, r.bare.seconds, r.ratio, r.restart.idleMB, r.bare.idleMB))
        }
        for n in sizes {
            if let lite = results.first(where: { $0.n == n && $0.store == "sqlite" }), let pg = results.first(where: { $0.n == n && $0.store == "postgresql" }) {
                print(String(format: "N = %d: restart on PostgreSQL %.2f s vs SQLite %.2f s (ratio sqlite/postgresql %.2f); idle RSS %.1f vs %.1f MB",
                             n, pg.restart.seconds, lite.restart.seconds, lite.restart.seconds / pg.restart.seconds, pg.restart.idleMB, lite.restart.idleMB))
            }
        }
        print("\nan answer under load (one contact's message → the bot's answer; load: --load-rate messages/s from up to 1,000 others):")
        print("      N  store       loaders   load sent/s   answered/s   idle p50/p99 ms    loaded p50/p99 ms   ratio p50")
        for r in results {
            let p = r.probe
            print(String(format: "%7d  %@  %8d  %12.1f  %11.1f  %7.1f / %7.1f  %8.1f / %8.1f  %9.2f",
                         r.n, r.store.padding(toLength: 10, withPad: " ", startingAt: 0), p.loaders, p.sentPerSecond, p.answeredPerSecond, p.idle.p50ms, p.idle.p99ms, p.loaded.p50ms, p.loaded.p99ms, p.loaded.p50ms / p.idle.p50ms))
        }
        for store in ["sqlite", "postgresql"] {
            let mine = results.filter { $0.store == store }
            guard mine.count > 1, let first = mine.first, let last = mine.last else { continue }
            print("\(store):", terminator: " ")
            let grow = Double(last.n) / Double(first.n)
            print(String(format: "N grew %.0f×: restart time %.1f×, bare time %.1f×, bot idle memory %.1f×",
                         grow, last.restart.seconds / first.restart.seconds, last.bare.seconds / first.bare.seconds, last.restart.idleMB / first.restart.idleMB))
        }
        print("goal: ratio ≥ 0.5: " + (results.allSatisfy { $0.ratio >= 0.5 } ? "met" : "NOT met")
              + "; idle bot ≤ 150 MB: " + (results.allSatisfy { $0.restart.idleMB <= 150 } ? "met" : "NOT met"))
    }

    private func measure(_ n: Int, postgres: String?) async throws -> Result {
        print("\nN = \(n), the bot on \(postgres == nil ? "SQLite" : "PostgreSQL")")
        // One bot making N contacts sends 2N NEWs on one connection: above the default per-connection
        // budget (1,000 per window), as it would be for a relay operator's large bot.
        let (dir, logger, server) = try await ChatBench.startRelay(label: "contacts") { $0.maxNewQueuesPerConnection = 4 * n + 100 }
        defer { try? FileManager.default.removeItem(at: dir) }
        // On PostgreSQL: a schema prefix of this size's own (its two schemas dropped at the end).
        let schema = "bench_contacts_\(n)_\(UInt32.random(in: 0...UInt32.max))"
        let database: String = postgres.map { $0 + ($0.contains("?") ? "&" : "?") + "schema=" + schema } ?? dir.appendingPathComponent("bot").path
        let botDatabase = try EngineDatabase.parse(database)
        defer { if let postgres { Self.dropSchemas(postgres, prefix: schema) } }
        let (bot, botTask) = try await ChatBench.startEngine("bot", dir: dir, relay: server, logger: logger, database: botDatabase)
        let (peer, peerTask) = try await ChatBench.startEngine("peer", dir: dir, relay: server, logger: logger)
        defer { peerTask.cancel() }

        // Set-up: N one-time invitations from the bot, each joined by the peer's one user.
        let connected = NIOLockedValueBox(0)
        let listener = Task {
            for await event in bot.events where event["type"]?.stringValue == "contactConnected" {
                connected.withLockedValue { $0 += 1 }
            }
        }
        let start = ContinuousClock.now
        var lastPrint = start
        try await withThrowingTaskGroup(of: Void.self) { group in
            var started = 0
            while started < min(window, n) { started += 1; group.addTask { try await ChatBench.invite(bot, peer) } }
            while try await group.next() != nil {
                if started < n { started += 1; group.addTask { try await ChatBench.invite(bot, peer) } }
            }
        }
        var last = connected.withLockedValue { $0 }, lastChange = ContinuousClock.now
        while last < n {
            try await Task.sleep(for: .milliseconds(50))
            let now = ContinuousClock.now, c = connected.withLockedValue { $0 }
            if c != last { last = c; lastChange = now }
            if now - lastPrint >= .seconds(5) { print("  contacts: \(c)/\(n)"); lastPrint = now }
            if now - lastChange > .seconds(stall) { throw BenchFailure("contacts: no progress for \(stall) s at \(c)/\(n)") }
        }
        let setup = (ContinuousClock.now - start).seconds
        print(String(format: "  set-up: %d contacts in %.1f s (%.0f/s)", n, setup, Double(n) / setup))
        listener.cancel()
        _ = await bot.execute("/_stop")
        botTask.cancel()
        _ = await botTask.result
        await bot.controller.close()

        // The bot's restart and the baseline, each in a fresh process.
        let restart = try await ChildReport.run(["contacts-restart", "--database", database, "--relay", server.address.description, "--expect", "\(n)"])
        let bare = try await ChildReport.run(["contacts-restart", "--database", database, "--relay", server.address.description, "--expect", "\(n)", "--bare"])
        print(String(format: "  restart: %.3f s until %d queues subscribed (a new bot process: databases opened, engine started); idle RSS %.1f MB",
                     restart.seconds, restart.queues, restart.idleMB))
        print(String(format: "  bare:    %.3f s for the same %d queues (one RelayConnection, pipelined SUBs); RSS %.1f MB",
                     bare.seconds, bare.queues, bare.idleMB))
        print(String(format: "  ratio bare / restart %.2f (goal ≥ 0.5)", bare.seconds / restart.seconds))
        let probe = try await probeUnderLoad(database: botDatabase, peer: peer, server: server, logger: logger)
        print(String(format: "  answer: idle p50 %.1f ms p99 %.1f ms; under load from %d contacts (%.1f msg/s sent, %.1f answered/s) p50 %.1f ms p99 %.1f ms",
                     probe.idle.p50ms, probe.idle.p99ms, probe.loaders, probe.sentPerSecond, probe.answeredPerSecond, probe.loaded.p50ms, probe.loaded.p99ms))
        _ = await peer.execute("/_stop")
        await server.shutdown()
        return Result(n: n, store: postgres == nil ? "sqlite" : "postgresql", setupSeconds: setup, restart: restart, bare: bare, probe: probe)
    }

    /// Drops the bench's two schemas on the PostgreSQL server (best effort: a failure is printed).
    static func dropSchemas(_ url: String, prefix: String) {
        do {
            guard case let .postgres(location) = try EngineDatabase.parse(url + (url.contains("?") ? "&" : "?") + "schema=" + prefix) else { return }
            for suffix in ["_chat_schema", "_agent_schema"] { try PostgresStore.dropSchema(at: try location.with(schema: prefix + suffix)) }
        } catch {
            print("  (could not drop the schemas \(prefix)_*: \(error))")
        }
    }

    struct ProbeResult {
        var loaders: Int
        var idle: Summary
        var loaded: Summary
        var sentPerSecond: Double
        var answeredPerSecond: Double
    }

    /// The bot, open again in this process, answers every text with the same text. One of the
    /// peer's contacts sends probes one at a time (each waits for its answer): first with nothing
    /// else going on, then while up to 1,000 other contacts send `--load-rate` messages a second.
    private func probeUnderLoad(database: EngineDatabase, peer: ChatAPI, server: RelayServer, logger: Logger) async throws -> ProbeResult {
        let controller = try await ChatController.open(database: database, defaultRelays: [server.address], logger: logger)
        let bot = ChatAPI(controller: controller)
        let botTask = Task { try await controller.run() }
        defer { botTask.cancel() }
        try ChatBench.expect(await bot.execute("/_start"), "chatStarted")
        let echo = ChatBench.answerEveryText(bot)
        defer { echo.cancel() }

        let listed = await peer.execute("/_contacts 1")
        guard case let .array(contacts)? = listed["contacts"] else { throw BenchFailure("no contacts: \(listed)") }
        let ids = contacts.compactMap { $0["contactId"]?.intValue }
        guard ids.count >= 2 else { throw BenchFailure("the peer has \(ids.count) contacts") }
        let probeId = ids[0], loaders = Array(ids.dropFirst().prefix(1000))

        // The peer's answers: probes to the waiting prober, load answers counted.
        let (answers, answer) = AsyncStream.makeStream(of: UInt64.self)
        let answered = NIOLockedValueBox(0)
        let listener = Task {
            for await event in peer.events where event["type"]?.stringValue == "newChatItems" {
                guard case let .array(items)? = event["chatItems"] else { continue }
                for item in items where item["chatItem"]?["content"]?["type"]?.stringValue == "rcvMsgContent" {
                    let text = item["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue ?? ""
                    if text.hasPrefix("probe "), let stamp = UInt64(text.dropFirst(6)) {
                        answer.yield(monotonicNanos() &- stamp)
                    } else if text.hasPrefix("load ") {
                        answered.withLockedValue { $0 += 1 }
                    }
                }
            }
        }
        defer { listener.cancel() }
        var inbox = answers.makeAsyncIterator()
        let stallLimit = Duration.seconds(stall)
        func probeRound(_ count: Int) async throws -> Summary {
            let recorder = Recorder(capacity: count)
            let start = ContinuousClock.now
            for _ in 0..<count {
                try ChatBench.expect(await peer.execute("/_send @\(probeId) json \(ChatBench.textMessage("probe \(monotonicNanos())"))"), "newChatItems")
                let timer = Task { try await Task.sleep(for: stallLimit); answer.yield(0) }
                let latency = await inbox.next()
                timer.cancel()
                guard let latency, latency != 0 else { throw BenchFailure("no answer to a probe in \(stall) s") }
                recorder.record(latency)
            }
            return recorder.summary(elapsed: ContinuousClock.now - start)
        }

        // Warm-up, not counted: the first answers wait behind the peer's events from the set-up
        // (its listener starts here and reads them all first).
        _ = try await probeRound(5)
        let idle = try await probeRound(probes)
        let sentCount = NIOLockedValueBox(0)
        let rate = loadRate
        let load = Task {
            let interval = Duration.seconds(1) / rate
            var next = ContinuousClock.now, i = 0
            while !Task.isCancelled {
                next += interval
                let id = loaders[i % loaders.count]
                i += 1
                _ = await peer.execute("/_send @\(id) json \(ChatBench.textMessage("load \(monotonicNanos())"))")
                sentCount.withLockedValue { $0 += 1 }
                try? await Task.sleep(until: next, clock: .continuous)
            }
        }
        // Two seconds of load before measuring, so that the probes meet a steady state.
        try await Task.sleep(for: .seconds(2))
        let (sent0, answered0, start) = (sentCount.withLockedValue { $0 }, answered.withLockedValue { $0 }, ContinuousClock.now)
        let loaded = try await probeRound(probes)
        let elapsed = (ContinuousClock.now - start).seconds
        let (sent1, answered1) = (sentCount.withLockedValue { $0 }, answered.withLockedValue { $0 })
        load.cancel()
        _ = await load.result
        _ = await bot.execute("/_stop")
        echo.cancel()
        botTask.cancel()
        _ = await botTask.result
        await controller.close()  // its databases (a PostgreSQL schema's lock) let go before the next size
        return ProbeResult(loaders: loaders.count, idle: idle, loaded: loaded,
                           sentPerSecond: Double(sent1 - sent0) / elapsed, answeredPerSecond: Double(answered1 - answered0) / elapsed)
    }
}

/// What a `contacts-restart` child printed: `subscribed <queues> <seconds> <idle RSS bytes>`.
struct ChildReport {
    var queues: Int
    var seconds: Double
    var idleBytes: Int
    var idleMB: Double { Double(idleBytes) / 1_048_576 }

    static func run(_ arguments: [String]) async throws -> ChildReport {
        let process = try SpawnedProcess(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"), arguments, stdin: .null, stderr: .inherit)
        let output = try process.standardOutput!.readToEnd() ?? Data()
        let termination = await process.exited()
        let text = String(decoding: output, as: UTF8.self)
        guard termination == .exit(0) else { throw BenchFailure("\(arguments.first ?? "child") failed (\(termination)): \(text)") }
        guard let line = text.split(separator: "\n").last(where: { $0.hasPrefix("subscribed ") }) else { throw BenchFailure("the child printed no result: \(text)") }
        let f = line.split(separator: " ")
        guard f.count == 4, let q = Int(f[1]), let s = Double(f[2]), let r = Int(f[3]) else { throw BenchFailure("unreadable result: \(line)") }
        return ChildReport(queues: q, seconds: s, idleBytes: r)
    }
}

/// The restarted bot of `contacts` (or, with `--bare`, its baseline), in a process of its own.
struct ContactsRestart: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "contacts-restart",
        abstract: "A bot process restarting on existing files until every queue is subscribed (started by contacts).",
        shouldDisplay: false
    )

    @Option(help: "The bot's databases: a file prefix (<prefix>_chat.db, <prefix>_agent.db) or a PostgreSQL connection string.") var database: String
    @Option(help: "The relay's smp:// address.") var relay: String
    @Option(help: "Contacts whose queues must be subscribed.") var expect: Int
    @Flag(help: "Subscribe the same queues with a bare RelayConnection instead.") var bare = false

    func run() async throws {
        let relayAddress = try RelayAddress(parsing: relay)
        let (queues, elapsed) = bare ? try await runBare(relayAddress) : try await runBot(relayAddress)
        // Idle: what the process keeps once the work is done and the allocator has settled.
        try await Task.sleep(for: .seconds(2))
        print("subscribed \(queues) \(elapsed.seconds) \(residentBytes())")
        fflush(nil)
        Foundation.exit(0)
    }

    /// The bot: the engine opened on its files and run, until `subscriptionStatus` has named
    /// every contact's connection (active or removed).
    private func runBot(_ relay: RelayAddress) async throws -> (Int, Duration) {
        let start = ContinuousClock.now
        var logger = Logger(label: "bench.contacts")
        logger.logLevel = .critical
        let controller = try await ChatController.open(database: try EngineDatabase.parse(database), defaultRelays: [relay], logger: logger)
        let api = ChatAPI(controller: controller)
        let seen = NIOLockedValueBox(0)
        let (done, finished) = AsyncStream.makeStream(of: Void.self)
        let expected = expect
        let listener = Task {
            for await event in api.events where event["type"]?.stringValue == "subscriptionStatus" {
                let total = seen.withLockedValue { $0 += event["connections"]?.arrayValue?.count ?? 0; return $0 }
                if total >= expected { finished.yield(); return }
            }
        }
        let engine = Task { try await controller.run() }
        let started = await api.execute("/_start")
        guard started["type"]?.stringValue == "chatStarted" else { throw BenchFailure("the bot did not start: \(started)") }
        for await _ in done { break }
        let elapsed = ContinuousClock.now - start
        listener.cancel()
        _ = engine
        return (seen.withLockedValue { $0 }, elapsed)
    }

    /// The baseline: the same queues (read before the clock starts), one connection, pipelined SUBs.
    private func runBare(_ relay: RelayAddress) async throws -> (Int, Duration) {
        let queues = try await Agent.receivingQueues(database: try EngineDatabase.parse(database).agent).filter { $0.relay == relay }
        let start = ContinuousClock.now
        let connection = try await RelayConnection.connect(to: relay)
        let errors = await connection.subscribe(queues)
        let elapsed = ContinuousClock.now - start
        if let e = errors.compactMap({ $0 }).first { throw BenchFailure("the bare client could not subscribe: \(e.message)") }
        return (queues.count, elapsed)
    }
}
