import Foundation
import TestSupport
import Testing

/// The shared test helpers themselves: waits are resumed by the awaited element, keep what they
/// skip, and say what they waited for and what they had when they give up.
@Suite(.timeLimit(.minutes(1))) struct TestSupportTests {
    @Test func aTemporaryDirectoryIsPrivateAndRemoved() throws {
        let dir = TemporaryDirectory(prefix: "swiftplex-support")
        let mode = try FileManager.default.attributesOfItem(atPath: dir.path)[.posixPermissions] as? Int
        #expect(mode == 0o700)
        try Data("x".utf8).write(to: dir.appendingPathComponent("file"))
        dir.cleanup()
        #expect(!FileManager.default.fileExists(atPath: dir.path))
        let path = withTemporaryDirectory { $0.path }
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func anInboxTakesMatchesAndKeepsTheRest() async throws {
        let (stream, source) = AsyncStream<Int>.makeStream()
        let inbox = AsyncInbox(stream)
        source.yield(1)
        source.yield(2)
        source.yield(3)
        #expect(try await inbox.first(where: { $0 == 2 }) == 2)
        #expect(try await inbox.next() == 1)
        #expect(try await inbox.next() == 3)
        // A waiter registered before the element arrives is resumed by it.
        async let later = inbox.first("an even number") { $0 % 2 == 0 ? $0 * 10 : nil }
        source.yield(5)
        source.yield(8)
        #expect(try await later == 80)
        #expect(inbox.pending == [5])
    }

    @Test func aTimeoutSaysWhatItWaitedForAndWhatItHas() async throws {
        let inbox = AsyncInbox<String>()
        inbox.yield("hello")
        let started = ContinuousClock.now
        do {
            _ = try await inbox.first(where: { $0 == "bye" }, "the goodbye", timeout: .milliseconds(100))
            Issue.record("no timeout")
        } catch let e as WaitTimeout {
            #expect(e.description.contains("the goodbye") && e.description.contains("hello"))
        }
        #expect(ContinuousClock.now - started >= .milliseconds(100))
        #expect(inbox.pending == ["hello"])
    }

    @Test func anEndedSourceFailsAWaitAtOnce() async throws {
        let (stream, source) = AsyncStream<Int>.makeStream()
        let inbox = AsyncInbox(stream)
        source.yield(1)
        source.finish()
        #expect(try await inbox.next() == 1)
        let started = ContinuousClock.now
        await #expect(throws: WaitTimeout.self) { try await inbox.next(timeout: .seconds(30)) }
        #expect(ContinuousClock.now - started < .seconds(10))
    }

    @Test func aLogWaitsForAConditionOnTheWholeRecord() async throws {
        let log = AsyncLog<Int>()
        async let done: Void = log.waitUntil("three elements") { $0.count == 3 }
        log.append(1)
        log.append(2)
        log.append(3)
        try await done
        #expect(try await log.first(from: 1, "an odd number") { $0 % 2 == 1 }.index == 2)
        #expect(log.all == [1, 2, 3])
    }

    @Test func aChildProcessIsAwaitedLineByLine() async throws {
        let sh = URL(fileURLWithPath: "/bin/sh")
        let p = try ChildProcess(sh, ["-c", "echo ready; echo oops >&2; while read l; do echo \"got $l\"; done; exit 3"])
        try await p.waitForLine("ready")
        try await p.waitForErrorLine("the warning") { $0 == "oops" }
        p.send("one")
        let (i, line) = try await p.waitForLine("the echo") { $0.hasPrefix("got ") }
        #expect(i == 1 && line == "got one")
        p.closeInput()
        #expect(try await p.waitForExit() == 3)
        #expect(p.lines == ["ready", "got one"])
        await #expect(throws: WaitTimeout.self) { try await p.waitForLine("never") }
    }

    @Test func aChildProcessIsSignalled() async throws {
        let p = try ChildProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "trap 'echo term; exit 0' TERM; echo up; while :; do sleep 1; done"])
        try await p.waitForLine("up")
        #expect(try await p.terminate() == 0)
        #expect(p.lines.contains("term"))
        await #expect(throws: WaitTimeout.self) {
            try await ChildProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "sleep 5"]).waitForExit(timeout: .milliseconds(100))
        }
    }
}
