import Foundation
import SwiftplexBase
import NIOConcurrencyHelpers
import TestSupport
import Testing
@testable import PluginHost

/// The durable dispatch cursor: an instance whose mark is behind gets the received messages it
/// missed first, in order, and no live message twice; what it sends while handling one carries
/// that message's idempotency key.
@Suite(.timeLimit(.minutes(2))) struct ReplayTests {
    let dir = temporaryDirectory()

    /// The engine's received messages as the feed gives them (committed before they are announced).
    final class Received: Sendable {
        private let items = NIOLockedValueBox<[Int64]>([])
        func add(_ ids: ClosedRange<Int64>) { items.withLockedValue { $0 += Array(ids) } }
        var feed: ReceivedItemFeed {
            ReceivedItemFeed(
                lastItemId: { [items] in items.withLockedValue { $0.last ?? 0 } },
                eventsAfter: { [items] after, limit in
                    items.withLockedValue { $0 }.filter { $0 > after }.prefix(limit).map { ($0, event(Int($0))) }
                })
        }
    }

    /// The commands plugins ran with the idempotency key each carried.
    final class KeyLog: Sendable {
        struct Entry: Sendable {
            var line: String
            var key: String?
        }

        let log = AsyncLog<Entry>()
        var runner: KeyedCommandRunner {
            { [log] line, key in
                log.append(Entry(line: line, key: key))
                return #"{"type":"cmdOk"}"#
            }
        }

        var lines: [Entry] { log.all }

        /// The `n` of each `/_send` line (the test plugin with `"verb":"/_send"`), in order, with its key.
        static func seen(_ entries: [Entry]) -> [(n: Int, key: String?)] {
            entries.compactMap { entry -> (Int, String?)? in
                guard entry.line.hasPrefix("/_send "), let r = entry.line.range(of: #""n":"#) else { return nil }
                return Int(entry.line[r.upperBound...].prefix { $0.isNumber }).map { ($0, entry.key) }
            }
        }

        var seen: [(n: Int, key: String?)] { Self.seen(log.all) }

        /// Waits (as commands arrive, no polling) until `count` sends were seen.
        func wait(for count: Int, timeout: Duration = .seconds(30)) async throws {
            try await log.waitUntil("\(count) sends", timeout: timeout) { Self.seen($0).count >= count }
        }
    }

    func manager(_ log: KeyLog, _ received: Received) throws -> PluginManager {
        PluginManager(storage: try PluginStorage(path: dir.appendingPathComponent("plugins.db")), runKeyedCommand: log.runner,
                      feed: received.feed, runnerExecutable: Build.runner, logger: quiet)
    }

    @Test(arguments: [PluginSpec.Isolation.inProcess, .process])
    func anInstanceBehindItsMarkGetsWhatItMissedFirstInOrderAndNothingTwice(_ isolation: PluginSpec.Isolation) async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let received = Received()
        received.add(1...10)  // history before the instance existed: never replayed
        let log = KeyLog()
        let first = try manager(log, received)
        await first.apply([testSpec("t", config: #"{"tag":"t","verb":"/_send"}"#, isolation: isolation)])
        for n in Int64(11)...15 {
            received.add(n...n)
            first.dispatch(type: "newChatItems", json: event(Int(n)), receivedItemId: n)
        }
        first.dispatch(type: "contactUpdated", json: #"{"type":"contactUpdated","n":1000}"#)
        await first.drain()
        #expect(log.seen.map(\.n) == Array(11...15) + [1000])
        // Sends issued while handling received item X carry "<instance>:X:<ordinal>"; others none.
        #expect(log.seen.map(\.key) == (11...15).map { "t:\($0):0" } + [nil])
        #expect(try await storedMark(dir, "t") == 15)
        await first.stopAll()

        // Messages 16…20 were stored but the host died before it dispatched them. The next host
        // replays them before live events; live copies of 18…22 (announced while it replays) are
        // not given twice; an event that is not a message waits for the replay.
        received.add(16...22)
        let second = try manager(log, received)
        await second.apply([testSpec("t", config: #"{"tag":"t","verb":"/_send"}"#, isolation: isolation)])
        second.dispatch(type: "contactUpdated", json: #"{"type":"contactUpdated","n":2000}"#)
        for n in Int64(18)...22 { second.dispatch(type: "newChatItems", json: event(Int(n)), receivedItemId: n) }
        // The replay's end is a state of the manager, not an event: polled (the last resort).
        try await eventually(timeout: .seconds(30), "the replay to end") { second.caughtUp }
        for n in Int64(18)...22 { second.dispatch(type: "newChatItems", json: event(Int(n)), receivedItemId: n) }
        received.add(23...23)
        second.dispatch(type: "newChatItems", json: event(23), receivedItemId: 23)
        try await log.wait(for: 6 + 9)
        await second.drain()
        let after = Array(log.seen.dropFirst(6))
        let messages = after.map(\.n).filter { $0 != 2000 }
        #expect(messages == Array(16...23), "\(after.map(\.n))")
        #expect(after.map(\.n).contains(2000))
        #expect(after.filter { $0.n != 2000 }.map(\.key) == (16...23).map { "t:\($0):0" })
        #expect(try await storedMark(dir, "t") == 23)
        await second.stopAll()
    }

    /// `send_message` (ABI 1.2) is a `/_send` made by the host: while a received message is
    /// handled it carries that message's key, in process and from an isolated child.
    @Test(arguments: [PluginSpec.Isolation.inProcess, .process])
    func aSendMessageCarriesTheKeyOfTheMessageBeingHandled(_ isolation: PluginSpec.Isolation) async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let received = Received()
        let log = KeyLog()
        let m = try manager(log, received)
        await m.apply([testSpec("s", config: #"{"tag":"s","verb":"send_message"}"#, isolation: isolation)])
        for n in Int64(1)...3 {
            received.add(n...n)
            m.dispatch(type: "newChatItems", json: event(Int(n)), receivedItemId: n)
        }
        m.dispatch(type: "contactUpdated", json: #"{"type":"contactUpdated","n":1000}"#)
        try await log.wait(for: 4)
        #expect(log.seen.map(\.n) == [1, 2, 3, 1000])
        #expect(log.seen.map(\.key) == ["s:1:0", "s:2:0", "s:3:0", nil])
        #expect(log.lines.count == 4 && log.lines.allSatisfy { $0.line.hasPrefix(#"/_send @1 json [{"msgContent":{"type":""#) },
                "\(log.lines.map(\.line))")
        await m.stopAll()
    }

    @Test func aMessageAFullQueueRefusesIsGivenLaterFromTheStoreInOrder() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let received = Received()
        let log = KeyLog()
        let m = try manager(log, received)
        // Two events fit in the queue; each live one takes the plugin 300 ms.
        await m.apply([testSpec("q", config: #"{"tag":"q","verb":"/_send"}"#, queueLimit: 2)])
        for n in Int64(1)...8 {
            received.add(n...n)
            m.dispatch(type: "newChatItems", json: event(Int(n), #","text":"slow-q""#), receivedItemId: n)
        }
        #expect(m.statuses()[0].stats.dropped > 0)
        try await log.wait(for: 8)
        received.add(9...9)
        m.dispatch(type: "newChatItems", json: event(9), receivedItemId: 9)
        try await log.wait(for: 9)
        await m.drain()
        #expect(log.seen.map(\.n) == Array(1...9))
        #expect(log.seen.map(\.key) == (1...9).map { "q:\($0):0" })
        await m.stopAll()
    }

    @Test func aMessageAnIsolatedPluginCrashesOnMovesTheMarkPastIt() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let received = Received()
        let log = KeyLog()
        let m = try manager(log, received)
        await m.apply([testSpec("c", config: #"{"tag":"c","verb":"/_send"}"#, isolation: .process)])
        received.add(1...2)
        m.dispatch(type: "newChatItems", json: event(1), receivedItemId: 1)
        m.dispatch(type: "newChatItems", json: event(2, #","text":"crash-now""#), receivedItemId: 2)
        await m.drain()
        #expect(m.statuses()[0].stats.crashes == 1)
        #expect(log.seen.map(\.n) == [1])
        // Dropped as the crash's cause, and not given again by the next host.
        #expect(try await storedMark(dir, "c") == 2)
        await m.stopAll()
    }

    @Test func aNewInstanceStartsAtTheNewestMessageAndAManagerWithoutAFeedKeepsNoMark() async throws {
        defer { try? FileManager.default.removeItem(at: dir) }
        let received = Received()
        received.add(1...50)
        let log = KeyLog()
        let m = try manager(log, received)
        await m.apply([testSpec("fresh", config: #"{"tag":"f","verb":"/_send"}"#), testSpec("seer", config: #"{"tag":"s"}"#)])
        received.add(51...51)
        m.dispatch(type: "newChatItems", json: event(51), receivedItemId: 51)
        await m.drain()
        #expect(log.seen.map(\.n) == [51])
        #expect(log.seen.map(\.key) == ["fresh:51:0"])
        // A command that is not a send carries no key (and is not counted).
        let others = log.lines.filter { $0.line.hasPrefix("/seen s ") }
        #expect(others.count == 1 && others.allSatisfy { $0.key == nil })
        await m.stopAll()

        let plain = CommandLog()
        let old = PluginManager(storage: try PluginStorage(path: dir.appendingPathComponent("plugins.db")), runCommand: plain.runner,
                                runnerExecutable: Build.runner, logger: quiet)
        await old.apply([testSpec("nomark", config: #"{"tag":"n"}"#)])
        old.dispatch(type: "newChatItems", json: event(52), receivedItemId: 52)
        await old.drain()
        #expect(plain.seen("n") == [52])
        #expect(try await storedMark(dir, "nomark") == nil)
        await old.stopAll()
    }
}

/// An instance's mark as `plugins.db` in `dir` has it (opened on a thread of its own).
private func storedMark(_ dir: URL, _ instance: String) async throws -> Int64? {
    try await Blocking.run("plugins.db") { try PluginStorage(path: dir.appendingPathComponent("plugins.db")).handledMark(instance: instance) }
}
