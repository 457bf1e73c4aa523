import ArgumentParser
import ChatAPI
import ChatCore
import Foundation
import Logging
import RelayProtocol
import SwiftplexStorage

/// `swiftplex-chat`: a line-oriented chat client for people, over an engine in this process.
@main
struct SwiftplexChat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swiftplex-chat",
        abstract: "Chat with people and bots over Swiftplex relays, one line at a time (/help lists the commands).",
        discussion: "Reads commands and messages from standard input (a terminal or a pipe) until /q or end of input."
    )

    @Option(name: .customLong("data-dir"), help: "Directory for the profile and its databases (created 0700).")
    var dataDirectory: String

    @Option(name: .customLong("server"), help: "Relay address smp://<fingerprint>@host[:port]; repeat for several. Stored for the profile.")
    var servers: [String] = []

    @Option(help: "Display name for a new profile (asked on the terminal when missing).")
    var name: String?

    @Option(name: .customLong("log-level"), help: "Engine log level on standard error (trace…critical).")
    var logLevel: String = "error"

    func validate() throws {
        for s in servers {
            do { _ = try RelayAddress(parsing: s) } catch {
                throw ValidationError("invalid --server '\(s)': \(error) (expected smp://<fingerprint>@host[:port])")
            }
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("invalid --log-level '\(logLevel)' (trace, debug, info, notice, warning, error or critical)")
        }
        if let name, name.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--name must not be empty") }
    }

    func run() async throws {
        let dir = URL(fileURLWithPath: dataDirectory)
        try Self.makePrivateDirectory(dir)
        var logger = Logger(label: "swiftplex-chat") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = Logger.Level(rawValue: logLevel) ?? .error
        let environmentRelays = (ProcessInfo.processInfo.environment["SWIFTPLEX_SERVERS"] ?? "")
            .split(separator: ",").compactMap { try? RelayAddress(parsing: String($0).trimmingCharacters(in: .whitespaces)) }

        let terminal = Terminal()
        let input = LineInput.standardInput()
        let controller: ChatController
        // One client per data directory: two engines on one database would reuse chain keys.
        let databaseLock: DatabaseLock
        do {
            databaseLock = try DatabaseLock.acquire(prefix: dir.appendingPathComponent("chat").path)
        } catch let locked as DatabaseLocked {
            throw ClientFailure("\(dir.path) is in use by another swiftplex-chat\(locked.holder.map { " (pid \($0))" } ?? "")")
        }
        do {
            controller = try ChatController(prefix: dir.appendingPathComponent("chat").path, defaultRelays: environmentRelays, logger: logger)
        } catch {
            throw ClientFailure("cannot open the chat databases in \(dir.path): \(error)")
        }
        let client = ChatClient(api: ChatAPI(controller: controller), terminal: terminal, qrColors: terminal.isInteractive)
        let status = await withTaskGroup(of: Void.self, returning: Int32.self) { group in
            var inputs = input.events.makeAsyncIterator()
            group.addTask { try? await controller.run() }
            group.addTask { await client.printEvents() }
            defer { group.cancelAll() }
            do {
                var displayName = name
                if displayName == nil, try await client.needsProfile() {
                    terminal.prompt("display name: ")
                    guard case let .line(typed) = await inputs.next() else {
                        terminal.error(ClientFailure("no display name given; a new profile needs one (or pass --name)"))
                        return 1
                    }
                    displayName = typed
                }
                try await client.setUp(name: displayName, servers: servers)
            } catch {
                terminal.error(error)
                return 1
            }
            while let event = await inputs.next() {
                switch event {
                case let .line(line):
                    if await client.handle(line) == .quit { return 0 }
                case .end:
                    return 0
                case .signal:
                    return 0
                }
            }
            return 0
        }
        _ = await client.api.execute("/_stop")
        await controller.close()
        databaseLock.release()
        if status != 0 { throw ExitCode(status) }
    }

    /// Creates the directory 0700, or tightens an existing one to 0700.
    static func makePrivateDirectory(_ dir: URL) throws {
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: dir.path)
        } catch {
            throw ClientFailure("cannot create the data directory \(dir.path): \(error.localizedDescription)")
        }
    }
}

/// A failure the client reports in plain words and exits on.
struct ClientFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
