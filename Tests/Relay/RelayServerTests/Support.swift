import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import RelayClient
import RelayPostgres
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import SwiftplexSQL
import SwiftplexSQLPostgres
import TestSupport
import Testing

/// The relay suites' name for the shared temporary directory (created 0700, removed by `cleanup()`).
typealias TempDirectory = TemporaryDirectory

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

/// The stores the relay suites run on: SQLite always, PostgreSQL when `make test` gave a server
/// (``TestPostgres``; without one a note says the PostgreSQL variants are left out).
enum RelayStoreKind: String, Sendable, CaseIterable, CustomTestStringConvertible {
    case sqlite, postgres

    static var all: [RelayStoreKind] {
        TestPostgres.noteSkippedOnce()
        return TestPostgres.isAvailable ? [.sqlite, .postgres] : [.sqlite]
    }

    var testDescription: String { rawValue }

    /// A PostgreSQL store for a relay whose data directory is `dataDirectory`: the same directory,
    /// the same schema (a relay restarted on it finds its queues).
    static func postgresStore(for dataDirectory: URL) async throws -> any RelayQueueStore {
        let url = try #require(TestPostgres.url(schema: TestPostgres.schema(for: dataDirectory.path)), "\(TestPostgres.skipReason)")
        return try await PostgresRelayStore.open(try PostgresLocation.relay(url: url), logger: testLogger)
    }
}

/// Starts an in-process relay on an ephemeral loopback port with its data in a temp directory, on
/// `store` (PostgreSQL: a schema of its own, the same for the same `dataDirectory`).
func withRelay<T>(
    store: RelayStoreKind = .sqlite,
    dataDirectory: URL? = nil,
    configure: (inout RelayConfiguration) -> Void = { _ in },
    _ body: (RelayServer) async throws -> T
) async throws -> T {
    let temp = TempDirectory()
    var config = RelayConfiguration(dataDirectory: dataDirectory ?? temp.url, host: "127.0.0.1", port: 0)
    configure(&config)
    let queueStore: (any RelayQueueStore)? = store == .postgres ? try await RelayStoreKind.postgresStore(for: config.dataDirectory) : nil
    let relay = try await RelayServer.start(configuration: config, store: queueStore, group: MultiThreadedEventLoopGroup.singleton, logger: testLogger)
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

/// A connection's events, awaited as they arrive (an `AsyncInbox` over `connection.events`).
final class EventInbox: Sendable {
    let events: AsyncInbox<RelayEvent>

    init(_ connection: RelayConnection) {
        events = AsyncInbox(connection.events)
    }

    /// The next event, or a `WaitTimeout` saying what was pending.
    func next(timeout: Duration = .seconds(10)) async throws -> RelayEvent {
        try await events.next(timeout: timeout)
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

extension String {
    var bytes: [UInt8] { Array(utf8) }
}
