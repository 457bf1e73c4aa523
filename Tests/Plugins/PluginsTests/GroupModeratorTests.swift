import Foundation
import PluginABITesting
import Testing

/// `group-moderator` over the C ABI with a scripted Chat API: which commands each message and
/// group event leads to. The end-to-end tests (BotHostTests/GroupModeratorEndToEndTests) run it
/// in a real host with real members.
@Suite(.serialized) struct GroupModeratorTests {
    /// Now, as the Chat API writes timestamps: a member with this join time is new.
    static var justNow: String { Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date()) }

    static func bob(_ text: String, itemId: Int64 = 200, role: String = "member", category: String = "post", joinedAt: String = GroupModeratorTests.justNow,
                    contentType: String = "text", userRole: String = "admin", botJoinedAt: String = ChatFixtures.ts) -> String {
        ChatFixtures.groupMessage(groupId: 2, memberName: "bob", memberContactId: nil, text: text, itemId: itemId, groupMemberId: 50,
                                  memberId: "Ym9i", role: role, category: category, joinedAt: joinedAt, contentType: contentType, userRole: userRole,
                                  userJoinedAt: botJoinedAt)
    }

    @Test func descriptor() throws {
        let lib = try plugin("group-moderator")
        #expect(lib.name == "group-moderator" && lib.version == "1.0.0")
        #expect(lib.events.first == "newChatItems" && lib.events.contains("receivedGroupInvitation") && lib.events.contains("connectedToGroupMember"))
        let schema = try JSONSerialization.jsonObject(with: Data(try #require(lib.configSchema).utf8)) as? [String: Any]
        #expect(Set((schema?["properties"] as? [String: Any])?.keys.map { $0 } ?? []) == ["accept_invitations", "groups"])
    }

    @Test func aBlockedWordIsDeletedStrikedAndTheThirdStrikeRemoves() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("group-moderator"), chat.host, #"{"groups":[{"blocked_words":["spam","free money"]}]}"#)
        #expect(p.handle(Self.bob("hello everyone", itemId: 200)) == nil)
        #expect(p.handle(Self.bob("buy SPAM now", itemId: 201)) == nil)
        #expect(p.handle(Self.bob("Free money for all", itemId: 202)) == nil)
        #expect(p.handle(Self.bob("spammy is a different word", itemId: 203)) == nil)
        #expect(p.handle(Self.bob("spam again", itemId: 204)) == nil)
        #expect(chat.actions == ["/_delete member item #2 201", "/_delete member item #2 202", "/_delete member item #2 204", "/_remove #2 50"])
        #expect(chat.sent == [
            "#2 bob: your message was removed (blocked word). Strike 1 of 3.",
            "#2 bob: your message was removed (blocked word). Strike 2 of 3.",
            "#2 bob: your message was removed (blocked word). Strike 3 of 3.",
        ])
        // The removal cleared the strikes: a member who comes back starts afresh.
        #expect(chat.host.storage["strikes"] == "{}")
        p.stop()
    }

    @Test func blockAfterBlocksAndPatternsMatchCaseInsensitively() throws {
        let chat = ScriptedChat()
        let config = #"{"groups":[{"blocked_patterns":["b[i1]tc[o0]in"],"block_after":2,"remove_after":0,"notice":"{name} ({reason}, {strikes}/{max})"}]}"#
        let p = try startOrRecord(try plugin("group-moderator"), chat.host, config)
        #expect(p.handle(Self.bob("B1TCOIN giveaway", itemId: 300)) == nil)
        #expect(p.handle(Self.bob("bitc0in", itemId: 301)) == nil)
        #expect(chat.actions == ["/_delete member item #2 300", "/_delete member item #2 301", "/_block #2 50 blocked=on"])
        #expect(chat.sent == ["#2 bob (blocked content, 1/2)", "#2 bob (blocked content, 2/2)"])
        p.stop()
    }

    @Test func newMembersMayNotPostLinksOrMediaForAWhile() throws {
        let chat = ScriptedChat()
        let config = #"{"groups":[{"new_member_seconds":600,"new_members_no_links":true,"new_members_no_media":true,"notice":"{reason}"}]}"#
        let p = try startOrRecord(try plugin("group-moderator"), chat.host, config)
        #expect(p.handle(Self.bob("look at https://example.org", itemId: 400)) == nil)
        #expect(p.handle(Self.bob("", itemId: 401, contentType: "image")) == nil)
        // Joined long ago, or there before the bot: not new.
        #expect(p.handle(Self.bob("look at https://example.org", itemId: 402, joinedAt: "2026-01-01T00:00:00Z")) == nil)
        #expect(p.handle(Self.bob("www.example.org", itemId: 403, category: "pre")) == nil)
        #expect(chat.actions == ["/_delete member item #2 400", "/_delete member item #2 401"])
        #expect(chat.sent == ["#2 links are not allowed for new members", "#2 media are not allowed for new members"])
        p.stop()
    }

    @Test func theRateLimitRemovesMessagesBeyondIt() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("group-moderator"), chat.host,
                                  #"{"groups":[{"rate_limit":{"messages":2,"seconds":60},"remove_after":0}]}"#)
        for i in 0..<4 { #expect(p.handle(Self.bob("message \(i)", itemId: 500 + Int64(i))) == nil) }
        #expect(chat.actions == ["/_delete member item #2 502", "/_delete member item #2 503"])
        #expect(chat.sent == ["#2 bob: your message was removed (too many messages). Strike 1 of ∞.",
                              "#2 bob: your message was removed (too many messages). Strike 2 of ∞."])
        p.stop()
    }

    @Test func moderatorsAreExemptAndABotWithoutTheRoleDoesNothing() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("group-moderator"), chat.host, #"{"groups":[{"blocked_words":["spam"]}]}"#)
        #expect(p.handle(Self.bob("spam", itemId: 600, role: "moderator")) == nil)
        #expect(p.handle(Self.bob("spam", itemId: 601, role: "owner")) == nil)
        #expect(p.handle(Self.bob("spam", itemId: 602, userRole: "member")) == nil)
        #expect(chat.actions.isEmpty && chat.sent.isEmpty)
        #expect(chat.host.logs.contains { $0.message.contains("needs moderator") })
        p.stop()
    }

    /// Messages sent before the bot joined (the history a new member gets) are not judged.
    @Test func historyFromBeforeTheBotJoinedIsLeftAlone() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("group-moderator"), chat.host, #"{"groups":[{"blocked_words":["spam"],"rate_limit":{"messages":1,"seconds":60}}]}"#)
        // The item's time (2026-01-01) is before the bot's membership (now).
        for i in 0..<3 { #expect(p.handle(Self.bob("old spam", itemId: 800 + Int64(i), botJoinedAt: Self.justNow)) == nil) }
        #expect(p.handle(Self.bob("new spam", itemId: 810)) == nil)
        #expect(chat.actions == ["/_delete member item #2 810"])
        #expect(chat.sent == ["#2 bob: your message was removed (blocked word). Strike 1 of 3."])
        p.stop()
    }

    @Test func onlyTheFirstMatchingGroupEntryApplies() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("group-moderator"), chat.host,
                                  #"{"groups":[{"match":"other*","blocked_words":["hello"]},{"match":"te?m","blocked_words":["spam"]}]}"#)
        #expect(p.handle(Self.bob("hello", itemId: 700)) == nil)
        #expect(p.handle(Self.bob("spam", itemId: 701)) == nil)
        #expect(chat.actions == ["/_delete member item #2 701"])
        p.stop()
    }

    @Test func invitationsAreAcceptedWhenConfigured() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("group-moderator"), chat.host, "{}")
        #expect(p.handle(ChatFixtures.groupInvitation(groupId: 7, from: 3)) == nil)
        #expect(chat.actions == ["/_join #7"])
        p.stop()

        let chat2 = ScriptedChat()
        let p2 = try startOrRecord(try plugin("group-moderator"), chat2.host, #"{"accept_invitations":false}"#)
        #expect(p2.handle(ChatFixtures.groupInvitation(groupId: 7, from: 3)) == nil)
        #expect(chat2.actions.isEmpty)
        p2.stop()
    }

    @Test func newcomersAreWelcomedOnce() throws {
        let chat = ScriptedChat()
        let p = try startOrRecord(try plugin("group-moderator"), chat.host, #"{"groups":[{"welcome":"Welcome to {group}, {name}!"}]}"#)
        let carol = ChatFixtures.member(60, groupId: 2, name: "carol", memberId: "Y2Fy", category: "post")
        let dave = ChatFixtures.member(61, groupId: 2, name: "dave", memberId: "ZGF2", category: "pre")
        let erin = ChatFixtures.member(62, groupId: 2, name: "{reason}", memberId: "ZXJp", category: "invitee")
        #expect(p.handle(ChatFixtures.groupEvent("connectedToGroupMember", groupId: 2, ["member": carol])) == nil)
        #expect(p.handle(ChatFixtures.groupEvent("connectedToGroupMember", groupId: 2, ["member": carol])) == nil)
        // There before the bot joined: not a newcomer.
        #expect(p.handle(ChatFixtures.groupEvent("connectedToGroupMember", groupId: 2, ["member": dave])) == nil)
        #expect(p.handle(ChatFixtures.groupEvent("joinedGroupMember", groupId: 2, ["member": erin])) == nil)
        #expect(chat.sent == ["#2 Welcome to team, carol!", "#2 Welcome to team, {reason}!"])
        p.stop()
    }

    @Test func badConfigsStopTheStartNamingTheField() throws {
        let lib = try plugin("group-moderator")
        #expect(startError(lib, #"{"groups":[{"blocked_patterns":["ok","(unclosed"]}]}"#)
            == "config.groups[0].blocked_patterns[1]: invalid regular expression (unclosed")
        #expect(startError(lib, #"{"groups":[{},{"blocked_words":["fine"," "]}]}"#) == "config.groups[1].blocked_words[1]: must not be empty")
        #expect(startError(lib, #"{"groups":[{"new_members_no_links":true}]}"#)
            == "config.groups[0].new_member_seconds: must be more than 0 when new members have limits")
        #expect(startError(lib, #"{"groups":[{"rate_limit":{"messages":3}}]}"#) == "config.groups[0].rate_limit.seconds: missing")
        #expect(startError(lib, #"{"groups":[{"rate_limit":{"messages":0,"seconds":5}}]}"#) == "config.groups[0].rate_limit.messages: must be 1 or more")
        #expect(startError(lib, #"{"groups":[{"match":""}]}"#) == "config.groups[0].match: must not be empty")
        #expect(startError(lib, #"{"accept_invitations":"yes"}"#) == "config.accept_invitations: expected true or false")
    }
}
