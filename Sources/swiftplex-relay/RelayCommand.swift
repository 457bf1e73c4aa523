import ArgumentParser
import Foundation
import Logging
import Metrics
import NIOCore
import NIOPosix
import Prometheus
import RelayProtocol
import RelayServer
import ServiceLifecycle

@main
struct RelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swiftplex-relay",
        abstract: "Run a Swiftplex relay: durable, private message queues over TLS.",
        discussion: """
            On first start the relay creates its identity in the data directory and prints its \
            address, smp://<fingerprint>@host:port. Give that address to clients: they refuse \
            any relay whose certificate does not match the fingerprint.
            """
    )

    @Option(name: .customLong("data-dir"), help: "Directory for the identity and the queue database (created 0700).")
    var dataDirectory: String

    @Option(help: "Address to listen on, HOST:PORT.")
    var listen: String = "127.0.0.1:\(RelayAddress.defaultPort)"

    @Option(name: .customLong("public-host"), help: "Host name clients use to reach this relay (default: the listen host).")
    var publicHost: String?

    @Option(help: "Maximum undelivered messages per queue.")
    var quota: Int = 128

    @Option(help: "How long undelivered messages are kept: a number with s, m, h or d (e.g. 21d).")
    var ttl: String = "21d"

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(help: "Serve Prometheus metrics on HOST:PORT at /metrics.")
    var metrics: String?

    func validate() throws {
        guard quota > 0 else { throw ValidationError("--quota must be at least 1") }
        guard Self.parseDuration(ttl) != nil else { throw ValidationError("--ttl must look like 30s, 10m, 12h or 21d") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical") }
        _ = try Self.parseHostPort(listen, option: "--listen")
        if let metrics { _ = try Self.parseHostPort(metrics, option: "--metrics") }
    }

    func run() async throws {
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
        let config = RelayConfiguration(
            dataDirectory: URL(fileURLWithPath: dataDirectory),
            host: host, port: port, publicHost: publicHost,
            queueQuota: quota, messageTTL: Self.parseDuration(ttl)!
        )
        let group = MultiThreadedEventLoopGroup.singleton
        let server: RelayServer
        do {
            server = try await RelayServer.start(configuration: config, group: group, logger: logger)
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
        // The address goes to stdout (and only it), so scripts can read it.
        print(server.address.description)
        fflush(nil)
        let serviceGroup = ServiceGroup(configuration: .init(
            services: services.map { .init(service: $0) },
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        ))
        try await serviceGroup.run()
    }

    static func parseDuration(_ text: String) -> Duration? {
        guard let unit = text.last, let n = Int64(text.dropLast()), n > 0 else { return nil }
        switch unit {
        case "s": return .seconds(n)
        case "m": return .seconds(n * 60)
        case "h": return .seconds(n * 3600)
        case "d": return .seconds(n * 86_400)
        default: return nil
        }
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
