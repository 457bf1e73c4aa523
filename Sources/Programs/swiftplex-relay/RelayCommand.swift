import ArgumentParser
import Foundation
import Logging
import Metrics
import NIOCore
import NIOPosix
import Prometheus
import RelayPostgres
import RelayProtocol
import RelayServer
import ServiceLifecycle
import SwiftplexSQL
import SwiftplexSQLPostgres

@main
struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swiftplex-relay",
        abstract: "Run a Swiftplex relay: durable, private message queues over TLS.",
        discussion: """
            On first start the relay creates its identity in the data directory and prints its \
            address, smp://<fingerprint>@host:port. Give that address to clients: they refuse \
            any relay whose certificate does not match the fingerprint. Queues and messages are \
            kept in relay.db in the data directory, or where --store says (an SQLite file or \
            postgresql://user@host:port/database?schema=name, docs/postgres.md); \
            `swiftplex-relay store copy` moves them between stores.
            """,
        subcommands: [StoreCommand.self]
    )

    @Option(name: .customLong("data-dir"), help: "Directory for the identity and the queue database (created 0700). Required to run the relay.")
    var dataDirectory: String?

    @Option(help: "Where queues and messages are kept: an SQLite file (default: relay.db in --data-dir) or postgresql://user[:password]@host[:port]/database[?schema=name&sslmode=disable|prefer|require] (the password may come from PGPASSWORD).")
    var store: String?

    @Option(name: .customLong("queue-cache"), help: "On PostgreSQL: queues kept in memory besides those in use (least recently used dropped first).")
    var queueCache: Int = 100_000

    @Option(help: "Address to listen on, HOST:PORT.")
    var listen: String = "127.0.0.1:\(RelayAddress.defaultPort)"

    @Option(name: .customLong("public-host"), help: "Host name clients use to reach this relay (default: the listen host).")
    var publicHost: String?

    @Option(help: "Maximum undelivered messages per queue.")
    var quota: Int = 128

    @Option(help: "How long undelivered messages are kept: a number with s, m, h or d (e.g. 21d).")
    var ttl: String = "21d"

    @Option(name: .customLong("max-connections"), help: "Connections open at once; more are closed as they arrive.")
    var maxConnections: Int = 4096

    @Option(name: .customLong("max-queues"), help: "Queues in total; NEW beyond gets QUOTA.")
    var maxQueues: Int = 1_000_000

    @Option(name: .customLong("max-new-per-connection"), help: "NEWs one connection may send per --new-window; more get QUOTA.")
    var maxNewPerConnection: Int = 1000

    @Option(name: .customLong("new-window"), help: "The window of --max-new-per-connection (e.g. 10m).")
    var newWindow: String = "10m"

    @Option(name: .customLong("max-stored-messages"), help: "Undelivered messages stored in total; SEND beyond gets QUOTA.")
    var maxStoredMessages: Int = 10_000_000

    @Option(name: .customLong("max-stored-mb"), help: "MiB of undelivered message bodies stored in total; SEND beyond gets QUOTA.")
    var maxStoredMB: Int = 16_384

    @Option(name: .customLong("max-auth-failures"), help: "AUTH answers a connection may get per --auth-failure-window before it is closed.")
    var maxAuthFailures: Int = 100

    @Option(name: .customLong("auth-failure-window"), help: "The window of --max-auth-failures (e.g. 10s).")
    var authFailureWindow: String = "10s"

    @Option(name: .customLong("max-commands-per-second"), help: "Commands one connection may send per second (a burst of two seconds' worth); over it the relay reads from it more slowly.")
    var maxCommandsPerSecond: Int = 20_000

    @Option(name: .customLong("max-new-per-second"), help: "NEWs one connection may send per second (a burst of two seconds' worth); over it the relay reads from it more slowly.")
    var maxNewPerSecond: Int = 50

    @Option(name: .customLong("max-send-kb-per-second"), help: "KiB of SEND bodies one connection may send per second (a burst of two seconds' worth); over it the relay reads from it more slowly.")
    var maxSendKBPerSecond: Int = 32_768

    @Option(name: .customLong("max-auth-failures-per-second"), help: "AUTH answers one connection may get per second (a burst of two seconds' worth); over it the relay reads from it more slowly.")
    var maxAuthFailuresPerSecond: Int = 10

    @Option(name: .customLong("max-global-new-per-second"), help: "NEWs all connections together may send per second (a burst of two seconds' worth); a connection that takes from the overdrawn budget is read from more slowly.")
    var maxGlobalNewPerSecond: Int = 200

    @Option(name: .customLong("max-global-unsigned-send-kb-per-second"), help: "KiB of unsigned SEND bodies (to unsecured queues) all connections together may send per second (a burst of two seconds' worth), as above.")
    var maxGlobalUnsignedSendKBPerSecond: Int = 8_192

    @Option(name: .customLong("max-global-auth-failures-per-second"), help: "AUTH answers all connections together may get per second (a burst of two seconds' worth), as above.")
    var maxGlobalAuthFailuresPerSecond: Int = 500

    @Option(name: .customLong("max-accepts-per-second"), help: "Connections the relay accepts per second (a burst of two seconds' worth); beyond it new connections wait in the listen backlog.")
    var maxAcceptsPerSecond: Int = 200

    @Option(name: .customLong("max-unproven-work-ms-per-second"), help: "Milliseconds of event-loop time per second that connections not yet proven well-behaved may cost together after their TLS handshake and first commands (a burst of a fifth of it); an unproven connection that takes from the overdrawn budget is read from more slowly.")
    var maxUnprovenWorkMsPerSecond: Int = 25

    @Option(name: .customLong("max-handshake-ms-per-second"), help: "Milliseconds of event-loop time per second that new connections which do not prove themselves may cost together: TLS handshakes, hellos and first commands (a burst of five seconds' worth, at least 50 ms; a connection that proves itself gives back what it took); while it is overdrawn no connection is accepted.")
    var maxHandshakeMsPerSecond: Int = 10

    @Option(name: .customLong("max-handshake-ms-per-second-per-source"), help: "The share of --max-handshake-ms-per-second one source (an IPv4 address, an IPv6 /64) may use (a burst of ten times it, at least 50 ms); while a source is over it, its new connections wait before their TLS handshake, with their handshake timeout not yet running, and other sources' do not. 0 turns per-source accounting off (behind a proxy that hides clients' addresses).")
    var maxHandshakeMsPerSecondPerSource: Int = 5

    @Option(name: .customLong("max-waiting-per-source"), help: "Connections from one source that may wait for its share of --max-handshake-ms-per-second-per-source at once; one more is closed before its TLS handshake.")
    var maxWaitingPerSource: Int = 256

    @Option(name: .customLong("source-prefix-ipv4"), help: "The IPv4 prefix length that makes one source for --max-handshake-ms-per-second-per-source.")
    var sourcePrefixIPv4: Int = 32

    @Option(name: .customLong("source-prefix-ipv6"), help: "The IPv6 prefix length that makes one source for --max-handshake-ms-per-second-per-source.")
    var sourcePrefixIPv6: Int = 64

    @Option(name: .customLong("password-file"), help: "A file holding the password NEW must carry (private relay); the address becomes smp://fingerprint:password@host.")
    var passwordFile: String?

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(help: "Serve Prometheus metrics on HOST:PORT at /metrics.")
    var metrics: String?

    func validate() throws {
        guard quota > 0 else { throw ValidationError("--quota must be at least 1") }
        guard queueCache > 0 else { throw ValidationError("--queue-cache must be at least 1") }
        if let store, PostgresLocation.isPostgres(store) {
            do { _ = try PostgresLocation.relay(url: store) } catch let e as RelayServerError { throw ValidationError("--store: \(e.message)") }
        }
        _ = try Self.duration(ttl, option: "--ttl")
        _ = try Self.duration(newWindow, option: "--new-window")
        _ = try Self.duration(authFailureWindow, option: "--auth-failure-window")
        for (value, option) in [(maxConnections, "--max-connections"), (maxQueues, "--max-queues"),
                                (maxNewPerConnection, "--max-new-per-connection"), (maxStoredMessages, "--max-stored-messages"),
                                (maxAuthFailures, "--max-auth-failures"), (maxCommandsPerSecond, "--max-commands-per-second"),
                                (maxNewPerSecond, "--max-new-per-second"), (maxAuthFailuresPerSecond, "--max-auth-failures-per-second"),
                                (maxGlobalNewPerSecond, "--max-global-new-per-second"),
                                (maxGlobalAuthFailuresPerSecond, "--max-global-auth-failures-per-second"),
                                (maxAcceptsPerSecond, "--max-accepts-per-second")] where value < 1 {
            throw ValidationError("\(option) must be at least 1")
        }
        guard (1...(Int.max >> 10)).contains(maxSendKBPerSecond) else { throw ValidationError("--max-send-kb-per-second must be at least 1") }
        guard (1...(Int.max >> 10)).contains(maxGlobalUnsignedSendKBPerSecond) else {
            throw ValidationError("--max-global-unsigned-send-kb-per-second must be at least 1")
        }
        guard (1...1_000_000).contains(maxUnprovenWorkMsPerSecond) else {
            throw ValidationError("--max-unproven-work-ms-per-second must be 1…1000000")
        }
        guard (1...1_000_000).contains(maxHandshakeMsPerSecond) else {
            throw ValidationError("--max-handshake-ms-per-second must be 1…1000000")
        }
        guard (0...1_000_000).contains(maxHandshakeMsPerSecondPerSource) else {
            throw ValidationError("--max-handshake-ms-per-second-per-source must be 0…1000000")
        }
        guard (1...1_000_000).contains(maxWaitingPerSource) else {
            throw ValidationError("--max-waiting-per-source must be 1…1000000")
        }
        guard (0...32).contains(sourcePrefixIPv4) else { throw ValidationError("--source-prefix-ipv4 must be 0…32") }
        guard (0...128).contains(sourcePrefixIPv6) else { throw ValidationError("--source-prefix-ipv6 must be 0…128") }
        guard (1...(Int.max >> 20)).contains(maxStoredMB) else { throw ValidationError("--max-stored-mb must be at least 1") }
        if let passwordFile { _ = try Self.readPassword(passwordFile) }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical") }
        _ = try Self.parseHostPort(listen, option: "--listen")
        if let metrics { _ = try Self.parseHostPort(metrics, option: "--metrics") }
    }

    func run() async throws {
        guard let dataDirectory else { throw ValidationError("Missing expected argument '--data-dir <data-dir>'") }
        umask(0o077)
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "swiftplex.relay")
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        let (host, port) = try Self.parseHostPort(listen, option: "--listen")
        var config = RelayConfiguration(
            dataDirectory: URL(fileURLWithPath: dataDirectory),
            host: host, port: port, publicHost: publicHost,
            queueQuota: quota, messageTTL: try Self.duration(ttl, option: "--ttl"),
            maxConnections: maxConnections, maxQueues: maxQueues,
            maxNewQueuesPerConnection: maxNewPerConnection, newQueueWindow: try Self.duration(newWindow, option: "--new-window"),
            maxStoredMessages: maxStoredMessages, maxStoredBytes: maxStoredMB << 20,
            maxAuthFailures: maxAuthFailures, authFailureWindow: try Self.duration(authFailureWindow, option: "--auth-failure-window"),
            newQueuePassword: try passwordFile.map(Self.readPassword),
            commandRate: RateLimit(perSecond: maxCommandsPerSecond),
            newQueueRate: RateLimit(perSecond: maxNewPerSecond),
            sendByteRate: RateLimit(perSecond: maxSendKBPerSecond << 10),
            authFailureRate: RateLimit(perSecond: maxAuthFailuresPerSecond),
            globalNewQueueRate: RateLimit(perSecond: maxGlobalNewPerSecond),
            globalUnsignedSendByteRate: RateLimit(perSecond: maxGlobalUnsignedSendKBPerSecond << 10),
            globalAuthFailureRate: RateLimit(perSecond: maxGlobalAuthFailuresPerSecond),
            acceptRate: RateLimit(perSecond: maxAcceptsPerSecond)
        )
        config.unprovenWorkRate = RateLimit(perSecond: maxUnprovenWorkMsPerSecond * 1000, burst: max(maxUnprovenWorkMsPerSecond * 200, 1))
        config.handshakeWorkRate = RateLimit(perSecond: maxHandshakeMsPerSecond * 1000, burst: max(maxHandshakeMsPerSecond * 5000, 50_000))
        config.sourceHandshakeWorkRate = RelayConfiguration.sourceHandshakeWorkRate(msPerSecond: maxHandshakeMsPerSecondPerSource)
        config.maxWaitingPerSource = maxWaitingPerSource
        config.sourcePrefixLengthIPv4 = sourcePrefixIPv4
        config.sourcePrefixLengthIPv6 = sourcePrefixIPv6
        // A file descriptor per connection, plus the databases, listeners and a margin.
        do {
            let limits = try OpenFileLimit.raise(toAtLeast: maxConnections + 128)
            logger.debug("open-file limit", metadata: ["limits": "\(limits)"])
        } catch {
            logger.warning("the open-file limit is below --max-connections: connections beyond it will be refused by the system", metadata: ["error": "\(error)"])
        }
        config.queueCacheSize = queueCache
        let group = MultiThreadedEventLoopGroup.singleton
        let server: RelayServer
        do {
            var queueStore: (any RelayQueueStore)?
            if let store { queueStore = try await StoreCommand.open(store, logger: logger) }
            server = try await RelayServer.start(configuration: config, store: queueStore, group: group, logger: logger)
        } catch {
            logger.critical("relay failed to start", metadata: ["error": "\(error)"])
            throw ExitCode.failure
        }
        var services: [any Service] = [RelayService(server: server)]
        if let metrics {
            let (mh, mp) = try Self.parseHostPort(metrics, option: "--metrics")
            let endpoint = try await MetricsEndpoint.start(host: mh, port: mp, registry: registry, group: group)
            logger.info("metrics endpoint listening", metadata: ["address": "http://\(mh):\(endpoint.port)/metrics"])
            services.append(endpoint)
        }
        // The address goes to stdout (and only it), so scripts can read it — printed by a service
        // of the group, so only once the group traps SIGTERM and SIGINT: a script that reads the
        // address and stops the relay at once stops it cleanly.
        let serviceGroup = ServiceGroup(configuration: .init(
            services: services.map { .init(service: $0) }
                + [.init(service: AddressAnnouncement(address: server.address.description), successTerminationBehavior: .ignore)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        ))
        try await serviceGroup.run()
    }

    /// Prints the relay's address on stdout, then waits for the group's shutdown.
    struct AddressAnnouncement: Service {
        let address: String

        func run() async throws {
            print(address)
            fflush(nil)
            try? await gracefulShutdown()
        }
    }

    /// The longest duration any option takes: 100 years.
    static let maxDurationSeconds: Int64 = 36_500 * 86_400

    /// `30s`, `10m`, `12h`, `21d`: a positive whole number and a unit, at most 100 years. Nil for
    /// anything else — a number too large for its unit included (no overflow, no trap).
    static func parseDuration(_ text: String) -> Duration? {
        guard let unit = text.last, text.count <= 32, let n = Int64(text.dropLast()), n > 0 else { return nil }
        let scale: Int64
        switch unit {
        case "s": scale = 1
        case "m": scale = 60
        case "h": scale = 3600
        case "d": scale = 86_400
        default: return nil
        }
        let (seconds, overflow) = n.multipliedReportingOverflow(by: scale)
        guard !overflow, seconds <= maxDurationSeconds else { return nil }
        return .seconds(seconds)
    }

    static func duration(_ text: String, option: String) throws -> Duration {
        guard let d = parseDuration(text) else {
            throw ValidationError("\(option) must look like 30s, 10m, 12h or 21d (at most 36500d), got '\(text.prefix(40))'")
        }
        return d
    }

    /// The password file's first line; it must be a valid address password.
    static func readPassword(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("--password-file: cannot read \(path)")
        }
        let text = String(decoding: data, as: UTF8.self)
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        guard RelayAddress.isValidPassword(line) else {
            throw ValidationError("--password-file: the password must be 1–\(RelayLimits.maxPasswordLength) characters of A–Z a–z 0–9 and -._~!$&'()*+,;=")
        }
        return line
    }

    static func parseHostPort(_ text: String, option: String) throws -> (String, Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65_535).contains(port) else {
            throw ValidationError("\(option) must be HOST:PORT, got '\(text)'")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("\(option) needs a host, got '\(text)'") }
        return (host, port)
    }
}
