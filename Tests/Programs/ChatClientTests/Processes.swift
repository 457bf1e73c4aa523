import Foundation
import RelayProtocol
import TestSupport

/// Finds the executables built next to the test bundle (or in `SWIFTPLEX_BIN_DIR`).
enum Binaries {
    static var directory: URL { BuildProducts.directory }
    static func url(_ name: String) -> URL { BuildProducts.url(name) }
}

/// A child process driven over pipes, line by line: the client suites' names over the shared
/// `ChildProcess` (whose waits are resumed by the line they wait for).
final class LineProcess: Sendable {
    let child: ChildProcess

    init(_ executable: URL, _ arguments: [String]) throws {
        child = try ChildProcess(executable, arguments)
    }

    var process: SpawnedProcess { child.process }
    var lines: [String] { child.lines }
    var errorLines: [String] { child.errorLines }

    func send(_ line: String) { child.send(line) }
    func closeInput() { child.closeInput() }

    /// Waits for the first output line (from `from` on) that satisfies `predicate`; returns its index and text.
    @discardableResult
    func waitFor(from: Int = 0, timeout: Duration = .seconds(30), _ what: String,
                 _ predicate: @escaping @Sendable (String) -> Bool) async throws -> (Int, String) {
        let found = try await child.waitForLine(from: from, what, timeout: timeout, where: predicate)
        return (found.index, found.line)
    }

    @discardableResult
    func waitFor(from: Int = 0, timeout: Duration = .seconds(30), line: String) async throws -> Int {
        try await child.waitForLine(from: from, line, timeout: timeout)
    }

    /// SIGKILL: nothing is flushed or closed.
    func kill9() async { await child.kill9() }

    func signal(_ sig: Int32) { child.signal(sig) }

    /// The exit status, or nil if the process is still running after `timeout`.
    func waitForExit(timeout: Duration = .seconds(30)) async -> Int32? {
        try? await child.waitForExit(timeout: timeout)
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

    /// Starts a relay on `dataDirectory`, on an ephemeral port unless `listen` names one (a
    /// restart after ``kill9()`` listens where the first run did: its clients know that address).
    static func start(dataDirectory: URL, listen: String = "127.0.0.1:0") async throws -> RelayProcess {
        let p = try LineProcess(Binaries.url("swiftplex-relay"), ["--data-dir", dataDirectory.path, "--listen", listen, "--log-level", "warning"])
        let (_, line) = try await p.waitFor("the relay's address") { _ in true }
        guard (try? RelayAddress(parsing: line)) != nil else { throw TestFailure("relay printed \(line)") }
        return RelayProcess(process: p, address: line)
    }

    func stop() async {
        process.signal(SIGTERM)
        _ = await process.waitForExit()
    }

    /// SIGKILL, then the same relay (data directory, host and port) started again.
    func restartAfterKill9(dataDirectory: URL) async throws -> RelayProcess {
        await process.kill9()
        let parsed = try RelayAddress(parsing: address)
        return try await Self.start(dataDirectory: dataDirectory, listen: "\(parsed.host):\(parsed.port)")
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

/// A relay process and named clients on it, each in its own directory under one temporary
/// directory: the set-up most client tests start from, and its orderly end.
final class ClientScene: Sendable {
    let directory: URL
    let relay: RelayProcess
    let clients: [ChatProcess]

    private init(directory: URL, relay: RelayProcess, clients: [ChatProcess]) {
        self.directory = directory
        self.relay = relay
        self.clients = clients
    }

    /// Starts a relay and one client per name (in that order, each ready before the next).
    static func start(_ names: String...) async throws -> ClientScene {
        let dir = TemporaryDirectory(prefix: "swiftplex-client").url
        let relay = try await RelayProcess.start(dataDirectory: dir.appendingPathComponent("relay"))
        var clients: [ChatProcess] = []
        for name in names {
            clients.append(try await ChatProcess.start(name, dataDirectory: dir.appendingPathComponent(name), relay: relay))
        }
        return ClientScene(directory: dir, relay: relay, clients: clients)
    }

    /// Quits every client (each must exit cleanly), stops the relay and removes the directory.
    func finish() async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        for client in clients { try await client.quit() }
        await relay.stop()
    }
}
