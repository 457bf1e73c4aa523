import ArgumentParser
import BotHost
import Foundation
import HostConfig
import Logging
import Metrics
import PluginHost
import Prometheus
import ServiceLifecycle
import SwiftplexStorage

/// `swiftplex run --config FILE`: starts the bot and serves until SIGTERM/SIGINT; SIGHUP reloads plugins.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "run", abstract: "Run the bot described by a configuration file.")

    @Option(name: .shortAndLong, help: "The YAML configuration file.") var config: String = "config/bot.yaml"
    @Option(help: "Override the configuration's log_level (trace, debug, info, notice, warning, error, critical).")
    var logLevel: String?

    func run() async throws {
        let configuration: HostConfiguration
        do {
            configuration = try HostConfiguration.load(path: config)
        } catch {
            FileHandle.standardError.write(Data("\(error.description)\n".utf8))
            throw ExitCode(78)  // EX_CONFIG
        }
        let level = logLevel.flatMap(Logger.Level.init(rawValue:)) ?? Logger.Level(configuration.logLevel)
        if let logLevel, Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        let format = configuration.logFormat
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var h = StreamLogHandler.standardError(label: label)
                h.logLevel = level
                return h
            case .logfmt, .json:
                var h = StructuredLogHandler(label: label, format: format == .json ? .json : .logfmt)
                h.logLevel = level
                return h
            }
        }
        let logger = Logger(label: "swiftplex")
        for warning in configuration.warnings { logger.warning("\(warning)") }

        let setup = HostSetup(config: configuration)
        let (setupOptions, problems) = try setup.options()
        var options = setupOptions
        // An admin API reload reads the file again, as SIGHUP does.
        options.admin?.pluginSource = { [config] bot in
            let fresh: HostConfiguration
            do { fresh = try HostConfiguration.load(path: config) } catch { throw ValidationErrorText("\(error)") }
            guard let specs = try HostSetup(config: fresh).options().0.bots.first(where: { $0.name == bot })?.plugins else {
                throw ValidationErrorText("\(config) no longer configures bot \(bot) (adding or removing bots needs a restart)")
            }
            return specs
        }
        for p in problems { logger.error("\(p)") }
        // One registry for the process: the host's own metrics and, through swift-metrics, the
        // embedded relay's, all served at the admin API's /metrics.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        options.metricsRegistry = registry
        let host: BotHost
        do {
            host = try await BotHost.start(options, logger: logger)
        } catch let locked as DatabaseLocked {
            logger.critical("the bot did not start: its data files in \(options.dataDirectory.path) are in use by another running bot: \(locked)")
            FileHandle.standardError.write(Data("swiftplex: data directory \(options.dataDirectory.path) is in use by another running bot\(locked.holder.map { " (pid \($0))" } ?? ""); stop it first or use another data_dir\n".utf8))
            throw ExitCode(75)  // EX_TEMPFAIL
        } catch {
            logger.critical("the bot did not start: \(error)")
            throw ExitCode.failure
        }
        if let relay = host.relayAddress { print("relay: \(relay)") }
        // One bot: `bot address: …`, `plugin NAME: …`; several: `bot BOT address: …`, `plugin BOT/NAME: …`.
        let several = host.bots.count > 1
        for (bot, entry) in zip(host.bots, configuration.bots) {
            if let address = bot.address, let relay = entry.chatRelay {
                // Relay mode: the relay address channel owners register with `/relays name=… <address>`.
                print(several ? "bot \(bot.name) relay address: \(address)" : "relay address: \(address)")
                if relay.printQR { AddressPrinter.printQR(address) }
            } else if let address = bot.address {
                print(several ? "bot \(bot.name) address: \(address)" : "bot address: \(address)")
                if entry.address.printQR { AddressPrinter.printQR(address) }
            }
            for status in bot.plugins.statuses() {
                print("plugin \(several ? "\(bot.name)/" : "")\(status.name): \(status.info.name) \(status.info.version) (\(status.isolation.rawValue))")
            }
        }
        fflush(nil)

        let pidFile = options.dataDirectory.appendingPathComponent("swiftplex.pid")
        _ = FileManager.default.createFile(atPath: pidFile.path, contents: Data("\(getpid())\n".utf8), attributes: [.posixPermissions: 0o600])
        defer { try? FileManager.default.removeItem(at: pidFile) }

        let reloader = Reloader(file: config, host: host, logger: logger)
        signal(SIGHUP, SIG_IGN)
        let hangup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        hangup.setEventHandler { reloader.trigger() }
        hangup.resume()
        defer { hangup.cancel() }

        // The host is a service: SIGTERM or SIGINT shuts its own services down gracefully
        // (plugins, engine, relay) and its run() returns once the databases are closed.
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: host), .init(service: reloader)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger
        ))
        // Where the API servers listen, once they do (a line scripts and tests can wait for).
        let announcements = Task {
            await withTaskGroup(of: Void.self) { g in
                if options.admin != nil {
                    g.addTask { let a = await host.adminAddress(); print("admin API: http://\(a)"); fflush(nil) }
                }
                if options.webSocketAPI != nil {
                    g.addTask { let a = await host.webSocketAddress(); print("WebSocket API: ws://\(a)"); fflush(nil) }
                }
                // Once, when /readyz would first answer 200 (engine running, relays connected).
                g.addTask {
                    await host.waitUntilReady()
                    guard !Task.isCancelled else { return }
                    // Counts every bot's connections to its own relays (one bot: `ready: 1 relay(s) connected`).
                    let relays = host.readiness().json["relaysConnected"]?.intValue ?? 0
                    print(several ? "ready: \(host.bots.count) bots, \(relays) relay(s) connected" : "ready: \(relays) relay(s) connected"); fflush(nil)
                }
            }
        }
        defer { announcements.cancel() }
        logger.info("bot running; SIGHUP reloads plugins, SIGTERM or Ctrl-C stops")
        try await group.run()
        logger.info("bot stopped")
    }
}

/// Re-reads the configuration and applies its plugin list, one reload at a time (a service of
/// the run's group: SIGHUPs that come during a reload make one more reload afterwards).
final class Reloader: Service, Sendable {
    let file: String
    let host: BotHost
    let logger: Logger
    private let requests: AsyncStream<Void>
    private let requestSink: AsyncStream<Void>.Continuation

    init(file: String, host: BotHost, logger: Logger) {
        self.file = file
        self.host = host
        self.logger = logger
        (requests, requestSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func trigger() {
        requestSink.yield()
    }

    func run() async {
        await cancelWhenGracefulShutdown { [self] in
            for await _ in requests { await reload() }
        }
    }

    func reload() async {
        logger.notice("reloading \(file)")
        let configuration: HostConfiguration
        do {
            configuration = try HostConfiguration.load(path: file)
        } catch {
            logger.error("reload refused; the running plugins are unchanged:\n\(error.description)")
            return
        }
        let setup = HostSetup(config: configuration)
        let options: BotHostOptions
        let problems: [ConfigProblem]
        do { (options, problems) = try setup.options() } catch {
            logger.error("reload refused: \(error)")
            return
        }
        for p in problems { logger.error("\(p)") }
        for bot in host.bots {
            guard let specs = options.bots.first(where: { $0.name == bot.name })?.plugins else {
                logger.error("bot \(bot.name) is no longer configured; it keeps its plugins until a restart")
                continue
            }
            for (name, outcome) in await bot.reload(specs) {
                logger.notice("plugin \(name): \(outcome)", metadata: ["bot": "\(bot.name)"])
            }
        }
        logger.notice("reload done (bots added or removed, bot profiles, relays and data_dir changes need a restart)")
    }
}
