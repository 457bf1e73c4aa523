import Agent
import ArgumentParser
import ChatAPI
import ChatCore
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
        abstract: "A bot with N contacts restarts: time until every queue is subscribed and idle memory, against a bare client subscribing the same queues.",
        discussion: """
            Prints, for each N: the set-up (N contacts made through the Chat API), the bot's restart \
            (a new process: databases opened, agent started, every queue subscribed) and its resident \
            memory when idle, the bare client's subscription of the same queues, and the ratio bare / bot \
            (goal ≥ 0.5; 1 would be a restart as fast as the subscriptions alone). A list \
            (--contacts 1000,10000) prints how time and memory grow with N.
            """
    )

    @Option(help: "Contact count(s): N, or a list such as 1000,10000.") var contacts: String = "1000,10000"
    @Option(help: "Invitations under way at once while making the contacts.") var window: Int = 64
    @Option(help: "Seconds without progress before giving up.") var stall: Int = 120

    var sizes: [Int] { contacts.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func validate() throws {
        let list = contacts.split(separator: ",")
        guard !list.isEmpty, sizes.count == list.count, sizes.allSatisfy({ $0 >= 1 }) else { throw ValidationError("--contacts: positive counts, comma-separated") }
        guard window > 0, stall > 0 else { throw ValidationError("--window and --stall must be positive") }
    }

    struct Result {
        var n: Int
        var setupSeconds: Double
        var restart: ChildReport
        var bare: ChildReport
        var ratio: Double { bare.seconds / restart.seconds }
    }

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        print("contacts benchmark: one in-process relay (durable); contacts made through the Chat API; restart and baseline in child processes")
        var results: [Result] = []
        for n in sizes { results.append(try await measure(n)) }
        print("\ngrowth with N (restart = new bot process until every queue is subscribed; bare = the same queues, bare client):")
        print("      N   setup s   restart s   bare s   ratio bare/restart   bot RSS idle MB   bare RSS MB")
        for r in results {
            print(String(format: "%7d  %8.1f  %10.2f  %7.2f  %19.2f  %16.1f  %12.1f",
                         r.n, r.setupSeconds, r.restart.seconds, r.bare.seconds, r.ratio, r.restart.idleMB, r.bare.idleMB))
        }
        if results.count > 1, let first = results.first, let last = results.last {
            let grow = Double(last.n) / Double(first.n)
            print(String(format: "N grew %.0f×: restart time %.1f×, bare time %.1f×, bot idle memory %.1f×",
                         grow, last.restart.seconds / first.restart.seconds, last.bare.seconds / first.bare.seconds, last.restart.idleMB / first.restart.idleMB))
        }
        print("goal: ratio ≥ 0.5: " + (results.allSatisfy { $0.ratio >= 0.5 } ? "met" : "NOT met")
              + "; idle bot ≤ 150 MB: " + (results.allSatisfy { $0.restart.idleMB <= 150 } ? "met" : "NOT met"))
    }

    private func measure(_ n: Int) async throws -> Result {
        print("\nN = \(n)")
        // One bot making N contacts sends 2N NEWs on one connection: above the default per-connection
        // budget (1,000 per window), as it would be for a relay operator's large bot.
        let (dir, logger, server) = try await ChatBench.startRelay(label: "contacts") { $0.maxNewQueuesPerConnection = 4 * n + 100 }
        defer { try? FileManager.default.removeItem(at: dir) }
        let (bot, botTask) = try await ChatBench.startEngine("bot", dir: dir, relay: server, logger: logger)
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
        let prefix = dir.appendingPathComponent("bot").path
        let restart = try await ChildReport.run(["contacts-restart", "--prefix", prefix, "--relay", server.address.description, "--expect", "\(n)"])
        let bare = try await ChildReport.run(["contacts-restart", "--prefix", prefix, "--relay", server.address.description, "--expect", "\(n)", "--bare"])
        print(String(format: "  restart: %.3f s until %d queues subscribed (a new bot process: databases opened, engine started); idle RSS %.1f MB",
                     restart.seconds, restart.queues, restart.idleMB))
        print(String(format: "  bare:    %.3f s for the same %d queues (one RelayConnection, pipelined SUBs); RSS %.1f MB",
                     bare.seconds, bare.queues, bare.idleMB))
        print(String(format: "  ratio bare / restart %.2f (goal ≥ 0.5)", bare.seconds / restart.seconds))
        _ = await peer.execute("/_stop")
        await server.shutdown()
        return Result(n: n, setupSeconds: setup, restart: restart, bare: bare)
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

    @Option(help: "The bot's file prefix (<prefix>_chat.db, <prefix>_agent.db).") var prefix: String
    @Option(help: "The relay's smp:// address.") var relay: String
    @Option(help: "Contacts whose queues must be subscribed.") var expect: Int
    @Flag(help: "Subscribe the same queues with a bare RelayConnection instead.") var bare = false

    func run() async throws {
        let relayAddress = try RelayAddress(parsing: relay)
        let (queues, elapsed) = bare ? try await runBare(relayAddress) : try await runBot(relayAddress)
        // Idle: what the process keeps once the work is done and the allocator has settled.
        try await Task.sleep(for: .seconds(2))
        print("subscribed \(queues) \(elapsed.seconds) \(Self.residentBytes())")
        fflush(nil)
        Foundation.exit(0)
    }

    /// The bot: the engine opened on its files and run, until `subscriptionStatus` has named
    /// every contact's connection (active or removed).
    private func runBot(_ relay: RelayAddress) async throws -> (Int, Duration) {
        let start = ContinuousClock.now
        var logger = Logger(label: "bench.contacts")
        logger.logLevel = .critical
        let controller = try ChatController(prefix: prefix, defaultRelays: [relay], logger: logger)
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
        let queues = try Agent.receivingQueues(databasePath: URL(fileURLWithPath: prefix + "_agent.db")).filter { $0.relay == relay }
        let start = ContinuousClock.now
        let connection = try await RelayConnection.connect(to: relay)
        let errors = await connection.subscribe(queues)
        let elapsed = ContinuousClock.now - start
        if let e = errors.compactMap({ $0 }).first { throw BenchFailure("the bare client could not subscribe: \(e.message)") }
        return (queues.count, elapsed)
    }

    /// VmRSS of this process, in bytes.
    static func residentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kb = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
        return kb * 1024
    }
}
