import CSwiftplexPlugin
import Foundation
import PluginABITesting
import Testing

/// The `channel` and `channel-relay` plugins over the C ABI with scripted Chat API answers (the
/// live runs are `Tests/python/test_python_channels.py` and `ChatAPITests/RelayPolicyTests`).
@Suite(.serialized) struct ChannelPluginTests {
    static let config = #"""
        {"name": "News", "relays": [{"name": "one", "address": "https://r1/r#a"}, {"name": "two", "address": "https://r2/r#b"}],
         "admins": ["1:alice"], "notice": "Admins only.", "schedule": [{"every_seconds": 3600, "text": "hourly"}]}
        """#

    /// Answers the channel commands; `owned` lists the group ids `/_get relays` shows as the bot's channels.
    final class ChannelChat: @unchecked Sendable {
        // @unchecked: fields are changed by the test between plugin calls only.
        var owned: Set<Int64> = []
        var created = 0
        let host = TestHost()

        init() { host.respond { [unowned self] in self.answer($0) } }

        func answer(_ command: String) -> String {
            let words = command.split(separator: " ")
            switch words.first {
            case "/user": return ChatFixtures.activeUser(1)
            case "/relays":
                return ChatFixtures.json(["type": "userChatRelays", "user": ChatFixtures.user(),
                                          "chatRelays": [["chatRelayId": 7, "address": "https://r1/r#a"], ["chatRelayId": 8, "address": "https://r2/r#b"]]])
            case "/_public":
                created += 1
                owned.insert(5)
                return ChatFixtures.json(["type": "publicGroupCreated", "user": ChatFixtures.user(),
                                          "groupInfo": ["groupId": 5, "membership": ["memberRole": "owner"]],
                                          "groupLink": ["connLinkContact": ["connShortLink": "https://s/c#news"]], "groupRelays": [Any]()])
            case "/_get" where words.count == 3:
                let id = Int64(words[2].dropFirst()) ?? 0
                guard owned.contains(id) else { return ChatFixtures.chatCmdError("groupNotFound") }
                return ChatFixtures.json(["type": "groupRelays", "user": ChatFixtures.user(),
                                          "groupInfo": ["groupId": id, "membership": ["memberRole": "owner"]], "groupRelays": [Any]()])
            case "/_send":
                guard let (ref, content) = ChatFixtures.parseSend(command) else { return ChatFixtures.chatCmdError("badSend") }
                return ChatFixtures.sent(to: Int64(ref.dropFirst()) ?? 0, text: content["text"] as? String ?? "")
            default: return ChatFixtures.chatCmdError("unknownCommand")
            }
        }

        /// `ref text` of every `/_send` (posts through post_to_channel are recorded as the `/_send` the host makes).
        var sent: [String] {
            host.commands.compactMap { ChatFixtures.parseSend($0) }.map { "\($0.ref) \($0.content["text"] as? String ?? "")" }
        }
    }

    @Test func itCreatesTheChannelWithItsRelaysOnceAndReusesIt() throws {
        let chat = ChannelChat()
        let p = try startOrRecord(try plugin("channel"), chat.host, Self.config)
        #expect(chat.host.commands.contains("/relays name=one https://r1/r#a name=two https://r2/r#b"))
        #expect(chat.host.commands.contains(#"/_public group 1 7,8 {"displayName":"News","fullName":""}"#), "\(chat.host.commands)")
        #expect(chat.host.storage["channel.groupId"] == "5" && chat.host.storage["channel.link"] == "https://s/c#news")
        #expect(chat.host.logs.contains { $0.message.contains("link: https://s/c#news") })
        p.stop()

        // Restarted with its storage: the channel is reused, not made again.
        let again = ChannelChat()
        again.owned = [5]
        again.host.storage = chat.host.storage
        let q = try startOrRecord(try plugin("channel"), again.host, Self.config)
        #expect(again.created == 0 && again.host.commands.contains("/_get relays #5"))
        q.stop()
    }

    @Test func adminsPostAsTheChannelOthersGetTheNoticeAndTimersPost() throws {
        let chat = ChannelChat()
        let p = try startOrRecord(try plugin("channel"), chat.host, Self.config)
        #expect(p.handle(ChatFixtures.directMessage(from: 1, name: "alice", text: "Breaking news")) == nil)
        #expect(p.handle(ChatFixtures.directMessage(from: 2, name: "bob", text: "let me post")) == nil)
        // Calls itself alice, but is not contact 1.
        #expect(p.handle(ChatFixtures.directMessage(from: 9, name: "alice", localName: "alice_1", text: "spam")) == nil)
        let timer = try #require(chat.host.timers.first { $0.name == "post-0" })
        #expect(timer.repeatMs == 3_600_000)
        #expect(p.handle(#"{"type":"swiftplex.timer","timerId":\#(timer.id),"name":"post-0"}"#) == nil)
        #expect(chat.sent == ["#5 Breaking news", "@1 Posted to News.", "@2 Admins only.", "@9 Admins only.", "#5 hourly"], "\(chat.sent)")
        p.stop()
    }

    /// The versioning rule: a plugin built against ABI 1.1 starts on a host whose table is the
    /// 1.0 size, and only posting to a channel fails there (no call beyond the table).
    @Test func onAnABI10HostItRunsButCannotPost() throws {
        let chat = ChannelChat()
        chat.host.api.pointee.struct_size = UInt32(MemoryLayout<swiftplex_host_api>.offset(of: \swiftplex_host_api.post_to_channel)!)
        let p = try startOrRecord(try plugin("channel"), chat.host, Self.config)
        #expect(chat.owned == [5])
        let timer = try #require(chat.host.timers.first { $0.name == "post-0" })
        #expect(p.handle(#"{"type":"swiftplex.timer","timerId":\#(timer.id),"name":"post-0"}"#) == nil)
        #expect(chat.sent.isEmpty, "\(chat.sent)")
        #expect(chat.host.logs.contains { $0.message.contains("a scheduled post failed") && $0.message.contains("ABI 1.0 host") })
        p.stop()
    }

    @Test func badSettingsAreRefusedAtStart() throws {
        let lib = try plugin("channel")
        #expect(startError(lib, #"{"name": "News", "relays": []}"#)?.contains("at least one chat relay") == true)
        #expect(startError(lib, #"{"name": "News", "relays": [{"name": "a b", "address": "x"}]}"#)?.contains("one word") == true)
        #expect(startError(lib, #"{"name": "News", "relays": [{"name": "a", "address": "x"}], "admins": ["alice"]}"#)?.contains("bare name") == true)
        // channel-relay runs only in a bot in relay mode (the scripted /user is no chat relay).
        let chat = ChannelChat()
        guard case let .failure(e) = try plugin("channel-relay").start(host: chat.host, config: "{}") else {
            Issue.record("channel-relay started in a bot that is no chat relay")
            return
        }
        #expect(e.message.contains("relay mode"), "\(e.message)")
        #expect(chat.host.commands == ["/user"])
    }
}
