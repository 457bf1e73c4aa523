import Foundation
import NIOConcurrencyHelpers
import RelayProtocol

/// Finds the executables built next to the test bundle (or in `SWIFTPLEX_BIN_DIR`).
enum Binaries {
    static var directory: URL {
        if let dir = ProcessInfo.processInfo.environment["SWIFTPLEX_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    static func url(_ name: String) -> URL { directory.appendingPathComponent(name) }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A child process whose stdout and stderr are collected line by line on reader threads, and
/// whose stdin is a pipe the test writes to.
final class LineProcess: @unchecked Sendable {
    let process = Process()
    private let stdin = Pipe()
    private let output = NIOLockedValueBox<[String]>([])
    private let errors = NIOLockedValueBox<[String]>([])
    private let exited = NIOLockedValueBox<Bool>(false)

    init(_ executable: URL, _ arguments: [String]) throws {
        process.executableURL = executable
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardInput = stdin
        process.standardOutput = out
        process.standardError = err
        try process.run()
        Self.collect(out.fileHandleForReading, into: output)
        Self.collect(err.fileHandleForReading, into: errors)
    }

    private static func collect(_ handle: FileHandle, into box: NIOLockedValueBox<[String]>) {
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let nl = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...nl)
                    box.withLockedValue { $0.append(line) }
                }
            }
            if !pending.isEmpty { box.withLockedValue { $0.append(String(decoding: pending, as: UTF8.self)) } }
        }
    }

    var lines: [String] { output.withLockedValue { $0 } }
    var errorLines: [String] { errors.withLockedValue { $0 } }

    func send(_ line: String) {
        stdin.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    func closeInput() { try? stdin.fileHandleForWriting.close() }

    /// Waits for the first output line (from `from` on) that satisfies `predicate`; returns its index and text.
    @discardableResult
    func waitFor(from: Int = 0, timeout: Duration = .seconds(30), _ what: String, _ predicate: (String) -> Bool) async throws -> (Int, String) {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let found = output.withLockedValue { lines -> (Int, String)? in
                guard from < lines.count else { return nil }
                return lines.indices[from...].first { predicate(lines[$0]) }.map { ($0, lines[$0]) }
            }
            if let found { return found }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TestFailure("timed out waiting for \(what); output: \(lines.suffix(20)); stderr: \(errorLines.suffix(10))")
    }

    @discardableResult
    func waitFor(from: Int = 0, timeout: Duration = .seconds(30), line: String) async throws -> Int {
        try await waitFor(from: from, timeout: timeout, "'\(line)'") { $0 == line }.0
    }

    /// SIGKILL: nothing is flushed or closed.
    func kill9() async {
        kill(process.processIdentifier, SIGKILL)
        _ = await waitForExit()
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    func waitForExit(timeout: Duration = .seconds(30)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline { return nil }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// A real `swiftplex-relay` process on an ephemeral loopback port.
final class RelayProcess: Sendable {
    let process: LineProcess
    let address: String

    private init(process: LineProcess, address: String) {
        self.process = process
        self.address = address
    }

    static func start(dataDirectory: URL) async throws -> RelayProcess {
        let p = try LineProcess(Binaries.url("swiftplex-relay"), ["--data-dir", dataDirectory.path, "--listen", "127.0.0.1:0", "--log-level", "warning"])
        let (_, line) = try await p.waitFor("the relay's address") { _ in true }
        guard (try? RelayAddress(parsing: line)) != nil else { throw TestFailure("relay printed \(line)") }
        return RelayProcess(process: p, address: line)
    }

    func stop() async {
        process.signal(SIGTERM)
        _ = await process.waitForExit()
    }
}

/// A `swiftplex-chat` process driven over pipes.
final class ChatProcess: Sendable {
    let process: LineProcess
    let name: String
    let dataDirectory: URL

    private init(process: LineProcess, name: String, dataDirectory: URL) {
        self.process = process
        self.name = name
        self.dataDirectory = dataDirectory
    }

    /// Starts the client on `dataDirectory` and waits until it says it is ready.
    static func start(_ name: String, dataDirectory: URL, relay: RelayProcess?, extra: [String] = []) async throws -> ChatProcess {
        var args = ["--data-dir", dataDirectory.path, "--name", name]
        if let relay { args += ["--server", relay.address] }
        let p = try LineProcess(Binaries.url("swiftplex-chat"), args + extra)
        try await p.waitFor(line: "\(name) is ready; type /help for commands")
        return ChatProcess(process: p, name: name, dataDirectory: dataDirectory)
    }

    func send(_ line: String) { process.send(line) }
    var lines: [String] { process.lines }

    @discardableResult
    func waitFor(from: Int = 0, timeout: Duration = .seconds(30), line: String) async throws -> Int {
        try await process.waitFor(from: from, timeout: timeout, line: line)
    }

    /// Sends `/q` and waits for a clean exit.
    func quit() async throws {
        send("/q")
        guard let status = await process.waitForExit() else { throw TestFailure("\(name) did not quit") }
        guard status == 0 else { throw TestFailure("\(name) exited with \(status): \(process.errorLines)") }
    }
}
