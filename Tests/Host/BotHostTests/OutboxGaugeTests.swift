import Agent
@testable import BotHost
import ChatAPI
import ChatTestSupport
import Foundation
import NIOPosix
import RelayServer
import SwiftplexBase
import SwiftplexPluginTesting
import TestSupport
import Testing

/// The host's outbox gauge (`swiftplex_engine_outbox_pending`) on a real bot, with its data in
/// SQLite files and in PostgreSQL: a message to a contact whose relay is down waits in the outbox,
/// and the scrape reports it.
@Suite(.timeLimit(.minutes(3))) struct OutboxGaugeTests: LiveRelaySuite {
    static var stores: [String] {
        TestPostgres.noteSkippedOnce()
        return TestPostgres.isAvailable ? ["sqlite", "postgres"] : ["sqlite"]
    }

    @Test(arguments: stores) func aMessageWaitingForItsRelayIsCountedInTheGauge(store: String) async throws {
        try await withLiveRelay { dir, relay in
            var options = BotHostOptions(dataDirectory: dir.appendingPathComponent("bot"), profile: .init(displayName: "Gauge Bot"),
                                         relays: .external([relay.address]), createAddress: false,
                                         runnerExecutable: URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner")))
            if store == "postgres" {
                let url = try #require(TestPostgres.url())
                options.database = url
            }
            // The person receives on a relay of their own, which goes down later.
            let personRelay = try await RelayServer.start(configuration: RelayConfiguration(dataDirectory: dir.appendingPathComponent("person-relay"),
                                                                                            host: "127.0.0.1", port: 0),
                                                          group: MultiThreadedEventLoopGroup.singleton, logger: silent)
            var personRelayUp = true
            do {
            try await withEngine(dir, "person", relays: [personRelay.address]) { person, inbox in
                await startUser(person, "person")
                let host = try await BotHost.start(options, logger: silent)
                let running = Task { await host.run() }
                do {
                    let events = AsyncInbox(host.events.subscribe().events.map { (try? JSONValue.parse($0.json)) ?? .null }, describe: { $0["type"]?.stringValue ?? "?" })
                    let link = try #require(await person.execute("/_connect 1")["connLinkInvitation"]?["connFullLink"]?.stringValue)
                    _ = await host.api.execute("/_connect \(host.userId) \(link)")
                    let connected = try await events.first(where: { $0["type"]?.stringValue == "contactConnected" }, "contactConnected", timeout: .seconds(30))
                    let personInBot = try #require(connected["contact"]?["contactId"]?.intValue)
                    _ = try await inbox.next("contactConnected", timeout: .seconds(30))

                    // Nothing waits while both relays are up.
                    try await eventually(timeout: .seconds(30), "the outbox to be empty", pollingEvery: .milliseconds(200)) {
                        Self.gauge(await host.metricsText()) == 0
                    }
                    await personRelay.shutdown()
                    personRelayUp = false
                    let sent = await host.api.execute(#"/_send @\#(personInBot) json [{"msgContent": {"type": "text", "text": "are you there?"}, "mentions": {}}]"#)
                    #expect(sent["type"]?.stringValue == "newChatItems", "\(sent)")
                    // The send returned once its envelope was committed to the outbox; its relay is
                    // down, so it is still there when scraped.
                    let pending = Self.gauge(await host.metricsText())
                    #expect(pending == 1, "store \(store): \(String(describing: pending))")
                    #expect(try await Agent.outboxDepth(at: host.defaultBot.agentLocation) == 1)
                } catch {
                    await host.shutdown()
                    await running.value
                    throw error
                }
                await host.shutdown()
                await running.value
            }
            } catch {
                if personRelayUp { await personRelay.shutdown() }
                throw error
            }
            if personRelayUp { await personRelay.shutdown() }
        }
    }

    static func gauge(_ text: [UInt8]) -> Double? {
        AdminAPITests.prometheus(String(decoding: text, as: UTF8.self))[#"swiftplex_engine_outbox_pending{bot="bot"}"#]
    }
}
