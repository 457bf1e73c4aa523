import CSpawn
import Foundation
import SwiftplexBase

/// A child process started with posix_spawn, and its pipes.
///
/// Foundation's `Process.run()` on Linux (Swift 6.3.1) enumerates /proc/self/fd to close every
/// descriptor in the child and can over-read that listing when more than ~1,300 descriptors are open,
/// crashing the parent (swift-corelibs-foundation PR 5472). A bot host with many connections and
/// plugin children hits that, so children are started here instead: the descriptors 0–2 are set up
/// with dup2, everything else is closed in the child by `closefrom`, signal dispositions are reset
/// and the mask emptied. Exit is observed by one thread per child blocked in `waitpid` on that pid.
public final class SpawnedProcess: @unchecked Sendable {
    /// How the child ended.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
        case exit(Int32)
        case signal(Int32)

        public var description: String {
            switch self {
            case let .exit(code): "exit status \(code)"
            case let .signal(number): "signal \(number)"
            }
        }
        /// The exit status, or the signal number (as Foundation's `terminationStatus`).
        public var status: Int32 {
            switch self {
            case let .exit(code): code
            case let .signal(number): number
            }
        }
    }

    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// A new pipe; the parent's end is in `standardInput` / `standardOutput` / `standardError`.
        case pipe
        /// The parent's own descriptor (0, 1 or 2).
        case inherit
        /// /dev/null.
        case null
    }

    public let processIdentifier: Int32
    /// The parent's write end of the child's standard input, when it is a pipe.
    public let standardInput: FileHandle?
    /// The parent's read end of the child's standard output, when it is a pipe.
    public let standardOutput: FileHandle?
    /// The parent's read end of the child's standard error, when it is a pipe.
    public let standardError: FileHandle?

    private let condition = NSCondition()
    private var ended: Termination?
    private var waiters: [CheckedContinuation<Termination, Never>] = []
    private var handlers: [@Sendable (Termination) -> Void] = []

    /// Starts `executable` (a path; no PATH search) with `arguments`, the given environment (the
    /// parent's when nil) and working directory (the parent's when nil).
    public init(_ executable: String, _ arguments: [String] = [], environment: [String: String]? = nil, directory: String? = nil,
                stdin: Stream = .pipe, stdout: Stream = .pipe, stderr: Stream = .pipe) throws {
        var parentEnds: [Int32] = [-1, -1, -1]
        var childEnds: [Int32] = [-1, -1, -1]
        func closeAll() {
            for fd in parentEnds + childEnds where fd > 2 { close(fd) }
        }
        for (index, stream) in [stdin, stdout, stderr].enumerated() {
            switch stream {
            case .inherit: childEnds[index] = Int32(index)
            case .null: childEnds[index] = -1
            case .pipe:
                var fds: [Int32] = [-1, -1]
                let rc = fds.withUnsafeMutableBufferPointer { swiftplex_pipe_cloexec($0.baseAddress) }
                guard rc == 0 else {
                    closeAll()
                    throw SpawnError(.resources, "cannot create a pipe for \(executable): \(String(cString: strerror(rc)))")
                }
                // stdin: the child reads fds[0]; stdout/stderr: the child writes fds[1].
                if index == 0 { (childEnds[0], parentEnds[0]) = (fds[0], fds[1]) } else { (parentEnds[index], childEnds[index]) = (fds[0], fds[1]) }
            }
        }
        let argv = [executable] + arguments
        let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        var pid: pid_t = 0
        let rc = withCStrings(argv) { argvPointer in
            withCStrings(env) { envPointer in
                childEnds.withUnsafeBufferPointer { fds in
                    if let directory {
                        directory.withCString { swiftplex_spawn(&pid, executable, argvPointer, envPointer, $0, fds.baseAddress) }
                    } else {
                        swiftplex_spawn(&pid, executable, argvPointer, envPointer, nil, fds.baseAddress)
                    }
                }
            }
        }
        for fd in childEnds where fd > 2 { close(fd) }
        childEnds = [-1, -1, -1]
        guard rc == 0 else {
            closeAll()
            let code: SpawnError.Code = (rc == ENOENT || rc == EACCES || rc == ENOEXEC) ? .notExecutable : .resources
            throw SpawnError(code, "cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        processIdentifier = pid
        standardInput = parentEnds[0] >= 0 ? FileHandle(fileDescriptor: parentEnds[0], closeOnDealloc: true) : nil
        standardOutput = parentEnds[1] >= 0 ? FileHandle(fileDescriptor: parentEnds[1], closeOnDealloc: true) : nil
        standardError = parentEnds[2] >= 0 ? FileHandle(fileDescriptor: parentEnds[2], closeOnDealloc: true) : nil
        Thread.detachNewThread { [self] in reap() }
    }

    private func reap() {
        var status: Int32 = 0
        while waitpid(processIdentifier, &status, 0) < 0 {
            if errno == EINTR { continue }
            // ECHILD: someone else reaped it (nothing in Swiftplex does); report it as lost.
            status = -1
            break
        }
        let termination: Termination = if status == -1 {
            .exit(-1)
        } else if swiftplex_signaled(status) != 0 {
            .signal(swiftplex_term_signal(status))
        } else {
            .exit(swiftplex_exit_code(status))
        }
        condition.lock()
        ended = termination
        let waiting = waiters
        let toCall = handlers
        waiters = []
        handlers = []
        condition.broadcast()
        condition.unlock()
        for w in waiting { w.resume(returning: termination) }
        for h in toCall { h(termination) }
    }

    /// True until the child has exited and been reaped.
    public var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return ended == nil
    }

    /// How the child ended, once it has.
    public var termination: Termination? {
        condition.lock()
        defer { condition.unlock() }
        return ended
    }

    /// Blocks the calling thread until the child has exited.
    @discardableResult
    public func waitUntilExit() -> Termination {
        Blocking.willWait("SpawnedProcess.waitUntilExit")
        condition.lock()
        defer { condition.unlock() }
        while ended == nil { condition.wait() }
        return ended!
    }

    /// Waits (without blocking a thread) until the child has exited.
    public func exited() async -> Termination {
        await withCheckedContinuation { continuation in
            condition.lock()
            if let ended {
                condition.unlock()
                continuation.resume(returning: ended)
            } else {
                waiters.append(continuation)
                condition.unlock()
            }
        }
    }

    /// Calls `handler` once the child has exited (at once, on this thread, if it already has).
    public func onExit(_ handler: @escaping @Sendable (Termination) -> Void) {
        condition.lock()
        if let ended {
            condition.unlock()
            handler(ended)
        } else {
            handlers.append(handler)
            condition.unlock()
        }
    }

    /// Sends `signal` to the child, unless it has already been reaped (its pid may be reused).
    public func signal(_ signal: Int32) {
        condition.lock()
        defer { condition.unlock() }
        if ended == nil { kill(processIdentifier, signal) }
    }
}

/// Why a child could not be started.
public struct SpawnError: CodedError {
    public enum Code: String, Sendable {
        /// The path does not exist, is not executable, or is not a program.
        case notExecutable
        /// Out of descriptors, processes or memory.
        case resources
    }
    public let code: Code
    public let message: String
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// Calls `body` with a NULL-terminated C array of copies of `strings`.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for p in pointers { free(p) } }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
