import Foundation
import SwiftplexPluginTesting
import Testing

/// auto-accept's rejection notice in the real host: a rejected requester is accepted, told why,
/// and deleted; an allowed one is welcomed and stays.
@Suite(.timeLimit(.minutes(3))) struct AutoAcceptNoticeTests {
    @Test func aRejectedRequesterGetsTheNoticeAndIsThenDeleted() async throws {
        try await PluginTestBench.withBench(plugins: [
            .init(name: "gate", path: PluginTestBench.product("libauto-accept.so"),
                  config: #"{"welcome":"welcome in","deny":["mallory*"],"rejection_notice":"Sorry, this bot does not accept you.","rejection_grace_seconds":0}"#),
        ]) { bench in
            let mallory = try await bench.request("mallory")
            #expect(try await mallory.nextMessage() == "Sorry, this bot does not accept you.")
            _ = try await mallory.nextEvent("contactDeletedByContact")
            let alice = try await bench.connect("alice")
            #expect(try await alice.nextMessage() == "welcome in")
            let contacts = await bench.host.api.execute("/_contacts \(bench.host.userId)").description
            #expect(contacts.contains(#""displayName":"alice""#) && !contacts.contains("mallory"))
        }
    }

    @Test func acceptIncognitoGivesTheContactARandomProfile() async throws {
        try await PluginTestBench.withBench(plugins: [
            .init(name: "gate", path: PluginTestBench.product("libauto-accept.so"),
                  config: #"{"welcome":"hi","allow":["a*"],"accept_incognito":true}"#),
        ], botName: "named-bot") { bench in
            let alice = try await bench.connect("alice")
            #expect(try await alice.nextMessage() == "hi")
            // The bot as alice sees it: a contact with a random name, not the bot's profile.
            let seen = await alice.api.execute("/_contacts 1")
            let contacts = seen["contacts"]?.description ?? ""
            #expect(seen["type"]?.stringValue == "contactsList" && contacts.contains("contactId"))
            #expect(!contacts.contains("named-bot"))
        }
    }
}
