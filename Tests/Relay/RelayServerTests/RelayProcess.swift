import Foundation
import RelayProtocol
import TestSupport

/// A real `swiftplex-relay` process, started from the build directory next to the test binary
/// (or `SWIFTPLEX_BIN_DIR`), on the shared `ChildProcess`.
final class RelayProcess: Sendable {
    let child: ChildProcess
    let address: RelayAddress

    var process: SpawnedProcess { child.process }

    static var binaryDirectory: URL { BuildProducts.directory }

    static func executable(_ name: String) -> URL { BuildProducts.url(name) }

    private init(child: ChildProcess, address: RelayAddress) {
        self.child = child
        self.address = address
    }

    /// Starts the relay on an ephemeral loopback port and waits for the address it prints.
    /// `launcher`: a program and its arguments that exec the relay (e.g. `prlimit` with limits).
    static func start(dataDirectory: URL, arguments: [String] = [], launcher: [String] = []) async throws -> RelayProcess {
        let relayArguments = ["--data-dir", dataDirectory.path, "--listen", "127.0.0.1:0", "--log-level", "warning"] + arguments
        let child = launcher.isEmpty
            ? try ChildProcess(executable("swiftplex-relay"), relayArguments)
            : try ChildProcess(URL(fileURLWithPath: launcher[0]), Array(launcher.dropFirst()) + [executable("swiftplex-relay").path] + relayArguments)
        let (_, line) = try await child.waitForLine("the relay's address") { _ in true }
        guard let address = try? RelayAddress(parsing: line) else {
            child.signal(SIGKILL)
            throw ProcessError(message: "relay printed \(line) instead of its address; stderr: \(child.errorLines)")
        }
        return RelayProcess(child: child, address: address)
    }

    /// SIGKILL: no chance to flush or close anything.
    func kill9() {
        child.signal(SIGKILL)
        child.process.waitUntilExit()
    }

    /// SIGTERM, then waits for the exit status (-1 if it does not exit within a minute).
    func terminate() async -> Int32 {
        child.signal(SIGTERM)
        return await waitForExit()
    }

    func waitForExit() async -> Int32 {
        (try? await child.waitForExit(timeout: .seconds(60))) ?? -1
    }
}

struct ProcessError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
