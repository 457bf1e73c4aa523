import ArgumentParser
import ChatAPI
import ChatCore
import ChatServer
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

    @Option(help: "Keep the chat and agent data in PostgreSQL instead of SQLite files in the data directory: a connection string (postgresql://user@host:5432/db?schema=name; schemas <name>_chat_schema and <name>_agent_schema). Also read from SWIFTPLEX_DATABASE.")
    var database: String?

    var databaseURL: String? { database ?? ProcessInfo.processInfo.environment["SWIFTPLEX_DATABASE"].flatMap { $0.isEmpty ? nil : $0 } }

    @Option(name: .customLong("server"), help: "Relay address smp://<fingerprint>@host[:port]; repeat for several. Stored for the profile.")
    var servers: [String] = []

    @Option(help: "Display name for a new profile (asked on the terminal when missing).")
    var name: String?

    @Option(name: .customLong("log-level"), help: "Engine log level on standard error (trace…critical).")
    var logLevel: String = "error"

    @Option(name: .customShort("p"), help: "Also serve SimpleX's WebSocket API on this port (as `simplex-chat -p PORT`); 0 picks a free port.")
    var port: Int?

    @Option(name: .customLong("ws-host"), help: "Address the WebSocket API listens on (default 127.0.0.1; beyond loopback it needs --ws-token).")
    var wsHost: String = "127.0.0.1"

    @Option(name: .customLong("ws-token"), help: "Bearer token WebSocket API clients must present (Authorization: Bearer, or ?token=). Also read from SWIFTPLEX_WS_TOKEN.")
    var wsToken: String?

    @Option(name: .customLong("ws-allow-origin"), help: "A browser origin (scheme://host[:port]) allowed to use the WebSocket API; repeat for several. Browsers' requests are refused otherwise.")
    var wsAllowOrigin: [String] = []

    @Option(name: .customLong("ws-allow-host"), help: "A host name the WebSocket API answers to besides loopback names and --ws-host; repeat for several.")
    var wsAllowHost: [String] = []

    var webSocketToken: String? { wsToken ?? ProcessInfo.processInfo.environment["SWIFTPLEX_WS_TOKEN"].flatMap { $0.isEmpty ? nil : $0 } }

    func validate() throws {
        if let port, !(0...65535).contains(port) { throw ValidationError("-p must be a port in 0...65535") }
        if port != nil, webSocketToken == nil, !ListenAddress(host: wsHost, port: 0).isLoopback {
            throw ValidationError("--ws-host \(wsHost) is beyond loopback: the WebSocket API then needs a token (--ws-token or SWIFTPLEX_WS_TOKEN)")
        }
        for o in wsAllowOrigin where !BrowserGuard.isValidOrigin(o) {
            throw ValidationError("--ws-allow-origin \(o) is not an origin (scheme://host[:port], like https://app.example.com)")
        }
        for s in servers {
            do { _ = try RelayAddress(parsing: s) } catch {
                throw ValidationError("invalid --server '\(s)': \(error) (expected smp://<fingerprint>@host[:port])")
            }
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("invalid --log-level '\(logLevel)' (trace, debug, info, notice, warning, error or critical)")
        }
        if let name, name.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--name must not be empty") }
        if let databaseURL {
            do { _ = try EngineDatabase.postgres(connection: databaseURL, schemaPrefix: nil) } catch {
                throw ValidationError("invalid --database: \(error) (expected postgresql://user@host:5432/db?schema=name)")
            }
        }
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
            databaseLock = try await DatabaseLock.acquire(prefix: dir.appendingPathComponent("chat").path)
        } catch let locked as DatabaseLocked {
            throw ClientFailure("\(dir.path) is in use by another swiftplex-chat\(locked.holder.map { " (pid \($0))" } ?? "")")
        }
        let database = try databaseURL.map { try EngineDatabase.postgres(connection: $0, schemaPrefix: nil) }
            ?? .sqlite(prefix: dir.appendingPathComponent("chat").path)
        do {
            controller = try await ChatController.open(database: database, defaultRelays: environmentRelays, logger: logger)
        } catch {
            throw ClientFailure("cannot open the chat databases in \(database): \(error)")
        }
        let api = ChatAPI(controller: controller)
        let client = ChatClient(api: api, terminal: terminal, qrColors: terminal.isInteractive)
        // The terminal and the WebSocket API's clients each see every event.
        let hub = EventHub(source: api.events)
        let terminalEvents = hub.subscribe().events
        var server: ChatWebSocketServer?
        if let port {
            do {
                server = try ChatWebSocketServer(api: api, events: hub, listen: ListenAddress(host: wsHost, port: port), token: webSocketToken,
                                                 browsers: BrowserGuard(allowedHosts: wsAllowHost, allowedOrigins: wsAllowOrigin), logger: logger,
                                                 onListening: { bound in
                                                     // A line a script can wait for (the port, when -p 0 picked one).
                                                     FileHandle.standardError.write(Data("WebSocket API listening on \(bound)\n".utf8))
                                                 })
            } catch {
                throw ClientFailure("\(error)")
            }
        }
        let status = await withTaskGroup(of: Void.self, returning: Int32.self) { group in
            var inputs = input.events.makeAsyncIterator()
            group.addTask { try? await controller.run() }
            group.addTask { await hub.run() }
            group.addTask { await client.printEvents(terminalEvents) }
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
            // Served once the profile exists (as SimpleX's CLI does): a client that connects on
            // the "listening" line finds the user made, never `noActiveUser`.
            if let server {
                group.addTask {
                    do { try await server.run() } catch {
                        terminal.error(ClientFailure("the WebSocket API stopped: \(error)"))
                    }
                }
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
