import ArgumentParser
import ChatAPI
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import NIOConcurrencyHelpers
import RelayServer
import SwiftplexBase

/// `swiftplex-bench group`: in one process with one relay, an owner engine and N−1 member engines
/// make a group through the Chat API (the owner's contacts, `/_group`, `/_add`, `/_join`, the full
/// mesh of introductions); then the owner sends M messages into it, timed until every member has
/// every one. The baseline, in the same run and on the same engines, is the owner sending M direct
/// messages one way to one member's contact, timed until that member has every one.
struct GroupBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group",
        abstract: "One member sends into a group of N engines (one relay), against direct messages one way in the same run.",
        discussion: """
            Prints the set-up time (contacts, then the group's full mesh, N(N-1)/2 member connections), \
            the direct baseline (owner → one contact, --direct messages one way), and the group run (owner → \
            N-1 members, M messages): deliveries/s, time per message, per-recipient cost (time per \
            message / (N-1)) and its ratio to the direct message's time; the same ratio of the process's \
            CPU time (every engine and the relay are in it), which other load on the machine moves less. \
            A list (--members 10,25,50) runs each size with a fresh relay and engines and prints how the \
            cost grows with N.
            """
    )

    @Option(help: "Group size(s), the owner included: N, or a list such as 10,25,50.") var members: String = "50"
    @Option(help: "Messages the owner sends into the group.") var messages: Int = 200
    @Option(help: "Messages the owner sends directly for the baseline (more than --messages: one recipient's run is short and noisy).") var direct: Int = 1000
    @Option(help: "Messages sent before measuring, in both phases.") var warmup: Int = 10
    @Option(help: "Seconds without progress before giving up.") var stall: Int = 300
    @Flag(help: "Measure only the host's group machine (no engines, no relay): the cost of a received message in a group of N with --pending members still being introduced, against the first size.") var hostOnly = false
    @Option(help: "With --host-only: members still being introduced (the host forwards to and from them).") var pending: Int = 5

    var sizes: [Int] { members.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func validate() throws {
        let list = members.split(separator: ",")
        guard !list.isEmpty, sizes.count == list.count, sizes.allSatisfy({ $0 >= 3 }) else { throw ValidationError("--members: sizes of at least 3, comma-separated") }
        guard pending >= 0, !hostOnly || sizes.allSatisfy({ $0 > pending + 2 }) else { throw ValidationError("--pending: at least 0, and fewer than each size minus 2") }
        guard messages > 0, direct > 0, warmup >= 0, stall > 0 else { throw ValidationError("--messages, --direct and --stall must be positive, --warmup not negative") }
    }

    func run() async throws {
        if hostOnly { return try GroupHostBench(sizes: sizes, messages: messages, pending: pending, warmup: warmup).run() }
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        print("group benchmark: \(messages) group messages, \(direct) direct ones, each after \(warmup) warm-up; one in-process relay (durable), all engines in this process")
        var results: [Result] = []
        for n in sizes {
            let result = try await measure(n)
            results.append(result)
        }
        if results.count > 1 {
            print("\ngrowth with N (per-recipient cost = group time per message / (N-1); direct = one direct message one way):")
            print("    N   setup s   deliveries/s   direct ms/msg   group ms/msg   per-recipient ms   ratio   CPU ms direct / per recipient   CPU ratio")
            for r in results {
                print(String(format: "%5d  %8.1f  %13.0f  %14.2f  %13.2f  %17.3f  %6.2f  %14.2f / %-14.2f  %9.2f",
                             r.n, r.setupSeconds, r.group.perSecond, r.directMs, r.groupMs, r.perRecipientMs, r.perRecipientMs / r.directMs,
                             r.directCPUMs, r.perRecipientCPUMs, r.perRecipientCPUMs / r.directCPUMs))
            }
        }
        print("goal: per-recipient cost ≤ 1.5× a direct message's: " + (results.allSatisfy { $0.perRecipientMs <= 1.5 * $0.directMs } ? "met" : "NOT met"))
    }

    struct Result {
        var n: Int
        var setupSeconds: Double
        var direct: Summary
        var group: Summary
        var directMs: Double
        var groupMs: Double
        /// The process's CPU time (user + system) per direct message, and per group message.
        var directCPUMs: Double
        var groupCPUMs: Double
        var perRecipientMs: Double { groupMs / Double(n - 1) }
        var perRecipientCPUMs: Double { groupCPUMs / Double(n - 1) }
    }

    /// User + system CPU time of this process so far, in milliseconds.
    static func processCPUMs() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
        let who = __rusage_who_t(RUSAGE_SELF.rawValue)
        #else
        let who = RUSAGE_SELF
        #endif
        guard getrusage(who, &usage) == 0 else { return .nan }
        func ms(_ t: timeval) -> Double { Double(t.tv_sec) * 1000 + Double(t.tv_usec) / 1000 }
        return ms(usage.ru_utime) + ms(usage.ru_stime)
    }

    private func measure(_ n: Int) async throws -> Result {
        print("\nN = \(n): 1 owner + \(n - 1) members")
        let (dir, logger, server) = try await ChatBench.startRelay(label: "group")
        defer { try? FileManager.default.removeItem(at: dir) }
        let names = ["owner"] + (1..<n).map { "m\($0)" }
        let state = MeshState(engines: n, direct: Recorder(capacity: direct), group: Recorder(capacity: messages * (n - 1)))
        let (ticks, tick) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        var apis: [ChatAPI] = []
        var tasks: [Task<Void, any Error>] = []
        defer { tasks.forEach { $0.cancel() } }
        let setupStart = ContinuousClock.now
        for (i, name) in names.enumerated() {
            let (api, engine) = try await ChatBench.startEngine(name, dir: dir, relay: server, logger: logger)
            apis.append(api)
            tasks.append(engine)
            tasks.append(Task { await Self.listen(i, api, state, tick) })
        }
        tasks.append(Task { // wakes the waits below when nothing happens, for progress and the stall check
            while !Task.isCancelled { try await Task.sleep(for: .seconds(1)); tick.yield() }
        })
        var wake = ticks.makeAsyncIterator()
        func wait(_ what: String, progress: @escaping () -> String, until done: @escaping () -> Bool) async throws {
            var last = progress(), lastChange = ContinuousClock.now, lastPrint = ContinuousClock.now
            while !done() {
                _ = await wake.next()
                let now = ContinuousClock.now, p = progress()
                if p != last { last = p; lastChange = now }
                if now - lastPrint >= .seconds(5) { print("  \(what): \(p)"); lastPrint = now }
                if now - lastChange > .seconds(stall) { throw BenchFailure("\(what): no progress for \(stall) s at \(p)") }
            }
        }
        let engines = apis, owner = apis[0]

        // Set-up: each member a contact of the owner, then the group and its mesh.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 1..<n { group.addTask { try await ChatBench.invite(owner, engines[i]) } }
            try await group.waitForAll()
        }
        try await wait("contacts", progress: { "\(state.contactCount)/\(n - 1)" }, until: { state.contactCount == n - 1 })
        let contactsDone = ContinuousClock.now
        let created = await owner.execute(#"/_group 1 {"displayName": "bench", "fullName": ""}"#)
        try ChatBench.expect(created, "groupCreated")
        guard let groupId = created["groupInfo"]?["groupId"]?.intValue else { throw BenchFailure("no group id: \(created)") }
        for i in 1..<n {
            guard let contact = state.contactId(names[i]) else { throw BenchFailure("no contact \(names[i])") }
            try ChatBench.expect(await owner.execute("/_add #\(groupId) \(contact) member"), "sentGroupInvitation")
        }
        let links = n * (n - 1) // each of the N(N-1)/2 connections, seen from both ends
        try await wait("mesh", progress: { "\(state.joined)/\(n - 1) joined, \(state.meshEnds / 2)/\(links / 2) connections" },
                       until: { state.meshEnds == links })
        let setupEnd = ContinuousClock.now
        let setup = setupEnd - setupStart
        print(String(format: "  set-up %.1f s: engines and %d contacts %.1f s, group mesh (%d connections) %.1f s",
                     setup.seconds, n - 1, (contactsDone - setupStart).seconds, links / 2, (setupEnd - contactsDone).seconds))

        // Baseline: direct messages one way, owner → m1.
        guard let m1 = state.contactId("m1") else { throw BenchFailure("no contact m1") }
        for _ in 0..<warmup { try ChatBench.expect(await owner.execute("/_send @\(m1) json \(ChatBench.textMessage("warm-up"))"), "newChatItems") }
        try await wait("direct warm-up", progress: { "\(state.directCount)/\(warmup)" }, until: { state.directCount >= warmup })
        let directStart = ContinuousClock.now
        let directCPUStart = Self.processCPUMs()
        for _ in 0..<direct {
            try ChatBench.expect(await owner.execute("/_send @\(m1) json \(ChatBench.textMessage(String(monotonicNanos())))"), "newChatItems")
        }
        try await wait("direct", progress: { "\(state.directCount - warmup)/\(direct)" }, until: { state.directCount >= warmup + direct })
        let directCPU = Self.processCPUMs() - directCPUStart
        let directElapsed = state.lastDelivery - directStart
        let directSummary = state.direct.summary(elapsed: directElapsed)

        // The group: owner → every member.
        let perMember = warmup + messages
        for _ in 0..<warmup { try ChatBench.expect(await owner.execute("/_send #\(groupId) json \(ChatBench.textMessage("warm-up"))"), "newChatItems") }
        try await wait("group warm-up", progress: { "\(state.groupMin)/\(warmup) at the slowest member" }, until: { state.groupMin >= warmup })
        let groupStart = ContinuousClock.now
        let groupCPUStart = Self.processCPUMs()
        for _ in 0..<messages {
            try ChatBench.expect(await owner.execute("/_send #\(groupId) json \(ChatBench.textMessage(String(monotonicNanos())))"), "newChatItems")
        }
        let sentAll = ContinuousClock.now
        try await wait("group", progress: { "\(state.groupTotal - warmup * (n - 1))/\(messages * (n - 1)) deliveries" },
                       until: { state.groupMin >= perMember })
        let groupCPU = Self.processCPUMs() - groupCPUStart
        let groupElapsed = state.lastDelivery - groupStart
        let group = state.group.summary(elapsed: groupElapsed)

        let result = Result(n: n, setupSeconds: setup.seconds, direct: directSummary, group: group,
                            directMs: directElapsed.seconds * 1000 / Double(direct), groupMs: groupElapsed.seconds * 1000 / Double(messages),
                            directCPUMs: directCPU / Double(direct), groupCPUMs: groupCPU / Double(messages))
        print(directSummary.line("direct"))
        print(group.line("group").replacingOccurrences(of: "msg/s", with: "dlv/s") + String(format: " deliveries to %d members", n - 1))
        print(String(format: "  direct: %.2f ms per message (owner → m1, one way, %d messages sent back to back, until m1 has all)", result.directMs, direct))
        print(String(format: "  group:  %.2f ms per message (%d sent in %.1f s; until all %d members have all), %.3f ms per recipient",
                     result.groupMs, messages, (sentAll - groupStart).seconds, n - 1, result.perRecipientMs))
        print(String(format: "  ratio per-recipient / direct %.2f (goal ≤ 1.5)", result.perRecipientMs / result.directMs))
        print(String(format: "  CPU (process, every engine and the relay): %.2f ms per direct message, %.2f ms per recipient, ratio %.2f",
                     result.directCPUMs, result.perRecipientCPUMs, result.perRecipientCPUMs / result.directCPUMs))

        for api in engines { _ = await api.execute("/_stop") }
        await server.shutdown()
        return result
    }

    /// Reads one engine's events for the whole run: contacts made (the owner), invitations
    /// (a member joins at once), member connections, and received texts (timed when they carry a
    /// send time).
    private static func listen(_ engine: Int, _ api: ChatAPI, _ state: MeshState, _ tick: AsyncStream<Void>.Continuation) async {
        for await event in api.events {
            switch event["type"]?.stringValue {
            case "contactConnected" where engine == 0:
                if let name = event["contact"]?["profile"]?["displayName"]?.stringValue, let id = event["contact"]?["contactId"]?.intValue {
                    state.contact(name, id)
                }
            case "receivedGroupInvitation":
                if let g = event["groupInfo"]?["groupId"]?.intValue {
                    let joined = await api.execute("/_join #\(g)")
                    if joined["type"]?.stringValue != "userAcceptedGroupSent" { print("  join failed in engine \(engine): \(joined)") }
                }
            case "userJoinedGroup":
                if let id = event["hostMember"]?["memberId"]?.stringValue { state.connected(engine, id, joined: true) }
            case "joinedGroupMember", "connectedToGroupMember":
                if let id = event["member"]?["memberId"]?.stringValue { state.connected(engine, id, joined: false) }
            case "newChatItems":
                guard case let .array(items)? = event["chatItems"] else { break }
                for item in items where item["chatItem"]?["content"]?["type"]?.stringValue == "rcvMsgContent" {
                    let stamp = item["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue.flatMap(UInt64.init)
                    state.received(engine, inGroup: item["chatInfo"]?["type"]?.stringValue == "group", stamp: stamp)
                }
            default: break
            }
            tick.yield()
        }
    }
}

/// What the engines' listeners have seen, read by the waits.
private final class MeshState: Sendable {
    let direct: Recorder
    let group: Recorder
    private struct S {
        var contacts: [String: Int] = [:]
        var peers: [Set<String>]
        var joined = 0
        var directCount = 0
        var groupCounts: [Int]
        var lastDelivery = ContinuousClock.now
    }
    private let s: NIOLockedValueBox<S>

    init(engines: Int, direct: Recorder, group: Recorder) {
        self.direct = direct
        self.group = group
        s = NIOLockedValueBox(S(peers: Array(repeating: [], count: engines), groupCounts: Array(repeating: 0, count: engines)))
    }

    func contact(_ name: String, _ id: Int) { s.withLockedValue { $0.contacts[name] = id } }
    func contactId(_ name: String) -> Int? { s.withLockedValue { $0.contacts[name] } }
    var contactCount: Int { s.withLockedValue { $0.contacts.count } }

    func connected(_ engine: Int, _ memberId: String, joined: Bool) {
        s.withLockedValue {
            $0.peers[engine].insert(memberId)
            if joined { $0.joined += 1 }
        }
    }
    var joined: Int { s.withLockedValue { $0.joined } }
    /// Member connections that are up, counted at each end.
    var meshEnds: Int { s.withLockedValue { $0.peers.reduce(0) { $0 + $1.count } } }

    func received(_ engine: Int, inGroup: Bool, stamp: UInt64?) {
        let now = ContinuousClock.now
        s.withLockedValue {
            if inGroup { $0.groupCounts[engine] += 1 } else { $0.directCount += 1 }
            $0.lastDelivery = now
        }
        if let stamp { (inGroup ? group : direct).record(monotonicNanos() &- stamp) }
    }
    var directCount: Int { s.withLockedValue { $0.directCount } }
    var groupMin: Int { s.withLockedValue { $0.groupCounts.dropFirst().min() ?? 0 } }
    var groupTotal: Int { s.withLockedValue { $0.groupCounts.reduce(0, +) } }
    var lastDelivery: ContinuousClock.Instant { s.withLockedValue { $0.lastDelivery } }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
