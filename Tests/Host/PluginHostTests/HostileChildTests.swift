import Foundation
import NIOConcurrencyHelpers
import TestSupport
import Testing
@testable import PluginHost

/// Isolated children that write hostile bytes (Tests/Fixtures/HostileRunner): the host survives
/// each, kills and restarts the bad child, and keeps serving a well-behaved isolated plugin.
@Suite(.timeLimit(.minutes(3))) struct HostileChildTests {
    let dir = temporaryDirectory()

    /// The hostile runner, compiled once per test process; it execs the real runner for `.so` paths.
    static let compiled: Result<URL, TestFailure> = {
        let source = Repository.path("Tests/Fixtures/HostileRunner/hostile_runner.c")
        let out = temporaryDirectory().appendingPathComponent("hostile-runner")
        let compiler = FileManager.default.isExecutableFile(atPath: "/usr/bin/cc") ? "cc" : "clang"
        let result: ProgramResult
        do {
            result = try runProgram(compiler, ["-O1", "-D_GNU_SOURCE", "-DREAL_RUNNER=\"\(Build.runner.path)\"", "-o", out.path, source.path])
        } catch { return .failure(TestFailure("cannot run the C compiler: \(error)")) }
        return result.termination == .exit(0) ? .success(out) : .failure(TestFailure("cannot compile \(source.path): \(result.errors)"))
    }()

    func manager(_ runCommand: @escaping CommandRunner) throws -> PluginManager {
        PluginManager(storage: try PluginStorage(path: dir.appendingPathComponent("plugins.db")), runCommand: runCommand,
                      runnerExecutable: try Self.compiled.get(), logger: quiet)
    }

    func stats(_ m: PluginManager, _ name: String) -> PluginStats {
        m.statuses().first { $0.name == name }?.stats ?? PluginStats()
    }

    /// Frames and output that break the protocol: out-of-range numbers (which trapped the host),
    /// frames the child may not send, an oversized frame, an endless output line. Each gets the
    /// child killed (a protocol error) and restarted, and the good plugin misses nothing.
    @Test(arguments: ["huge-seq", "huge-level", "float-level", "unknown-done", "event-frame", "huge-frame", "endless-line"])
    func aChildThatBreaksTheProtocolIsRestartedWhileOthersAreServed(mode: String) async throws {
        let log = CommandLog()
        let m = try manager(log.runner)
        let r = await m.apply([testSpec("good", config: #"{"tag":"good"}"#, isolation: .process),
                               testSpec("bad", config: "{}", isolation: .process, path: "/hostile/\(mode)")])
        guard case .started = r[0].outcome, case .started = r[1].outcome else { throw TestFailure("\(r)") }
        for n in 1...50 { m.dispatch(type: "newChatItems", json: event(n)) }
        try await log.wait(timeout: .seconds(60)) { $0.seen("good") == Array(1...50) }
        try await eventually(timeout: .seconds(60), "the bad child to be killed and restarted") {
            let s = stats(m, "bad")
            return s.protocolErrors >= 1 && s.restarts >= 1
        }
        for n in 51...100 { m.dispatch(type: "newChatItems", json: event(n)) }
        try await log.wait(timeout: .seconds(60)) { $0.seen("good") == Array(1...100) }
        #expect(stats(m, "good").crashes == 0)
        await m.stopAll()
    }

    /// A child that stops reading its stdin: dispatch never waits for it (all 300 events, 600 kB,
    /// are dispatched before the bad one's timeout, and the good plugin gets them all), then it is
    /// killed as hung.
    @Test func aChildThatStopsReadingDelaysNobodyAndIsKilledAsHung() async throws {
        let log = CommandLog()
        let m = try manager(log.runner)
        let r = await m.apply([testSpec("good", config: #"{"tag":"good"}"#, isolation: .process),
                               testSpec("bad", config: "{}", isolation: .process, path: "/hostile/no-read", timeout: .seconds(15))])
        guard case .started = r[0].outcome, case .started = r[1].outcome else { throw TestFailure("\(r)") }
        let watchdog = Task { await m.runWatchdog(every: .milliseconds(50)) }
        defer { watchdog.cancel() }
        let padding = String(repeating: "x", count: 2000)
        for n in 1...300 { m.dispatch(type: "newChatItems", json: event(n, #","pad":"\#(padding)""#)) }
        // 600 kB is ten times a pipe's buffer: a dispatch that wrote to the child itself would
        // still be blocked above until the watchdog killed it (after 15 s). It returned first.
        #expect(stats(m, "bad").timedOut == 0)
        try await log.wait(timeout: .seconds(60)) { $0.seen("good") == Array(1...300) }
        try await eventually(timeout: .seconds(60), "the hung child to be killed and restarted") {
            let s = stats(m, "bad")
            return s.timedOut >= 1 && s.restarts >= 1
        }
        for n in 301...310 { m.dispatch(type: "newChatItems", json: event(n)) }
        try await log.wait(timeout: .seconds(60)) { $0.seen("good") == Array(1...310) }
        await m.stopAll()
    }

    /// 5,000 `call` frames at once: at most `maxConcurrentCalls` run, the rest are answered with
    /// an error at once; the child is not killed, and the good plugin is served throughout.
    @Test func aCallFloodRunsBoundedAndTheExcessIsRefused() async throws {
        let log = CommandLog()
        let active = NIOLockedValueBox((now: 0, max: 0, ran: 0))
        let inner = log.runner
        let runCommand: CommandRunner = { line in
            guard line.hasPrefix("/flood ") else { return await inner(line) }
            active.withLockedValue { $0.now += 1; $0.max = Swift.max($0.max, $0.now) }
            try? await Task.sleep(for: .milliseconds(5))
            active.withLockedValue { $0.now -= 1; $0.ran += 1 }
            return #"{"type":"cmdOk"}"#
        }
        let m = try manager(runCommand)
        let limits = PluginSpec.IsolationLimits(maxConcurrentCalls: 8)
        let r = await m.apply([testSpec("good", config: #"{"tag":"good"}"#, isolation: .process),
                               testSpec("bad", config: "{}", isolation: .process, path: "/hostile/call-flood", limits: limits)])
        guard case .started = r[0].outcome, case .started = r[1].outcome else { throw TestFailure("\(r)") }
        for n in 1...20 { m.dispatch(type: "newChatItems", json: event(n)) }
        try await eventually(timeout: .seconds(60), "every flood call to be run or refused") {
            active.withLockedValue { $0.ran } + stats(m, "bad").refusedCalls == 5000
        }
        try await log.wait(timeout: .seconds(60)) { $0.seen("good") == Array(1...20) }
        let counts = active.withLockedValue { $0 }
        #expect(counts.max <= 8, "\(counts.max) calls ran at once")
        #expect(stats(m, "bad").refusedCalls > 0)
        #expect(stats(m, "bad").crashes == 0)
        await m.stopAll()
    }

    /// A child that never says hello is killed after the hello timeout: the load fails, it does not hang.
    @Test func aChildThatNeverSaysHelloFailsToLoad() async throws {
        let m = try manager(CommandLog().runner)
        let r = await m.apply([testSpec("bad", config: "{}", isolation: .process, path: "/hostile/silent", timeout: .seconds(1))])
        guard case let .failed(e) = r[0].outcome else { throw TestFailure("\(r)") }
        #expect("\(e)".contains("hello"))
    }
}

/// The private copy a plugin is loaded from: a fresh 0700 directory per load, never a
/// predictable path another local user could prepare.
@Suite struct PluginCopyTests {
    @Test func copiesGoToAFreshPrivateDirectoryNotAPredictablePath() throws {
        // Another user got to the old predictable path first (here: a file where the directory
        // would go). Loading neither uses nor minds it.
        let predictable = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-plugins-\(getpid())")
        try? FileManager.default.removeItem(at: predictable)
        try Data("not yours".utf8).write(to: predictable)
        defer { try? FileManager.default.removeItem(at: predictable) }
        let library = try PluginLibrary.load(path: Build.testPlugin)
        #expect(library.info.name == "test-plugin")
        #expect(try String(contentsOf: predictable, encoding: .utf8) == "not yours")

        let (a, fileA) = try PluginLibrary.privateCopy(of: Build.testPlugin)
        let (b, fileB) = try PluginLibrary.privateCopy(of: Build.testPlugin)
        defer { unlink(fileA); unlink(fileB); rmdir(a); rmdir(b) }
        #expect(a != b)
        for d in [a, b] {
            var st = stat()
            #expect(lstat(d, &st) == 0)
            #expect(st.st_mode & S_IFMT == S_IFDIR && st.st_mode & 0o777 == 0o700 && st.st_uid == geteuid())
            #expect(!d.hasSuffix("-\(getpid())"))
        }
        #expect(FileManager.default.contentsEqual(atPath: fileA, andPath: Build.testPlugin))
    }
}
