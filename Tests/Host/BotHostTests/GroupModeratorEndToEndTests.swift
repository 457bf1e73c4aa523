import Foundation
import PluginHost
import SwiftplexBase
import SwiftplexPluginTesting
import Testing

/// Groups with the bot in them: `group-moderator` (and `auto-reply`) loaded with dlopen into a
/// real bot host, and people with engines of their own in one group with it, over the host's
/// embedded relay. Alice owns the group and makes the bot an admin (it joins by itself:
/// `accept_invitations`); Bob joins after it, so for the bot he is a newcomer.
@Suite(.timeLimit(.minutes(4))) struct GroupModeratorEndToEndTests {
    struct Group {
        let bench: PluginTestBench
        let alice: ScriptedContact
        let bob: ScriptedContact
        /// The group's id in Alice's and in Bob's database.
        let inAlice: Int64
        let inBob: Int64
    }

    static let bot = "test-bot"

    static func moderator(_ rules: String, extra: [PluginTestBench.Plugin] = [], isolation: PluginSpec.Isolation = .inProcess) -> [PluginTestBench.Plugin] {
        [
            .init(name: "accept", path: PluginTestBench.product("libauto-accept.so"), config: "{}"),
            .init(name: "moderator", path: PluginTestBench.product("libgroup-moderator.so"), config: #"{"groups": [\#(rules)]}"#,
                  isolation: isolation),
        ] + extra
    }

    /// Alice connects to the bot and to Bob, makes group "team", invites the bot as admin (it
    /// joins by itself) and then Bob.
    static func withGroup(_ plugins: [PluginTestBench.Plugin], engine: PluginTestBench.Engine = .embedded,
                          _ body: (Group) async throws -> Void) async throws {
        try await PluginTestBench.withBench(plugins: plugins, botName: bot, engine: engine) { bench in
            let alice = try await bench.connect("alice")
            let bob = try await bench.person("bob")
            let (bobInAlice, _) = try await alice.connect(with: bob)
            let g = try await alice.createGroup("team")
            try await alice.invite(contactId: try #require(alice.botContactId), to: g, role: "admin")
            _ = try await alice.nextEvent("joinedGroupMember") { $0["member"]?["memberProfile"]?["displayName"]?.stringValue == bot }
            try await alice.invite(contactId: bobInAlice, to: g)
            let inBob = try await bob.joinNextInvitation()
            try await body(Group(bench: bench, alice: alice, bob: bob, inAlice: g, inBob: inBob))
        }
    }

    @Test func aNewcomerIsWelcomedAndABlockedWordIsDeletedForAllWithAStrike() async throws {
        try await Self.withGroup(Self.moderator(#"{"welcome": "Welcome to {group}, {name}!", "blocked_words": ["scam"]}"#)) { g in
            // The welcome comes once the bot's connection with Bob is up.
            #expect(try await g.bob.nextGroupMessage(in: g.inBob, from: Self.bot).text == "Welcome to team, bob!")
            #expect(try await g.alice.nextGroupMessage(in: g.inAlice, from: Self.bot).text == "Welcome to team, bob!")

            try await g.bob.send("hello all", toGroup: g.inBob)
            let spam = try await g.bob.send("join my crypto SCAM today", toGroup: g.inBob)
            #expect(try await g.alice.nextGroupMessage(in: g.inAlice, from: "bob").text == "hello all")
            let notice = "bob: your message was removed (blocked word). Strike 1 of 3."
            #expect(try await g.bob.nextGroupMessage(in: g.inBob, from: Self.bot).text == notice)
            #expect(try await g.alice.nextGroupMessage(in: g.inAlice, from: Self.bot).text == notice)
            // Deleted for all: Bob's own copy is marked deleted by the bot.
            let deleted = try await g.bob.nextEvent("chatItemsDeleted") { e in
                e["chatItemDeletions"]?.arrayValue?.contains { $0["deletedChatItem"]?["chatItem"]?["meta"]?["itemId"]?.int64Value == spam } == true
            }
            #expect(deleted["byUser"]?.boolValue == false)
        }
    }

    /// Bob writes before the bot is in the group; the bot, joining, gets the group's history, and
    /// judges none of it: his first strike is for what he writes after (another rule, so the
    /// notices tell which message each is about). The history's items keep the forward's `msgTs`
    /// as their `itemTs` (the plugin's `sentAt`), before the bot's membership was made.
    @Test func historyFromBeforeTheBotJoinedIsNotJudged() async throws {
        try await PluginTestBench.withBench(plugins: Self.moderator(#"{"blocked_words": ["scam"], "blocked_patterns": ["fraud"]}"#), botName: Self.bot) { bench in
            let alice = try await bench.connect("alice")
            let bob = try await bench.person("bob")
            let (bobInAlice, _) = try await alice.connect(with: bob)
            let g = try await alice.createGroup("team")
            try await alice.invite(contactId: bobInAlice, to: g)
            let inBob = try await bob.joinNextInvitation()
            try await bob.send("an old scam", toGroup: inBob)
            #expect(try await alice.nextGroupMessage(in: g, from: "bob").text == "an old scam")
            try await alice.invite(contactId: try #require(alice.botContactId), to: g, role: "admin")
            _ = try await bob.nextEvent("connectedToGroupMember") { $0["member"]?["memberProfile"]?["displayName"]?.stringValue == Self.bot }
            try await bob.send("fraud alert", toGroup: inBob)
            #expect(try await bob.nextGroupMessage(in: inBob, from: Self.bot).text == "bob: your message was removed (blocked content). Strike 1 of 3.")
            try await bob.send("more fraud", toGroup: inBob)
            #expect(try await bob.nextGroupMessage(in: inBob, from: Self.bot).text == "bob: your message was removed (blocked content). Strike 2 of 3.")
        }
    }

    /// The same plugin in its own process (`isolation: process`): group events and the group
    /// commands go through the runner's frames.
    @Test func anIsolatedModeratorWorksTheSame() async throws {
        try await Self.withGroup(Self.moderator(#"{"welcome": "hi {name}", "blocked_words": ["scam"]}"#, isolation: .process)) { g in
            #expect(try await g.bob.nextGroupMessage(in: g.inBob, from: Self.bot).text == "hi bob")
            let spam = try await g.bob.send("a scam", toGroup: g.inBob)
            #expect(try await g.bob.nextGroupMessage(in: g.inBob, from: Self.bot).text == "bob: your message was removed (blocked word). Strike 1 of 3.")
            _ = try await g.bob.nextEvent("chatItemsDeleted") { e in
                e["chatItemDeletions"]?.arrayValue?.contains { $0["deletedChatItem"]?["chatItem"]?["meta"]?["itemId"]?.int64Value == spam } == true
            }
            #expect(g.bench.host.plugins.statuses().first { $0.name == "moderator" }?.isolation == .process)
        }
    }

    @Test func theRateLimitRemovesTheMessageBeyondIt() async throws {
        try await Self.withGroup(Self.moderator(#"{"rate_limit": {"messages": 2, "seconds": 600}}"#)) { g in
            for text in ["one", "two", "three"] { try await g.bob.send(text, toGroup: g.inBob) }
            // One strike only: the first two were within the limit.
            #expect(try await g.bob.nextGroupMessage(in: g.inBob, from: Self.bot).text
                == "bob: your message was removed (too many messages). Strike 1 of 3.")
        }
    }

    /// The join time comes from the engine's record of the member (`createdAt`, as the Chat API
    /// writes it; a member without a readable one is never new): Bob joined seconds ago, so he is
    /// new and his link goes.
    @Test func aNewcomersLinkIsRemoved() async throws {
        try await Self.withGroup(Self.moderator(#"{"new_member_seconds": 3600, "new_members_no_links": true, "notice": "{name}: {reason}"}"#)) { g in
            try await g.bob.send("no link here", toGroup: g.inBob)
            try await g.bob.send("my shop: https://example.org/cheap", toGroup: g.inBob)
            #expect(try await g.alice.nextGroupMessage(in: g.inAlice, from: "bob").text == "no link here")
            #expect(try await g.bob.nextGroupMessage(in: g.inBob, from: Self.bot).text == "bob: links are not allowed for new members")
        }
    }

    @Test func theLastStrikeRemovesTheMember() async throws {
        try await Self.withGroup(Self.moderator(#"{"blocked_words": ["scam"], "remove_after": 2}"#)) { g in
            try await g.bob.send("a scam", toGroup: g.inBob)
            #expect(try await g.bob.nextGroupMessage(in: g.inBob, from: Self.bot).text.hasSuffix("Strike 1 of 2."))
            try await g.bob.send("another scam", toGroup: g.inBob)
            // The last notice and the removal travel separately: Bob may be out before the notice
            // reaches him, so Alice is the one who is sure to see it.
            #expect(try await g.alice.nextGroupMessage(in: g.inAlice, from: Self.bot).text.hasSuffix("Strike 1 of 2."))
            #expect(try await g.alice.nextGroupMessage(in: g.inAlice, from: Self.bot).text.hasSuffix("Strike 2 of 2."))
            _ = try await g.bob.nextEvent("deletedMemberUser") { $0["groupInfo"]?["groupId"]?.int64Value == g.inBob }
            let removed = try await g.alice.nextEvent("deletedMember") { $0["deletedMember"]?["memberProfile"]?["displayName"]?.stringValue == "bob" }
            #expect(removed["byMember"]?["memberProfile"]?["displayName"]?.stringValue == Self.bot)
        }
    }

    @Test func strikesCanBlockTheMemberForAll() async throws {
        try await Self.withGroup(Self.moderator(#"{"blocked_words": ["scam"], "block_after": 1, "remove_after": 0}"#)) { g in
            try await g.bob.send("a scam", toGroup: g.inBob)
            let blocked = try await g.alice.nextEvent("memberBlockedForAll") { $0["member"]?["memberProfile"]?["displayName"]?.stringValue == "bob" }
            #expect(blocked["blocked"]?.boolValue == true)
            #expect(blocked["byMember"]?["memberProfile"]?["displayName"]?.stringValue == Self.bot)
        }
    }

    /// Any plugin sees group messages: `auto-reply` answers in the group, quoting the message.
    @Test func aPluginAnswersInTheGroupQuotingTheMessage() async throws {
        let echo = PluginTestBench.Plugin(name: "echo", path: PluginTestBench.product("libauto-reply.so"),
                                          config: #"{"rules": [{"keyword": "ping", "reply": "pong"}]}"#)
        try await Self.withGroup(Self.moderator("{}", extra: [echo])) { g in
            try await g.bob.send("ping", toGroup: g.inBob)
            let answer = try await g.bob.nextGroupMessage(in: g.inBob, from: Self.bot)
            #expect(answer.text == "pong" && answer.quotedText == "ping")
        }
    }
}
