import BotHost
import ChatCore
import Foundation
import Logging
import PluginHost
import SwiftplexPluginTesting
import TestSupport
import Testing

var quiet: Logger {
    var l = Logger(label: "bot-host-test")
    l.logLevel = .critical
    return l
}

/// A fresh temporary directory (0700); the test removes it.
func temporaryDirectory() -> URL { TemporaryDirectory(prefix: "swiftplex-host-test").url }

func testPluginSpec(_ name: String, tag: String) -> PluginSpec {
    let config = #"{"tag":"\#(tag)"}"#
    return PluginSpec(name: name, path: PluginTestBench.product("libswiftplex-test-plugin.so"), configFingerprint: config,
                      configure: { _ in .success(config) })
}

@Suite(.timeLimit(.minutes(2))) struct BotHostTests {
    @Test func firstStartCreatesTheBotAndItsAddressAndARestartReusesThem() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let options = BotHostOptions(dataDirectory: dir, profile: .init(displayName: "Host Test Bot"),
                                     relays: .embedded(host: "127.0.0.1", port: 0, publicHost: nil),
                                     plugins: [testPluginSpec("menu", tag: "status")],
                                     runnerExecutable: URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner")))
        let first = try await BotHost.start(options, logger: quiet)
        let address = try #require(first.address)
        #expect(address.hasPrefix("simplex:/contact#") || address.hasPrefix("https://"))
        #expect(first.relayAddress != nil)
        // The profile carries the peer type, the plugins' command menu and the address.
        let user = await first.api.execute("/user")
        let profile = try #require(user["user"]?["profile"])
        #expect(profile["displayName"]?.stringValue == "Host Test Bot")
        #expect(profile["peerType"]?.stringValue == "bot")
        #expect(profile["contactLink"]?.stringValue == address)
        #expect(profile["preferences"]?["commands"]?.description.contains(#""keyword":"status""#) == true)
        await first.shutdown()

        // Data directory and databases are private.
        let mode = try FileManager.default.attributesOfItem(atPath: dir.path)[.posixPermissions] as? Int
        #expect(mode == 0o700)
        for file in ["bot_chat.db", "bot_agent.db", "plugins.db"] {
            let m = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent(file).path)[.posixPermissions] as? Int
            #expect(m == 0o600, "\(file)")
        }

        let second = try await BotHost.start(options, logger: quiet)
        #expect(second.address == address)
        #expect(second.userId == first.userId)
        let users = await second.api.execute("/users")
        #expect(users["users"]?.description.components(separatedBy: "\"userId\"").count == 2)  // still one user
        await second.shutdown()
    }

    @Test func aBadRelayAddressOrBusyPortIsAClearError() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let runner = URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner"))
        let a = try await BotHost.start(BotHostOptions(dataDirectory: dir.appendingPathComponent("a"), profile: .init(displayName: "a"),
                                                       relays: .embedded(host: "127.0.0.1", port: 0, publicHost: nil), runnerExecutable: runner),
                                        logger: quiet)
        let port = try #require(a.relayAddress?.port)
        await #expect(throws: BotHostError.self) {
            _ = try await BotHost.start(BotHostOptions(dataDirectory: dir.appendingPathComponent("b"), profile: .init(displayName: "b"),
                                                       relays: .embedded(host: "127.0.0.1", port: port, publicHost: nil), runnerExecutable: runner),
                                        logger: quiet)
        }
        await a.shutdown()
    }
}
