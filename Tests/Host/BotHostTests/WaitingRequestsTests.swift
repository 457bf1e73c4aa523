@testable import BotHost
import ChatAPI
import ChatTestSupport
import Foundation
import PluginHost
import RelayServer
import SwiftplexBase
import SwiftplexPluginTesting
import TestSupport
import Testing

/// A contact request that reaches the bot while no plugin listens (the host down, or started
/// without the plugin) is not lost to the auto-accept service: the next start gives it to the
/// plugins again.
@Suite(.timeLimit(.minutes(3))) struct WaitingRequestsTests: LiveRelaySuite {
    @Test func aRequestThatArrivedWhileNoPluginListenedIsDecidedAtTheNextStart() async throws {
        try await withLiveRelay { dir, relay in
            var options = BotHostOptions(dataDirectory: dir.appendingPathComponent("bot"), profile: .init(displayName: "Gate Bot"),
                                         relays: .external([relay.address]),
                                         runnerExecutable: URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner")))
            try await withEngine(dir, "person", relays: [relay.address]) { person, inbox in
                await startUser(person, "person")
                // No plugin: the request waits in the engine.
                let first = try await BotHost.start(options, logger: quiet)
                let running = Task { await first.run() }
                let events = AsyncInbox(first.events.subscribe().events.map { (try? JSONValue.parse($0.json)) ?? .null }, describe: { $0["type"]?.stringValue ?? "?" })
                let address = try #require(first.address)
                _ = await person.execute("/_connect 1 \(address)")
                _ = try await events.first(where: { $0["type"]?.stringValue == "receivedContactRequest" }, "the request", timeout: .seconds(30))
                await first.shutdown()
                await running.value

                // Started again with auto-accept deciding by rules (so not the engine's own auto-accept).
                let config = #"{"deny": ["mallory*"], "welcome": "welcome, you waited"}"#
                options.plugins = [PluginSpec(name: "gate", path: PluginTestBench.product("libauto-accept.so"), configFingerprint: config,
                                              configure: { _ in .success(config) })]
                let second = try await BotHost.start(options, logger: quiet)
                let runningAgain = Task { await second.run() }
                _ = try await inbox.next("contactConnected", timeout: .seconds(30))
                let welcome = try await inbox.next("newChatItems", timeout: .seconds(30))
                #expect(text(welcome["chatItems"]?.arrayFirst) == "welcome, you waited")
                await second.shutdown()
                await runningAgain.value
            }
        }
    }
}
