import ChatCore
import Foundation
import GRDB
import PluginHost
import SwiftplexPluginTesting
import Testing
@testable import BotHost

/// Relay mode (`chat_relay:`): the bot is created as a chat relay user, its address is a relay
/// address (`/r`), and a bot's kind is never switched on restart.
@Suite(.timeLimit(.minutes(2))) struct RelayModeTests {
    func options(_ dir: URL, relay: Bool) -> BotHostOptions {
        var profile = BotHostOptions.Profile(displayName: "Relay Test")
        profile.chatRelay = relay
        return BotHostOptions(dataDirectory: dir, profile: profile, relays: .embedded(host: "127.0.0.1", port: 0, publicHost: nil),
                              createAddress: false, runnerExecutable: URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner")))
    }

    @Test func aRelayBotHasARelayAddressAndStaysARelay() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = try await BotHost.start(options(dir, relay: true), logger: quiet)
        // Made even with the contact address off: a relay's address is how owners reach it.
        let address = try #require(first.address)
        #expect(address.contains("/r?"), "\(address)")
        #expect(first.bots[0].isChatRelay)
        let user = await first.api.execute("/user")
        #expect(user["user"]?["userChatRelay"]?.boolValue == true, "\(user)")
        await first.shutdown()

        let again = try await BotHost.start(options(dir, relay: true), logger: quiet)
        #expect(again.address == address)
        await again.shutdown()

        do {
            let wrong = try await BotHost.start(options(dir, relay: false), logger: quiet)
            await wrong.shutdown()
            Issue.record("a chat relay bot started as an ordinary bot")
        } catch let e as BotHostError {
            #expect(e.description.contains("was created as a chat relay"), "\(e)")
        }
    }

    /// The channel-relay plugin's policy outlives the host's shutdown (the engine keeps it, so a
    /// restarted relay applies it before the plugin is up again); without the plugin configured
    /// the host clears it.
    @Test func thePolicyOutlivesARestartAndGoesWithThePlugin() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = #"{"max_channels":3}"#
        let plugin = PluginSpec(name: "policy", path: PluginTestBench.product("libchannel-relay.so"), configFingerprint: config,
                                configure: { _ in .success(config) })
        var withPlugin = options(dir, relay: true)
        withPlugin.plugins = [plugin]
        let first = try await BotHost.start(withPlugin, logger: quiet)
        #expect(await first.bots[0].controller?.currentRelayPolicy == ChannelRelayPolicy(maxChannels: 3))
        await first.shutdown()
        // Kept through the shutdown (the plugin's stop no longer clears it).
        let db = try DatabaseQueue(path: BotHost.databasePrefix(dir) + "_chat.db")
        let stored = try await db.read { db in try String.fetchOne(db, sql: "SELECT policy FROM relay_policy WHERE id = 1") }
        try db.close()
        #expect(stored?.contains("\"maxChannels\":3") == true, "\(String(describing: stored))")

        let without = try await BotHost.start(options(dir, relay: true), logger: quiet)
        #expect(await without.bots[0].controller?.currentRelayPolicy == ChannelRelayPolicy())
        await without.shutdown()
    }

    @Test func anOrdinaryBotIsNotTurnedIntoARelay() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = try await BotHost.start(options(dir, relay: false), logger: quiet)
        await first.shutdown()
        do {
            let wrong = try await BotHost.start(options(dir, relay: true), logger: quiet)
            await wrong.shutdown()
            Issue.record("an ordinary bot started as a chat relay")
        } catch let e as BotHostError {
            #expect(e.description.contains("cannot become a chat relay"), "\(e)")
        }
    }
}
