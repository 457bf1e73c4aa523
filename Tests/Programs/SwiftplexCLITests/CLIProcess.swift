import Foundation
import TestSupport

/// A `swiftplex` process started from the build directory: the CLI suite's names over the shared
/// `ChildProcess` (stdout lines awaited as they arrive).
final class CLIProcess: Sendable {
    let child: ChildProcess

    static var binDirectory: URL { BuildProducts.directory }

    init(_ arguments: [String], in directory: URL? = nil, executable: String = "swiftplex") throws {
        child = try ChildProcess(BuildProducts.url(executable), arguments, in: directory)
    }

    var process: SpawnedProcess { child.process }
    var stdout: [String] { child.lines }
    var stderr: String { child.errorText }

    /// Waits for a stdout line starting with `prefix` and returns the rest of it.
    func line(startingWith prefix: String, timeout: Duration = .seconds(60)) async throws -> String {
        let (_, l) = try await child.waitForLine("a line starting with '\(prefix)'", timeout: timeout) { $0.hasPrefix(prefix) }
        return String(l.dropFirst(prefix.count))
    }

    /// Waits for the process to exit (and its output to end) and returns its status; a process
    /// still running after `timeout` is terminated and reported.
    func exitStatus(timeout: Duration = .seconds(60)) async throws -> Int32 {
        do {
            return try await child.waitForExit(timeout: timeout)
        } catch {
            process.signal(SIGTERM)
            throw CLIError("did not exit in time: \(error)")
        }
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

/// A fresh temporary directory (0700); the test removes it.
func temporaryDirectory() -> URL { TemporaryDirectory(prefix: "swiftplex-cli-test").url }
