import Foundation
import PluginABITesting
import Testing

@Suite(.serialized) struct AutoReplyTests {
    @Test func descriptor() throws {
        let lib = try plugin("auto-reply")
        #expect(lib.name == "auto-reply" && lib.version == "1.0.0" && lib.events == ["newChatItems"])
        let schema = try JSONSerialization.jsonObject(with: Data(try #require(lib.configSchema).utf8)) as? [String: Any]
        let props = schema?["properties"] as? [String: Any]
        #expect(Set(props?.keys.map { $0 } ?? []) == ["echo", "rules", "help"])
    }

    @Test func echoModeRepliesWithTheSameText() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("auto-reply"), chat.host, #"{"echo":true}"#)
        #expect(p.handle(ChatFixtures.directMessage(from: 5, name: "ann", text: "hello there")) == nil)
        #expect(p.handle(ChatFixtures.groupMessage(groupId: 2, memberName: "bo", memberContactId: nil, text: "in group")) == nil)
        #expect(p.handle(ChatFixtures.sentMessage(to: 5, text: "own")) == nil)
        #expect(chat.sent == ["@5 hello there", "#2 in group"])
        // In a group the answer quotes the message (as SimpleX's msg.reply); in a direct chat not.
        let sends = chat.host.commands.filter { $0.hasPrefix("/_send") }
        #expect(sends.count == 2 && !sends[0].contains("quotedItemId") && sends[1].contains(#""quotedItemId":200"#), "\(sends)")
        p.stop()
    }

    @Test func theFirstMatchingRuleReplies() throws {
        let chat = ScriptedChat()
        let config = #"{"echo":true,"rules":[{"keyword":"price","reply":"10 EUR"},{"regex":"^(hi|hello)\\b","reply":"Hi!"},{"keyword":"hello","reply":"never"},{"keyword":"opening hours","reply":"9-5"}]}"#
        let p = try startOrRecord(try plugin("auto-reply"), chat.host, config)
        for text in ["What is the PRICE?", "hello, price?", "Hello you", "prices", "your opening hours please"] {
            #expect(p.handle(ChatFixtures.directMessage(from: 5, name: "ann", text: text)) == nil)
        }
        // "prices" is not the word "price": no rule, so echo.
        #expect(chat.sent == ["@5 10 EUR", "@5 10 EUR", "@5 Hi!", "@5 prices", "@5 9-5"])
        p.stop()
    }

    @Test func withoutEchoUnmatchedMessagesGetNoReply() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("auto-reply"), chat.host, #"{"rules":[{"keyword":"ping","reply":"pong"}]}"#)
        #expect(p.handle(ChatFixtures.directMessage(from: 5, name: "ann", text: "something else")) == nil)
        #expect(p.handle(ChatFixtures.directMessage(from: 5, name: "ann", text: "ping")) == nil)
        #expect(chat.sent == ["@5 pong"])
        p.stop()
    }

    @Test func helpListsTheRulesAndIsInTheMenu() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("auto-reply"), chat.host, #"{"echo":true,"rules":[{"keyword":"price","reply":"10 EUR"},{"regex":"^hi","reply":"Hi!"}]}"#)
        #expect(chat.host.menu == #"[{"keyword":"help","label":"What this bot answers"}]"#)
        #expect(p.handle(ChatFixtures.directMessage(from: 5, name: "ann", text: "/help")) == nil)
        #expect(chat.sent == ["@5 I answer:\n• price → 10 EUR\n• /^hi/ → Hi!\nAnything else I echo back."])
        p.stop()

        // help: false — no menu entry, and /help is an ordinary message (echoed here).
        let chat2 = ScriptedChat()
        let p2 = try startOrRecord(try plugin("auto-reply"), chat2.host, #"{"echo":true,"help":false}"#)
        #expect(chat2.host.menu == "[]")
        #expect(p2.handle(ChatFixtures.directMessage(from: 5, name: "ann", text: "/help")) == nil)
        #expect(chat2.sent == ["@5 /help"])
        p2.stop()
    }

    @Test func badRulesStopTheStartNamingTheRule() throws {
        let lib = try plugin("auto-reply")
        #expect(startError(lib, #"{"rules":[{"keyword":"a","reply":"b"},{"regex":"(unclosed","reply":"x"}]}"#)
            == "config.rules[1].regex: invalid regular expression (unclosed")
        #expect(startError(lib, #"{"rules":[{"reply":"x"}]}"#) == "config.rules[0]: needs keyword or regex")
        #expect(startError(lib, #"{"rules":[{"keyword":"a","regex":"b","reply":"x"}]}"#) == "config.rules[0]: has both keyword and regex; give one")
        #expect(startError(lib, #"{"rules":[{"keyword":"a"}]}"#) == "config.rules[0].reply: missing")
        #expect(startError(lib, #"{"echo":"yes"}"#) == "config.echo: expected true or false")
    }
}
