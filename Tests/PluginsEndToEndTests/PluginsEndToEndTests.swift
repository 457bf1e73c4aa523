import Foundation
import PluginHost
import SwiftplexPluginTesting
import Testing

/// The built-in plugins in the real bot host (engine, embedded relay on loopback TLS, SQLite files)
/// with scripted people connecting through their own engines.
@Suite(.serialized, .timeLimit(.minutes(3))) struct PluginsEndToEndTests {
    func plugin(_ name: String, _ config: String, isolation: PluginSpec.Isolation = .inProcess) -> PluginTestBench.Plugin {
        .init(name: name, path: PluginTestBench.product("lib\(name).so"), config: config, isolation: isolation)
    }

    /// SDK plugins run the same in a child process (`isolation: process`), timers and storage included.
    @Test func swiftPluginsWorkIsolatedInAChildProcess() async throws {
        let bench = try await PluginTestBench.start(plugins: [
            plugin("auto-accept", #"{"welcome":"isolated hello","max_per_hour":5}"#, isolation: .process),
            plugin("auto-reply", #"{"rules":[{"regex":"^ping$","reply":"pong"}],"echo":true}"#, isolation: .process),
        ])
        do {
            let alice = try await bench.connect("alice")
            #expect(try await alice.nextMessage() == "isolated hello")
            try await alice.send("ping")
            #expect(try await alice.nextMessage() == "pong")
            try await alice.send("other")
            #expect(try await alice.nextMessage() == "other")
        } catch {
            await bench.shutdown()
            throw error
        }
        await bench.shutdown()
    }

    @Test func aPersonGetsTheWelcomeAndEveryMessageEchoed() async throws {
        let bench = try await PluginTestBench.start(plugins: [
            plugin("auto-accept", #"{"welcome":"Hello! I echo what you write."}"#),
            plugin("auto-reply", #"{"echo":true}"#),
        ])
        do {
            let alice = try await bench.connect("alice")
            #expect(try await alice.nextMessage() == "Hello! I echo what you write.")
            try await alice.send("hello bot")
            #expect(try await alice.nextMessage() == "hello bot")
            try await alice.send("/help")
            #expect(try await alice.nextMessage() == "I echo every message back.")
        } catch {
            await bench.shutdown()
            throw error
        }
        await bench.shutdown()
    }

    @Test func rulesAcceptTheAllowedWelcomeThemAndRejectADeniedName() async throws {
        let bench = try await PluginTestBench.start(plugins: [
            plugin("auto-accept", #"{"welcome":"Welcome, friend","deny":["troll*"]}"#),
            plugin("auto-reply", #"{"rules":[{"keyword":"price","reply":"10 EUR"}]}"#),
        ])
        do {
            let troll = try await bench.request("troll42")
            let alice = try await bench.connect("alice")
            #expect(try await alice.nextMessage() == "Welcome, friend")
            try await alice.send("what is the price?")
            #expect(try await alice.nextMessage() == "10 EUR")
            // The troll's request was rejected: never connected, never greeted.
            #expect(await troll.receivesNothing(for: .seconds(2)))
            let contacts = await bench.host.api.execute("/_contacts \(bench.host.userId)")
            let names = contacts["contacts"]?.description ?? ""
            #expect(names.contains("alice") && !names.contains("troll42"))
        } catch {
            await bench.shutdown()
            throw error
        }
        await bench.shutdown()
    }

    @Test func theHourlyCapHolds() async throws {
        let bench = try await PluginTestBench.start(plugins: [plugin("auto-accept", #"{"max_per_hour":1,"welcome":"hi"}"#)])
        do {
            let first = try await bench.connect("first")
            #expect(try await first.nextMessage() == "hi")
            let second = try await bench.request("second")
            #expect(await second.receivesNothing(for: .seconds(2)))
            let contacts = await bench.host.api.execute("/_contacts \(bench.host.userId)")
            #expect(contacts["contacts"]?.description.contains("second") == false)
        } catch {
            await bench.shutdown()
            throw error
        }
        await bench.shutdown()
    }

    @Test func broadcastReachesEveryContactAndTheAdminGetsASummary() async throws {
        let bench = try await PluginTestBench.start(plugins: [
            plugin("auto-accept", "{}"),
            plugin("broadcast", #"{"admins":["alice"],"notice":"Announcements only."}"#),
        ])
        do {
            let alice = try await bench.connect("alice")
            let bob = try await bench.connect("bob")
            let carol = try await bench.connect("carol")
            try await alice.send("Meeting at 5")
            #expect(try await bob.nextMessage() == "Meeting at 5")
            #expect(try await carol.nextMessage() == "Meeting at 5")
            #expect(try await alice.nextMessage() == "Sent to 2 contacts.")
            try await bob.send("can I post?")
            #expect(try await bob.nextMessage() == "Announcements only.")
            #expect(await carol.receivesNothing(for: .seconds(1)))
        } catch {
            await bench.shutdown()
            throw error
        }
        await bench.shutdown()
    }
}
