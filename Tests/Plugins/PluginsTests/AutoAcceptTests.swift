import Foundation
import PluginABITesting
import Testing

@Suite(.serialized) struct AutoAcceptTests {
    @Test func descriptor() throws {
        let lib = try plugin("auto-accept")
        #expect(lib.name == "auto-accept" && lib.events == ["receivedContactRequest", "contactConnected"])
        #expect(lib.configSchema?.contains(#""max_per_hour":{"default":0"#) == true)
    }

    @Test func trivialRulesTurnOnTheEnginesAutoAcceptWithTheWelcome() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("auto-accept"), chat.host, #"{"welcome":"Hello! I echo.","accept_incognito":true}"#)
        #expect(chat.host.commands == ["/user", "/_show_address 1",
                                       #"/_address_settings 1 {"autoAccept":{"acceptIncognito":true},"autoReply":{"text":"Hello! I echo.","type":"text"},"businessAddress":false}"#])
        p.stop()
    }

    @Test func rulesTurnTheEnginesAutoAcceptOffAndDenyPatternsReject() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("auto-accept"), chat.host, #"{"welcome":"Welcome","deny":["spam*","*bot"]}"#)
        #expect(chat.host.commands.last == #"/_address_settings 1 {"businessAddress":false}"#)
        chat.host.clearCommands()
        #expect(p.handle(ChatFixtures.contactRequest(11, name: "SpamKing")) == nil)
        #expect(p.handle(ChatFixtures.contactRequest(12, name: "somebot")) == nil)
        #expect(p.handle(ChatFixtures.contactRequest(13, name: "alice")) == nil)
        #expect(chat.actions == ["/_reject 11", "/_reject 12", "/_accept 13"])
        // The welcome goes to the accepted contact when it connects, not to others.
        #expect(p.handle(ChatFixtures.contactConnected(101, name: "alice")) == nil)
        #expect(p.handle(ChatFixtures.contactConnected(55, name: "via invitation")) == nil)
        #expect(p.handle(ChatFixtures.contactConnected(101, name: "alice")) == nil)
        #expect(chat.sent == ["@101 Welcome"])
        #expect(chat.host.logs.contains { $0.message == "contact request 11 rejected: matches a deny pattern" })
        p.stop()
    }

    @Test func allowPatternsAdmitOnlyMatchingNames() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("auto-accept"), chat.host, #"{"allow":["team-*","boss"]}"#)
        chat.host.clearCommands()
        for (id, name) in [(1, "team-ann"), (2, "Boss"), (3, "bossy"), (4, "stranger")] as [(Int64, String)] {
            #expect(p.handle(ChatFixtures.contactRequest(id, name: name)) == nil)
        }
        #expect(chat.actions == ["/_accept 1", "/_accept 2", "/_reject 3", "/_reject 4"])
        p.stop()
    }

    @Test func theHourlyCapHoldsAcrossARestart() throws {
        let lib = try plugin("auto-accept")
        let chat = ScriptedChat()
        let config = #"{"max_per_hour":2,"accept_incognito":true}"#
        let p = try startOrRecord(lib, chat.host, config)
        chat.host.clearCommands()
        for id: Int64 in 1...3 { #expect(p.handle(ChatFixtures.contactRequest(id, name: "user\(id)")) == nil) }
        #expect(chat.actions == ["/_accept incognito=on 1", "/_accept incognito=on 2", "/_reject 3"])
        p.stop()

        // A new instance over the same storage (the host keeps it across restarts) still counts them.
        let again = try startOrRecord(lib, chat.host, config)
        chat.host.clearCommands()
        #expect(again.handle(ChatFixtures.contactRequest(4, name: "user4")) == nil)
        #expect(chat.actions == ["/_reject 4"])
        again.stop()

        // Accepts older than an hour leave the window.
        var storage = chat.host.storage
        let old = Date().timeIntervalSince1970 - 3601
        storage["accepted-at"] = "[\(old),\(old)]"
        chat.host.storage = storage
        let later = try startOrRecord(lib, chat.host, config)
        chat.host.clearCommands()
        #expect(later.handle(ChatFixtures.contactRequest(5, name: "user5")) == nil)
        #expect(chat.actions == ["/_accept incognito=on 5"])
        later.stop()
    }

    @Test func aRejectionNoticeIsSentThenTheContactDeleted() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("auto-accept"), chat.host,
                                  #"{"welcome":"Hi","deny":["troll"],"rejection_notice":"Sorry, not accepting you.","rejection_grace_seconds":0}"#)
        #expect(chat.host.timers.map(\.name) == ["delete-rejected"])
        chat.host.clearCommands()
        #expect(p.handle(ChatFixtures.contactRequest(21, name: "troll")) == nil)
        #expect(chat.actions == ["/_accept 21"])
        #expect(p.handle(ChatFixtures.contactConnected(101, name: "troll")) == nil)
        #expect(chat.sent == ["@101 Sorry, not accepting you."])
        #expect(chat.actions.last == "/_delete @101 full")
        #expect(chat.host.storage["pending-deletions"] == nil)
        p.stop()
    }

    /// With a rejection notice, every rejected requester used to be accepted (to hear it), so
    /// `max_per_hour` capped nothing: a flood of requests became a flood of contacts.
    @Test func theHourlyCapAlsoHoldsWithARejectionNotice() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("auto-accept"), chat.host,
                                  #"{"deny":["mallory*"],"max_per_hour":2,"rejection_notice":"No.","rejection_grace_seconds":0}"#)
        chat.host.clearCommands()
        #expect(p.handle(ChatFixtures.contactRequest(1, name: "alice")) == nil)       // accepted: 1 of 2
        #expect(p.handle(ChatFixtures.contactRequest(2, name: "mallory-1")) == nil)   // denied, accepted for the notice: 2 of 2
        #expect(p.handle(ChatFixtures.contactRequest(3, name: "mallory-2")) == nil)   // denied, cap reached: no notice
        #expect(p.handle(ChatFixtures.contactRequest(4, name: "bob")) == nil)         // allowed, cap reached
        for id: Int64 in 5...20 { #expect(p.handle(ChatFixtures.contactRequest(id, name: "mallory-\(id)")) == nil) }
        #expect(chat.actions.filter { $0.hasPrefix("/_accept") } == ["/_accept 1", "/_accept 2"])
        #expect(chat.actions.filter { $0.hasPrefix("/_reject") } == (3...20).map { "/_reject \($0)" })
        p.stop()
    }

    @Test func deletionsWaitForTheGracePeriodAndATimer() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("auto-accept"), chat.host,
                                  #"{"deny":["troll"],"rejection_notice":"No.","rejection_grace_seconds":1}"#)
        #expect(p.handle(ChatFixtures.contactRequest(21, name: "troll")) == nil)
        #expect(p.handle(ChatFixtures.contactConnected(101, name: "troll")) == nil)
        #expect(!chat.actions.contains { $0.hasPrefix("/_delete") })
        #expect(chat.host.storage["pending-deletions"] != nil)
        // Kept: the plugin dates the deletion with the wall clock (grace 1 s); this is the grace
        // period passing, the behaviour under test, not a wait for something to happen.
        Thread.sleep(forTimeInterval: 1.1)
        let timer = try #require(chat.host.timers.first)
        #expect(timer.repeatMs == 1000)
        #expect(p.handle(TestHost.timerEvent(timer)) == nil)
        #expect(chat.actions.last == "/_delete @101 full")
        p.stop()
    }

    @Test func startErrors() throws {
        let lib = try plugin("auto-accept")
        let chat = ScriptedChat()
        chat.hasAddress = false
        guard case let .failure(e) = lib.start(host: chat.host, config: "{}") else { Issue.record("started"); return }
        #expect(e.message.hasPrefix("the bot has no contact address") && e.message.contains("userContactLinkNotFound"))
        #expect(startError(lib, #"{"max_per_hour":-1}"#) == "config.max_per_hour: must be 0 or more")
        #expect(startError(lib, #"{"deny":"troll"}"#) == "config.deny: expected an array")
        #expect(startError(lib, #"{"max_per_hour":"lots"}"#) == "config.max_per_hour: expected an integer")
    }
}
