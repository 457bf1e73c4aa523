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
import SwiftplexSpawn

/// `swiftplex-bench relay-clients`: a relay (in a child process, so that its memory is its own)
/// with thousands of connected clients, each subscribed to one queue: the relay's memory per
/// connection and per queue, and delivery throughput to those clients against the 8-connection
/// figure measured on the same relay in the same run.
struct RelayClientsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-clients",
        abstract: "A relay with many connected clients (one queue each): memory per connection and per queue, delivery throughput against 8 connections."
    )

    @Option(help: "Connected clients, comma-separated and ascending; each step adds clients to the ones before.") var clients: String = "1000,10000"
    @Option(help: "Messages per throughput measurement.") var messages: Int = 20_000
    @Option(help: "Message body size in bytes.") var size: Int = 1024
    @Option(name: .customLong("extra-queues"), help: "Queues made on one connection to measure memory per queue.") var extraQueues: Int = 10_000
    @Option(name: .customLong("connect-window"), help: "Clients connecting (TLS handshake, NEW, SUB) at once.") var connectWindow: Int = 64
    @Option(help: "Event loop threads of the clients (the relay uses one per core).") var threads: Int = System.coreCount
    @Option(name: .customLong("unproven-work-ms"), help: "Keep the relay's budget of unproven work on, at N ms a second (the relay's default is 25); off by default here.")
    var unprovenWorkMs: Int?
    @Option(name: .customLong("accepts-per-second"), help: "Keep the relay's accept rate on, at N a second (the relay's default is 200); off by default here.")
    var acceptsPerSecond: Int?
    @Option(name: .customLong("handshake-ms"), help: "Keep the relay's budget of new connections' work on, at N ms a second (the relay's default is 10); off by default here.")
    var handshakeMs: Int?
    @Flag(name: .customLong("relay-pacing"), help: "Keep all of the relay's pacing of connections at its defaults (accept rate, budgets of new connections' and of unproven work, runs of unproven work); the options above override each.")
    var relayPacing = false
    @Option(name: .customLong("relay-prefix"), help: "A command the relay's process is started under, split at spaces (e.g. 'valgrind --tool=massif' to see what its memory holds).")
    var relayPrefix: String?

    var steps: [Int] { clients.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func validate() throws {
        let s = steps
        guard !s.isEmpty, s.count == clients.split(separator: ",").count, s.allSatisfy({ $0 > 0 }), s == s.sorted(), Set(s).count == s.count else {
            throw ValidationError("--clients is a comma-separated ascending list of positive counts, e.g. 1000,10000")
        }
        guard messages > 0, extraQueues >= 0, connectWindow > 0, threads > 0 else { throw ValidationError("counts must be positive") }
        if let unprovenWorkMs, !(1...1_000_000).contains(unprovenWorkMs) { throw ValidationError("--unproven-work-ms must be 1…1000000") }
        if let acceptsPerSecond, !(1...1_000_000).contains(acceptsPerSecond) { throw ValidationError("--accepts-per-second must be 1…1000000") }
        if let handshakeMs, !(1...1_000_000).contains(handshakeMs) { throw ValidationError("--handshake-ms must be 1…1000000") }
        guard size >= 8, size <= RelayLimits.maxMessageBodyLength else { throw ValidationError("--size must be 8…\(RelayLimits.maxMessageBodyLength)") }
    }

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        let largest = steps.last!
        // Each client is one socket here and one in the relay; 8 senders, 8 receivers and the
        // queue-memory connection on top.
        let limit = try OpenFileLimit.raise(toAtLeast: largest + 64)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        var limits: [String] = []
        if let unprovenWorkMs { limits += ["--unproven-work-ms", "\(unprovenWorkMs)"] }
        if let acceptsPerSecond { limits += ["--accepts-per-second", "\(acceptsPerSecond)"] }
        if let handshakeMs { limits += ["--handshake-ms", "\(handshakeMs)"] }
        if relayPacing { limits += ["--relay-pacing"] }
        let relay = try RelayChild(maxConnections: largest + 64, limits: limits, prefix: relayPrefix?.split(separator: " ").map(String.init) ?? [])
        defer { relay.stop() }
        print("relay-clients: relay in process \(relay.pid) (its own open-file limit raised like this one's: \(limit)); relay rates off except: \(relayPacing ? "the relay's pacing at its defaults, but " : "")unproven work \(unprovenWorkMs.map { "\($0) ms/s" } ?? (relayPacing ? "default" : "off")), new connections' work \(handshakeMs.map { "\($0) ms/s" } ?? (relayPacing ? "default" : "off")), accepts \(acceptsPerSecond.map { "\($0)/s" } ?? (relayPacing ? "default" : "off")); clients \(steps.map(String.init).joined(separator: ", ")); \(messages) messages of \(size) bytes per throughput figure; x25519 recipient and sender keys (the client library's default)")

        let idle = relay.residentBytes()
        print(String(format: "relay idle: %.1f MB resident", Double(idle) / 1e6))

        // The baseline: 8 sender and 8 receiver connections, 64 queues, as `swiftplex-bench relay`.
        let senders = try await (0..<8).asyncMap { _ in try await RelayConnection.connect(to: relay.address, group: group) }
        var baselineQueues: [Flow] = []
        var baselineReceivers: [Receiver] = []
        for _ in 0..<8 {
            let r = try await Receiver.connect(relay.address, group: group)
            for _ in 0..<8 { baselineQueues.append(try await r.newQueue()) }
            baselineReceivers.append(r)
        }
        try await Flow.secure(baselineQueues, senders: senders)
        _ = try await Throughput.measure(flows: baselineQueues, receivers: baselineReceivers, senders: senders, messages: min(2000, messages), size: size)
        let baseline = try await Throughput.measure(flows: baselineQueues, receivers: baselineReceivers, senders: senders, messages: messages, size: size)
        print(baseline.line("8 conns"))
        for r in baselineReceivers { await r.close() }

        // Memory per queue: queues made on one connection (NEW + SUB), no more connections.
        if extraQueues > 0 {
            let before = relay.residentBytes()
            let r = try await Receiver.connect(relay.address, group: group)
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                var made = 0
                while made < min(256, extraQueues) { made += 1; tasks.addTask { _ = try await r.newQueue() } }
                for try await _ in tasks where made < extraQueues { made += 1; tasks.addTask { _ = try await r.newQueue() } }
            }
            let took = ContinuousClock.now - start
            let after = relay.residentBytes()
            print(String(format: "queues: %d more on one connection in %.2f s; relay +%.1f MB, %.0f bytes per queue", extraQueues, took.seconds,
                         Double(after - before) / 1e6, Double(after - before) / Double(extraQueues)))
            await r.close()
        }

        // Clients, step by step: each connects, makes one queue and subscribes to it.
        var connected: [Receiver] = []
        var flows: [Flow] = []
        var previous = (clients: 0, resident: relay.residentBytes())
        var rows: [(clients: Int, connect: Duration, perClient: Double, resident: Int, summary: Summary)] = []
        for target in steps {
            let start = ContinuousClock.now
            let added = try await connectClients(target - connected.count, relay: relay.address, group: group)
            let took = ContinuousClock.now - start
            connected += added.map(\.receiver)
            flows += added.map(\.flow)
            try await Flow.secure(added.map(\.flow), senders: senders)
            let resident = relay.residentBytes()
            let perClient = Double(resident - previous.resident) / Double(target - previous.clients)
            print(String(format: "%d clients connected and subscribed (%d new in %.2f s, %.0f per second); relay %.1f MB resident, %.1f KB per connection",
                         target, added.count, took.seconds, Double(added.count) / took.seconds, Double(resident) / 1e6, perClient / 1e3))
            let summary = try await Throughput.measure(flows: flows, receivers: connected, senders: senders, messages: messages, size: size)
            print(summary.line("\(target) conns"))
            print(String(format: "ratio %d-connection / 8-connection throughput: %.2f", target, summary.perSecond / baseline.perSecond))
            rows.append((target, took, perClient, resident, summary))
            previous = (target, resident)
        }

        if rows.count > 1 {
            let a = rows[rows.count - 2], b = rows[rows.count - 1]
            let clientGrowth = Double(b.clients) / Double(a.clients)
            print(String(format: "growth %d → %d clients (×%.0f): relay memory ×%.2f, throughput ×%.2f, p99 ×%.2f",
                         a.clients, b.clients, clientGrowth, Double(b.resident - idle) / Double(max(1, a.resident - idle)),
                         b.summary.perSecond / a.summary.perSecond, b.summary.p99ms / a.summary.p99ms))
        }
        for r in connected { await r.close() }
        for s in senders { await s.close() }
        try await group.shutdownGracefully()
    }

    private func connectClients(_ count: Int, relay: RelayAddress, group: any EventLoopGroup) async throws -> [(receiver: Receiver, flow: Flow)] {
        guard count > 0 else { return [] }
        return try await withThrowingTaskGroup(of: (Receiver, Flow).self) { tasks in
            var started = 0
            var done: [(receiver: Receiver, flow: Flow)] = []
            done.reserveCapacity(count)
            func start() {
                started += 1
                tasks.addTask {
                    let r = try await Receiver.connect(relay, group: group)
                    return (r, try await r.newQueue())
                }
            }
            while started < min(connectWindow, count) { start() }
            for try await pair in tasks {
                done.append(pair)
                if started < count { start() }
            }
            return done
        }
    }
}

/// One queue, its sender key once secured.
final class Flow: Sendable {
    let queue: RecipientQueue
    let senderKey = AuthPrivateKey.newX25519()

    init(queue: RecipientQueue) { self.queue = queue }

    /// SKEY for every flow, spread over the sender connections, pipelined.
    static func secure(_ flows: [Flow], senders: [RelayConnection]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for (i, flow) in flows.enumerated() {
                let s = senders[i % senders.count]
                tasks.addTask { try await s.secureAsSender(senderId: flow.queue.senderId, senderKey: flow.senderKey) }
                if i >= 512 { try await tasks.next() }
            }
            try await tasks.waitForAll()
        }
    }
}

/// A receiving client: one connection whose messages are opened, recorded and acknowledged.
final class Receiver: Sendable {
    let connection: RelayConnection
    private let queues = NIOLockedValueBox<[[UInt8]: RecipientQueue]>([:])
    private let recorder = NIOLockedValueBox<Recorder?>(nil)
    private let reader: Task<Void, Never>

    private init(connection: RelayConnection) {
        self.connection = connection
        let queues = self.queues, recorder = self.recorder
        reader = Task {
            for await event in connection.events {
                guard case let .message(rid, id, sealed) = event,
                      let q = queues.withLockedValue({ $0[rid] }),
                      let m = try? q.open(messageId: id, sealed: sealed) else { continue }
                recorder.withLockedValue { $0 }?.record(monotonicNanos() &- m.body.stamp)
                Task { try? await connection.acknowledge(q, messageId: id) }
            }
        }
    }

    static func connect(_ relay: RelayAddress, group: any EventLoopGroup) async throws -> Receiver {
        Receiver(connection: try await RelayConnection.connect(to: relay, group: group))
    }

    func newQueue() async throws -> Flow {
        let q = try await connection.createQueue()
        queues.withLockedValue { $0[q.recipientId] = q }
        try await connection.subscribe(q)
        return Flow(queue: q)
    }

    func record(into r: Recorder?) { recorder.withLockedValue { $0 = r } }

    func close() async {
        await connection.close()
        reader.cancel()
    }
}

enum Throughput {
    /// 64 closed loops (one message in flight each) over the 8 sender connections; loop i sends to
    /// flows i, i + 64, i + 128, … in turn, so every queue (and every client) gets messages.
    static func measure(flows: [Flow], receivers: [Receiver], senders: [RelayConnection], messages: Int, size: Int) async throws -> Summary {
        let recorder = Recorder(capacity: messages)
        for r in receivers { r.record(into: recorder) }
        defer { for r in receivers { r.record(into: nil) } }
        let remaining = NIOLockedValueBox(messages)
        let loops = min(64, flows.count)
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for loop in 0..<loops {
                let sender = senders[loop % senders.count]
                let mine = stride(from: loop, to: flows.count, by: loops).map { flows[$0] }
                tasks.addTask {
                    var next = 0
                    while remaining.withLockedValue({ r -> Bool in guard r > 0 else { return false }; r -= 1; return true }) {
                        let flow = mine[next % mine.count]
                        next += 1
                        try await sender.sendMessage(senderId: flow.queue.senderId, key: flow.senderKey, body: .stamped(size: size))
                    }
                }
            }
            try await tasks.waitForAll()
        }
        // Every SEND was answered OK; wait for the deliveries (bounded, so a lost one is reported).
        let deadline = ContinuousClock.now + .seconds(60)
        while recorder.count < messages {
            guard ContinuousClock.now < deadline else { throw BenchFailure("only \(recorder.count) of \(messages) messages arrived within 60 s") }
            try await Task.sleep(for: .milliseconds(1))
        }
        return recorder.summary(elapsed: ContinuousClock.now - start)
    }
}

/// `swiftplex-bench relay-clients-relay` (hidden; started by `relay-clients`): a relay with its
/// rate limits off and room for the clients, until standard input closes.
struct RelayClientsRelay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay-clients-relay",
        abstract: "The relay of relay-clients, in a process of its own (started by relay-clients).",
        shouldDisplay: false
    )

    @Option(name: .customLong("max-connections")) var maxConnections: Int
    @Option(name: .customLong("unproven-work-ms")) var unprovenWorkMs: Int?
    @Option(name: .customLong("accepts-per-second")) var acceptsPerSecond: Int?
    @Option(name: .customLong("handshake-ms")) var handshakeMs: Int?
    @Flag(name: .customLong("relay-pacing")) var relayPacing = false

    func run() async throws {
        try OpenFileLimit.raise(toAtLeast: maxConnections + 64)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-bench-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var logger = Logger(label: "bench.relay-clients")
        logger.logLevel = .warning
        // What an operator of a busy relay sets: connections above the expected clients, the
        // accept and queue-creation rates off (the bench connects thousands at once).
        var config = RelayConfiguration(dataDirectory: dir, host: "127.0.0.1", port: 0, maxConnections: maxConnections,
                                        maxQueues: 10_000_000, maxNewQueuesPerConnection: 1_000_000)
        config.unlimitRates()
        // What a restart's reconnection storm meets, when asked: the relay's pacing of connections
        // (accept rate, the budgets of new connections' and of unproven work, runs of unproven work).
        if relayPacing { config.restoreConnectionPacing() }
        if let handshakeMs { config.handshakeWorkRate = RateLimit(perSecond: handshakeMs * 1000, burst: max(handshakeMs * 5000, 50_000)) }
        if let unprovenWorkMs { config.unprovenWorkRate = RateLimit(perSecond: unprovenWorkMs * 1000, burst: unprovenWorkMs * 200) }
        if let acceptsPerSecond { config.acceptRate = RateLimit(perSecond: acceptsPerSecond) }
        let server = try await RelayServer.start(configuration: config, group: group, logger: logger)
        print("address \(server.address)")
        fflush(nil)
        await Task.detached {
            var byte: UInt8 = 0
            while true {
                let n = read(0, &byte, 1)
                if n > 0 || (n < 0 && errno == EINTR) { continue }
                break
            }
        }.value
        await server.shutdown()
        try await group.shutdownGracefully()
    }
}

/// The relay's child process, seen from `relay-clients`.
final class RelayChild {
    private let process: SpawnedProcess
    let address: RelayAddress
    var pid: Int32 { process.processIdentifier }

    init(maxConnections: Int, limits: [String] = [], prefix: [String] = []) throws {
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let command = prefix + [exe, "relay-clients-relay", "--max-connections", "\(maxConnections)"] + limits
        process = try SpawnedProcess(command[0], Array(command.dropFirst()), stderr: .inherit)
        // The first line that starts with "address " (a prefix such as heaptrack prints its own lines first).
        let fd = process.standardOutput!.fileDescriptor
        var found: RelayAddress?
        var lines: [String] = []
        while found == nil {
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while true {
                let n = read(fd, &byte, 1)
                if n < 0, errno == EINTR { continue }
                guard n == 1 else { throw BenchFailure("the relay process ended before printing its address: \(lines.joined(separator: " / "))") }
                if byte == UInt8(ascii: "\n") { break }
                line.append(byte)
            }
            let text = String(decoding: line, as: UTF8.self)
            lines.append(text)
            if text.hasPrefix("address ") {
                guard let address = RelayAddress(String(text.dropFirst("address ".count))) else { throw BenchFailure("the relay process printed a bad address: \(text)") }
                found = address
            }
        }
        let address = found!
        self.address = address
    }

    /// VmRSS of the relay process, in bytes.
    func residentBytes() -> Int { swiftplex_bench.residentBytes(ofProcess: pid) }

    func stop() {
        try? process.standardInput?.close()
        _ = process.waitUntilExit()
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var result: [T] = []
        for element in self { result.append(try await transform(element)) }
        return result
    }
}
