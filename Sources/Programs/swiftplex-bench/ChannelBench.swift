import ArgumentParser
import ChatAPI
import ChatCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexBase
import SwiftplexCrypto

/// `swiftplex-bench channel`: an owner's posts fanned out by two chat relays (one engine, two relay
/// users) to N subscribers (users spread over a few engines), all on one in-process relay server.
/// The baseline, in the same run and on the same relay server: the same bytes (one agent envelope
/// per delivery) sent straight to 2N queues with the relay client, as the relay bench does.
struct ChannelBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channel",
        abstract: "One post fanned out to N subscribers through 2 chat relays, against a relay-only fan-out of the same bytes to 2N queues.",
        discussion: """
            Set-up (printed as it goes): a relay server in this process (rate limits off: a few \
            connections make thousands of queues; a queue holds up to 100,000 messages: the relays' \
            link queues take a thousand join requests at once), an engine with two relay users, an owner engine \
            with channel `bench` on both relays, and --subscribers users spread over --engines \
            subscriber engines, each joining the channel through both relays. Then, alternating so \
            that both see the same machine: the baseline (2N envelopes of the agent's size, two \
            sender connections, one receiver connection per subscriber engine, sent all at once and \
            timed until every queue's message is received) and a post (timed from `/_send` until \
            every subscriber has both relays' copies). Deliveries/s = 2N / that time; the ratio is \
            the median post's against the median baseline's. Also: the time until the last \
            subscriber has the post (its first copy), and p50/p99 of per-subscriber latency (post \
            sent → first copy shown as `newChatItems`), over all measured posts. The process's CPU \
            time (getrusage) per delivery of both is printed too: other load on the machine moves it \
            less than the wall time.
            """
    )

    @Option(help: "Subscribers (users of the subscriber engines).") var subscribers: Int = 1000
    @Option(help: "Subscriber engines the subscribers are spread over.") var engines: Int = 4
    @Option(help: "Measured posts (each after a baseline round).") var posts: Int = 5
    @Option(help: "Posts (and baseline rounds) before measuring.") var warmup: Int = 1
    @Option(help: "Joins in flight per subscriber engine during set-up.") var joins: Int = 8
    @Option(help: "Seconds without progress before giving up.") var stall: Int = 120
    @Option(name: .customLong("join-stall"), help: "Seconds without a join's progress after which the run goes on with the subscribers that joined (a join that failed is not retried by the engine; its chatError is printed).")
    var joinStall: Int = 60

    func validate() throws {
        guard subscribers > 0, engines > 0, engines <= subscribers, posts > 0, warmup >= 0, joins > 0, stall > 0 else {
            throw ValidationError("--subscribers, --engines (≤ subscribers), --posts, --joins and --stall must be positive, --warmup not negative")
        }
    }

    /// What one delivery puts on the wire: the agent's envelope (version, kind, nonce, box of the padded plaintext).
    static let envelopeBytes = min(2 + 24 + 15_900 + 16, RelayLimits.maxMessageBodyLength)

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        let n = subscribers
        print("channel benchmark: \(n) subscribers on \(engines) engines, 2 chat relays (one engine), \(posts) posts after \(warmup) warm-up; baseline: \(2 * n) queues, \(Self.envelopeBytes)-byte bodies; one in-process relay server (durable, rate limits and per-queue quota off)")
        let (dir, logger, server) = try await ChatBench.startRelay(label: "channel") { $0.unlimitRates(); $0.queueQuota = 100_000; $0.maxNewQueuesPerConnection = .max; $0.maxStoredMessages = .max; $0.maxStoredBytes = .max }
        defer { try? FileManager.default.removeItem(at: dir) }
        let state = FanState(subscribers: n, posts: warmup + posts)
        var tasks: [Task<Void, any Error>] = []
        defer { tasks.forEach { $0.cancel() } }
        let (ticks, tick) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        tasks.append(Task { while !Task.isCancelled { try await Task.sleep(for: .milliseconds(200)); tick.yield() } })
        var wake = ticks.makeAsyncIterator()
        func wait(_ what: String, every: Duration = .seconds(5), stall: Int? = nil, progress: @escaping () async -> String, until done: @escaping () async -> Bool) async throws {
            var last = await progress(), lastChange = ContinuousClock.now, lastPrint = ContinuousClock.now
            while await !done() {
                _ = await wake.next()
                let now = ContinuousClock.now, p = await progress()
                if p != last { last = p; lastChange = now }
                if now - lastPrint >= every { print("  \(what): \(p)"); lastPrint = now }
                let limit = stall ?? self.stall
                if now - lastChange > .seconds(limit) { throw BenchFailure("\(what): no progress for \(limit) s at \(p)") }
            }
        }
        let setupStart = ContinuousClock.now

        // The relays: one engine, two relay users with their addresses.
        let relayController = try await ChatController.open(prefix: dir.appendingPathComponent("relays").path, defaultRelays: [server.address], logger: logger)
        let relays = ChatAPI(controller: relayController)
        tasks.append(Task { try await relayController.run() })
        tasks.append(Task { await Self.listen(relays, nil, state, tick) })
        var addresses: [String] = []
        for (i, name) in ["relay1", "relay2"].enumerated() {
            try ChatBench.expect(await relays.execute(#"/_create user {"profile": {"displayName": "\#(name)", "fullName": ""}, "pastTimestamp": false, "userChatRelay": true, "clientService": false}"#), "activeUser")
            if i == 0 { try ChatBench.expect(await relays.execute("/_start"), "chatStarted") }
            let answer = await relays.execute("/_address \(i + 1)")
            guard let link = answer["connLinkContact"]?["connShortLink"]?.stringValue else { throw BenchFailure("no relay address: \(answer)") }
            addresses.append(link)
        }

        // The owner and the channel, active on both relays.
        let (owner, ownerTask) = try await ChatBench.startEngine("owner", dir: dir, relay: server, logger: logger)
        tasks.append(ownerTask)
        tasks.append(Task { await Self.listen(owner, nil, state, tick) })
        let set = await owner.execute("/relays name=one \(addresses[0]) name=two \(addresses[1])")
        guard case let .array(registered)? = set["chatRelays"], registered.count == 2 else { throw BenchFailure("relays not registered: \(set)") }
        let ids = registered.compactMap { $0["chatRelayId"]?.intValue }.map(String.init).joined(separator: ",")
        let created = await owner.execute(#"/_public group 1 \#(ids) {"displayName": "bench", "fullName": ""}"#)
        guard let groupId = created["groupInfo"]?["groupId"]?.intValue,
              let link = created["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue else { throw BenchFailure("no channel: \(created)") }
        try await wait("relays", progress: { "\(state.relaysActive)/2 active" }, until: { state.relaysActive >= 2 })
        let channelReady = ContinuousClock.now
        print(String(format: "  channel active on both relays after %.1f s", (channelReady - setupStart).seconds))

        // Subscribers: users of `engines` engines, each joining through both relays.
        var subscriberAPIs: [ChatAPI] = []
        for e in 0..<engines {
            let count = n / engines + (e < n % engines ? 1 : 0)
            let (api, task) = try await ChatBench.startEngine("s\(e)-1", dir: dir, relay: server, logger: logger)
            tasks.append(task)
            tasks.append(Task { await Self.listen(api, e, state, tick) })
            for u in 1..<max(count, 1) {
                try ChatBench.expect(await api.execute(#"/_create user {"profile": {"displayName": "s\#(e)-\#(u + 1)", "fullName": ""}, "pastTimestamp": false, "userChatRelay": false, "clientService": false}"#), "activeUser")
            }
            state.addUsers(engine: e, count: count)
            subscriberAPIs.append(api)
        }
        print(String(format: "  %d subscriber users made on %d engines after %.1f s", n, engines, (ContinuousClock.now - setupStart).seconds))
        let window = joins, apis = subscriberAPIs
        let joining = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (e, api) in apis.enumerated() {
                    let users = state.users(engine: e)
                    group.addTask {
                        try await withThrowingTaskGroup(of: Void.self) { inFlight in
                            for userId in 1...users {
                                if userId > window { try await inFlight.next() }
                                inFlight.addTask { try ChatBench.expect(await api.execute("/_connect \(userId) \(link)"), "startedConnectionToGroup") }
                            }
                            try await inFlight.waitForAll()
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        do {
            try await wait("joins", stall: joinStall, progress: { "\(state.joinedEnds)/\(2 * n) subscriber ends, \(state.relayEnds)/\(2 * n) relay ends, \(state.errors) chatErrors" },
                           until: { state.joinedEnds >= 2 * n && state.relayEnds >= 2 * n })
            try await joining.value
        } catch let failure as BenchFailure {
            // Joins the engine dropped (a step that failed under load is not made again): measure
            // the fan-out that exists, and say so.
            let (both, one) = state.joinedUsers
            print("  \(failure.description)")
            print("  NOTE: going on with the subscribers that joined: \(both) through both relays, \(one) through one, \(n - both - one) not at all (\(state.errors) chatErrors)")
            joining.cancel()
        }
        let setupEnd = ContinuousClock.now
        let (bothRelays, oneRelay) = state.joinedUsers
        // What each post must reach: every subscriber with a relay, and every relay end.
        let reach = bothRelays + oneRelay, copiesPerPost = state.relayEnds
        guard reach > 0, copiesPerPost > 0 else { throw BenchFailure("no subscriber joined") }
        print(String(format: "  set-up %.1f s: channel %.1f s, %d subscribers joined (%d through both relays, %d relay ends) %.1f s (%.0f joins/s)",
                     (setupEnd - setupStart).seconds, (channelReady - setupStart).seconds, reach, bothRelays, copiesPerPost, (setupEnd - channelReady).seconds,
                     Double(reach) / (setupEnd - channelReady).seconds))

        // The baseline's queues: 2N on the same server, as many sender connections as relays and
        // as many receiver connections as subscriber engines.
        let baseline = try await FanOut.make(server: server, queues: copiesPerPost, senders: 2, receivers: engines, bodySize: Self.envelopeBytes)
        print(String(format: "  baseline: %d queues made after %.1f s", copiesPerPost, (ContinuousClock.now - setupStart).seconds))

        let controllers = subscriberAPIs.map(\.controller)
        func forwards() async -> Int {
            var sum = 0
            for c in controllers { sum += await c.channelForwardsReceived() }
            return sum
        }
        var postSeconds: [Double] = []
        var baseSeconds: [Double] = []
        var lastFirst: [Double] = []
        var postCPU: [Double] = []
        var baseCPU: [Double] = []
        let latencies = Recorder(capacity: reach * posts)
        for k in 0..<(warmup + posts) {
            let measured = k >= warmup
            let baseCPUStart = GroupBench.processCPUMs()
            let base = try await baseline.round(stall: stall)
            let baseCPUms = GroupBench.processCPUMs() - baseCPUStart
            let before = await forwards()
            let cpuStart = GroupBench.processCPUMs()
            let start = ContinuousClock.now
            let sentAt = monotonicNanos()
            try ChatBench.expect(await owner.execute("/_send #\(groupId) json \(ChatBench.textMessage("\(k) \(sentAt)"))"), "newChatItems")
            try await wait("post \(k + 1)", progress: { "\(state.firstCopies(k))/\(reach) subscribers have it" }, until: { state.firstCopies(k) >= reach })
            let allFirst = ContinuousClock.now
            // Second copies show no event (dedup drops them): polled, every 5 ms.
            var copies = await forwards() - before, lastChange = ContinuousClock.now
            while copies < copiesPerPost {
                try await Task.sleep(for: .milliseconds(5))
                let now = await forwards() - before
                if now != copies { copies = now; lastChange = ContinuousClock.now }
                if ContinuousClock.now - lastChange > .seconds(stall) { throw BenchFailure("post \(k + 1): no progress for \(stall) s at \(copies)/\(copiesPerPost) copies") }
            }
            let elapsed = (ContinuousClock.now - start).seconds
            let cpu = GroupBench.processCPUMs() - cpuStart
            let jobs = try await relayController.channelDeliveryJobs()
            let first = (allFirst - start).seconds
            print(String(format: "%@ %d: baseline %.3f s (%.0f dlv/s); post %.3f s (%.0f dlv/s), last subscriber has it after %.3f s; ratio %.2f; CPU %.0f / %.0f ms, ratio %.2f%@",
                         measured ? "post" : "warm-up", measured ? k - warmup + 1 : k + 1, base, Double(copiesPerPost) / base, elapsed,
                         Double(copiesPerPost) / elapsed, first, base / elapsed, baseCPUms, cpu, baseCPUms / cpu, jobs == 0 ? "" : " (\(jobs) delivery jobs left)"))
            if measured {
                postSeconds.append(elapsed)
                baseSeconds.append(base)
                lastFirst.append(first)
                postCPU.append(cpu)
                baseCPU.append(baseCPUms)
                for ns in state.latencies(k, sentAt: sentAt) { latencies.record(ns) }
            }
        }
        func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
        let post = median(postSeconds), base = median(baseSeconds)
        let lat = latencies.summary(elapsed: .seconds(1))
        print(String(format: "baseline   %9.0f dlv/s   (median of %d: %.3f s for %d envelopes to %d queues; range %.3f–%.3f s)",
                     Double(copiesPerPost) / base, posts, base, copiesPerPost, copiesPerPost, baseSeconds.min()!, baseSeconds.max()!))
        print(String(format: "channel    %9.0f dlv/s   (median of %d: %.3f s until every subscriber has both relays' copies; range %.3f–%.3f s)",
                     Double(copiesPerPost) / post, posts, post, postSeconds.min()!, postSeconds.max()!))
        print(String(format: "last subscriber has the post after %.3f s (median; range %.3f–%.3f s); per-subscriber latency p50 %.1f ms, p99 %.1f ms (%d samples)",
                     median(lastFirst), lastFirst.min()!, lastFirst.max()!, lat.p50ms, lat.p99ms, lat.count))
        print(String(format: "CPU of the process (every engine and the relay server are in it) per delivery: baseline %.3f ms, channel %.3f ms (medians); ratio %.2f",
                     median(baseCPU) / Double(copiesPerPost), median(postCPU) / Double(copiesPerPost), median(baseCPU) / median(postCPU)))
        print(String(format: "ratio channel/baseline %.2f (goal ≥ 0.3: %@)", base / post, base / post >= 0.3 ? "met" : "NOT met"))

        await baseline.close()
        for api in subscriberAPIs + [owner, relays] { _ = await api.execute("/_stop") }
        await server.shutdown()
    }

    /// Reads one engine's events: the owner's relays becoming active, the relays' subscribers
    /// connecting (`joinedGroupMember`), a subscriber user's relays (`userJoinedGroup`) and posts.
    private static func listen(_ api: ChatAPI, _ engine: Int?, _ state: FanState, _ tick: AsyncStream<Void>.Continuation) async {
        for await event in api.events {
            switch event["type"]?.stringValue {
            case "groupRelayUpdated" where event["groupRelay"]?["relayStatus"]?.stringValue == "active":
                state.relayActive()
            case "chatError":
                state.error(engine, event)
            case "joinedGroupMember" where engine == nil:
                state.relayEnd()
            case "userJoinedGroup" where engine != nil:
                if let user = event["user"]?["userId"]?.intValue { state.joinedEnd(engine: engine!, user: user) }
            case "newChatItems" where engine != nil:
                guard case let .array(items)? = event["chatItems"], let user = event["user"]?["userId"]?.intValue else { break }
                let now = monotonicNanos()
                for item in items {
                    guard let text = item["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue,
                          let post = text.split(separator: " ").first.flatMap({ Int($0) }) else { continue }
                    state.received(engine: engine!, user: user, post: post, at: now)
                }
            default: break
            }
            tick.yield()
        }
    }
}

/// What the engines' listeners have seen, read by the waits.
private final class FanState: Sendable {
    private struct S {
        var relaysActive = 0
        var relayEnds = 0
        var joinedEnds = 0
        var errors = 0
        var endsByUser: [Int64: Int] = [:]
        var users: [Int: Int] = [:]
        /// Per post: when each (engine, user) first showed it.
        var firsts: [[Int64: UInt64]]
    }
    private let s: NIOLockedValueBox<S>

    init(subscribers: Int, posts: Int) { s = NIOLockedValueBox(S(firsts: Array(repeating: [:], count: posts))) }

    func relayActive() { s.withLockedValue { $0.relaysActive += 1 } }
    var relaysActive: Int { s.withLockedValue { $0.relaysActive } }
    func relayEnd() { s.withLockedValue { $0.relayEnds += 1 } }
    var relayEnds: Int { s.withLockedValue { $0.relayEnds } }
    func joinedEnd(engine: Int, user: Int) {
        s.withLockedValue {
            $0.joinedEnds += 1
            $0.endsByUser[Int64(engine) << 32 | Int64(user), default: 0] += 1
        }
    }
    /// Subscribers joined through both relays, and through one.
    var joinedUsers: (both: Int, one: Int) {
        s.withLockedValue { s in (s.endsByUser.values.filter { $0 >= 2 }.count, s.endsByUser.values.filter { $0 == 1 }.count) }
    }
    /// `chatError` events: the first few are printed (a join that fails shows here), all counted.
    func error(_ engine: Int?, _ event: JSONValue) {
        let n = s.withLockedValue { $0.errors += 1; return $0.errors }
        if n <= 5 { print("  chatError in \(engine.map { "subscriber engine \($0)" } ?? "the relays' or the owner's engine"): \(event["chatError"] ?? event)") }
    }
    var errors: Int { s.withLockedValue { $0.errors } }
    var joinedEnds: Int { s.withLockedValue { $0.joinedEnds } }
    func addUsers(engine: Int, count: Int) { s.withLockedValue { $0.users[engine] = count } }
    func users(engine: Int) -> Int { s.withLockedValue { $0.users[engine] ?? 0 } }

    func received(engine: Int, user: Int, post: Int, at: UInt64) {
        s.withLockedValue {
            guard post >= 0, post < $0.firsts.count else { return }
            let key = Int64(engine) << 32 | Int64(user)
            if $0.firsts[post][key] == nil { $0.firsts[post][key] = at }
        }
    }
    func firstCopies(_ post: Int) -> Int { s.withLockedValue { $0.firsts[post].count } }
    func latencies(_ post: Int, sentAt: UInt64) -> [UInt64] { s.withLockedValue { $0.firsts[post].values.map { $0 &- sentAt } } }
}

/// The baseline: queues on the relay server, written to by `senders` connections and read by
/// `receivers` connections; a round sends one body to every queue at once and waits until every
/// one is received (opened and acknowledged).
private final class FanOut: Sendable {
    struct Sender: Sendable {
        var connection: RelayConnection
        var queues: [(senderId: [UInt8], key: AuthPrivateKey)]
    }
    let senders: [Sender]
    let receivers: [RelayConnection]
    let bodySize: Int
    let received = NIOLockedValueBox(0)
    let readers: NIOLockedValueBox<[Task<Void, Never>]> = NIOLockedValueBox([])

    private init(senders: [Sender], receivers: [RelayConnection], bodySize: Int) {
        self.senders = senders
        self.receivers = receivers
        self.bodySize = bodySize
    }

    static func make(server: RelayServer, queues: Int, senders s: Int, receivers r: Int, bodySize: Int) async throws -> FanOut {
        let group = MultiThreadedEventLoopGroup.singleton
        var receivers: [RelayConnection] = []
        for _ in 0..<r { receivers.append(try await RelayConnection.connect(to: server.address, group: group)) }
        var senderConns: [RelayConnection] = []
        for _ in 0..<s { senderConns.append(try await RelayConnection.connect(to: server.address, group: group)) }
        var byReceiver: [[RecipientQueue]] = Array(repeating: [], count: r)
        var bySender: [[(senderId: [UInt8], key: AuthPrivateKey)]] = Array(repeating: [], count: s)
        for i in 0..<queues {
            let receiver = receivers[i % r]
            let q = try await receiver.createQueue(recipientKey: .newEd25519())
            let k = AuthPrivateKey.newX25519()
            try await senderConns[i % s].secureAsSender(senderId: q.senderId, senderKey: k)
            byReceiver[i % r].append(q)
            bySender[i % s].append((q.senderId, k))
        }
        let fan = FanOut(senders: zip(senderConns, bySender).map { Sender(connection: $0, queues: $1) }, receivers: receivers, bodySize: bodySize)
        for (receiver, qs) in zip(receivers, byReceiver) {
            for failure in await receiver.subscribe(qs) { if let failure { throw failure } }
            let byId = Dictionary(uniqueKeysWithValues: qs.map { ($0.recipientId, $0) })
            let counter = fan.received
            let reader = Task {
                for await event in receiver.events {
                    guard case let .message(rid, id, sealed) = event, let q = byId[rid] else { continue }
                    guard (try? q.open(messageId: id, sealed: sealed)) != nil else { continue }
                    counter.withLockedValue { $0 += 1 }
                    try? await receiver.acknowledge(q, messageId: id)
                }
            }
            fan.readers.withLockedValue { $0.append(reader) }
        }
        return fan
    }

    /// One body to every queue, all sent at once; the seconds until every one was received.
    func round(stall: Int) async throws -> Double {
        let total = senders.reduce(0) { $0 + $1.queues.count }
        let before = received.withLockedValue { $0 }
        let size = bodySize
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for sender in senders {
                for q in sender.queues {
                    group.addTask { try await sender.connection.sendMessage(senderId: q.senderId, key: q.key, body: .stamped(size: size)) }
                }
            }
            try await group.waitForAll()
        }
        var last = before, lastChange = ContinuousClock.now
        while true {
            let now = received.withLockedValue { $0 } - before
            if now >= total { break }
            if now != last { last = now; lastChange = ContinuousClock.now }
            if ContinuousClock.now - lastChange > .seconds(stall) { throw BenchFailure("baseline: no progress for \(stall) s at \(now)/\(total)") }
            try await Task.sleep(for: .milliseconds(1))
        }
        return (ContinuousClock.now - start).seconds
    }

    func close() async {
        readers.withLockedValue { $0.forEach { $0.cancel() } }
        for c in receivers + senders.map(\.connection) { await c.close() }
    }
}
