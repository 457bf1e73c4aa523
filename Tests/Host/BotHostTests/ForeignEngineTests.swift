@testable import BotHost
import ChatCore
import ChatServer
import ChatTestSupport
import NIOPosix
import RelayServer
import SwiftplexBase
import TestSupport
import Foundation
import Logging
import PluginHost
import SwiftplexPluginTesting
import Testing

/// The bot host on engines other than its embedded one, through the one seam (``BotEngine``):
/// `libsimplex.so` loaded by path at run time, and a `swiftplex-chat -p` process over SimpleX's
/// WebSocket API — standing in for SimpleX's own library and CLI, which speak the same C ABI and
/// WebSocket API.
@Suite(.timeLimit(.minutes(3))) struct ForeignEngineTests {
    @Test(arguments: PluginTestBench.Engine.allCases) func broadcastWorksOnEveryEngine(_ engine: PluginTestBench.Engine) async throws {
        try await PluginTestBench.withBench(plugins: [
            .init(name: "welcome", path: PluginTestBench.product("libauto-accept.so"), config: "{}"),
            .init(name: "news", path: PluginTestBench.product("libbroadcast.so"),
                  config: #"{"admins": ["1:alice"], "notice": "This bot only forwards announcements."}"#),
        ], engine: engine) { bench in
            let alice = try await bench.connect("alice")
            let bob = try await bench.connect("bob")
            try await alice.send("the meeting moves to 3pm")
            #expect(try await bob.nextMessage() == "the meeting moves to 3pm")
            #expect(try await alice.nextMessage().contains("1"))
            try await bob.send("can I broadcast?")
            #expect(try await bob.nextMessage() == "This bot only forwards announcements.")
        }
    }

    /// The group moderator on a foreign engine: the bot joins Alice's group as admin by itself,
    /// welcomes Bob, and deletes his message with a blocked word for all, with a strike.
    @Test(arguments: [PluginTestBench.Engine.libsimplex, .webSocket]) func theGroupModeratorWorksOnForeignEngines(_ engine: PluginTestBench.Engine) async throws {
        let rules = #"{"welcome": "Welcome to {group}, {name}!", "blocked_words": ["scam"]}"#
        try await GroupModeratorEndToEndTests.withGroup(GroupModeratorEndToEndTests.moderator(rules), engine: engine) { g in
            let bot = GroupModeratorEndToEndTests.bot
            #expect(try await g.bob.nextGroupMessage(in: g.inBob, from: bot).text == "Welcome to team, bob!")
            let spam = try await g.bob.send("join my crypto SCAM today", toGroup: g.inBob)
            #expect(try await g.bob.nextGroupMessage(in: g.inBob, from: bot).text == "bob: your message was removed (blocked word). Strike 1 of 3.")
            _ = try await g.bob.nextEvent("chatItemsDeleted") { e in
                e["chatItemDeletions"]?.arrayValue?.contains { $0["deletedChatItem"]?["chatItem"]?["meta"]?["itemId"]?.int64Value == spam } == true
            }
        }
    }

    /// The channel owner on every engine: the `channel` plugin creates a channel with two chat
    /// relays (on an engine of their own), a subscriber joins it by its link, and what the admin
    /// contact sends the bot reaches the subscriber as a post of the channel.
    @Test(arguments: PluginTestBench.Engine.allCases) func theChannelOwnerWorksOnEveryEngine(_ engine: PluginTestBench.Engine) async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let smp = try await RelayServer.start(configuration: RelayConfiguration(dataDirectory: dir.appendingPathComponent("smp"), host: "127.0.0.1", port: 0),
                                              group: MultiThreadedEventLoopGroup.singleton, logger: Logger(label: "smp", factory: { _ in SwiftLogNoOpLogHandler() }))
        do {
            try await withEngine(dir, "relays", relays: [smp.address]) { relays, _ in
                let addresses = try await makeRelayUsers(relays)
                let config = JSONValue.object([
                    ("name", .string("News")),
                    ("relays", .array(addresses.enumerated().map { .object([("name", .string("r\($0.offset)")), ("address", .string($0.element))]) })),
                    ("admins", .array([.string("1:admin")])),
                ])
                try await PluginTestBench.withBench(plugins: [
                    .init(name: "welcome", path: PluginTestBench.product("libauto-accept.so"), config: "{}"),
                    .init(name: "news", path: PluginTestBench.product("libchannel.so"), config: config.description),
                ], engine: engine) { bench in
                    let bot = bench.host.defaultBot
                    let storage = try PluginStorage(path: BotOptions.pluginStorage(bench.directory.appendingPathComponent("bot"), prefix: bot.options.dataPrefix))
                    let channelId = try #require(try storage.get(instance: "news", key: "channel.groupId"))
                    let link = try #require(try storage.get(instance: "news", key: "channel.link"))
                    // Both relays take the channel before anyone joins it.
                    try await eventually(timeout: .seconds(60), "both chat relays active", pollingEvery: .milliseconds(200)) {
                        let relays = await bot.api.execute("/_get relays #\(channelId)")["groupRelays"]?.arrayValue ?? []
                        return relays.count == 2 && relays.allSatisfy { $0["relayStatus"]?.stringValue == "active" }
                    }
                    let admin = try await bench.connect("admin", timeout: .seconds(60))
                    let subscriber = try await bench.person("subscriber")
                    let joining = await subscriber.api.execute("/_connect 1 \(link)")
                    #expect(joining["type"]?.stringValue == "startedConnectionToGroup", "\(joining)")
                    _ = try await subscriber.nextEvent("userJoinedGroup", timeout: .seconds(60))
                    try await admin.send("the first post")
                    _ = try await subscriber.nextEvent("newChatItems", timeout: .seconds(60)) { e in
                        e["chatItems"]?.arrayValue?.contains {
                            $0["chatItem"]?["chatDir"]?["type"]?.stringValue == "channelRcv"
                                && $0["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue == "the first post"
                        } == true
                    }
                }
            }
        } catch {
            await smp.shutdown()
            throw error
        }
        await smp.shutdown()
    }

    /// The admin API on a foreign engine: the status names the engine, a contact made through it
    /// is listed, and a Chat API command is answered as the engine answers it.
    @Test(arguments: [PluginTestBench.Engine.libsimplex, .webSocket]) func theAdminAPIWorksOnForeignEngines(_ engine: PluginTestBench.Engine) async throws {
        try await PluginTestBench.withBench(plugins: [.init(name: "welcome", path: PluginTestBench.product("libauto-accept.so"), config: "{}")],
                                            engine: engine, configure: { $0.admin = AdminOptions(listen: ListenAddress(host: "127.0.0.1", port: 0)) }) { bench in
            let http = HTTPProbe(port: await bench.host.adminAddress().port)
            let token = try AdminToken.read(dataDirectory: bench.directory.appendingPathComponent("bot"))
            let status = try JSONValue.parse(try await http.get("/api/status", token: token).body)
            #expect(status["bots"]?.arrayFirst?["engine"]?.stringValue == (engine == .libsimplex ? "libsimplex" : "websocket"))
            _ = try await bench.connect("alice")
            let contacts = try await http.get("/api/contacts", token: token)
            #expect(contacts.status == 200 && contacts.body.contains("alice"), "\(contacts.body)")
            let user = try JSONValue.parse(try await http.post("/api/command", token: token, body: #"{"cmd": "/user"}"#).body)
            #expect(user["type"]?.stringValue == "activeUser")
            #expect(try await http.get("/readyz").status == 200)
            if engine == .webSocket {
                // While the engine cannot be reached (WebSocketEngineTests: when the engine tells of
                // a gap) the bot is not ready, and it is again once the connection is back.
                let bot = bench.host.defaultBot
                bot.engineConnection(.lost)
                #expect(try await http.get("/readyz").status == 503)
                bot.engineConnection(.restored)
                #expect(try await http.get("/readyz").status == 200)
            }
        }
    }

    /// A missing library, a library that is not SimpleX's chat library, and an engine URL nobody
    /// serves are start-up errors naming the file or the URL.
    @Test func aMissingOrWrongLibraryAndAnUnreachableEngineAreClearStartUpErrors() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-foreign-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        var logger = Logger(label: "foreign-engine-test")
        logger.logLevel = .critical
        func options(_ engine: EngineChoice) -> BotHostOptions {
            var o = BotHostOptions(dataDirectory: dir.appendingPathComponent(UUID().uuidString), profile: .init(displayName: "Foreign"),
                                   relays: .embedded(host: "127.0.0.1", port: 0, publicHost: nil),
                                   runnerExecutable: URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner")))
            o.engine = engine
            return o
        }
        func startError(_ engine: EngineChoice) async -> String {
            do {
                let host = try await BotHost.start(options(engine), logger: logger)
                await host.shutdown()
                return "started"
            } catch {
                return "\(error)"
            }
        }
        let missing = await startError(.libsimplex(library: "/nowhere/libsimplex.so"))
        #expect(missing.contains("/nowhere/libsimplex.so") && missing.contains("does not exist"), "\(missing)")
        let plugin = PluginTestBench.product("libauto-accept.so")
        let wrong = await startError(.libsimplex(library: plugin))
        #expect(wrong.contains(plugin) && wrong.contains("no chat_migrate_init"), "\(wrong)")
        let unreachable = await startError(.websocket(url: "ws://127.0.0.1:1", token: nil))
        #expect(unreachable.contains("ws://127.0.0.1:1") && unreachable.contains("cannot reach"), "\(unreachable)")
    }
}
