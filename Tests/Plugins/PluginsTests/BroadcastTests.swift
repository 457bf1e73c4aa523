import Foundation
import PluginABITesting
import Testing

@Suite(.serialized) struct BroadcastTests {
    let config = #"{"admins":["1:alice"],"notice":"This bot only broadcasts announcements."}"#

    @Test func anAdminMessageReachesEveryOtherContactAndTheAdminGetsASummary() throws {
        let chat = ScriptedChat()
        chat.contacts = [(1, "alice"), (2, "bob"), (3, "carol"), (4, "dan")]
        let p = try startOrRecord(try plugin("broadcast"), chat.host, config)
        #expect(p.handle(ChatFixtures.directMessage(from: 1, name: "alice", text: "Meeting at 5")) == nil)
        #expect(chat.sent == ["@2 Meeting at 5", "@3 Meeting at 5", "@4 Meeting at 5", "@1 Sent to 3 contacts."])
        p.stop()
    }

    @Test func failedDeliveriesAreCountedInTheSummary() throws {
        let chat = ScriptedChat()
        chat.contacts = [(1, "alice"), (2, "bob"), (3, "carol")]
        chat.failSendTo = [3]
        let p = try startOrRecord(try plugin("broadcast"), chat.host, config)
        #expect(p.handle(ChatFixtures.directMessage(from: 1, name: "alice", text: "news")) == nil)
        #expect(chat.sent.last == "@1 Sent to 1 contact, failed for 1.")
        p.stop()
    }

    @Test func othersGetTheNoticeAndImpostorsAreNotAdmins() throws {
        let chat = ScriptedChat()
        chat.contacts = [(1, "alice"), (2, "bob")]
        let p = try startOrRecord(try plugin("broadcast"), chat.host, config)
        #expect(p.handle(ChatFixtures.directMessage(from: 2, name: "bob", text: "hello?")) == nil)
        // Calls itself alice, but the bot's database named it alice_1.
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "alice", localName: "alice_1", text: "spam")) == nil)
        // Even a contact whose local name is "alice" is not the admin unless it is contact 1
        // (e.g. alice deleted and someone else connected as "alice" afterwards).
        #expect(p.handle(ChatFixtures.directMessage(from: 8, name: "alice", text: "spam")) == nil)
        // And contact 1 under another name (a later contact reusing the id) is not either.
        #expect(p.handle(ChatFixtures.directMessage(from: 1, name: "mallory", text: "spam")) == nil)
        #expect(chat.sent == ["@2 This bot only broadcasts announcements.", "@7 This bot only broadcasts announcements.",
                              "@8 This bot only broadcasts announcements.", "@1 This bot only broadcasts announcements."])
        #expect(!chat.host.commands.contains { $0.hasPrefix("/_contacts") })
        p.stop()
    }

    @Test func configErrors() throws {
        let lib = try plugin("broadcast")
        #expect(lib.events == ["newChatItems"])
        #expect(startError(lib, #"{"notice":"x"}"#) == "config.admins: missing")
        #expect(startError(lib, #"{"admins":[],"notice":"x"}"#) == #"config.admins: needs at least one "<contact id>:<local display name>""#)
        #expect(startError(lib, #"{"admins":[1],"notice":"x"}"#) == "config.admins[0]: expected a string")
        // A bare name (the old form) is refused, showing the new one.
        #expect(startError(lib, #"{"admins":["1:bob","alice"],"notice":"x"}"#)
            == #"config.admins[1]: "alice" is a bare name; an admin is "<contact id>:<local display name>", e.g. "1:alice" (the bot logs each contact's id)"#)
        #expect(startError(lib, #"{"admins":["x:alice"],"notice":"x"}"#)?.hasPrefix(#"config.admins[0]: "x:alice": the contact id"#) == true)
        #expect(startError(lib, #"{"admins":["0:alice"],"notice":"x"}"#)?.hasPrefix(#"config.admins[0]: "0:alice": the contact id"#) == true)
        #expect(startError(lib, #"{"admins":["3:"],"notice":"x"}"#)?.hasPrefix(#"config.admins[0]: "3:": the local display name"#) == true)
        // A repeated key in the config is refused rather than one of them silently winning.
        #expect(startError(lib, #"{"admins":["1:alice"],"admins":["2:mallory"],"notice":"x"}"#)?.contains("duplicate key") == true)
    }
}
