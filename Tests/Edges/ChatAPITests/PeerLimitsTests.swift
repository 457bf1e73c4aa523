import ChatTestSupport
import Foundation
import RelayProtocol
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// Runs an engine with the given limits; the body gets the controller too.
func withLimitedEngine<T: Sendable>(_ dir: URL, _ name: String, relays: [RelayAddress], limits: ChatLimits,
                                    _ body: (ChatController, ChatAPI, ChatInbox) async throws -> T) async throws -> T {
    let controller = try await ChatController.open(prefix: dir.appendingPathComponent(name).path, defaultRelays: relays, logger: silent, limits: limits)
    let api = ChatAPI(controller: controller)
    let inbox = ChatInbox(api)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try? await controller.run() }
        defer { group.cancelAll() }
        return try await body(controller, api, inbox)
    }
}

/// Waits until `condition` holds: it reads a counter the engine moves when it refuses a request.
/// A refused request makes no event (see `ChatLimits`), so this is `eventually`, the last-resort poll.
func waitUntil(_ what: String, timeout: Duration = .seconds(15), _ condition: () async -> Bool) async throws {
    try await eventually(timeout: timeout, what) { await condition() }
}

/// What peers can make the engine store: names, contact requests, reactions — on real relays
/// and real SQLite files.
@Suite(.timeLimit(.minutes(3))) struct PeerLimitsTests: LiveRelaySuite {
    func requestName(_ e: JSONValue) -> String? { e["contactRequest"]?["localDisplayName"]?.stringValue }

    func profile(_ name: String) -> String { #"{"displayName": "\#(name)", "fullName": ""}"# }

    /// A peer cannot take a name the bot already uses for someone: two "alice"s are `alice` and
    /// `alice_1`, a peer calling itself like the bot is `bot_1`, and renames stay unique.
    @Test func localDisplayNamesAreUniquePerUser() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "bot", relays: [relay.address]) { bot, botInbox in
                await startUser(bot, "bot")
                let address = try #require(await bot.execute("/_address 1")["connLinkContact"]?["connFullLink"]?.stringValue)
                try await withEngine(dir, "alice1", relays: [relay.address]) { alice1, a1Inbox in
                    try await withEngine(dir, "alice2", relays: [relay.address]) { alice2, a2Inbox in
                        try await withEngine(dir, "mimic", relays: [relay.address]) { mimic, _ in
                            await startUser(alice1, "alice")
                            await startUser(alice2, "alice")
                            await startUser(mimic, "bot")
                            var requests: [JSONValue] = []
                            for peer in [alice1, alice2, mimic] {
                                #expect(await peer.execute("/_connect 1 \(address)")["type"]?.stringValue == "sentInvitation")
                                requests.append(try await botInbox.next("receivedContactRequest"))
                            }
                            #expect(requests.map(requestName) == ["alice", "alice_1", "bot_1"])
                            let ids = requests.compactMap { $0["contactRequest"]?["contactRequestId"]?.intValue }

                            // Accepted requests keep their names as contacts.
                            let first = await bot.execute("/_accept \(ids[0])")
                            #expect(first["contact"]?["localDisplayName"]?.stringValue == "alice")
                            let second = await bot.execute("/_accept \(ids[1])")
                            #expect(second["contact"]?["localDisplayName"]?.stringValue == "alice_1")
                            let firstId = try #require(first["contact"]?["contactId"]?.intValue)
                            let secondId = try #require(second["contact"]?["contactId"]?.intValue)
                            _ = try await a1Inbox.next("contactConnected")
                            _ = try await a2Inbox.next("contactConnected")
                            _ = try await botInbox.next("contactConnected")
                            _ = try await botInbox.next("contactConnected")
                            #expect(await bot.execute("/_reject \(ids[2])")["contactRequest"]?["localDisplayName"]?.stringValue == "bot_1")

                            // The first alice renames herself to carol: she is `carol`, `alice` is free.
                            #expect(await alice1.execute("/_profile 1 \(profile("carol"))")["type"]?.stringValue == "userProfileUpdated")
                            let renamed = try await botInbox.next("contactUpdated")
                            #expect(renamed["toContact"]?["contactId"]?.intValue == firstId)
                            #expect(renamed["toContact"]?["localDisplayName"]?.stringValue == "carol")
                            // The second renames to the taken name carol: she is `carol_1`.
                            #expect(await alice2.execute("/_profile 1 \(profile("carol"))")["type"]?.stringValue == "userProfileUpdated")
                            let taken = try await botInbox.next("contactUpdated")
                            #expect(taken["toContact"]?["contactId"]?.intValue == secondId)
                            #expect(taken["toContact"]?["localDisplayName"]?.stringValue == "carol_1")
                            // …and to the bot's own name: `bot_1` (freed when its request was rejected).
                            #expect(await alice2.execute("/_profile 1 \(profile("bot"))")["type"]?.stringValue == "userProfileUpdated")
                            let own = try await botInbox.next("contactUpdated")
                            #expect(own["toContact"]?["localDisplayName"]?.stringValue == "bot_1")

                            let names = (await bot.execute("/_contacts 1")["contacts"]?.arrayValues ?? []).compactMap { $0["localDisplayName"]?.stringValue }
                            #expect(Set(names).count == names.count)
                            #expect(names.sorted() == ["bot_1", "carol"])
                            #expect(await bot.execute("/user")["user"]?["localDisplayName"]?.stringValue == "bot")
                        }
                    }
                }
            }
        }
    }

    /// Requests to one address are limited per window and in number waiting; refused ones leave
    /// no trace. Unanswered ones expire after the TTL, their names freed.
    @Test func contactRequestsAreRateLimitedCappedAndExpire() async throws {
        try await withLiveRelay { dir, relay in
            let limits = ChatLimits(contactRequestsPerWindow: 2, contactRequestWindow: .seconds(3600), maxPendingContactRequests: 1,
                                    contactRequestTTL: .seconds(24 * 3600))
            try await withLimitedEngine(dir, "bot", relays: [relay.address], limits: limits) { controller, bot, botInbox in
                await startUser(bot, "bot")
                let address = try #require(await bot.execute("/_address 1")["connLinkContact"]?["connFullLink"]?.stringValue)
                try await withEngine(dir, "peer", relays: [relay.address]) { peer, _ in
                    await startUser(peer, "spammer")
                    func pendingRequests() async -> [JSONValue] {
                        (await bot.execute("/_get chats 1 count=100")["chats"]?.arrayValues ?? [])
                            .filter { $0["chatInfo"]?["type"]?.stringValue == "contactRequest" }
                    }
                    // 1: taken.
                    #expect(await peer.execute("/_connect 1 \(address)")["type"]?.stringValue == "sentInvitation")
                    let first = try await botInbox.next("receivedContactRequest")
                    #expect(requestName(first) == "spammer")
                    // 2: one is already waiting (maxPendingContactRequests 1): refused.
                    #expect(await peer.execute("/_connect 1 \(address)")["type"]?.stringValue == "sentInvitation")
                    try await waitUntil("the second request to be refused") { await controller.refusedContactRequests == 1 }
                    #expect(await pendingRequests().count == 1)
                    // Not expired a day minus a minute later; expired a day and a minute later.
                    #expect(await controller.expireContactRequests(now: Date().addingTimeInterval(24 * 3600 - 60)) == 0)
                    #expect(await controller.expireContactRequests(now: Date().addingTimeInterval(24 * 3600 + 60)) == 1)
                    #expect(await pendingRequests().isEmpty)
                    // 3: taken (the second in the window), with the expired one's name free again.
                    #expect(await peer.execute("/_connect 1 \(address)")["type"]?.stringValue == "sentInvitation")
                    let third = try await botInbox.next("receivedContactRequest")
                    #expect(requestName(third) == "spammer")
                    let thirdId = try #require(third["contactRequest"]?["contactRequestId"]?.intValue)
                    #expect(await bot.execute("/_reject \(thirdId)")["type"]?.stringValue == "contactRequestRejected")
                    // 4: nothing waits, but the window (2 per hour) is full: refused.
                    #expect(await peer.execute("/_connect 1 \(address)")["type"]?.stringValue == "sentInvitation")
                    try await waitUntil("the fourth request to be refused") { await controller.refusedContactRequests == 2 }
                    #expect(await pendingRequests().isEmpty)
                    #expect(await controller.expiredContactRequests == 1)
                }
            }
        }
    }

    /// A group the bot hosts takes at most `maxGroupMembers` (the bot included): one more is a
    /// `commandError` naming the limit and the setting, and nothing is sent to the contact.
    @Test func aGroupTakesNoMoreMembersThanTheLimit() async throws {
        try await withLiveRelay { dir, relay in
            try await withLimitedEngine(dir, "a", relays: [relay.address], limits: ChatLimits(maxGroupMembers: 2)) { _, a, aInbox in
                try await withEngine(dir, "b", relays: [relay.address]) { b, bInbox in
                    try await withEngine(dir, "c", relays: [relay.address]) { c, cInbox in
                        await startUser(a, "anna")
                        await startUser(b, "ben")
                        await startUser(c, "cara")
                        var contacts: [Int] = []
                        for (peer, inbox, name) in [(b, bInbox, "ben"), (c, cInbox, "cara")] {
                            let link = try #require(await a.execute("/_connect 1")["connLinkInvitation"]?["connFullLink"]?.stringValue)
                            #expect(await peer.execute("/_connect 1 \(link)")["type"]?.stringValue == "sentConfirmation")
                            contacts.append(try #require(try await aInbox.next("contactConnected", where: {
                                $0["contact"]?["profile"]?["displayName"]?.stringValue == name })["contact"]?["contactId"]?.intValue))
                            _ = try await inbox.next("contactConnected")
                        }
                        let g = try #require(await a.execute(#"/_group 1 {"displayName": "pair"}"#)["groupInfo"]?["groupId"]?.intValue)
                        #expect(await a.execute("/_add #\(g) \(contacts[0]) member")["type"]?.stringValue == "sentGroupInvitation")
                        let refused = await a.execute("/_add #\(g) \(contacts[1]) member")
                        #expect(errorType(refused) == "commandError", "\(refused)")
                        let message = refused["chatError"]?["errorType"]?["message"]?.stringValue ?? ""
                        #expect(message.contains("groups.max_members") && message.contains("2"), "\(message)")
                        // Ben got his invitation; cara's engine gets none: a later message proves it.
                        _ = try await bInbox.next("receivedGroupInvitation")
                        #expect(await a.execute(sendText(contacts[1], "no group for you"))["type"]?.stringValue == "newChatItems")
                        let next = try await cInbox.events.first(where: { $0["type"]?.stringValue == "receivedGroupInvitation" || text($0["chatItems"]?.arrayFirst) == "no group for you" },
                                                                 "an invitation or the later message", timeout: .seconds(15))
                        #expect(next["type"]?.stringValue == "newChatItems", "\(next)")
                    }
                }
            }
        }
    }

    /// Only SimpleX's emoji, at most `maxReactionsPerMember` per side on an item: refused when
    /// sending, ignored when a peer sends them anyway.
    @Test func reactionsAreValidatedAndCapped() async throws {
        try await withLiveRelay { dir, relay in
            // b may send more than a takes: a's cap is the default (3).
            try await withLimitedEngine(dir, "a", relays: [relay.address], limits: ChatLimits()) { _, a, aInbox in
                try await withLimitedEngine(dir, "b", relays: [relay.address], limits: ChatLimits(maxReactionsPerMember: 10)) { bController, b, bInbox in
                    await startUser(a, "anna")
                    await startUser(b, "ben")
                    let link = try #require(await a.execute("/_connect 1")["connLinkInvitation"]?["connFullLink"]?.stringValue)
                    #expect(await b.execute("/_connect 1 \(link)")["type"]?.stringValue == "sentConfirmation")
                    let ben = try #require(try await aInbox.next("contactConnected")["contact"]?["contactId"]?.intValue)
                    let anna = try #require(try await bInbox.next("contactConnected")["contact"]?["contactId"]?.intValue)
                    let sent = try #require(itemId(await a.execute(sendText(ben, "react to me"))["chatItems"]?.arrayFirst))
                    let theirs = try #require(itemId(try await bInbox.next("newChatItems")["chatItems"]?.arrayFirst))

                    func react(_ api: ChatAPI, _ contact: Int, _ item: Int, _ emoji: String) async -> JSONValue {
                        await api.execute(#"/_reaction @\#(contact) \#(item) on {"type": "emoji", "emoji": "\#(emoji)"}"#)
                    }
                    // Sending: an emoji outside the set, or any other shape, is refused.
                    #expect(errorType(await react(b, anna, theirs, "💩")) == "commandError")
                    #expect(errorType(await b.execute(#"/_reaction @\#(anna) \#(theirs) on {"type": "emoji", "emoji": "👍", "junk": [1,2,3]}"#)) == "commandError")
                    #expect(errorType(await b.execute(#"/_reaction @\#(anna) \#(theirs) on {"type": "custom", "anything": "at all"}"#)) == "commandError")
                    // The heart as keyboards type it (with U+FE0F) is the set's heart.
                    #expect(await react(b, anna, theirs, "❤️")["reaction"]?["chatReaction"]?["reaction"]?["emoji"]?.stringValue == "❤")
                    // a (default cap 3) refuses its own fourth reaction.
                    for emoji in ["👍", "😀", "🚀"] { #expect(await react(a, ben, sent, emoji)["type"]?.stringValue == "chatItemReaction") }
                    #expect(errorType(await react(a, ben, sent, "✅")) == "commandError")
                    #expect(await react(a, ben, sent, "👍")["type"]?.stringValue == "chatItemReaction")  // one it has: fine

                    // Receiving: b sends four more (its own cap is 10) and, bypassing its checks, a bad one.
                    for emoji in ["👍", "😂", "🚀"] { #expect(await react(b, anna, theirs, emoji)["type"]?.stringValue == "chatItemReaction") }
                    let contact = try await bController.contact(Int64(anna)).1
                    let item = try await bController.item(Int64(theirs), contactId: Int64(anna))
                    try await bController.sendChatMessage(contact, ChatMessage(event: "x.msg.react", params: .object([
                        ("msgId", .string(item.sharedMsgId ?? "")), ("reaction", .object([("type", .string("emoji")), ("emoji", .string(String(repeating: "x", count: 5000)))])),
                        ("add", .bool(true)),
                    ])))
                    // A later message proves a has handled everything before it.
                    #expect(await b.execute(sendText(anna, "done"))["type"]?.stringValue == "newChatItems")
                    _ = try await aInbox.next("newChatItems") { text($0["chatItems"]?.arrayFirst) == "done" }
                    // a took the heart and two more (3 of b's), and ignored the fourth and the bad one.
                    let stored = await a.execute("/_get chat @\(ben) count=10")
                    let reacted = stored["chat"]?["chatItems"]?.arrayValues?.first { $0["meta"]?["itemId"]?.intValue == sent }
                    let emojis = Set((reacted?["reactions"]?.arrayValues ?? []).compactMap { $0["reaction"]?["emoji"]?.stringValue })
                    #expect(emojis == ["👍", "😀", "🚀", "❤", "😂"])
                    let total = (reacted?["reactions"]?.arrayValues ?? []).compactMap { $0["totalReacted"]?.intValue }.reduce(0, +)
                    #expect(total == 6)  // a's 3 + b's first 3 (❤, 👍, 😂); 🚀 (b's 4th) and the bad one ignored
                }
            }
        }
    }
}

extension JSONValue {
    var arrayValues: [JSONValue]? { if case let .array(a) = self { a } else { nil } }
}
