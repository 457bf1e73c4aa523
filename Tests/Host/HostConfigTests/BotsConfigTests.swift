import Foundation
import Testing
@testable import HostConfig

/// `bots:` — several bots in one host, each with its own name, data files, profile, address and
/// plugins; the `bot:` form is one bot named `bot` on the files `bot_*`.
@Suite struct BotsConfigTests {
    static let twoBots = """
        bots:
          - name: support
            data: bot
            display_name: Support
            address:
              requests_per_minute: 5
            plugins:
              - name: welcome
                path: auto-accept
          - name: news
            display_name: News Desk
            full_name: The news
            peer_type: human
            publish_commands: false
            address:
              enabled: false
            plugins:
              - name: welcome
                path: auto-accept
                config: {welcome: hi}
              - name: echo
                path: ./plugins/libecho.so
        ws_api:
          bot: news

        """

    @Test func theSingleBotFormIsOneBotNamedBot() throws {
        let (c, _) = try load(minimal + "plugins:\n  - name: a\n    path: auto-reply\n")
        #expect(c.bots.count == 1)
        let bot = try #require(c.bots.first)
        #expect(bot.name == "bot" && bot.data == "bot" && bot.keyPath == "")
        #expect(bot.profile == c.bot && bot.address == c.address && bot.plugins == c.plugins)
        #expect(bot.plugins.map(\.name) == ["a"])
    }

    @Test func everyBotHasItsOwnProfileAddressAndPlugins() throws {
        let (c, dir) = try load(Self.twoBots)
        #expect(c.bots.map(\.name) == ["support", "news"])
        #expect(c.bots.map(\.data) == ["bot", "bot_news"])  // given, and the default bot_<name>
        let support = c.bots[0], news = c.bots[1]
        #expect(support.profile.displayName == "Support" && support.address.requestsPerMinute == 5 && support.address.enabled)
        #expect(news.profile == HostConfiguration.Bot(displayName: "News Desk", fullName: "The news", peerType: .human, publishCommands: false))
        #expect(!news.address.enabled)
        #expect(support.plugins.map(\.name) == ["welcome"] && news.plugins.map(\.name) == ["welcome", "echo"])
        #expect(news.plugins[1].path == .file(dir.path + "/plugins/libecho.so") || news.plugins[1].path == .file(URL(fileURLWithPath: dir.path).standardizedFileURL.path + "/plugins/libecho.so"))
        #expect(news.keyPath == "bots[1].")
        // The first bot is also the top-level view.
        #expect(c.bot == support.profile && c.plugins == support.plugins)
        #expect(c.webSocketAPI?.bot == "news")
    }

    @Test func duplicateNamesAndSharedDataFilesAreRefusedWhereTheyAre() throws {
        let p = try problems("""
            bots:
              - name: a
                display_name: A
              - name: a
                display_name: Another A
              - name: b
                data: bot_a
                display_name: B
              - name: c
                data: shared
                display_name: C
              - name: d
                data: shared
                display_name: D
            """)
        #expect(p.contains { $0.hasPrefix("4:11: bots[1].name: duplicate bot name \"a\" (first used at 2:11)") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("7:11: bots[2].data: bot \"b\" would use the data files bot_a_chat.db and bot_a_agent.db of bot \"a\" (at 2:11)") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("13:11: bots[4].data: bot \"d\" would use the data files shared_chat.db") && $0.contains("of bot \"c\" (at 10:11)") }, "\(p)")
        #expect(p.count == 3, "\(p)")
    }

    @Test func badEntriesGetTypedMessagesAtTheirPlace() throws {
        let p = try problems("""
            bots:
              - display_name: Nameless
              - name: Bad Name
                display_name: x
              - name: ok
                data: ../escape
                display_name: "#hash"
                colour: blue
                plugins:
                  - name: p
                    path: auto-reply
                  - name: p
                    path: auto-reply
            ws_api:
              bot: nobody
            """)
        #expect(p.contains { $0.hasPrefix("2:5: bots[0]: missing required key \"name\"") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("3:11: bots[1].name: must match") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("6:11: bots[2].data: a prefix for the bot's files") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("7:19: bots[2].display_name: must not start with @ or #") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("8:5: unknown key \"colour\" in bots[2]") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("12:15: bots[2].plugins[1].name: duplicate plugin name \"p\"") }, "\(p)")
        // With bots in error the ws_api.bot name cannot be checked; it is not reported then.
        #expect(!p.contains { $0.contains("ws_api.bot") }, "\(p)")
        let unknown = try problems("bots:\n  - name: a\n    display_name: A\nws_api:\n  bot: nobody\n")
        #expect(unknown == ["5:8: ws_api.bot: names no bot of this host; the bots are \"a\""], "\(unknown)")
    }

    @Test func perBotKeysAtTheTopLevelBesideBotsAreRefused() throws {
        let p = try problems("""
            bot:
              display_name: Old
            plugins: []
            bots:
              - name: a
                display_name: A
            """)
        #expect(p.contains { $0.hasPrefix("1:1: bot: with bots: given, each bot has its own profile") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("3:1: plugins: with bots: given, each bot has its own plugins") }, "\(p)")
        let empty = try problems("bots: []\n")
        #expect(empty.contains { $0.contains("the list of bots is empty") }, "\(empty)")
        let none = try problems("log_level: info\n")
        #expect(none.contains { $0.contains("missing required key \"bot\"") && $0.contains("or bots") }, "\(none)")
    }
}
