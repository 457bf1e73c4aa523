import ArgumentParser
import ChatAPI
import ChatCore
import ChatServer
import Foundation
import Logging
import RelayProtocol
import SwiftplexBase
import SwiftplexSQL
import SwiftplexSQLPostgres
import SwiftplexStorage

/// `swiftplex-chat`: a line-oriented chat client for people, over an engine in this process; it
/// also takes SimpleX CLI's command lines (`simplex-chat -p 5225 --create-bot-display-name Bot
/// -d ./bot`), so bot guides and SDKs that start SimpleX's CLI can start it unchanged.
@main
struct SwiftplexChat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swiftplex-chat",
        abstract: "Chat with people and bots over Swiftplex relays, one line at a time (/help lists the commands).",
        discussion: """
            Reads commands and messages from standard input (a terminal or a pipe) until /q or end of input. \
            With -p (the WebSocket API) or --headless it keeps serving after the end of input, until SIGTERM or SIGINT. \
            With -e it runs one command, prints its answer and exits. \
            SimpleX CLI's flags that are not listed here are refused with exit status 64 (docs/operations.md, "SimpleX CLI compatibility").
            """,
        version: SwiftplexVersion.current
    )

    @Option(name: [.customShort("d"), .customLong("database")],
            help: "Database file prefix: the data is kept in <prefix>_chat.db and <prefix>_agent.db (as SimpleX's -d). A postgresql:// URL here means --postgres. Default: ~/.swiftplex/simplex_v1.")
    var database: String?

    @Option(name: .customLong("data-dir"), help: "Directory for the profile and its databases (created 0700; files chat_chat.db, chat_agent.db). Instead of -d.")
    var dataDirectory: String?

    @Option(help: "Keep the chat and agent data in PostgreSQL instead of SQLite files: a connection string (postgresql://user@host:5432/db?schema=name; schemas <name>_chat_schema and <name>_agent_schema). Also read from SWIFTPLEX_DATABASE when -d names no file prefix.")
    var postgres: String?

    @Option(name: [.customShort("s"), .customLong("server")],
            help: "Relay address smp://<fingerprint>@host[:port]; repeat, or give several separated by spaces (as SimpleX's -s). Stored for the profile.")
    var servers: [String] = []

    @Option(help: "Display name for a new profile (asked on the terminal when missing).")
    var name: String?

    @Option(name: .customLong("create-bot-display-name"), help: "Create the profile as a bot with this display name on the first start (peer type bot; no prompt). Ignored when the profile exists.")
    var createBotDisplayName: String?

    @Flag(name: .customLong("create-bot-allow-files"), help: "Accepted for SimpleX compatibility (needs --create-bot-display-name); it has no effect: file transfer is not implemented, the bot's profile does not offer files.")
    var createBotAllowFiles = false

    @Option(name: [.customShort("l"), .customLong("log-level")],
            help: "Engine log level on standard error: trace, debug, info, notice, warning, error or critical; SimpleX's warn and important mean warning and notice.")
    var logLevel: String = "error"

    @Option(name: [.customShort("p"), .customLong("chat-server-port")], help: "Also serve SimpleX's WebSocket API on this port (as `simplex-chat -p PORT`); 0 picks a free port. Keeps serving after the end of input.")
    var port: Int?

    @Flag(help: "No terminal UI: standard input is not read and events are not printed; the engine (and the WebSocket API with -p) serves until SIGTERM or SIGINT.")
    var headless = false

    @Flag(help: "Run as a chat relay (as SimpleX's --relay with --headless): a new profile is a chat relay user, and its relay address is created and printed on start.")
    var relay = false

    @Option(name: [.customShort("e"), .customLong("execute")], help: "Run this one command (as typed at the terminal), print its answer and exit.")
    var execute: String?

    @Option(name: [.customShort("t"), .customLong("time")], help: "With -e: seconds to wait after the command before exiting, so that what it sent is delivered (default 3, as SimpleX's).")
    var time: Int?

    @Flag(name: [.customShort("y"), .customLong("yes-migrate")], help: "Accepted for SimpleX compatibility: database migrations always run.")
    var yesMigrate = false

    @Option(name: .customLong("device-name"), help: "Accepted for SimpleX compatibility; no effect (remote control of other devices is not implemented).")
    var deviceName: String?

    @Flag(name: .customLong("disable-vacuum"), help: "Accepted for SimpleX compatibility; no effect (the databases are not vacuumed after migrations).")
    var disableVacuum = false

    @Option(name: .customLong("ws-host"), help: "Address the WebSocket API listens on (default 127.0.0.1; beyond loopback it needs --ws-token).")
    var wsHost: String = "127.0.0.1"

    @Option(name: .customLong("ws-token"), help: "Bearer token WebSocket API clients must present (Authorization: Bearer, or ?token=). Also read from SWIFTPLEX_WS_TOKEN.")
    var wsToken: String?

    @Option(name: .customLong("ws-allow-origin"), help: "A browser origin (scheme://host[:port]) allowed to use the WebSocket API; repeat for several. Browsers' requests are refused otherwise.")
    var wsAllowOrigin: [String] = []

    @Option(name: .customLong("ws-allow-host"), help: "A host name the WebSocket API answers to besides loopback names and --ws-host; repeat for several.")
    var wsAllowHost: [String] = []

    var webSocketToken: String? { wsToken ?? ProcessInfo.processInfo.environment["SWIFTPLEX_WS_TOKEN"].flatMap { $0.isEmpty ? nil : $0 } }

    /// The relay addresses given with -s/--server, each value split at spaces.
    var serverAddresses: [String] { servers.flatMap { $0.split(separator: " ").map(String.init) } }

    /// SimpleX's log levels beside swift-log's.
    var engineLogLevel: Logger.Level? {
        switch logLevel {
        case "warn": .warning
        case "important": .notice
        default: Logger.Level(rawValue: logLevel)
        }
    }

    static func main() async {
        // The engine opens PostgreSQL (`--postgres`) through the backend this program passes in.
        SQLBackends.use(postgres: PostgresStore.backend)
        var arguments = Array(CommandLine.arguments.dropFirst())
        if let refusal = SimpleXFlags.refusal(in: arguments) {
            FileHandle.standardError.write(Data("swiftplex-chat: \(refusal)\n".utf8))
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        // SimpleX's -v is --version.
        arguments = arguments.map { $0 == "-v" ? "--version" : $0 }
        await main(arguments)
    }

    func validate() throws {
        if let port, !(0...65535).contains(port) { throw ValidationError("-p must be a port in 0...65535") }
        if port != nil, webSocketToken == nil, !ListenAddress(host: wsHost, port: 0).isLoopback {
            throw ValidationError("--ws-host \(wsHost) is beyond loopback: the WebSocket API then needs a token (--ws-token or SWIFTPLEX_WS_TOKEN)")
        }
        for o in wsAllowOrigin where !BrowserGuard.isValidOrigin(o) {
            throw ValidationError("--ws-allow-origin \(o) is not an origin (scheme://host[:port], like https://app.example.com)")
        }
        for s in serverAddresses {
            do { _ = try RelayAddress(parsing: s) } catch {
                throw ValidationError("invalid --server '\(s)': \(error) (expected smp://<fingerprint>@host[:port])")
            }
        }
        guard engineLogLevel != nil else {
            throw ValidationError("invalid --log-level '\(logLevel)' (trace, debug, info, notice, warning, error or critical; or SimpleX's warn, important)")
        }
        if let name, name.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--name must not be empty") }
        if let bot = createBotDisplayName, bot.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--create-bot-display-name must not be empty")
        }
        if name != nil, createBotDisplayName != nil { throw ValidationError("give --name or --create-bot-display-name, not both") }
        if createBotAllowFiles, createBotDisplayName == nil { throw ValidationError("--create-bot-allow-files needs --create-bot-display-name") }
        if execute != nil, port != nil || headless { throw ValidationError("-e runs one command and exits; it does not go with -p or --headless") }
        if let execute, execute.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("-e needs a command") }
        if let time {
            guard execute != nil else { throw ValidationError("-t is the time to wait after -e's command; give -e too") }
            guard time >= 0 else { throw ValidationError("-t must be 0 or more seconds") }
        }
        _ = try storage()
    }

    /// Where the engine keeps its data, from -d, --data-dir, --postgres and SWIFTPLEX_DATABASE.
    func storage() throws -> ChatStorage {
        let environment = ProcessInfo.processInfo.environment["SWIFTPLEX_DATABASE"].flatMap { $0.isEmpty ? nil : $0 }
        return try ChatStorage.choose(database: database, dataDirectory: dataDirectory, postgres: postgres, environment: environment,
                                      home: Self.homeDirectory)
    }

    /// The home directory: `HOME`, else the user's entry in the password database (as SimpleX's
    /// default directory is found).
    static var homeDirectory: URL {
        if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty { return URL(fileURLWithPath: home) }
        return FileManager.default.homeDirectoryForCurrentUser
    }

    /// What the process does once the engine runs.
    enum Mode {
        case interactive, headless, execute(String)

        var isInteractive: Bool { if case .interactive = self { true } else { false } }
        var isExecute: Bool { if case .execute = self { true } else { false } }
    }

    var mode: Mode {
        if let execute { return .execute(execute) }
        return headless ? .headless : .interactive
    }

    func run() async throws {
        let storage = try storage()
        try storage.prepareDirectory()
        var logger = Logger(label: "swiftplex-chat") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = engineLogLevel ?? .error
        let environmentRelays = (ProcessInfo.processInfo.environment["SWIFTPLEX_SERVERS"] ?? "")
            .split(separator: ",").compactMap { try? RelayAddress(parsing: String($0).trimmingCharacters(in: .whitespaces)) }

        let mode = self.mode
        let interactive = mode.isInteractive
        let terminal = Terminal()
        // Standard input is read at the terminal only; signals are taken in every mode.
        let input = LineInput.standardInput(readingLines: interactive)
        // One client per database: two engines on one database would reuse chain keys. (A
        // PostgreSQL store holds its own advisory lock as well.)
        var databaseLock: DatabaseLock?
        if let lockPrefix = storage.lockPrefix {
            do {
                databaseLock = try await DatabaseLock.acquire(prefix: lockPrefix)
            } catch let locked as DatabaseLocked {
                throw ClientFailure("\(storage.description) is in use by another swiftplex-chat\(locked.holder.map { " (pid \($0))" } ?? "")")
            }
        }
        let controller: ChatController
        do {
            controller = try await ChatController.open(database: storage.database, defaultRelays: environmentRelays, logger: logger)
        } catch {
            throw ClientFailure("cannot open the chat databases in \(storage.database): \(error)")
        }
        let api = ChatAPI(controller: controller)
        let client = ChatClient(api: api, terminal: terminal, qrColors: terminal.isInteractive)
        // The terminal and the WebSocket API's clients each see every event.
        let hub = EventHub(source: api.events)
        let terminalEvents = interactive ? hub.subscribe().events : nil
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
        let newProfile = NewProfile(name: createBotDisplayName ?? name, bot: createBotDisplayName != nil, relay: relay)
        let servers = serverAddresses
        let wait = time ?? 3
        let status = await withTaskGroup(of: Void.self, returning: Int32.self) { group in
            var inputs = input.events.makeAsyncIterator()
            group.addTask { try? await controller.run() }
            group.addTask { await hub.run() }
            if let terminalEvents { group.addTask { await client.printEvents(terminalEvents) } }
            defer { group.cancelAll() }
            do {
                var profile = newProfile
                if profile.name == nil, try await client.needsProfile() {
                    guard interactive else {
                        terminal.error(ClientFailure("no profile yet: a new one needs a name (--create-bot-display-name NAME or --name NAME)"))
                        return 1
                    }
                    terminal.prompt("display name: ")
                    guard case let .line(typed) = await inputs.next() else {
                        terminal.error(ClientFailure("no display name given; a new profile needs one (or pass --name)"))
                        return 1
                    }
                    profile.name = typed
                }
                try await client.setUp(profile, servers: servers, quiet: mode.isExecute)
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
            if case let .execute(command) = mode {
                _ = await client.handle(command)
                // Time for what the command sent to go out, as SimpleX's -t; a signal ends it early.
                input.timeUp(after: .seconds(wait))
                while let event = await inputs.next() {
                    if case .line = event { continue }
                    break
                }
                return 0
            }
            // With the WebSocket API or headless, the end of input does not stop the engine.
            let serving = server != nil || !interactive
            while let event = await inputs.next() {
                switch event {
                case let .line(line):
                    if await client.handle(line) == .quit { return 0 }
                case .end:
                    if !serving { return 0 }
                    FileHandle.standardError.write(Data("standard input ended; serving until SIGTERM or SIGINT\n".utf8))
                case .signal:
                    return 0
                case .timeUp:
                    continue
                }
            }
            return 0
        }
        _ = await client.api.execute("/_stop")
        await controller.close()
        databaseLock?.release()
        if status != 0 { throw ExitCode(status) }
    }
}

/// A failure the client reports in plain words and exits on.
struct ClientFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
