import ArgumentParser
import ChatAPI
import ChatCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexBase
import SwiftplexCrypto

/// `swiftplex-bench echo`: a client engine sends messages to a bot engine that echoes each one,
/// through an in-process relay and the Chat API, against a relay-only echo over two queues
/// (the same relay work without encryption, ratchets or chat databases), in one run.
struct EchoBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo",
        abstract: "Chat echo through two engines and a relay, against a relay-only echo over two queues."
    )

    @Option(help: "Messages per measurement.") var messages: Int = 2000
    @Option(help: "Messages in flight at once.") var window: Int = 8
    @Option(help: "Messages sent before measuring, to warm up both paths.") var warmup: Int = 200
    @Option(help: "Then the chat echo again on fresh engines at these message counts (ascending, comma-separated; 'none' to skip), and how its time and memory grow.")
    var growth: String = "500,5000"

    var growthSizes: [Int] { growth == "none" ? [] : growth.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func validate() throws {
        guard messages > 0, window > 0, warmup >= 0 else { throw ValidationError("--messages and --window must be positive, --warmup not negative") }
        let g = growthSizes
        guard growth == "none" || (g.count == growth.split(separator: ",").count && g.allSatisfy { $0 > 0 } && g == g.sorted()) else {
            throw ValidationError("--growth is 'none' or ascending positive counts, e.g. 500,5000")
        }
    }

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        let (dir, logger, server) = try await ChatBench.startRelay(label: "echo")
        defer { try? FileManager.default.removeItem(at: dir) }
        let group = MultiThreadedEventLoopGroup.singleton
        print("echo benchmark: \(messages) messages, \(window) in flight, after \(warmup) warm-up; one in-process relay (durable), two engines in this process")

        let relay = try await relayEcho(server: server, group: group)
        let echo = try await chatEcho(server: server, dir: dir, logger: logger, count: messages)
        print(relay.line("relay"))
        print(echo.line("echo"))
        print(String(format: "ratio echo/relay %.2f", echo.perSecond / relay.perSecond))
        var points: [GrowthPoint] = []
        for n in growthSizes {
            let fresh = dir.appendingPathComponent("growth-\(n)")
            try FileManager.default.createDirectory(at: fresh, withIntermediateDirectories: true)
            let s = try await chatEcho(server: server, dir: fresh, logger: logger, count: n)
            print(s.line("echo \(n)"))
            points.append(GrowthPoint(work: n, seconds: Double(s.count) / s.perSecond, residentBytes: residentBytes()))
        }
        Growth.report("the chat echo (fresh engines each; time of the measured round trips)", unit: "message", points)
        await server.shutdown()
    }

    /// Runs `warmup + count` round trips with at most `window` in flight and measures the
    /// last `count`: `send` starts one; `receive` consumes the answers and calls `completed`
    /// with each round trip's latency until it returns false.
    private func closedLoop(count: Int, send: @escaping @Sendable () async throws -> Void,
                            receive: @escaping @Sendable (_ completed: @escaping @Sendable (UInt64) -> Bool) async throws -> Void) async throws -> Summary {
        let total = warmup + count
        let skip = warmup
        let recorder = Recorder(capacity: count)
        let progress = NIOLockedValueBox((done: 0, start: ContinuousClock.now))
        let (tokens, slot) = AsyncStream.makeStream(of: Void.self)
        for _ in 0..<window { slot.yield() }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                try await receive { latency in
                    let done = progress.withLockedValue { p -> Int in
                        p.done += 1
                        if p.done == skip { p.start = ContinuousClock.now }
                        return p.done
                    }
                    if done > skip { recorder.record(latency) }
                    if done >= total { slot.finish(); return false }
                    slot.yield()
                    return true
                }
            }
            tasks.addTask {
                var sent = 0
                for await _ in tokens where sent < total {
                    try await send()
                    sent += 1
                }
            }
            try await tasks.waitForAll()
        }
        return recorder.summary(elapsed: ContinuousClock.now - progress.withLockedValue { $0.start })
    }

    // MARK: - Baseline: the relay alone

    /// Client SEND on queue A → echo (subscribed to A) ACKs and SENDs the body on queue B →
    /// client (subscribed to B) ACKs and records the round trip.
    private func relayEcho(server: RelayServer, group: any EventLoopGroup) async throws -> Summary {
        let client = try await RelayConnection.connect(to: server.address, group: group)
        let echo = try await RelayConnection.connect(to: server.address, group: group)
        let toEcho = try await echo.createQueue()
        let toClient = try await client.createQueue()
        let clientKey = AuthPrivateKey.newX25519()
        let echoKey = AuthPrivateKey.newX25519()
        try await client.secureAsSender(senderId: toEcho.senderId, senderKey: clientKey)
        try await echo.secureAsSender(senderId: toClient.senderId, senderKey: echoKey)
        try await echo.subscribe(toEcho)
        try await client.subscribe(toClient)

        let echoTask = Task {
            for await event in echo.events {
                guard case let .message(_, id, sealed) = event else { continue }
                let body = try toEcho.open(messageId: id, sealed: sealed).body
                async let ack: Void = echo.acknowledge(toEcho, messageId: id)
                try await echo.sendMessage(senderId: toClient.senderId, key: echoKey, body: body)
                try await ack
            }
        }
        let inbox = client.events
        let summary = try await closedLoop(count: messages, send: {
            try await client.sendMessage(senderId: toEcho.senderId, key: clientKey, body: .stamped(size: 64))
        }, receive: { completed in
            for await event in inbox {
                guard case let .message(_, id, sealed) = event else { continue }
                let body = try toClient.open(messageId: id, sealed: sealed).body
                try await client.acknowledge(toClient, messageId: id)
                if !completed(monotonicNanos() &- body.stamp) { return }
            }
        })
        echoTask.cancel()
        await client.close()
        await echo.close()
        return summary
    }

    // MARK: - Two chat engines

    private func chatEcho(server: RelayServer, dir: URL, logger: Logger, count: Int) async throws -> Summary {
        let (bot, botEngine) = try await ChatBench.startEngine("echo", dir: dir, relay: server, logger: logger)
        let (client, clientEngine) = try await ChatBench.startEngine("client", dir: dir, relay: server, logger: logger)
        defer { botEngine.cancel(); clientEngine.cancel() }
        let clientEvents = client.events
        var clientInbox = clientEvents.makeAsyncIterator()

        // The bot: each text from a contact is sent back to that contact.
        let botTask = ChatBench.answerEveryText(bot)
        defer { botTask.cancel() }

        try await ChatBench.invite(bot, client)
        var botId: Int?
        while botId == nil, let event = await clientInbox.next() {
            if event["type"]?.stringValue == "contactConnected" { botId = event["contact"]?["contactId"]?.intValue }
        }
        guard let botId else { throw BenchFailure("the client engine never connected") }

        let summary = try await closedLoop(count: count, send: {
            try ChatBench.expect(await client.execute("/_send @\(botId) json \(ChatBench.textMessage(String(monotonicNanos())))"), "newChatItems")
        }, receive: { completed in
            for await event in clientEvents where event["type"]?.stringValue == "newChatItems" {
                guard case let .array(items)? = event["chatItems"] else { continue }
                for item in items where item["chatItem"]?["content"]?["type"]?.stringValue == "rcvMsgContent" {
                    guard let stamp = item["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue.flatMap(UInt64.init) else { continue }
                    if !completed(monotonicNanos() &- stamp) { return }
                }
            }
        })
        _ = await bot.execute("/_stop")
        _ = await client.execute("/_stop")
        return summary
    }
}
