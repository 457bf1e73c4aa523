import Foundation
import NIOConcurrencyHelpers
import RelayProtocol

/// A real `swiftplex-relay` process, started from the build directory next to the test binary
/// (or `SWIFTPLEX_BIN_DIR`).
final class RelayProcess: @unchecked Sendable {
    let process: Process
    let address: RelayAddress
    private let stderrPipe: Pipe

    static var binaryDirectory: URL {
        if let dir = ProcessInfo.processInfo.environment["SWIFTPLEX_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    static func executable(_ name: String) -> URL {
        binaryDirectory.appendingPathComponent(name)
    }

    private init(process: Process, address: RelayAddress, stderrPipe: Pipe) {
        self.process = process
        self.address = address
        self.stderrPipe = stderrPipe
    }

    /// Starts the relay on an ephemeral loopback port and waits for the address it prints.
    static func start(dataDirectory: URL, arguments: [String] = []) async throws -> RelayProcess {
        let process = Process()
        process.executableURL = executable("swiftplex-relay")
        process.arguments = ["--data-dir", dataDirectory.path, "--listen", "127.0.0.1:0", "--log-level", "warning"] + arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let line = try await readLine(out.fileHandleForReading, timeout: .seconds(30))
        guard let line, let address = try? RelayAddress(parsing: line) else {
            process.terminate()
            throw ProcessError(message: "relay printed no address (got \(line ?? "nothing")); stderr: \(String(decoding: err.fileHandleForReading.availableData, as: UTF8.self))")
        }
        return RelayProcess(process: process, address: address, stderrPipe: err)
    }

    /// Reads one line from a pipe without blocking the cooperative pool.
    static func readLine(_ handle: FileHandle, timeout: Duration) async throws -> String? {
        try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                await withCheckedContinuation { cont in
                    Thread.detachNewThread {
                        var data = Data()
                        while true {
                            let chunk = handle.availableData
                            if chunk.isEmpty { break }
                            data.append(chunk)
                            if data.contains(UInt8(ascii: "\n")) { break }
                        }
                        let text = String(decoding: data, as: UTF8.self)
                        cont.resume(returning: text.split(separator: "\n").first.map(String.init))
                    }
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            let first = try await group.next()!
            group.cancelAll()
            return first
        }
    }

    /// SIGKILL: no chance to flush or close anything.
    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM, then waits for the exit status.
    func terminate() async -> Int32 {
        process.terminate()
        return await waitForExit()
    }

    func waitForExit() async -> Int32 {
        let p = process
        return await withCheckedContinuation { cont in
            Thread.detachNewThread {
                p.waitUntilExit()
                cont.resume(returning: p.terminationStatus)
            }
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

struct ProcessError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
