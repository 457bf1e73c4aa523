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
import Testing

/// A fresh temporary directory, removed by `cleanup()`.
struct TempDirectory {
    let url: URL
    init() {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-test-\(UUID().uuidString)")
    }
    func cleanup() { try? FileManager.default.removeItem(at: url) }
}

/// A clock the test moves by hand.
final class ManualClock: RelayClock {
    private let time = NIOLockedValueBox<Int64>(1_800_000_000)
    func now() -> Int64 { time.withLockedValue { $0 } }
    func advance(seconds: Int64) { time.withLockedValue { $0 += seconds } }
}

var testLogger: Logger {
    var l = Logger(label: "test")
    l.logLevel = .warning
    return l
}

/// Starts an in-process relay on an ephemeral loopback port with its data in a temp directory.
func withRelay<T>(
    dataDirectory: URL? = nil,
    configure: (inout RelayConfiguration) -> Void = { _ in },
    _ body: (RelayServer) async throws -> T
) async throws -> T {
    let temp = TempDirectory()
    var config = RelayConfiguration(dataDirectory: dataDirectory ?? temp.url, host: "127.0.0.1", port: 0)
    configure(&config)
    let relay = try await RelayServer.start(configuration: config, group: MultiThreadedEventLoopGroup.singleton, logger: testLogger)
    do {
        let result = try await body(relay)
        await relay.shutdown()
        if dataDirectory == nil { temp.cleanup() }
        return result
    } catch {
        await relay.shutdown()
        if dataDirectory == nil { temp.cleanup() }
        throw error
    }
}

/// Collects events from a connection's stream into a buffer tests can wait on.
final class EventInbox: Sendable {
    private let buffer = NIOLockedValueBox<[RelayEvent]>([])

    init(_ connection: RelayConnection) {
        let buffer = self.buffer
        let events = connection.events
        Task {
            for await e in events { buffer.withLockedValue { $0.append(e) } }
        }
    }

    /// The next event, or a `timeout` error.
    func next(timeout: Duration = .seconds(10)) async throws -> RelayEvent {
        let deadline = ContinuousClock.now + timeout
        while true {
            let e = buffer.withLockedValue { b -> RelayEvent? in b.isEmpty ? nil : b.removeFirst() }
            if let e { return e }
            guard ContinuousClock.now < deadline else {
                throw RelayClientError(.timeout, "no relay event within \(timeout)")
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Waits for the next MSG and opens it.
    func nextMessage(for queue: RecipientQueue, timeout: Duration = .seconds(10)) async throws -> ReceivedMessage {
        let e = try await next(timeout: timeout)
        guard case let .message(rid, id, sealed) = e, rid == queue.recipientId else {
            throw RelayClientError(.unexpectedResponse, "expected MSG, got \(e)")
        }
        return try queue.open(messageId: id, sealed: sealed)
    }
}

/// Waits until `condition` holds, polling; fails after `timeout`.
func eventually(timeout: Duration = .seconds(10), _ what: String, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("timed out waiting for: \(what)")
    throw RelayClientError(.timeout, what)
}

extension String {
    var bytes: [UInt8] { Array(utf8) }
}
