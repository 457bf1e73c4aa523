import ArgumentParser
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import SwiftplexSpawn

/// `swiftplex-bench relay-abuse`: a well-behaved client's round trip (SEND → MSG → ACK on its own
/// queue) through an in-process relay, first alone, then while many connections misbehave in
/// every way the relay's limits are for. Loopback only, bounded in connections and time.
///
/// The attackers run in a child process (this executable's hidden `relay-abuse-attackers`), so that
/// what is measured is the relay's cost of them, not their own CPU in the relay's process; like
/// remote attackers, they go as fast as the relay lets them (each waits for its answers or for
/// its writes to be taken) and no faster. `--attackers-in-process` runs them in this process.
struct RelayAbuseBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-abuse",
        abstract: "A good client's round trip through a relay, unloaded and under misbehaving connections (NEW floods, bad signatures, SKEY attempts, unsigned SEND floods, garbage blocks, slow readers)."
    )

    @Option(help: "Misbehaving connections at once.") var attackers: Int = 200
    @Option(help: "Seconds of each measured phase.") var seconds: Int = 10
    @Option(help: "Message body size of the good client, in bytes.") var size: Int = 1024
    @Option(help: "Event loop threads of the relay.") var threads: Int = System.coreCount
    @Flag(help: "Print each round trip slower than 200 ms, split into SEND, MSG and ACK.") var verbose = false
    @Option(help: "Only these misbehaviours, comma-separated: new-flood, bad-signatures, skey, send-flood, garbage, slow-reader (default: all).")
    var only: String?
    @Flag(name: .customLong("unlimited-rates"), help: "Turn off every rate limit of the relay — per connection, relay-wide and the accept rate (to see what they do).")
    var unlimitedRates = false
    @Option(name: .customLong("unproven-work-ms"), help: "The relay's --max-unproven-work-ms-per-second (default: the relay's default, 25).")
    var unprovenWorkMs: Int?
    @Flag(name: .customLong("no-unproven-runs"), help: "Turn off the relay's runs of unproven work (reads of unproven connections waiting for a gap), to compare.")
    var noUnprovenRuns = false
    @Option(name: .customLong("handshake-ms"), help: "The relay's --max-handshake-ms-per-second (default: the relay's default, 10).")
    var handshakeMs: Int?
    @Flag(name: .customLong("attackers-in-process"), help: "Run the attackers in this process, beside the relay (their own CPU then counts against it), instead of a child process.")
    var attackersInProcess = false
    @Option(help: "Honest new clients connecting at once in the newcomer phases (each connects — TLS handshake and hello —, subscribes to a queue of its own made before, and closes, again and again); 0 skips those phases.")
    var newcomers: Int = 4
    @Option(name: .customLong("newcomer-seconds"), help: "Seconds of each newcomer phase (one unloaded, one under the attack, after the good client's phases).")
    var newcomerSeconds: Int = 5
    @Option(name: .customLong("attackers-source"), help: "The loopback address the attackers connect from (the good client connects from 127.0.0.1), standing for the attackers' host.")
    var attackersSource: String = "127.0.0.2"
    @Option(name: .customLong("newcomers-source"), help: "The loopback address the honest newcomers connect from, standing for other hosts than the attackers'.")
    var newcomersSource: String = "127.0.0.3"
    @Flag(name: .customLong("one-source"), help: "Everyone connects from 127.0.0.1 (one source: the relay's per-source budgets cannot tell the attackers from the newcomers).")
    var oneSource = false
    @Option(name: .customLong("handshake-ms-per-source"), help: "The relay's --max-handshake-ms-per-second-per-source (default: the relay's default, 5; 0 turns per-source accounting off).")
    var handshakeMsPerSource: Int?
    @Option(name: .customLong("attackers-cpus"), help: "Run the attackers' process on these CPUs only (a taskset list, e.g. 1), as remote attackers would not use the relay's CPUs; run the bench itself with `taskset -c 0` so that the relay and the good client keep to the others.")
    var attackersCPUs: String?

    func validate() throws {
        guard attackers >= 0, attackers <= 2000 else { throw ValidationError("--attackers must be 0…2000") }
        guard (1...300).contains(seconds) else { throw ValidationError("--seconds must be 1…300") }
        guard (0...256).contains(newcomers) else { throw ValidationError("--newcomers must be 0…256") }
        guard (1...300).contains(newcomerSeconds) else { throw ValidationError("--newcomer-seconds must be 1…300") }
        if let unprovenWorkMs, !(1...1_000_000).contains(unprovenWorkMs) { throw ValidationError("--unproven-work-ms must be 1…1000000") }
        if let handshakeMs, !(1...1_000_000).contains(handshakeMs) { throw ValidationError("--handshake-ms must be 1…1000000") }
        if let handshakeMsPerSource, !(0...1_000_000).contains(handshakeMsPerSource) { throw ValidationError("--handshake-ms-per-source must be 0…1000000") }
        for address in [attackersSource, newcomersSource] where (try? SocketAddress(ipAddress: address, port: 0)) == nil {
            throw ValidationError("\(address) is not an IP address")
        }
        guard size >= 8, size <= RelayLimits.maxMessageBodyLength else { throw ValidationError("--size must be 8…\(RelayLimits.maxMessageBodyLength)") }
        if let attackersCPUs {
            guard !attackersInProcess else { throw ValidationError("--attackers-cpus needs the attackers in their own process") }
            guard !attackersCPUs.isEmpty, attackersCPUs.allSatisfy({ $0.isNumber || $0 == "," || $0 == "-" }) else {
                throw ValidationError("--attackers-cpus takes a CPU list such as 1 or 2-3")
            }
            guard FileManager.default.isExecutableFile(atPath: AttackerProcess.taskset) else {
                throw ValidationError("--attackers-cpus needs \(AttackerProcess.taskset) (util-linux)")
            }
        }
        if let only, only.split(separator: ",").contains(where: { Behaviour(rawValue: String($0)) == nil }) {
            throw ValidationError("--only takes \(Behaviour.allCases.map(\.rawValue).joined(separator: ", "))")
        }
    }

    /// The ways a connection misbehaves; attacker `i` does the `i % count`-th of those chosen.
    enum Behaviour: String, CaseIterable {
        case newFlood = "new-flood"
        case badSignatures = "bad-signatures"
        case skeyAttempts = "skey"
        case unsignedSendFlood = "send-flood"
        case garbageBlocks = "garbage"
        case slowReader = "slow-reader"
    }

    /// This process's CPU list (`Cpus_allowed_list` of /proc/self/status).
    static func allowedCPUs() -> String? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        return status.split(separator: "\n").first { $0.hasPrefix("Cpus_allowed_list:") }
            .map { $0.dropFirst("Cpus_allowed_list:".count).trimmingCharacters(in: .whitespaces) }
    }

    private var behaviours: [Behaviour] {
        guard let only else { return Behaviour.allCases }
        return only.split(separator: ",").compactMap { Behaviour(rawValue: String($0)) }
    }

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        let serverGroup = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let attackGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let goodGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var logger = Logger(label: "bench.relay-abuse")
        logger.logLevel = .critical
        // The relay's default limits, except a shorter write-stall timeout so that slow readers
        // are cut off within the run.
        var config = RelayConfiguration(dataDirectory: dir, host: "127.0.0.1", port: 0)
        config.writeStallTimeout = .seconds(5)
        if let unprovenWorkMs { config.unprovenWorkRate = RateLimit(perSecond: unprovenWorkMs * 1000, burst: unprovenWorkMs * 200) }
        if let handshakeMs { config.handshakeWorkRate = RateLimit(perSecond: handshakeMs * 1000, burst: max(handshakeMs * 5000, 50_000)) }
        if noUnprovenRuns { config.unprovenRunRate = .unlimited }
        if let handshakeMsPerSource { config.sourceHandshakeWorkRate = RelayConfiguration.sourceHandshakeWorkRate(msPerSecond: handshakeMsPerSource) }
        if unlimitedRates { config.unlimitRates() }
        let server = try await RelayServer.start(configuration: config, group: serverGroup, logger: logger)
        print("relay-abuse: \(attackers) misbehaving connections (\(behaviours.map(\.rawValue).joined(separator: ", "))), \(seconds) s per phase, \(size)-byte messages, \(threads) relay event-loop threads")
        print("relay limits: unproven work \(config.unprovenWorkRate) µs, new connections' work \(config.handshakeWorkRate) µs (per source \(config.sourceHandshakeWorkRate) µs), runs of unproven work \(config.unprovenRunRate) µs, accepts \(config.acceptRate)")
        let attackersFrom = oneSource ? nil : attackersSource
        let newcomersFrom = oneSource ? nil : newcomersSource
        print("sources: good client 127.0.0.1, attackers \(attackersFrom ?? "127.0.0.1"), newcomers \(newcomersFrom ?? "127.0.0.1")")
        print("CPUs: relay and good client \(Self.allowedCPUs() ?? "?"), attackers \(attackersInProcess ? "the same (in process)" : attackersCPUs ?? "any")")

        // The good client: a recipient connection and a sender connection, one secured queue.
        let recipient = try await RelayConnection.connect(to: server.address, group: goodGroup)
        let sender = try await RelayConnection.connect(to: server.address, group: goodGroup)
        let queue = try await recipient.createQueue(recipientKey: .newX25519())
        let senderKey = AuthPrivateKey.newX25519()
        try await sender.secureAsSender(senderId: queue.senderId, senderKey: senderKey)
        try await recipient.subscribe(queue)
        let good = GoodClient(recipient: recipient, sender: sender, queue: queue, senderKey: senderKey, size: size, verbose: verbose)
        // An address for the SKEY attackers to aim at.
        let address = try await recipient.createQueue(recipientKey: .newX25519(), mode: .contact)
        // The newcomers' queues, made on a connection of their own (closed: each newcomer subscribes anew).
        let setup = try await RelayConnection.connect(to: server.address, group: goodGroup)
        var newcomerQueues: [RecipientQueue] = []
        for _ in 0..<newcomers { newcomerQueues.append(try await setup.createQueue(recipientKey: .newX25519())) }
        await setup.close()
        let newcomerProbe = Newcomers(relay: server.address, queues: newcomerQueues, group: goodGroup, source: newcomersFrom)

        // Warm-up, then unloaded.
        for _ in 0..<200 { _ = try await good.roundTrip() }
        let (unloaded, unloadedParts) = try await good.measure(seconds: seconds)
        print(unloaded.line("unloaded"))
        print(unloadedParts)
        let newcomersUnloaded = newcomers > 0 ? await newcomerProbe.measure(seconds: newcomerSeconds) : nil
        if let newcomersUnloaded { print(newcomersUnloaded.line("unloaded")) }

        // Loaded: the attackers run for the phase (plus a second to get going), then stop.
        let loaded: (total: Summary, parts: String)
        let statsDuring: RelayStats
        let attackSummary: String
        var newcomersLoaded: NewcomerFigures?
        if attackersInProcess {
            let stop = NIOLockedValueBox(false)
            let counters = AttackCounters()
            (loaded, statsDuring) = try await withThrowingTaskGroup(of: Void.self) { group -> ((total: Summary, parts: String), RelayStats) in
                for i in 0..<attackers {
                    let behaviour = behaviours[i % behaviours.count]
                    group.addTask {
                        await Attacker(behaviour: behaviour, relay: server.address, address: address.senderId, group: attackGroup,
                                       stop: stop, counters: counters, source: attackersFrom).run()
                    }
                }
                try await Task.sleep(for: .seconds(1))
                let summary = try await good.measure(seconds: seconds)
                let stats = server.stats
                if newcomers > 0 { newcomersLoaded = await newcomerProbe.measure(seconds: newcomerSeconds) }
                stop.withLockedValue { $0 = true }
                try await group.waitForAll()
                return (summary, stats)
            }
            attackSummary = counters.summary
        } else {
            let child = try AttackerProcess(relay: server.address, address: address.senderId, attackers: attackers, behaviours: behaviours, cpus: attackersCPUs,
                                            source: attackersFrom)
            try await Task.sleep(for: .seconds(1))
            loaded = try await good.measure(seconds: seconds)
            statsDuring = server.stats
            if newcomers > 0 { newcomersLoaded = await newcomerProbe.measure(seconds: newcomerSeconds) }
            attackSummary = try child.stop()
        }
        print(loaded.total.line("loaded"))
        print(loaded.parts)
        let p99Ratio = loaded.total.p99ms / unloaded.p99ms
        print(String(format: "ratio loaded/unloaded: p50 %.2f, p99 %.2f (goal: p99 within 3: %@)", loaded.total.p50ms / unloaded.p50ms, p99Ratio,
                     (p99Ratio <= 3 ? "met" : "not met") as NSString))
        if let newcomersLoaded, let newcomersUnloaded {
            print(newcomersLoaded.line("loaded"))
            print(String(format: "newcomers: ratio of connections completed loaded/unloaded %.2f", newcomersLoaded.completedPerSecond / newcomersUnloaded.completedPerSecond))
        }
        print("attackers (\(attackersInProcess ? "in this process" : "in a child process")): \(attackSummary)")
        print("relay during the attack: \(statsDuring.connections) connections, \(statsDuring.sources) sources tracked, \(statsDuring.queues) queues, \(statsDuring.storedMessages) stored messages, \(statsDuring.authFailures) AUTH answers, \(statsDuring.limitRefusals) limit refusals, \(statsDuring.throttled) throttles (\(statsDuring.throttledByLimit.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")))")
        await recipient.close()
        await sender.close()
        await server.shutdown()
        try await attackGroup.shutdownGracefully()
        try await goodGroup.shutdownGracefully()
        try await serverGroup.shutdownGracefully()
    }

}

/// `swiftplex-bench relay-abuse-attackers` (hidden; started by `relay-abuse`): the misbehaving
/// connections, in their own process, until standard input closes; then it prints what the relay
/// answered them and exits.
struct RelayAbuseAttackers: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-abuse-attackers",
        abstract: "The misbehaving connections of relay-abuse, in a process of their own (started by relay-abuse).",
        shouldDisplay: false
    )

    @Option(help: "The relay's smp:// address.") var relay: String
    @Option(help: "The sender ID (base64url) of the address queue the SKEY attackers aim at.") var address: String
    @Option(help: "Misbehaving connections at once.") var attackers: Int
    @Option(help: "Misbehaviours, comma-separated.") var only: String
    @Option(help: "The local address to connect from.") var source: String?

    func run() async throws {
        guard let relayAddress = RelayAddress(relay) else { throw ValidationError("--relay is not a relay address") }
        guard let target = Base64URL.decode(address) else { throw ValidationError("--address is not base64url") }
        let behaviours = only.split(separator: ",").compactMap { RelayAbuseBench.Behaviour(rawValue: String($0)) }
        guard !behaviours.isEmpty, (0...2000).contains(attackers) else { throw ValidationError("--only and --attackers") }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let stop = NIOLockedValueBox(false)
        let counters = AttackCounters()
        let done = NIOLockedValueBox<CheckedContinuation<Void, Never>?>(nil)
        // Standard input closing (the parent's signal, or its death) stops the attack.
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 64)
            while true {
                let n = read(0, &buffer, buffer.count)
                if n > 0 || (n < 0 && errno == EINTR) { continue }
                break
            }
            stop.withLockedValue { $0 = true }
            done.withLockedValue { $0?.resume(); $0 = nil }
        }
        for i in 0..<attackers {
            let behaviour = behaviours[i % behaviours.count]
            Task {
                await Attacker(behaviour: behaviour, relay: relayAddress, address: target, group: group, stop: stop, counters: counters, source: source).run()
            }
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let stopped = done.withLockedValue { d -> Bool in
                if stop.withLockedValue({ $0 }) { return true }
                d = c
                return false
            }
            if stopped { c.resume() }
        }
        // Attackers blocked on a held connection stop with the process, not after the relay lets them go.
        print(counters.summary)
        fflush(nil)
        Foundation.exit(0)
    }
}

/// The attackers' child process, seen from `relay-abuse`.
final class AttackerProcess {
    private let process: SpawnedProcess

    static let taskset = "/usr/bin/taskset"

    /// `cpus`: a CPU list the child is started on (through taskset), else wherever this process may run.
    init(relay: RelayAddress, address: [UInt8], attackers: Int, behaviours: [RelayAbuseBench.Behaviour], cpus: String? = nil, source: String? = nil) throws {
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let arguments = ["relay-abuse-attackers", "--relay", relay.description, "--address", Base64URL.encode(address),
                         "--attackers", "\(attackers)", "--only", behaviours.map(\.rawValue).joined(separator: ",")]
            + (source.map { ["--source", $0] } ?? [])
        if let cpus {
            process = try SpawnedProcess(Self.taskset, ["-c", cpus, exe] + arguments, stderr: .inherit)
        } else {
            process = try SpawnedProcess(exe, arguments, stderr: .inherit)
        }
    }

    /// Closes the child's standard input (it stops), waits for it and returns what it printed.
    func stop() throws -> String {
        try process.standardInput!.close()
        let fd = process.standardOutput!.fileDescriptor
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n > 0 { bytes += buffer[0..<n]; continue }
            if n < 0, errno == EINTR { continue }
            break
        }
        let termination = process.waitUntilExit()
        let text = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard termination == .exit(0) else {
            throw ValidationError("the attackers' process failed (\(termination)): \(text)")
        }
        return text
    }
}

/// What the newcomers of one phase got: connections completed (TLS handshake, hello, an answered
/// `SUB`), their time from connect to the `SUB`'s answer, and attempts that failed.
struct NewcomerFigures {
    var summary: Summary
    var failed: Int
    var seconds: Int
    var completedPerSecond: Double { summary.perSecond }

    func line(_ phase: String) -> String {
        String(format: "newcomers %@: %d connected and subscribed in %d s (%.1f/s), connect→SUB answered p50 %.1f ms, p99 %.1f ms; %d attempts failed",
               phase as NSString, summary.count, seconds, summary.perSecond, summary.p50ms, summary.p99ms, failed)
    }
}

/// Honest new clients (as after a relay restart or a network change): each connects, subscribes
/// to its own queue (made before) and closes, again and again, for a phase.
struct Newcomers {
    let relay: RelayAddress
    let queues: [RecipientQueue]
    let group: any EventLoopGroup
    /// The local address to connect from (nil: the system's choice).
    let source: String?

    func measure(seconds: Int) async -> NewcomerFigures {
        let recorder = Recorder(capacity: 100_000)
        let failed = NIOLockedValueBox(0)
        let start = ContinuousClock.now
        let end = start + .seconds(seconds)
        await withTaskGroup(of: Void.self) { tasks in
            for queue in queues {
                tasks.addTask {
                    while ContinuousClock.now < end {
                        let t0 = monotonicNanos()
                        do {
                            let c = try await RelayConnection.connect(to: relay, group: group, timeout: .seconds(10), sourceAddress: source)
                            do {
                                try await c.subscribe(queue)
                                recorder.record(monotonicNanos() &- t0)
                            } catch {
                                failed.withLockedValue { $0 += 1 }
                            }
                            await c.close()
                        } catch {
                            failed.withLockedValue { $0 += 1 }
                            try? await Task.sleep(for: .milliseconds(50))
                        }
                    }
                }
            }
        }
        return NewcomerFigures(summary: recorder.summary(elapsed: ContinuousClock.now - start), failed: failed.withLockedValue { $0 }, seconds: seconds)
    }
}

/// The well-behaved client: SEND on its queue, wait for the MSG, ACK it. Used by one task.
final class GoodClient {
    let recipient: RelayConnection
    let sender: RelayConnection
    let queue: RecipientQueue
    let senderKey: AuthPrivateKey
    let size: Int
    let verbose: Bool
    private var deliveries: AsyncStream<RelayEvent>.Iterator
    /// The parts of each round trip of the current ``measure(seconds:)``: `SEND` → `OK`, `OK` → `MSG`, `ACK` → `OK`.
    private var parts: (send: Recorder, msg: Recorder, ack: Recorder)?

    init(recipient: RelayConnection, sender: RelayConnection, queue: RecipientQueue, senderKey: AuthPrivateKey, size: Int, verbose: Bool) {
        self.verbose = verbose
        self.recipient = recipient
        self.sender = sender
        self.queue = queue
        self.senderKey = senderKey
        self.size = size
        deliveries = recipient.events.makeAsyncIterator()
    }

    /// One SEND → MSG → ACK, in nanoseconds.
    func roundTrip() async throws -> UInt64 {
        let start = monotonicNanos()
        try await sender.sendMessage(senderId: queue.senderId, key: senderKey, body: .stamped(size: size))
        let sent = monotonicNanos()
        var id: [UInt8]?
        while id == nil, let event = await deliveries.next() {
            if case let .message(_, messageId, _) = event { id = messageId }
        }
        guard let id else { throw RelayClientError(.connectionClosed, "the good client's connection closed") }
        let received = monotonicNanos()
        try await recipient.acknowledge(queue, messageId: id)
        let end = monotonicNanos()
        if let parts {
            parts.send.record(sent &- start)
            parts.msg.record(received &- sent)
            parts.ack.record(end &- received)
        }
        if verbose, end - start > 200_000_000 {
            print("slow round trip: send \((sent - start) / 1_000_000) ms, msg \((received - sent) / 1_000_000) ms, ack \((end - received) / 1_000_000) ms")
        }
        return end &- start
    }

    /// Round trips one after another for `seconds`; also returns the p50/p99 of their parts.
    func measure(seconds: Int) async throws -> (total: Summary, parts: String) {
        let recorder = Recorder(capacity: 100_000)
        let split = (send: Recorder(capacity: 100_000), msg: Recorder(capacity: 100_000), ack: Recorder(capacity: 100_000))
        parts = split
        defer { parts = nil }
        let start = ContinuousClock.now
        let end = start + .seconds(seconds)
        while ContinuousClock.now < end { recorder.record(try await roundTrip()) }
        let elapsed = ContinuousClock.now - start
        let line = [("SEND", split.send), ("MSG", split.msg), ("ACK", split.ack)].map { name, r in
            let s = r.summary(elapsed: elapsed)
            return String(format: "%@ %.3f / %.3f", name, s.p50ms, s.p99ms)
        }.joined(separator: ", ")
        return (recorder.summary(elapsed: elapsed), "  parts p50 / p99 ms: " + line)
    }
}

/// What the attackers got from the relay.
final class AttackCounters: Sendable {
    private let counts = NIOLockedValueBox<[String: Int]>([:])
    func add(_ what: String, _ n: Int = 1) { counts.withLockedValue { $0[what, default: 0] += n } }
    var summary: String {
        counts.withLockedValue { $0.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") }
    }
}

/// One misbehaving connection at a time (reconnecting when the relay closes it) until told to stop.
struct Attacker {
    let behaviour: RelayAbuseBench.Behaviour
    let relay: RelayAddress
    let address: [UInt8]
    let group: any EventLoopGroup
    let stop: NIOLockedValueBox<Bool>
    let counters: AttackCounters
    /// The local address to connect from (nil: the system's choice).
    var source: String?

    private var stopped: Bool { stop.withLockedValue { $0 } }

    func run() async {
        while !stopped {
            counters.add("connections")
            do {
                switch behaviour {
                case .newFlood, .skeyAttempts, .unsignedSendFlood:
                    try await client()
                case .badSignatures, .garbageBlocks, .slowReader:
                    try await raw()
                }
            } catch {
                counters.add("closed or refused")
            }
            // A refused connection retries after a pause, not in a tight loop.
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    private func answer(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let e as RelayClientError {
            if case let .relay(code) = e.code { counters.add("ERR \(code.rawValue)") } else { throw e }
        }
    }

    private func client() async throws {
        let c = try await RelayConnection.connect(to: relay, group: group, timeout: .seconds(5), sourceAddress: source)
        defer { Task { await c.close() } }
        var own: [RecipientQueue] = []
        // One key for all its NEWs (nothing forbids it): the flood costs the attacker little.
        let newKey = AuthPrivateKey.newX25519()
        let newDh = X25519.PrivateKey().publicKey
        while !stopped, c.isActive {
            switch behaviour {
            case .newFlood:
                try await answer { try await c.send(.new(recipientKey: newKey.publicKey, recipientDhKey: newDh), key: newKey) }
            case .skeyAttempts:
                try await answer { try await c.secureAsSender(senderId: address, senderKey: .newX25519()) }
            case .unsignedSendFlood:
                if own.isEmpty { try await answer { own.append(try await c.createQueue(recipientKey: .newX25519())) } }
                guard let q = own.last else { continue }
                try await answer { try await c.sendMessage(senderId: q.senderId, key: nil, body: Sodium.randomBytes(RelayLimits.maxMessageBodyLength)) }
            case .badSignatures, .garbageBlocks, .slowReader:
                return
            }
        }
        if !c.isActive { counters.add("closed by the relay") }
    }

    private func raw() async throws {
        let tls = try NIOSSLContext(configuration: {
            var c = TLSConfiguration.makeClientConfiguration()
            c.certificateVerification = .none
            return c
        }())
        var bootstrap = ClientBootstrap(group: group)
        if let source { bootstrap = bootstrap.bind(to: try SocketAddress(ipAddress: source, port: 0)) }
        let channel = try await bootstrap
            .channelOption(.autoRead, value: behaviour != .slowReader)
            .connectTimeout(.seconds(5))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: nil))
                }
            }
            .connect(host: relay.host, port: relay.port).get()
        defer { channel.close(promise: nil) }
        let allocator = channel.allocator
        if behaviour == .slowReader {
            // Let the handshake through, then never read again: blocks of PINGs make the relay
            // write PONGs that nobody reads, until it closes the connection.
            try await channel.setOption(.autoRead, value: true).get()
        }
        try await channel.writeAndFlush(BlockCodec.encode([ClientHello(version: 1).encoded()], allocator: allocator)[0]).get()
        switch behaviour {
        case .badSignatures:
            // Blocks of 64 SUBs with random signatures at random queue IDs, written as fast as the
            // relay takes them (its answers are read and dropped), until it closes the connection.
            let subs = (0..<RelayLimits.maxAuthorizedPerBlock).map { _ in
                Transmission(signature: Sodium.randomBytes(64), correlationId: Sodium.randomBytes(24),
                             entityId: Sodium.randomBytes(24), command: ClientCommand.subscribe.encoded()).encoded(allocator: allocator)
            }
            let block = BlockCodec.encode(subs, allocator: allocator)[0]
            while !stopped, channel.isActive {
                try await channel.writeAndFlush(block).get()
            }
        case .garbageBlocks:
            while !stopped, channel.isActive {
                var block = allocator.buffer(bytes: Sodium.randomBytes(RelayLimits.blockSize))
                block.setInteger(UInt16(RelayLimits.blockSize), at: 0) // a lying content length
                try await channel.writeAndFlush(block).get()
                try? await Task.sleep(for: .milliseconds(10))
            }
        default:
            try await channel.setOption(.autoRead, value: false).get()
            let pings = (0..<200).map { _ in
                Transmission(correlationId: Sodium.randomBytes(24), entityId: [], command: ClientCommand.ping.encoded()).encoded(allocator: allocator)
            }
            let block = BlockCodec.encode(pings, allocator: allocator)[0]
            while !stopped, channel.isActive, channel.isWritable {
                channel.writeAndFlush(block, promise: nil)
                try? await Task.sleep(for: .milliseconds(5))
            }
            while !stopped, channel.isActive { try? await Task.sleep(for: .milliseconds(50)) }
        }
        if !channel.isActive { counters.add("closed by the relay") }
    }
}
