import ArgumentParser
import ChatAPI
import ChatCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import SimplexLib
import SwiftplexBase

/// `swiftplex-bench libsimplex`: the cost of the C ABI — a cheap command through `chat_send_cmd`
/// and event delivery through `chat_recv_msg_wait` — against the same operations on the Swift
/// Chat API, in one run.
struct LibSimplexBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "libsimplex",
        abstract: "Round trips through the libsimplex C ABI against direct Swift Chat API calls."
    )

    @Option(help: "Commands (and events) per measurement; several, comma-separated and ascending, also print how the cost grows.")
    var iterations: String = "2000,20000"

    var sizes: [Int] { iterations.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func validate() throws {
        let s = sizes
        guard !s.isEmpty, s.count == iterations.split(separator: ",").count, s.allSatisfy({ $0 > 0 }), s == s.sorted() else {
            throw ValidationError("--iterations is a positive count, or several ascending, comma-separated (e.g. 2000,20000)")
        }
    }

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-bench-lib-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var logger = Logger(label: "bench.lib")
        logger.logLevel = .critical
        let newUser = #"/_create user {"profile": {"displayName": "bench", "fullName": ""}, "pastTimestamp": false, "userChatRelay": false, "clientService": false}"#
        print("libsimplex benchmark: for each of \(sizes.map(String.init).joined(separator: ", ")): that many `/users` through chat_send_cmd vs ChatAPI.execute, and as many events through chat_recv_msg_wait vs the Swift event stream")

        // Direct: the Swift Chat API. Through the C ABI: a controller of its own, called from
        // plain threads as a C or Python host does.
        let controller = try await ChatController.open(prefix: dir.appendingPathComponent("direct").path, defaultRelays: [], logger: logger)
        let api = ChatAPI(controller: controller)
        _ = await api.execute(newUser)
        for _ in 0..<1000 { _ = await api.execute("/users").description }
        var ctrl: UnsafeMutableRawPointer?
        free(chat_migrate_init(dir.appendingPathComponent("abi").path, "", "yesUp", &ctrl))
        free(chat_send_cmd(ctrl, newUser))
        let handle = UInt(bitPattern: ctrl)
        _ = await onThread {
            let c = UnsafeMutableRawPointer(bitPattern: handle)
            for _ in 0..<1000 { free(chat_send_cmd(c, "/users")) }
        }
        let event = JSONValue.object([("type", .string("newChatItems")), ("chatItems", .array([]))])

        var commandGrowth: [GrowthPoint] = []
        var eventGrowth: [GrowthPoint] = []
        var worst = Double.infinity
        for n in sizes {
            let directCommands = Recorder(capacity: n)
            var start = ContinuousClock.now
            for _ in 0..<n {
                let t = monotonicNanos()
                _ = await api.execute("/users").description
                directCommands.record(monotonicNanos() &- t)
            }
            let directCommandSummary = directCommands.summary(elapsed: ContinuousClock.now - start)

            let (stream, continuation) = AsyncStream.makeStream(of: JSONValue.self)
            start = ContinuousClock.now
            let consumer = Task {
                var count = 0
                for await e in stream {
                    _ = e.description
                    count += 1
                    if count == n { break }
                }
            }
            for _ in 0..<n { continuation.yield(event) }
            await consumer.value
            let directEvents = Double(n) / seconds(ContinuousClock.now - start)

            let abiCommands = Recorder(capacity: n)
            let elapsedCommands = await onThread {
                let c = UnsafeMutableRawPointer(bitPattern: handle)
                let s = ContinuousClock.now
                for _ in 0..<n {
                    let t = monotonicNanos()
                    free(chat_send_cmd(c, "/users"))
                    abiCommands.record(monotonicNanos() &- t)
                }
                return ContinuousClock.now - s
            }
            let abiCommandSummary = abiCommands.summary(elapsed: elapsedCommands)
            commandGrowth.append(GrowthPoint(work: n, seconds: seconds(elapsedCommands), residentBytes: residentBytes()))

            let eventStart = ContinuousClock.now
            async let receivedCount: Int = onThread {
                let c = UnsafeMutableRawPointer(bitPattern: handle)
                var count = 0
                while count < n {
                    let p = chat_recv_msg_wait(c, 500_000)
                    if p.pointee != 0 { count += 1 }
                    free(p)
                }
                return count
            }
            for _ in 0..<n { _ = simplexEnqueueEvent(UnsafeMutableRawPointer(bitPattern: handle), event) }
            let received = await receivedCount
            let eventSeconds = seconds(ContinuousClock.now - eventStart)
            let abiEvents = Double(received) / eventSeconds
            eventGrowth.append(GrowthPoint(work: n, seconds: eventSeconds, residentBytes: residentBytes()))

            print("\(n) of each:")
            print(directCommandSummary.line("direct-cmd").replacingOccurrences(of: "msg/s", with: "cmd/s"))
            print(abiCommandSummary.line("abi-cmd").replacingOccurrences(of: "msg/s", with: "cmd/s"))
            print(String(format: "%-10@ %9.0f events/s", "direct-evt" as NSString, directEvents))
            print(String(format: "%-10@ %9.0f events/s", "abi-evt" as NSString, abiEvents))
            let commandsRatio = abiCommandSummary.perSecond / directCommandSummary.perSecond
            print(String(format: "ratio abi/direct commands %.2f events %.2f", commandsRatio, abiEvents / directEvents))
            worst = min(worst, commandsRatio, abiEvents / directEvents)
        }
        free(chat_close_store(UnsafeMutableRawPointer(bitPattern: handle)))
        await controller.close()
        Growth.report("commands through the C ABI", unit: "command", commandGrowth)
        Growth.report("events through the C ABI", unit: "event", eventGrowth)
        print(String(format: "ratio abi/direct %.2f (the lowest of the above; goal ≥ 0.5)", worst))
    }

    private func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// Runs `body` on a new thread (the C ABI blocks; it must not run on the Swift task pool).
    private func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { cont in
            Thread.detachNewThread { cont.resume(returning: body()) }
        }
    }
}
