@testable import BotHost
import ChatCore
import ChatTestSupport
import ChatServer
import Foundation
import NIOConcurrencyHelpers
import PluginHost
import SwiftplexBase
import SwiftplexPluginTesting
import TestSupport
import Testing

/// Several bots in one host: two engines with their own databases, profiles, addresses and
/// plugins (the real auto-accept and auto-reply plugins), people on their own engines talking
/// to each through the shared embedded relay, and the admin API over HTTP on loopback.
@Suite(.timeLimit(.minutes(3))) struct MultiBotTests {
    static let runner = URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner"))

    static func plugin(_ name: String, _ file: String, _ config: String) -> PluginSpec {
        PluginSpec(name: name, path: PluginTestBench.product(file), timeout: .seconds(10), configFingerprint: config, configure: { _ in .success(config) })
    }

    /// `alpha` (the first bot, the default prefix `bot`) welcomes people; `beta` (its own files
    /// `bot_beta_*`) welcomes them in its own words and echoes what they say.
    static func options(_ dir: URL) -> BotHostOptions {
        var options = BotHostOptions(dataDirectory: dir, profile: .init(displayName: "Alpha Bot"),
                                     relays: .embedded(host: "127.0.0.1", port: 0, publicHost: nil),
                                     plugins: [plugin("welcome", "libauto-accept.so", #"{"welcome": "alpha here"}"#)],
                                     runnerExecutable: runner)
        options.botName = "alpha"
        options.otherBots = [BotOptions(name: "beta", profile: .init(displayName: "Beta Bot"), plugins: [
            plugin("welcome", "libauto-accept.so", #"{"welcome": "beta here"}"#),
            plugin("echo", "libauto-reply.so", #"{"echo": true}"#),
        ])]
        options.admin = AdminOptions(listen: ListenAddress(host: "127.0.0.1", port: 0))
        return options
    }

    /// Every event of a bot's stream, as JSON text, from before the host runs until `stop`.
    final class Recorder: Sendable {
        let seen = NIOLockedValueBox<[String]>([])
        let task: Task<Void, Never>
        init(_ bot: HostedBot) {
            let subscription = bot.events.subscribe()
            let seen = self.seen
            task = Task { for await e in subscription.events { seen.withLockedValue { $0.append(e.json) } } }
        }
        func stop() -> [String] {
            task.cancel()
            return seen.withLockedValue { $0 }
        }
    }

    @Test func twoBotsInOneHostEachAcceptTheirOwnContactsAndSeeOnlyTheirOwnEvents() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let options = Self.options(dir)
        let host = try await BotHost.start(options, logger: quiet)
        #expect(host.bots.map(\.name) == ["alpha", "beta"])
        let alpha = try #require(host.bot(named: "alpha")), beta = try #require(host.bot(named: "beta"))
        let alphaAddress = try #require(alpha.address), betaAddress = try #require(beta.address)
        #expect(alphaAddress != betaAddress)
        #expect(alpha.userId == host.userId && host.address == alphaAddress)
        let alphaEvents = Recorder(alpha), betaEvents = Recorder(beta)
        let running = Task { await host.run() }
        var people: [ScriptedContact] = []
        do {
            let relay = try #require(host.relayAddress)
            func person(_ name: String) async throws -> ScriptedContact {
                let p = try await ScriptedContact.start(name: name, directory: dir.appendingPathComponent("person-\(name)"), relay: relay)
                people.append(p)
                return p
            }
            // Each bot accepts the person who asks it, with its own welcome.
            let alice = try await person("alice")
            try await alice.connect(to: alphaAddress)
            #expect(try await alice.nextMessage() == "alpha here")
            let carol = try await person("carol")
            try await carol.connect(to: betaAddress)
            #expect(try await carol.nextMessage() == "beta here")
            // Beta's echo plugin answers carol; alice's message reaches alpha, which has none.
            try await carol.send("hello beta")
            #expect(try await carol.nextMessage() == "hello beta")
            try await alice.send("hello alpha")
            #expect(await alice.receivesNothing(for: .seconds(2)))

            // Profiles and contacts are each bot's own.
            let alphaUser = await alpha.api.execute("/user")
            let betaUser = await beta.api.execute("/user")
            #expect(alphaUser["user"]?["profile"]?["displayName"]?.stringValue == "Alpha Bot")
            #expect(betaUser["user"]?["profile"]?["displayName"]?.stringValue == "Beta Bot")
            #expect(betaUser["user"]?["profile"]?["contactLink"]?.stringValue == betaAddress)

            // The admin API: both bots listed; ?bot= picks one; plugins say whose they are.
            let http = HTTPProbe(port: await host.adminAddress().port)
            let token = try AdminToken.read(dataDirectory: dir)
            func json(_ path: String) async throws -> JSONValue {
                let a = try await http.get(path, token: token)
                #expect(a.status == 200, "\(path): \(a.status) \(a.body)")
                return try JSONValue.parse(a.body)
            }
            let bots = try await json("/api/bots")["bots"]
            #expect(bots?.arrayCount == 2)
            #expect(bots?[0]?["name"]?.stringValue == "alpha" && bots?[0]?["default"]?.boolValue == true)
            #expect(bots?[1]?["name"]?.stringValue == "beta" && bots?[1]?["address"]?.stringValue == betaAddress)
            #expect(bots?[1]?["dataPrefix"]?.stringValue == "bot_beta" && bots?[1]?["displayName"]?.stringValue == "Beta Bot")
            let betaContacts = try await json("/api/contacts?bot=beta")
            #expect(betaContacts["bot"]?.stringValue == "beta")
            #expect(betaContacts["contacts"]?.description.contains(#""localDisplayName":"carol""#) == true)
            #expect(betaContacts["contacts"]?.description.contains("alice") == false)
            let defaultContacts = try await json("/api/contacts")
            #expect(defaultContacts["bot"]?.stringValue == "alpha")
            #expect(defaultContacts["contacts"]?.description.contains(#""localDisplayName":"alice""#) == true)
            #expect(defaultContacts["contacts"]?.description.contains("carol") == false)
            let plugins = try await json("/api/plugins")["plugins"]
            let pairs = Set((plugins?.arrayValue ?? []).map { "\($0["bot"]?.stringValue ?? "?")/\($0["name"]?.stringValue ?? "?")" })
            #expect(pairs == ["alpha/welcome", "beta/welcome", "beta/echo"])
            #expect(try await json("/api/plugins?bot=alpha")["plugins"]?.arrayCount == 1)
            #expect(try await json("/api/address?bot=beta")["link"]?.stringValue == betaAddress)
            let unknown = try await http.get("/api/contacts?bot=gamma", token: token)
            #expect(unknown.status == 404 && unknown.body.contains("noSuchBot"))
            // Reloading one bot's instance leaves the other bot's same-named instance alone.
            let reload = try JSONValue.parse(try await http.post("/api/plugins/welcome/reload?bot=beta", token: token).body)
            #expect(reload["results"]?.description.contains(#""bot":"alpha""#) == false)
            #expect(reload["results"]?.description.contains(#""bot":"beta""#) == true)
            let status = try await json("/api/status")
            #expect(status["bots"]?.arrayCount == 2)
            let ready = try JSONValue.parse(try await http.get("/readyz", token: token).body)
            #expect(ready["ready"]?.boolValue == true && ready["bots"]?.arrayCount == 2)
            #expect(ready["relaysConnected"]?.intValue == 2)  // each engine to the embedded relay

            // Metrics carry the bot: each received the one message its person sent it.
            var metrics: [String: Double] = [:]
            try await eventually(timeout: .seconds(20), "each bot's received message is counted") {
                metrics = AdminAPITests.prometheus(try await http.get("/metrics", token: token).body)
                return metrics[#"swiftplex_engine_messages_received_total{bot="alpha"}"#] == 1
                    && metrics[#"swiftplex_engine_messages_received_total{bot="beta"}"#] == 1
            }
            #expect(metrics[#"swiftplex_engine_running{bot="alpha"}"#] == 1 && metrics[#"swiftplex_engine_running{bot="beta"}"#] == 1)
            #expect(metrics[#"swiftplex_plugin_events_handled_total{bot="beta",instance="echo"}"#] != nil)
            #expect(metrics[#"swiftplex_plugin_events_handled_total{bot="alpha",instance="echo"}"#] == nil)
        } catch {
            for p in people { await p.stop() }
            await host.shutdown()
            await running.value
            throw error
        }
        for p in people { await p.stop() }
        await host.shutdown()
        await running.value

        // Each bot's stream (what its plugins were given) holds its own people only.
        let a = alphaEvents.stop().joined(separator: "\n"), b = betaEvents.stop().joined(separator: "\n")
        #expect(a.contains("hello alpha") && !a.contains("hello beta") && !a.contains("carol"))
        #expect(b.contains("hello beta") && !b.contains("hello alpha") && !b.contains("alice"))

        // Each bot has its own files, private.
        for file in ["bot_chat.db", "bot_agent.db", "plugins.db", "bot_beta_chat.db", "bot_beta_agent.db", "bot_beta_plugins.db"] {
            let mode = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent(file).path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file)")
        }

        // A backup covers both bots; restored elsewhere, each keeps its contacts.
        let archive = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: archive) }
        let manifest = try HostBackup.create(dataDirectory: dir, configFile: nil, to: archive.appendingPathComponent("host.zip"))
        #expect(Set(manifest.databases).isSuperset(of: ["bot_chat.db", "bot_agent.db", "bot_beta_chat.db", "bot_beta_agent.db", "bot_beta_plugins.db"]))
        let restoredDir = archive.appendingPathComponent("restored")
        try HostBackup.restore(from: archive.appendingPathComponent("host.zip"), dataDirectory: restoredDir, configFile: nil, replace: false)
        var restoredOptions = Self.options(restoredDir)
        restoredOptions.admin = nil
        let restored = try await BotHost.start(restoredOptions, logger: quiet)
        let betaAgain = try #require(restored.bot(named: "beta"))
        #expect(betaAgain.address == betaAddress)
        let contacts = await betaAgain.api.execute("/_contacts \(betaAgain.userId)").description
        #expect(contacts.contains(#""localDisplayName":"carol""#) && !contacts.contains("alice"))
        await restored.shutdown()
    }

    @Test func badBotListsAreRefusedBeforeAnythingStarts() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        var options = Self.options(dir)
        options.otherBots = [BotOptions(name: "alpha", profile: .init(displayName: "again"))]
        await #expect(throws: BotHostError.self) { _ = try await BotHost.start(options, logger: quiet) }
        options.otherBots = [BotOptions(name: "gamma", dataPrefix: "bot", profile: .init(displayName: "same files"))]
        await #expect(throws: BotHostError.self) { _ = try await BotHost.start(options, logger: quiet) }
        options.otherBots = []
        options.webSocketAPI = WebSocketAPIOptions(listen: ListenAddress(host: "127.0.0.1", port: 0), bot: "nobody")
        await #expect(throws: BotHostError.self) { _ = try await BotHost.start(options, logger: quiet) }
        // Nothing was left holding the data: a good host starts on it.
        options.webSocketAPI = nil
        let host = try await BotHost.start(options, logger: quiet)
        await host.shutdown()
    }

    @Test func aSecondHostCannotTakeABotAnotherHostRuns() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = try await BotHost.start(Self.options(dir), logger: quiet)
        // Another host whose only bot uses beta's files: refused, beta's lock is held.
        var other = BotHostOptions(dataDirectory: dir, profile: .init(displayName: "intruder"), relays: .embedded(host: "127.0.0.1", port: 0, publicHost: nil),
                                   runnerExecutable: Self.runner)
        other.dataPrefix = "bot_beta"
        let refused = await #expect(throws: (any Error).self) { _ = try await BotHost.start(other, logger: quiet) }
        #expect("\(refused.map { "\($0)" } ?? "")".contains("bot_beta.lock"))
        await first.shutdown()
    }
}
