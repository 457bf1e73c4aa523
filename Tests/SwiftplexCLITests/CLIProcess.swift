import Foundation
import NIOConcurrencyHelpers

/// A `swiftplex` process started from the build directory, its stdout collected line by line.
final class CLIProcess: @unchecked Sendable {
    let process = Process()
    private let out = NIOLockedValueBox<[String]>([])
    private let err = NIOLockedValueBox<String>("")

    static var binDirectory: URL {
        if let dir = ProcessInfo.processInfo.environment["SWIFTPLEX_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    init(_ arguments: [String], in directory: URL? = nil, executable: String = "swiftplex") throws {
        process.executableURL = Self.binDirectory.appendingPathComponent(executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        let o = Pipe(), e = Pipe()
        process.standardOutput = o
        process.standardError = e
        try process.run()
        Self.collect(o.fileHandleForReading) { [out] line in out.withLockedValue { $0.append(line) } }
        Self.collect(e.fileHandleForReading) { [err] line in err.withLockedValue { $0 += line + "\n" } }
    }

    private static func collect(_ handle: FileHandle, _ sink: @escaping @Sendable (String) -> Void) {
        Thread.detachNewThread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    sink(String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...nl)
                }
            }
            if !buffer.isEmpty { sink(String(decoding: buffer, as: UTF8.self)) }
        }
    }

    var stdout: [String] { out.withLockedValue { $0 } }
    var stderr: String { err.withLockedValue { $0 } }

    /// Waits for a stdout line starting with `prefix` and returns the rest of it.
    func line(startingWith prefix: String, timeout: Duration = .seconds(60)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let l = stdout.first(where: { $0.hasPrefix(prefix) }) { return String(l.dropFirst(prefix.count)) }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw CLIError("no line starting with '\(prefix)'; stdout: \(stdout.suffix(10)); stderr: \(stderr.suffix(2000))")
    }

    /// Waits for the process to exit and returns its status.
    func exitStatus(timeout: Duration = .seconds(60)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.terminate()
                throw CLIError("did not exit in time; stderr: \(stderr.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        // Let the readers finish.
        try await Task.sleep(for: .milliseconds(100))
        return process.terminationStatus
    }

    /// Runs `swiftplex <arguments>` to completion.
    static func run(_ arguments: [String], in directory: URL? = nil) async throws -> (status: Int32, stdout: String, stderr: String) {
        let p = try CLIProcess(arguments, in: directory)
        let status = try await p.exitStatus()
        return (status, p.stdout.joined(separator: "\n"), p.stderr)
    }
}

struct CLIError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

func temporaryDirectory() -> URL {
    let u = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-cli-test-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: u, withIntermediateDirectories: true)
    return u
}
