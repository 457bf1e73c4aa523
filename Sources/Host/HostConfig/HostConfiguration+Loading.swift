import Foundation
import SwiftplexBase

extension HostConfiguration {
    /// Config files are small; anything bigger is refused before libyaml sees it.
    public static let maxFileSize = 1 << 20

    /// Reads, parses, interpolates and decodes a config file.
    ///
    /// - Parameters:
    ///   - path: the config file; messages name it as given.
    ///   - environment: variables for `${NAME}` substitution (the process's by default).
    /// - Throws: every problem found, each at its `FILE:LINE:COLUMN`.
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigErrors) -> HostConfiguration {
        let bytes = try readFile(path)
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().standardizedFileURL.path
        return try parse(bytes: bytes, file: path, directory: directory, environment: environment)
    }

    /// Parses config text that did not come from ``load(path:environment:)`` (standard input,
    /// tests). `directory` is what relative paths resolve against.
    public static func parse(text: String, file: String, directory: String, environment: [String: String]) throws(ConfigErrors) -> HostConfiguration {
        try parse(bytes: Array(text.utf8), file: file, directory: directory, environment: environment)
    }

    static func parse(bytes: [UInt8], file: String, directory: String, environment: [String: String]) throws(ConfigErrors) -> HostConfiguration {
        let raw = try YAMLReader.parse(bytes, file: file)
        let (root, interpolationProblems) = Interpolation.apply(to: raw, environment: environment, file: file)
        var decoder = NodeDecoder(file: file)
        let config = decoder.hostConfiguration(root, file: file, directory: directory)
        // A scalar whose substitution failed still holds `${…}`; its type errors would only
        // repeat the substitution problem at the same place.
        let failed = Set(interpolationProblems.map(\.mark))
        let problems = interpolationProblems + decoder.sink.problems.filter { !failed.contains($0.mark) }
        guard problems.isEmpty, let config else { throw ConfigErrors(problems) }
        return config
    }

    static func readFile(_ path: String) throws(ConfigErrors) -> [UInt8] {
        func fail(_ message: String) -> ConfigErrors {
            ConfigErrors([ConfigProblem(file: path, line: 0, column: 0, message: message)])
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw fail("no such file")
        }
        guard !isDirectory.boolValue else { throw fail("is a directory, not a config file") }
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        } catch {
            throw fail("cannot be read (\(String(cString: strerror(errno))))")
        }
        defer { try? handle.close() }
        let data: Data?
        do {
            data = try handle.read(upToCount: maxFileSize + 1)
        } catch {
            throw fail("cannot be read")
        }
        let bytes = [UInt8](data ?? Data())
        guard bytes.count <= maxFileSize else { throw fail("is larger than 1 MiB; is it really a config file?") }
        return bytes
    }

    /// Resolves a path from the config file against its directory.
    static func resolve(_ path: String, against directory: String) -> String {
        URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: directory, isDirectory: true)).standardizedFileURL.path
    }
}

extension NodeDecoder {
    static let topKeys = ["data_dir", "log_level", "bot", "relays", "embedded_relay", "address", "plugin_dirs", "plugins", "peer_relays", "ws_api", "admin", "log", "bots", "chat_relay", "database", "engine", "groups"]

    /// Decodes the whole file; nil when something required is missing or wrong (the problems
    /// are in `sink` either way).
    mutating func hostConfiguration(_ root: ConfigNode, file: String, directory: String) -> HostConfiguration? {
        guard root.entries != nil else {
            problem(root, "", root.isNull
                ? "the file holds no settings; it needs at least bot.display_name"
                : "expected a mapping of settings at the top level, got \(root.shown)")
            return nil
        }
        guard let f = fields(root, "", known: Self.topKeys) else { return nil }
        var warnings: [ConfigProblem] = []

        var dataDirectory = HostConfiguration.resolve(HostConfiguration.defaultDataDirectory, against: directory)
        if let n = f("data_dir"), let s = nonEmptyString(n, "data_dir") {
            dataDirectory = HostConfiguration.resolve(s, against: directory)
        }
        var database: String?
        if let n = f("database"), let s = nonEmptyString(n, "database") {
            if s.hasPrefix("postgresql://") || s.hasPrefix("postgres://") {
                database = s
            } else {
                problem(n, "database", "a PostgreSQL connection string (postgresql://user@host:5432/db?schema=name), got \(n.shown); leave it out to keep the databases as SQLite files in data_dir")
            }
        }
        let logLevel = f("log_level").map { choice($0, "log_level", as: HostConfiguration.LogLevel.self) ?? .info } ?? .info
        var logFormat = HostConfiguration.LogFormat.text
        if let n = f("log"), let l = fields(n, "log", known: ["format"]), let v = l("format") {
            logFormat = choice(v, "log.format", as: HostConfiguration.LogFormat.self) ?? .text
        }

        // `bots:` (several bots), or the one bot of `bot:`, `address:` and `plugins:`.
        let botsNode = f("bots")
        var bot: HostConfiguration.Bot?
        if botsNode != nil {
            for key in ["bot", "address", "plugins", "chat_relay", "engine", "groups"] {
                if f(key) != nil, let keyNode = root.entries?.first(where: { $0.key == key }) {
                    sink.add(keyNode.keyMark, "\(key): with bots: given, each bot has its own \(key == "bot" ? "profile (display_name, …)" : key); move it into the entries of bots")
                }
            }
        } else if let n = f("bot") {
            bot = self.bot(n)
        } else {
            problem(root, "", "missing required key \"bot\" (the bot's profile; it needs at least display_name), or bots (a list of bots)")
        }

        var relays = HostConfiguration.Relays.embedded
        if let n = f("relays") { relays = self.relays(n) ?? .embedded }

        var embedded = HostConfiguration.EmbeddedRelay(host: HostConfiguration.defaultListenHost, port: HostConfiguration.defaultListenPort, publicHost: nil)
        if let n = f("embedded_relay") {
            if case .external = relays {
                warnings.append(ConfigProblem(file: file, at: n.mark, "embedded_relay has no effect because relays lists external relays"))
            }
            if let e = embeddedRelay(n) { embedded = e }
        }

        var address = HostConfiguration.Address(enabled: true, printQR: true)
        if botsNode == nil, let n = f("address") { address = self.address(n, "address") }
        var groups = HostConfiguration.Groups()
        if botsNode == nil, let n = f("groups") { groups = self.groups(n, "groups") }

        var peerRelays = HostConfiguration.PeerRelays()
        if let n = f("peer_relays"), let p = fields(n, "peer_relays", known: ["allow", "refuse_private", "timeout"]) {
            if let v = p("allow"), let items = list(v, "peer_relays.allow") {
                var hosts: [String] = []
                for (i, item) in items.enumerated() {
                    let path = "peer_relays.allow[\(i)]"
                    guard let s = nonEmptyString(item, path) else { continue }
                    if HostPortSyntax.isHost(s) || HostPortSyntax.parse(s, allowPortZero: false) != nil {
                        hosts.append(s)
                    } else {
                        expected("a host name or IP address, optionally with :port", item, path)
                    }
                }
                peerRelays.allow = hosts
            }
            if let v = p("refuse_private") { peerRelays.refusePrivate = bool(v, "peer_relays.refuse_private") ?? false }
            if let v = p("timeout"), let d = duration(v, "peer_relays.timeout") { peerRelays.timeout = d }
        }

        var pluginDirectories: [String] = []
        if let n = f("plugin_dirs"), let items = list(n, "plugin_dirs") {
            for (i, item) in items.enumerated() {
                if let s = nonEmptyString(item, "plugin_dirs[\(i)]") {
                    pluginDirectories.append(HostConfiguration.resolve(s, against: directory))
                }
            }
        }

        var plugins: [HostConfiguration.Plugin] = []
        if botsNode == nil, let n = f("plugins") { plugins = pluginList(n, "plugins", directory: directory) }
        var chatRelay: HostConfiguration.ChatRelay?
        if botsNode == nil, let n = f("chat_relay") { chatRelay = self.chatRelay(n, "chat_relay") }

        var engine = HostConfiguration.Engine.swiftplex
        if botsNode == nil, let n = f("engine") {
            engine = self.engine(n, "engine", directory: directory) ?? .swiftplex
            foreignEngineProblems(engine, at: n, path: "engine", chatRelay: f("chat_relay"), address: f("address"), groups: f("groups"))
        }

        var bots: [HostConfiguration.BotEntry] = []
        if let botsNode {
            bots = botList(botsNode, directory: directory) ?? []
        } else if let bot {
            bots = [HostConfiguration.BotEntry(name: HostConfiguration.defaultBotName, data: HostConfiguration.defaultBotName, profile: bot,
                                               address: address, groups: groups, plugins: plugins, chatRelay: chatRelay, engine: engine, keyPath: "", mark: root.mark)]
        }

        if let n = f("peer_relays"), let foreign = bots.first(where: { $0.engine != .swiftplex }) {
            problem(n, "peer_relays", "needs Swiftplex's engine (which relays peers' links may make a bot dial is its policy), but bot \(JSONWriter.quote(foreign.name)) runs on another engine; SimpleX's engine has network settings of its own")
        }

        var webSocketAPI: HostConfiguration.WebSocketAPI?
        if let n = f("ws_api") { webSocketAPI = self.webSocketAPI(n, botNames: bots.map(\.name)) }
        var admin: HostConfiguration.Admin?
        if let n = f("admin") { admin = self.admin(n) }

        guard let first = bots.first else { return nil }
        var config = HostConfiguration(
            file: file, directory: directory, dataDirectory: dataDirectory, logLevel: logLevel, bot: first.profile,
            relays: relays, embeddedRelay: embedded, address: first.address, peerRelays: peerRelays, pluginDirectories: pluginDirectories,
            plugins: first.plugins, warnings: warnings
        )
        config.bots = bots
        config.webSocketAPI = webSocketAPI
        if let admin { config.admin = admin }
        config.logFormat = logFormat
        config.database = database
        return config
    }

    mutating func nonEmptyString(_ node: ConfigNode, _ path: String) -> String? {
        guard let s = string(node, path) else { return nil }
        guard !s.isEmpty else {
            problem(node, path, "must not be empty")
            return nil
        }
        return s
    }

    static let profileKeys = ["display_name", "full_name", "peer_type", "publish_commands"]

    mutating func bot(_ node: ConfigNode) -> HostConfiguration.Bot? {
        guard let f = fields(node, "bot", known: Self.profileKeys) else { return nil }
        return profile(f)
    }

    /// The profile keys of `bot:` or of an entry of `bots:`.
    mutating func profile(_ f: Fields) -> HostConfiguration.Bot? {
        var displayName: String?
        if let n = f("display_name") {
            if let s = string(n, f.path("display_name")) {
                let trimmed = s.trimmingCharacters(in: .whitespacesAndNewlines)
                if trimmed.isEmpty {
                    problem(n, f.path("display_name"), "must not be empty")
                } else if trimmed.hasPrefix("@") || trimmed.hasPrefix("#") {
                    problem(n, f.path("display_name"), "must not start with @ or #")
                } else if trimmed.contains(where: \.isNewline) {
                    problem(n, f.path("display_name"), "must be a single line")
                } else {
                    displayName = trimmed
                }
            }
        } else {
            problem(f.node, f.path, "missing required key \"display_name\" (the name people see)")
        }
        var fullName = ""
        if let n = f("full_name") { fullName = string(n, f.path("full_name"))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "" }
        let peerType = f("peer_type").map { choice($0, f.path("peer_type"), as: HostConfiguration.PeerType.self) } ?? .bot
        let publishCommands = f("publish_commands").map { bool($0, f.path("publish_commands")) } ?? true
        guard let displayName, let peerType, let publishCommands else { return nil }
        return HostConfiguration.Bot(displayName: displayName, fullName: fullName, peerType: peerType, publishCommands: publishCommands)
    }

    /// `chat_relay:` of the bot or of an entry of `bots:`: `true`/`false`, or a mapping
    /// (`enabled`, default true; `print_qr`, default false). Nil when relay mode is off (also for
    /// a key without a value, which takes the default like every key).
    /// `engine:` — `swiftplex`, or a mapping with `type: libsimplex` (`library`, `key`,
    /// `confirm_migrations`) or `type: websocket` (`url`, `token`).
    mutating func engine(_ node: ConfigNode, _ path: String, directory: String) -> HostConfiguration.Engine? {
        if let word = node.scalar {
            guard word == "swiftplex" else {
                expected("swiftplex, or a mapping with type: libsimplex (library: …) or type: websocket (url: …)", node, path)
                return nil
            }
            return .swiftplex
        }
        guard let f = fields(node, path, known: ["type", "library", "key", "confirm_migrations", "url", "token"]) else { return nil }
        guard let typeNode = f("type") else {
            problem(node, path, "missing required key \"type\" (swiftplex, libsimplex or websocket)")
            return nil
        }
        guard let type = string(typeNode, f.path("type")) else { return nil }
        func refuse(_ keys: [String]) -> Bool {
            var bad = false
            for key in keys {
                if let n = f(key) {
                    problem(n, f.path(key), "is not a setting of engine type \(type)")
                    bad = true
                }
            }
            return bad
        }
        switch type {
        case "swiftplex":
            return refuse(["library", "key", "confirm_migrations", "url", "token"]) ? nil : .swiftplex
        case "libsimplex":
            guard !refuse(["url", "token"]) else { return nil }
            guard let n = f("library") else {
                problem(node, path, "missing required key \"library\" (the path of libsimplex.so)")
                return nil
            }
            guard let library = nonEmptyString(n, f.path("library")) else { return nil }
            let key = f("key").flatMap { string($0, f.path("key")) } ?? ""
            var confirm = "yesUp"
            if let n = f("confirm_migrations"), let s = string(n, f.path("confirm_migrations")) {
                guard ["yesUp", "yesUpDown", "error"].contains(s) else {
                    problem(n, f.path("confirm_migrations"), "must be yesUp (apply new migrations), yesUpDown (also roll back) or error (refuse to migrate), got \(n.shown)")
                    return nil
                }
                confirm = s
            }
            return .libsimplex(library: HostConfiguration.resolve(library, against: directory), key: key, confirmMigrations: confirm)
        case "websocket":
            guard !refuse(["library", "key", "confirm_migrations"]) else { return nil }
            guard let n = f("url") else {
                problem(node, path, "missing required key \"url\" (where simplex-chat -p PORT serves, like ws://127.0.0.1:5225)")
                return nil
            }
            guard let url = nonEmptyString(n, f.path("url")) else { return nil }
            guard url.hasPrefix("ws://") || url.hasPrefix("wss://") else {
                problem(n, f.path("url"), "must be a ws:// or wss:// URL (like ws://127.0.0.1:5225), got \(n.shown)")
                return nil
            }
            let token = f("token").flatMap { string($0, f.path("token")) }
            return .websocket(url: url, token: token)
        default:
            problem(typeNode, f.path("type"), "must be swiftplex, libsimplex or websocket, got \(typeNode.shown)")
            return nil
        }
    }

    /// What a bot asks of its engine that only Swiftplex's has, on a foreign engine: a problem
    /// each, at the `engine:` that makes it so.
    mutating func foreignEngineProblems(_ engine: HostConfiguration.Engine, at node: ConfigNode, path: String,
                                        chatRelay: ConfigNode?, address: ConfigNode?, groups: ConfigNode?) {
        guard engine != .swiftplex else { return }
        if let chatRelay, chatRelay.boolValue != false {
            problem(node, path, "chat_relay (relay mode) needs Swiftplex's engine: its channel policy and statistics are Swiftplex's extensions; on SimpleX run `simplex-chat --relay --headless` as the relay instead")
        }
        for key in ["requests_per_minute", "max_pending_requests", "request_ttl"] where address?.entries?.contains(where: { $0.key == key }) == true {
            problem(node, path, "address.\(key) needs Swiftplex's engine (its contact-request limits); SimpleX's engine keeps none, so this would be ignored")
        }
        if groups?.entries?.contains(where: { $0.key == "max_members" }) == true {
            problem(node, path, "groups.max_members needs Swiftplex's engine (its group member limit); SimpleX's engine keeps none, so this would be ignored")
        }
    }

    mutating func chatRelay(_ node: ConfigNode, _ path: String) -> HostConfiguration.ChatRelay? {
        if let b = node.boolValue { return b ? HostConfiguration.ChatRelay() : nil }
        guard node.entries != nil || node.isNull else {
            expected("true, false or a mapping (enabled, print_qr)", node, path)
            return nil
        }
        guard let f = fields(node, path, known: ["enabled", "print_qr"]) else { return nil }
        var relay = HostConfiguration.ChatRelay()
        if let v = f("print_qr") { relay.printQR = bool(v, f.path("print_qr")) ?? false }
        if let v = f("enabled"), bool(v, f.path("enabled")) == false { return nil }
        return relay
    }

    /// `address:` of the bot or of an entry of `bots:` (defaults where it says nothing).
    mutating func address(_ node: ConfigNode, _ path: String) -> HostConfiguration.Address {
        var address = HostConfiguration.Address(enabled: true, printQR: true)
        guard let a = fields(node, path, known: ["enabled", "print_qr", "requests_per_minute", "max_pending_requests", "request_ttl"]) else { return address }
        if let v = a("enabled") { address.enabled = bool(v, a.path("enabled")) ?? true }
        if let v = a("print_qr") { address.printQR = bool(v, a.path("print_qr")) ?? true }
        if let v = a("requests_per_minute"), let i = integer(v, a.path("requests_per_minute"), in: 1...1_000_000) { address.requestsPerMinute = i }
        if let v = a("max_pending_requests"), let i = integer(v, a.path("max_pending_requests"), in: 1...10_000_000) { address.maxPendingRequests = i }
        if let v = a("request_ttl"), let d = duration(v, a.path("request_ttl")) { address.requestTTL = d }
        return address
    }

    /// `groups:` of the bot or of an entry of `bots:`.
    mutating func groups(_ node: ConfigNode, _ path: String) -> HostConfiguration.Groups {
        var groups = HostConfiguration.Groups()
        guard let g = fields(node, path, known: ["max_members"]) else { return groups }
        if let v = g("max_members"), let i = integer(v, g.path("max_members"), in: 2...100_000) { groups.maxMembers = i }
        return groups
    }

    /// A `plugins:` list (of the bot or of an entry of `bots:`); instance names unique within it.
    mutating func pluginList(_ node: ConfigNode, _ path: String, directory: String) -> [HostConfiguration.Plugin] {
        var plugins: [HostConfiguration.Plugin] = []
        guard let items = list(node, path) else { return [] }
        var firstByName: [String: ConfigMark] = [:]
        for (i, item) in items.enumerated() {
            // Names are checked for duplicates even when the rest of an entry is wrong, and
            // the rest of a duplicate entry is still checked (every problem in one pass).
            var duplicate = false
            if let nameNode = item["name"], let name = nameNode.scalar, PluginName.isValid(name) {
                if let first = firstByName[name] {
                    problem(nameNode, "\(path)[\(i)].name", "duplicate plugin name \(JSONWriter.quote(name)) (first used at \(first)); give each instance its own name")
                    duplicate = true
                } else {
                    firstByName[name] = nameNode.mark
                }
            }
            if let p = plugin(item, "\(path)[\(i)]", directory: directory), !duplicate { plugins.append(p) }
        }
        return plugins
    }

    static let botEntryKeys = ["name", "data"] + profileKeys + ["address", "plugins", "chat_relay", "engine", "groups"]

    /// `bots:` — every entry decoded, names and data prefixes unique; nil when any entry is wrong
    /// (the problems are in `sink`).
    mutating func botList(_ node: ConfigNode, directory: String) -> [HostConfiguration.BotEntry]? {
        guard let items = list(node, "bots") else { return nil }
        guard !items.isEmpty else {
            problem(node, "bots", "the list of bots is empty; list at least one bot (name and display_name)")
            return nil
        }
        var bots: [HostConfiguration.BotEntry] = []
        var ok = true
        var nameAt: [String: ConfigMark] = [:]
        var dataOf: [String: (bot: String, mark: ConfigMark)] = [:]
        for (i, item) in items.enumerated() {
            let path = "bots[\(i)]"
            guard !item.isNull, let f = fields(item, path, known: Self.botEntryKeys) else {
                if item.isNull { expected("a bot entry (a mapping with name and display_name)", item, path) }
                ok = false
                continue
            }
            var name: String?
            if let n = f("name") {
                if let s = string(n, f.path("name")) {
                    if !PluginName.isValid(s) {
                        problem(n, f.path("name"), PluginName.rule + ", got \(n.shown)")
                    } else if let first = nameAt[s] {
                        problem(n, f.path("name"), "duplicate bot name \(JSONWriter.quote(s)) (first used at \(first)); give each bot its own name")
                    } else {
                        nameAt[s] = n.mark
                        name = s
                    }
                }
            } else {
                problem(item, path, "missing required key \"name\" (the bot's name in the admin API, metrics and logs)")
            }
            var data: String?
            var dataMark = item.mark
            if let n = f("data") {
                dataMark = n.mark
                if let s = string(n, f.path("data")) {
                    if PluginName.isValid(s) { data = s } else {
                        problem(n, f.path("data"), "a prefix for the bot's files in data_dir " + PluginName.rule + ", got \(n.shown)")
                    }
                }
            } else if let name {
                data = "bot_\(name)"
                dataMark = f("name")?.mark ?? item.mark
            }
            if let data, let name {
                if let other = dataOf[data] {
                    problem(f("data") ?? f("name") ?? item, f.path("data"),
                            "bot \(JSONWriter.quote(name)) would use the data files \(data)_chat.db and \(data)_agent.db of bot \(JSONWriter.quote(other.bot)) (at \(other.mark)); give each bot its own data")
                    ok = false
                } else {
                    dataOf[data] = (name, dataMark)
                }
            }
            let profile = self.profile(f)
            let address = f("address").map { self.address($0, f.path("address")) } ?? HostConfiguration.Address(enabled: true, printQR: true)
            let groups = f("groups").map { self.groups($0, f.path("groups")) } ?? HostConfiguration.Groups()
            let plugins = f("plugins").map { pluginList($0, f.path("plugins"), directory: directory) } ?? []
            let chatRelay = f("chat_relay").flatMap { self.chatRelay($0, f.path("chat_relay")) }
            var engine = HostConfiguration.Engine.swiftplex
            if let n = f("engine") {
                guard let e = self.engine(n, f.path("engine"), directory: directory) else {
                    ok = false
                    continue
                }
                engine = e
                foreignEngineProblems(engine, at: n, path: f.path("engine"), chatRelay: f("chat_relay"), address: f("address"), groups: f("groups"))
            }
            guard let name, let data, let profile else {
                ok = false
                continue
            }
            bots.append(HostConfiguration.BotEntry(name: name, data: data, profile: profile, address: address, groups: groups, plugins: plugins,
                                                   chatRelay: chatRelay, engine: engine, keyPath: path + ".", mark: item.mark))
        }
        return ok && bots.count == items.count ? bots : nil
    }


    mutating func relays(_ node: ConfigNode) -> HostConfiguration.Relays? {
        if let word = node.scalar {
            guard word == "embedded" else {
                expected("the word embedded or a list of smp:// relay addresses", node, "relays")
                return nil
            }
            return .embedded
        }
        guard let items = node.sequence else {
            expected("the word embedded or a list of smp:// relay addresses", node, "relays")
            return nil
        }
        guard !items.isEmpty else {
            problem(node, "relays", "the list of relays is empty; list at least one smp:// address, or write relays: embedded")
            return nil
        }
        var addresses: [String] = []
        for (i, item) in items.enumerated() {
            let path = "relays[\(i)]"
            guard let s = string(item, path) else { continue }
            if let why = RelayAddressSyntax.problem(s) {
                problem(item, path, "\(why) (expected smp://<fingerprint>@host[:port], got \(item.shown))")
            } else if addresses.contains(s) {
                problem(item, path, "this relay is listed twice")
            } else {
                addresses.append(s)
            }
        }
        return addresses.count == items.count ? .external(addresses) : nil
    }

    mutating func embeddedRelay(_ node: ConfigNode) -> HostConfiguration.EmbeddedRelay? {
        guard let f = fields(node, "embedded_relay", known: ["listen", "public_host"]) else { return nil }
        var relay = HostConfiguration.EmbeddedRelay(host: HostConfiguration.defaultListenHost, port: HostConfiguration.defaultListenPort, publicHost: nil)
        var ok = true
        if let n = f("listen") {
            if let s = string(n, "embedded_relay.listen"), let (host, port) = HostPortSyntax.parse(s, allowPortZero: true) {
                relay.host = host
                relay.port = port
            } else {
                if n.scalar != nil { expected("host:port with a port in 0...65535 (like 127.0.0.1:5223)", n, "embedded_relay.listen") }
                ok = false
            }
        }
        if let n = f("public_host"), let s = string(n, "embedded_relay.public_host") {
            if HostPortSyntax.isHost(s) {
                relay.publicHost = s
            } else {
                expected("a host name or IP address", n, "embedded_relay.public_host")
                ok = false
            }
        }
        return ok ? relay : nil
    }

    static let pluginKeys = ["name", "path", "enabled", "isolation", "timeout", "queue_limit", "restart_backoff", "isolation_limits", "config"]

    mutating func plugin(_ node: ConfigNode, _ path: String, directory: String) -> HostConfiguration.Plugin? {
        guard let f = fields(node, path, known: Self.pluginKeys), !node.isNull else {
            if node.isNull { expected("a plugin entry (a mapping with name and path)", node, path) }
            return nil
        }
        var name: String?
        if let n = f("name") {
            if let s = string(n, f.path("name")) {
                if PluginName.isValid(s) { name = s } else { problem(n, f.path("name"), PluginName.rule + ", got \(n.shown)") }
            }
        } else {
            problem(node, path, "missing required key \"name\"")
        }
        var location: HostConfiguration.PluginPath?
        if let n = f("path") {
            if let s = nonEmptyString(n, f.path("path")) {
                if s.contains("/") || s.hasSuffix(".so") {
                    location = .file(HostConfiguration.resolve(s, against: directory))
                } else if PluginName.isValid(s) {
                    location = .name(s)
                } else {
                    problem(n, f.path("path"), "a plugin name (no / and no .so) " + PluginName.rule
                        + "; a file path must contain / or end in .so; got \(n.shown)")
                }
            }
        } else {
            problem(node, path, "missing required key \"path\" (a plugin name such as auto-reply, or a path to a .so file)")
        }
        let enabled = f("enabled").map { bool($0, f.path("enabled")) } ?? true
        let isolation = f("isolation").map { choice($0, f.path("isolation"), as: HostConfiguration.Isolation.self) } ?? .inProcess
        let timeout = f("timeout").map { duration($0, f.path("timeout")) } ?? HostConfiguration.defaultPluginTimeout
        let queueLimit = f("queue_limit").map { integer($0, f.path("queue_limit"), in: HostConfiguration.queueLimitRange) } ?? HostConfiguration.defaultQueueLimit
        var backoff: HostConfiguration.Backoff? = HostConfiguration.defaultBackoff
        if let n = f("restart_backoff") { backoff = self.backoff(n, f.path("restart_backoff")) }
        var limits: HostConfiguration.IsolationLimits? = HostConfiguration.IsolationLimits()
        if let n = f("isolation_limits") { limits = isolationLimits(n, f.path("isolation_limits")) }
        var config: ConfigNode? = ConfigNode.emptyMapping(at: node.mark)
        if let n = f("config") {
            if n.entries != nil { config = n } else {
                expected("a mapping (the plugin's own settings)", n, f.path("config"))
                config = nil
            }
        }
        guard let name, let location, let enabled, let isolation, let timeout, let queueLimit, let backoff, let limits, let config else { return nil }
        return HostConfiguration.Plugin(
            name: name, path: location, enabled: enabled, isolation: isolation, timeout: timeout, queueLimit: queueLimit,
            restartBackoff: backoff, isolationLimits: limits, config: config, mark: node.mark
        )
    }

    mutating func isolationLimits(_ node: ConfigNode, _ path: String) -> HostConfiguration.IsolationLimits? {
        let keys = ["max_frame_bytes", "max_output_line_bytes", "max_concurrent_calls", "max_pending_input_bytes"]
        guard let f = fields(node, path, known: keys) else { return nil }
        var ok = true
        func value(_ key: String, _ range: ClosedRange<Int>) -> Int? {
            guard let n = f(key) else { return nil }
            let v = integer(n, f.path(key), in: range)
            if v == nil { ok = false }
            return v
        }
        let limits = HostConfiguration.IsolationLimits(
            maxFrameBytes: value("max_frame_bytes", 1024...(1 << 30)),
            maxOutputLineBytes: value("max_output_line_bytes", 80...(64 << 20)),
            maxConcurrentCalls: value("max_concurrent_calls", 1...10_000),
            maxPendingInputBytes: value("max_pending_input_bytes", (64 << 10)...(1 << 32)))
        return ok ? limits : nil
    }

    mutating func backoff(_ node: ConfigNode, _ path: String) -> HostConfiguration.Backoff? {
        guard let f = fields(node, path, known: ["initial", "max"]) else { return nil }
        let initial = f("initial").map { duration($0, f.path("initial")) } ?? HostConfiguration.defaultBackoff.initial
        let max = f("max").map { duration($0, f.path("max")) } ?? HostConfiguration.defaultBackoff.max
        guard let initial, let max else { return nil }
        guard initial <= max else {
            problem(f("max") ?? node, path, "initial (\(DurationText.format(initial))) must not be longer than max (\(DurationText.format(max)))")
            return nil
        }
        return HostConfiguration.Backoff(initial: initial, max: max)
    }
}

/// The rule for plugin instance names (and plugin names given as `path`).
enum PluginName {
    static let rule = "must match [a-z0-9][a-z0-9_-]{0,63} (lower-case letters, digits, _ and -, up to 64)"

    static func isValid(_ s: String) -> Bool {
        let u = Array(s.utf8)
        func ok(_ c: UInt8) -> Bool { (0x61...0x7A).contains(c) || (0x30...0x39).contains(c) }
        guard let first = u.first, ok(first), u.count <= 64 else { return false }
        return u.dropFirst().allSatisfy { ok($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }
}
