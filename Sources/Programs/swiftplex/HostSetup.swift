import BotHost
import ChatServer
import Foundation
import HostConfig
import Logging
import PluginHost
import RelayProtocol

/// Turns a loaded configuration into what the host runs: paths resolved, plugins located, each
/// plugin's `config:` validated against its own schema once the plugin is loaded.
struct HostSetup {
    let config: HostConfiguration

    /// The directory of this executable (where the build puts plugins and the runner).
    static var executableDirectory: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    }

    static var runnerExecutable: URL {
        if let p = ProcessInfo.processInfo.environment["SWIFTPLEX_PLUGIN_RUNNER"] { return URL(fileURLWithPath: p) }
        return executableDirectory.appendingPathComponent("swiftplex-plugin-runner")
    }

    var dataDirectory: URL {
        let d = config.dataDirectory
        return d.hasPrefix("/") ? URL(fileURLWithPath: d) : URL(fileURLWithPath: config.directory).appendingPathComponent(d)
    }

    /// Where plugins named by name are looked for, in order.
    var pluginSearchPath: [String] {
        var dirs = config.pluginDirectories.map { $0.hasPrefix("/") ? $0 : URL(fileURLWithPath: config.directory).appendingPathComponent($0).path }
        if let extra = ProcessInfo.processInfo.environment["SWIFTPLEX_PLUGIN_PATH"] {
            dirs += extra.split(separator: ":").map(String.init)
        }
        let exe = Self.executableDirectory
        dirs.append(exe.path)
        dirs.append(exe.deletingLastPathComponent().appendingPathComponent("lib/swiftplex/plugins").path)
        return dirs
    }

    /// The plugin's file, or a problem at the entry's position.
    func locate(_ plugin: HostConfiguration.Plugin) -> Result<String, LocateFailure> {
        switch plugin.path {
        case let .file(path):
            guard FileManager.default.fileExists(atPath: path) else {
                return .failure(LocateFailure(problem: ConfigProblem(file: config.file, at: plugin.mark, "plugin '\(plugin.name)': no such file \(path)")))
            }
            return .success(path)
        case let .name(name):
            let file = plugin.path.libraryFileName
            for dir in pluginSearchPath {
                let candidate = URL(fileURLWithPath: dir).appendingPathComponent(file).path
                if FileManager.default.fileExists(atPath: candidate) { return .success(candidate) }
            }
            return .failure(LocateFailure(problem: ConfigProblem(file: config.file, at: plugin.mark,
                                          "plugin '\(plugin.name)': \(file) (plugin \(name)) not found in \(pluginSearchPath.joined(separator: ", "))")))
        }
    }

    /// Validates an instance's `config:` against the plugin's schema; returns the config JSON.
    /// `keyPath` is the bot entry's (`bots[N].`, or empty for a `bot:` configuration).
    func configure(_ plugin: HostConfiguration.Plugin, keyPath: String = "", index: Int, info: PluginInfo) -> Result<String, ConfigErrors> {
        guard let schemaText = info.configSchema else { return .success(plugin.config.toJSON()) }
        let schema: PluginConfigSchema
        do {
            schema = try PluginConfigSchema(json: schemaText)
        } catch {
            return .failure(ConfigErrors([ConfigProblem(file: config.file, at: plugin.mark,
                                                        "plugin '\(plugin.name)' (\(info.name) \(info.version)) has an invalid config schema: \(error)")]))
        }
        return schema.validate(plugin.config, file: config.file, path: "\(keyPath)plugins[\(index)].config")
    }

    /// Host options plus the plugin entries that could not even be located.
    func options() throws -> (BotHostOptions, [ConfigProblem]) {
        let relays: BotHostOptions.Relays
        switch config.relays {
        case .embedded:
            relays = .embedded(host: config.embeddedRelay.host, port: config.embeddedRelay.port, publicHost: config.embeddedRelay.publicHost)
        case let .external(list):
            relays = .external(try list.map { text in
                do { return try RelayAddress(parsing: text) } catch {
                    throw ValidationErrorText("\(config.file): relays: '\(text)' is not a relay address: \(error)")
                }
            })
        }
        var problems: [ConfigProblem] = []
        let peerRelays = BotHostOptions.PeerRelays(allow: config.peerRelays.allow, refusePrivate: config.peerRelays.refusePrivate,
                                                   timeout: config.peerRelays.timeout)
        let bots = config.bots.map { entry in
            var specs: [PluginSpec] = []
            for (index, plugin) in entry.plugins.enumerated() where plugin.enabled {
                switch locate(plugin) {
                case let .failure(f): problems.append(f.problem)
                case let .success(path): specs.append(spec(plugin, keyPath: entry.keyPath, index: index, path: path))
                }
            }
            var profile = BotHostOptions.Profile(displayName: entry.profile.displayName, fullName: entry.profile.fullName,
                                                 peerType: entry.profile.peerType.rawValue, publishCommands: entry.profile.publishCommands)
            profile.chatRelay = entry.chatRelay != nil
            var bot = BotOptions(name: entry.name, dataPrefix: entry.data, profile: profile, createAddress: entry.address.enabled, plugins: specs)
            bot.engine = EngineChoice(entry.engine)
            bot.requestsPerMinute = entry.address.requestsPerMinute
            bot.maxPendingRequests = entry.address.maxPendingRequests
            bot.requestTTL = entry.address.requestTTL
            bot.maxGroupMembers = entry.groups.maxMembers
            bot.peerRelays = peerRelays
            return bot
        }
        guard let first = bots.first else { throw ValidationErrorText("\(config.file): no bot is configured") }
        var options = BotHostOptions(dataDirectory: dataDirectory, profile: first.profile, relays: relays,
                                     createAddress: first.createAddress, plugins: first.plugins, runnerExecutable: Self.runnerExecutable)
        options.botName = first.name
        options.dataPrefix = first.dataPrefix
        options.engine = first.engine
        options.requestsPerMinute = first.requestsPerMinute
        options.maxPendingRequests = first.maxPendingRequests
        options.requestTTL = first.requestTTL
        options.maxGroupMembers = first.maxGroupMembers
        options.peerRelays = peerRelays
        options.otherBots = Array(bots.dropFirst())
        options.database = config.database
        if let ws = config.webSocketAPI {
            options.webSocketAPI = WebSocketAPIOptions(listen: ListenAddress(host: ws.host, port: ws.port), token: ws.token, bot: ws.bot,
                                                       browsers: BrowserGuard(allowedHosts: ws.allowedHosts, allowedOrigins: ws.allowedOrigins))
        }
        if config.admin.enabled {
            var admin = AdminOptions(listen: ListenAddress(host: config.admin.host, port: config.admin.port))
            admin.maxBodyBytes = config.admin.maxBodyBytes
            admin.requestsPerSecond = Double(config.admin.requestsPerSecond)
            admin.burst = config.admin.burst
            admin.browsers = BrowserGuard(allowedHosts: config.admin.allowedHosts, allowedOrigins: config.admin.allowedOrigins)
            options.admin = admin
        }
        return (options, problems)
    }

    func spec(_ plugin: HostConfiguration.Plugin, keyPath: String = "", index: Int, path: String) -> PluginSpec {
        let setup = self
        return PluginSpec(
            name: plugin.name, path: path,
            isolation: plugin.isolation == .process ? .process : .inProcess,
            timeout: plugin.timeout, queueLimit: plugin.queueLimit,
            backoff: .init(initial: plugin.restartBackoff.initial, max: plugin.restartBackoff.max),
            configFingerprint: plugin.config.toJSON(),
            limits: Self.limits(plugin.isolationLimits),
            configure: { info in
                setup.configure(plugin, keyPath: keyPath, index: index, info: info).mapError { PluginError(.invalidConfig, $0.description) }
            })
    }
}

extension HostSetup {
    /// An entry's `isolation_limits:`, the host's defaults where it says nothing.
    static func limits(_ c: HostConfiguration.IsolationLimits) -> PluginSpec.IsolationLimits {
        var l = PluginSpec.IsolationLimits()
        if let v = c.maxFrameBytes { l.maxFrameBytes = v }
        if let v = c.maxOutputLineBytes { l.maxOutputLineBytes = v }
        if let v = c.maxConcurrentCalls { l.maxConcurrentCalls = v }
        if let v = c.maxPendingInputBytes { l.maxPendingInputBytes = v }
        return l
    }
}

/// A plugin entry whose file could not be found, at the entry's position.
struct LocateFailure: Error {
    let problem: ConfigProblem
}

struct ValidationErrorText: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

extension Logger.Level {
    init(_ level: HostConfiguration.LogLevel) {
        self = Logger.Level(rawValue: level.rawValue) ?? .info
    }
}

extension EngineChoice {
    /// The engine a bot's `engine:` entry names.
    init(_ engine: HostConfiguration.Engine) {
        self = switch engine {
        case .swiftplex: .swiftplex
        case let .libsimplex(library, key, confirm): .libsimplex(library: library, key: key, confirmMigrations: confirm)
        case let .websocket(url, token): .websocket(url: url, token: token)
        }
    }
}
