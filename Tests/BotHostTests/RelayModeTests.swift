import BotHost
import Foundation
import SwiftplexPluginTesting
import Testing

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
