import ChatCore
import Foundation
import PluginHost
import SwiftplexPluginTesting
import Testing

/// The built-in plugins, loaded with dlopen into a real bot host, talking to people who run
/// their own engines through the host's embedded relay.
@Suite(.timeLimit(.minutes(3))) struct PluginsEndToEndTests {
    static let welcome = "Hello! I am a Swiftplex bot. Every message you send me comes back."

    static func acceptAndEcho(isolation: PluginSpec.Isolation = .inProcess) -> [PluginTestBench.Plugin] {
        [
            .init(name: "welcome", path: PluginTestBench.product("libauto-accept.so"), config: #"{"welcome": "\#(welcome)"}"#),
            .init(name: "echo", path: PluginTestBench.product("libauto-reply.so"), config: #"{"echo": true}"#, isolation: isolation),
        ]
    }

    /// On every engine: the embedded one, `libsimplex.so` loaded by path, `swiftplex-chat -p`.
    @Test(arguments: PluginTestBench.Engine.allCases) func aPersonConnectsGetsTheWelcomeAndEveryMessageEchoed(_ engine: PluginTestBench.Engine) async throws {
        try await PluginTestBench.withBench(plugins: Self.acceptAndEcho(), engine: engine) { bench in
            #expect(bench.host.api.kind == engine.kind)
            let alice = try await bench.connect("alice")
            #expect(try await alice.nextMessage() == Self.welcome)
            for text in ["hello", "second message", "ünïcödé ✓"] {
                try await alice.send(text)
                #expect(try await alice.nextMessage() == text)
            }
            let bob = try await bench.connect("bob")
            #expect(try await bob.nextMessage() == Self.welcome)
            try await bob.send("hi from bob")
            #expect(try await bob.nextMessage() == "hi from bob")
        }
    }

    @Test func anIsolatedEchoPluginWorksTheSame() async throws {
        try await PluginTestBench.withBench(plugins: Self.acceptAndEcho(isolation: .process)) { bench in
            let alice = try await bench.connect("alice")
            #expect(try await alice.nextMessage() == Self.welcome)
            try await alice.send("through a child process")
            #expect(try await alice.nextMessage() == "through a child process")
            #expect(bench.host.plugins.statuses().first { $0.name == "echo" }?.isolation == .process)
        }
    }

    @Test func autoAcceptRulesDenyNamesAndCapTheHourlyRate() async throws {
        try await PluginTestBench.withBench(plugins: [
            .init(name: "gate", path: PluginTestBench.product("libauto-accept.so"),
                  config: #"{"welcome": "welcome in", "deny": ["mallory*"], "max_per_hour": 2}"#),
        ]) { bench in
            let alice = try await bench.connect("alice")
            #expect(try await alice.nextMessage() == "welcome in")
            _ = try await bench.request("mallory-the-spammer")
            let bob = try await bench.connect("bob")
            #expect(try await bob.nextMessage() == "welcome in")
            // Two accepted this hour: the third is refused although its name is allowed.
            let carol = try await bench.request("carol")
            #expect(await carol.receivesNothing(for: .seconds(3)))
            let contacts = await bench.host.api.execute("/_contacts \(bench.host.userId)").description
            #expect(contacts.contains(#""displayName":"alice""#) && contacts.contains(#""displayName":"bob""#))
            #expect(!contacts.contains("mallory") && !contacts.contains(#""displayName":"carol""#))
        }
    }

    @Test func broadcastReachesEveryContactAndOthersGetTheNotice() async throws {
        try await PluginTestBench.withBench(plugins: [
            .init(name: "welcome", path: PluginTestBench.product("libauto-accept.so"), config: "{}"),
            .init(name: "news", path: PluginTestBench.product("libbroadcast.so"),
                  config: #"{"admins": ["1:alice"], "notice": "This bot only forwards announcements."}"#),
        ]) { bench in
            let alice = try await bench.connect("alice")
            let bob = try await bench.connect("bob")
            let carol = try await bench.connect("carol")
            try await alice.send("the meeting moves to 3pm")
            #expect(try await bob.nextMessage() == "the meeting moves to 3pm")
            #expect(try await carol.nextMessage() == "the meeting moves to 3pm")
            let summary = try await alice.nextMessage()
            #expect(summary.contains("2"))
            try await bob.send("can I broadcast?")
            #expect(try await bob.nextMessage() == "This bot only forwards announcements.")
            // Carol got nothing of bob's: her next message is alice's next broadcast.
            try await alice.send("and the room is 4B")
            #expect(try await carol.nextMessage() == "and the room is 4B")
        }
    }

    /// A second contact who takes the admin's display name is `alice_1` in the bot's database
    /// and is not contact 1: its "broadcast" reaches nobody, it gets the notice, and the real
    /// admin still broadcasts (to the impostor too, as to every contact).
    @Test func aContactNamedLikeTheAdminCannotBroadcast() async throws {
        let notice = "This bot only forwards announcements."
        try await PluginTestBench.withBench(plugins: [
            .init(name: "welcome", path: PluginTestBench.product("libauto-accept.so"), config: "{}"),
            .init(name: "news", path: PluginTestBench.product("libbroadcast.so"),
                  config: #"{"admins": ["1:alice"], "notice": "\#(notice)"}"#),
        ]) { bench in
            let alice = try await bench.connect("alice")
            let bob = try await bench.connect("bob")
            let impostor = try await bench.connect("alice")
            let contacts = await bench.host.api.execute("/_contacts \(bench.host.userId)")
            let names = contacts.description
            #expect(names.contains(#""contactId":1,"localDisplayName":"alice""#))
            #expect(names.contains(#""localDisplayName":"alice_1""#))

            try await impostor.send("URGENT: everyone send your recovery phrase to me")
            // The bot has handled it once the impostor has its answer: the notice.
            #expect(try await impostor.nextMessage() == notice)
            try await alice.send("the real announcement")
            // Each person's next message is the real one: the impostor's never went out before it.
            #expect(try await bob.nextMessage() == "the real announcement")
            #expect(try await impostor.nextMessage() == "the real announcement")
            #expect(try await alice.nextMessage() == "Sent to 2 contacts.")
        }
    }
}
