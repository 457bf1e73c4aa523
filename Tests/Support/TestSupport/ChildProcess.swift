import Foundation
@_exported import SwiftplexSpawn

/// A child process with pipes: its stdout and stderr are collected line by line as they arrive
/// (one reading thread per pipe), tests await a line matching a predicate or the exit (both
/// continuation-based), send signals and write to its stdin. Started with posix_spawn
/// (``SpawnedProcess``), not Foundation's `Process`, whose `run()` can crash with many descriptors open.
public final class ChildProcess: @unchecked Sendable {
    public let process: SpawnedProcess
    /// Lines of standard output and standard error, in order; each ends at the pipe's end of file.
    public let output = AsyncLog<String>()
    public let errors = AsyncLog<String>()
    private let exitStatus = AsyncInbox<Int32>()
    private let stdin: FileHandle
    public let name: String

    /// Starts `executable` with `arguments` (in `directory`, with `environment` if given).
    public init(_ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String]? = nil) throws {
        name = executable.lastPathComponent
        process = try SpawnedProcess(executable.path, arguments, environment: environment, directory: directory?.path)
        stdin = process.standardInput!
        let exitStatus = self.exitStatus
        process.onExit { exitStatus.yield($0.status) }
        Self.collect(process.standardOutput!, into: output, "\(name)'s standard output")
        Self.collect(process.standardError!, into: errors, "\(name)'s standard error")
    }

    private static func collect(_ handle: FileHandle, into log: AsyncLog<String>, _ label: String) {
        Thread.detachNewThread {
            var pending = Data()
            // read(2) rather than `FileHandle.availableData`, which traps on EINTR (a child's
            // SIGCHLD landing on this thread ended a whole test run that way).
            let fd = handle.fileDescriptor
            var bytes = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 { break }
                pending.append(contentsOf: bytes[0..<n])
                while let nl = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    log.append(String(decoding: pending[pending.startIndex..<nl], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...nl)
                }
            }
            if !pending.isEmpty { log.append(String(decoding: pending, as: UTF8.self)) }
            log.finish("\(label) ended")
        }
    }

    public var processIdentifier: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    /// Every stdout line so far.
    public var lines: [String] { output.all }
    /// Every stderr line so far.
    public var errorLines: [String] { errors.all }
    /// Standard error so far, as text.
    public var errorText: String { errors.all.map { $0 + "\n" }.joined() }

    /// Writes `line` and a newline to the process's standard input.
    public func send(_ line: String) { write(Data((line + "\n").utf8)) }
    public func write(_ data: Data) { try? stdin.write(contentsOf: data) }
    public func closeInput() { try? stdin.close() }

    /// Waits for the first stdout line (at index `from` or later) that `predicate` accepts; returns
    /// its index and text. Fails at once if the output ends first, and after `timeout`, with the
    /// last lines of stdout and stderr.
    @discardableResult
    public func waitForLine(from: Int = 0, _ what: String, timeout: Duration = .seconds(30),
                            where predicate: @escaping @Sendable (String) -> Bool) async throws -> (index: Int, line: String) {
        do {
            let (i, line) = try await output.first(from: from, what, timeout: timeout, where: predicate)
            return (i, line)
        } catch let e as WaitTimeout {
            throw WaitTimeout("\(name): \(e.description); stderr: \(errorLines.suffix(10))")
        }
    }

    /// Waits for the stdout line `line` exactly.
    @discardableResult
    public func waitForLine(from: Int = 0, _ line: String, timeout: Duration = .seconds(30)) async throws -> Int {
        try await waitForLine(from: from, "'\(line)'", timeout: timeout) { $0 == line }.index
    }

    /// Waits for a stderr line that `predicate` accepts.
    @discardableResult
    public func waitForErrorLine(from: Int = 0, _ what: String, timeout: Duration = .seconds(30),
                                 where predicate: @escaping @Sendable (String) -> Bool) async throws -> (index: Int, line: String) {
        do {
            let (i, line) = try await errors.first(from: from, what, timeout: timeout, where: predicate)
            return (i, line)
        } catch let e as WaitTimeout {
            throw WaitTimeout("\(name) (stderr): \(e.description); stdout: \(lines.suffix(10))")
        }
    }

    /// Waits for the process to exit and then for both pipes to reach end of file (so `lines` and
    /// `errorLines` are complete); returns the exit status. Throws `WaitTimeout` if it does not
    /// exit within `timeout`.
    @discardableResult
    public func waitForExit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        let status: Int32
        do {
            status = try await exitStatus.first(where: { _ in true }, "\(name) to exit", timeout: timeout)
        } catch let e as WaitTimeout {
            throw WaitTimeout("\(e.description); stdout: \(lines.suffix(10)); stderr: \(errorLines.suffix(10))")
        }
        exitStatus.yield(status)  // later waits see it too
        // The pipes end right after the exit unless a grandchild inherited them; then give up
        // on completeness after a bounded wait rather than hang.
        try? await output.waitForEnd("\(name)'s stdout to end", timeout: .seconds(5))
        try? await errors.waitForEnd("\(name)'s stderr to end", timeout: .seconds(5))
        return status
    }

    /// Sends `signal` to the process.
    public func signal(_ signal: Int32) { process.signal(signal) }

    /// SIGTERM, then waits for the exit status.
    @discardableResult
    public func terminate(timeout: Duration = .seconds(30)) async throws -> Int32 {
        signal(SIGTERM)
        return try await waitForExit(timeout: timeout)
    }

    /// SIGKILL (nothing is flushed or closed), then waits for the exit.
    public func kill9() async {
        signal(SIGKILL)
        _ = try? await waitForExit()
    }

    deinit {
        process.signal(SIGKILL)
    }
}

/// Everything readable from `handle` until its end of file, read with read(2): unlike
/// `FileHandle.readDataToEndOfFile()` it retries on EINTR instead of trapping.
public func readToEnd(_ handle: FileHandle) -> Data {
    let fd = handle.fileDescriptor
    var data = Data()
    var bytes = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        if n <= 0 { return data }
        data.append(contentsOf: bytes[0..<n])
    }
}

/// What a program run to completion by ``runProgram(_:_:in:)`` did.
public struct ProgramResult: Sendable {
    public let termination: SpawnedProcess.Termination
    public let standardOutput: Data
    public let standardError: Data
    /// The exit status, or the signal number.
    public var status: Int32 { termination.status }
    public var output: String { String(decoding: standardOutput, as: UTF8.self) }
    public var errors: String { String(decoding: standardError, as: UTF8.self) }
}

/// Runs `executable` (a path, or a name looked up in PATH) to completion with posix_spawn, its
/// standard input from /dev/null, collecting both output streams (read on two threads, so a full
/// pipe cannot deadlock it).
public func runProgram(_ executable: String, _ arguments: [String], in directory: URL? = nil,
                       environment: [String: String]? = nil) throws -> ProgramResult {
    var path = executable
    if !executable.contains("/") {
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        guard let found = directories.map({ "\($0)/\(executable)" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw SpawnError(.notExecutable, "\(executable) is not in PATH")
        }
        path = found
    }
    let process = try SpawnedProcess(path, arguments, environment: environment, directory: directory?.path, stdin: .null)
    // stderr is read on its own thread while this one reads stdout; its end of file comes with
    // the exit (or a grandchild's).
    let collected = ErrorCollector()
    let errorHandle = process.standardError!
    Thread.detachNewThread { collected.set(readToEnd(errorHandle)) }
    let out = readToEnd(process.standardOutput!)
    let termination = process.waitUntilExit()
    let err = collected.wait()
    return ProgramResult(termination: termination, standardOutput: out, standardError: err)
}

private final class ErrorCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var data: Data?

    func set(_ d: Data) { condition.withLock { data = d; condition.broadcast() } }

    func wait() -> Data {
        condition.withLock {
            while data == nil { condition.wait() }
            return data!
        }
    }
}
