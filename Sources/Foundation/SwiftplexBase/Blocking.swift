import Foundation
import Synchronization

/// Blocking work kept off Swift's cooperative thread pool.
///
/// The cooperative pool has one thread per core (two on a small server, one under
/// `LIBDISPATCH_COOPERATIVE_POOL_STRICT=1`). A task that blocks one of them — waiting for a
/// database server, a file lock, a semaphore, a child process — takes that core away from every
/// other task in the process: the admin API, the WebSocket API, other bots' engines, timers. So
/// every wait that can block is either done on a thread of its own (``run(_:_:)``) or is a
/// blocking API meant for threads that are not the pool's (the C ABI's callers, plugin threads,
/// a store's own thread), and those APIs call ``willWait(_:)`` first.
///
/// ``willWait(_:)`` costs one load when the check is off. With `SWIFTPLEX_BLOCKING_CHECK=trap`
/// a blocking wait entered from a Swift task stops the process with the name of the call;
/// `SWIFTPLEX_BLOCKING_CHECK=log` (what `make test` sets) prints one line and the call stack per
/// call site instead, and `Tests/Support/blocking_report.py` fails the run on any that
/// Swiftplex's own code made — so a new one is found by the first test that reaches it, not by a
/// timeout on a loaded machine.
public enum Blocking {
    /// What ``willWait(_:)`` does with a wait entered on a Swift task.
    public enum CheckMode: Sendable { case off, log, trap }

    /// From `SWIFTPLEX_BLOCKING_CHECK` (`trap`, `log`; anything else: off), read once.
    public static let mode: CheckMode = {
        switch ProcessInfo.processInfo.environment["SWIFTPLEX_BLOCKING_CHECK"] {
        case "trap": .trap
        case "log": .log
        default: .off
        }
    }()

    /// Runs `body` on a new thread of its own and awaits its result: for rare, long, blocking work
    /// (opening and migrating a database, taking a file lock, closing a store) called from async
    /// code. Not for work done per message: that belongs on a long-lived thread or executor.
    public static func run<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let thread = Thread {
                allowingWaits { continuation.resume(with: Result { try body() }) }
            }
            thread.name = name
            thread.start()
        }
    }

    /// The same for work that cannot fail.
    public static func run<T: Sendable>(_ name: String, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            let thread = Thread {
                allowingWaits { continuation.resume(returning: body()) }
            }
            thread.name = name
            thread.start()
        }
    }

    /// Marks the start of a blocking wait named `what`. A wait entered from a Swift task (on the
    /// cooperative pool) is reported by the check mode; threads that run tasks' jobs on purpose
    /// and may block (a C caller lending its thread) wrap their loop in ``allowingWaits(_:)``.
    @inline(__always)
    public static func willWait(_ what: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
        guard mode != .off else { return }
        report(what(), file: file, line: line)
    }

    /// Runs `body` with blocking waits allowed on this thread even inside tasks' jobs.
    public static func allowingWaits<T>(_ body: () throws -> T) rethrows -> T {
        let previous = allowed.value
        allowed.value = true
        defer { allowed.value = previous }
        return try body()
    }

    private static let allowed = ThreadFlag()
    private static let reported = ReportedSites()

    private static func report(_ what: String, file: StaticString, line: UInt) {
        guard !allowed.value, withUnsafeCurrentTask(body: { $0 != nil }) else { return }
        let message = "blocking wait on the Swift concurrency pool: \(what) at \(file):\(line)"
        switch mode {
        case .off: return
        case .log:
            // Once per call site and caller: the stack names who made the wait.
            let stack = Thread.callStackSymbols.dropFirst(2).prefix(16)
            if reported.insert("\(file):\(line) " + stack.joined()) {
                FileHandle.standardError.write(Data(("swiftplex: " + message + "\n  " + stack.joined(separator: "\n  ") + "\n").utf8))
            }
        case .trap:
            FileHandle.standardError.write(Data(("swiftplex: " + message + "\n").utf8))
            fatalError(message)
        }
    }
}

/// A per-thread boolean (pthread-specific data).
private final class ThreadFlag: @unchecked Sendable {  // the key is written once, in init
    private var key = pthread_key_t()

    init() { pthread_key_create(&key, nil) }

    var value: Bool {
        get { pthread_getspecific(key) != nil }
        set { pthread_setspecific(key, newValue ? UnsafeRawPointer(bitPattern: 1) : nil) }
    }
}

/// Call sites already reported (the log mode prints each once).
private final class ReportedSites: Sendable {
    private let sites = Mutex<Set<String>>([])

    func insert(_ site: String) -> Bool {
        sites.withLock { $0.insert(site).inserted }
    }
}
