import ChannelProtocol
import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// The owner's updates, deletions and reactions on channel posts, through both relays to a
/// subscriber (docs/channels.md §9 "Updates, deletions and reactions"). Engines on a live relay
/// server (TLS on loopback, SQLite files).
@Suite(.timeLimit(.minutes(3))) struct ChannelItemTests: LiveRelaySuite {
    func chatError(_ r: JSONValue) -> JSONValue? { r["type"]?.stringValue == "chatCmdError" ? r["chatError"]?["errorType"] : nil }

    func subscribe(_ s: ChatAPI, _ sIn: ChatInbox, _ user: Int, _ name: String, _ link: String) async throws -> Int {
        await startUser(s, name)
        let started = await s.execute("/_connect \(user) \(link)")
        let subGroup = try #require(started["groupInfo"]?["groupId"]?.intValue, "\(started)")
        for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup", where: { $0["user"]?["userId"]?.intValue == user }, timeout: .seconds(30)) }
        return subGroup
    }

    @Test func theOwnersEditsReactionsAndDeletionsReachTheSubscriberOnce() async throws {
        try await withLiveRelay { dir, relay in
            try await withActiveChannel(dir, relay: relay.address) { _, _, o, _, groupId, link in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    let subGroup = try await subscribe(s, sIn, 1, "sub1", link)
                    let sent = await postToChannel(o, groupId, "first")
                    let ownerItem = try #require(sent["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue, "\(sent)")
                    let posted = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "first" }, timeout: .seconds(30))
                    let subItem = try #require(posted["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue)
                    let sentSecond = await postToChannel(o, groupId, "second")
                    let ownerSecond = try #require(sentSecond["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue, "\(sentSecond)")
                    let second = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "second" }, timeout: .seconds(30))
                    let subSecond = try #require(second["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue)

                    // The owner edits its post: `chatItemUpdated` at both ends, as the channel.
                    let edited = await o.execute(#"/_update item #\#(groupId) \#(ownerItem) json {"msgContent": {"type": "text", "text": "first, edited"}}"#)
                    #expect(edited["type"]?.stringValue == "chatItemUpdated", "\(edited)")
                    #expect(text(edited["chatItem"]) == "first, edited")
                    #expect(edited["chatItem"]?["chatItem"]?["meta"]?["itemEdited"]?.boolValue == true)
                    let same = await o.execute(#"/_update item #\#(groupId) \#(ownerItem) json {"msgContent": {"type": "text", "text": "first, edited"}}"#)
                    #expect(same["type"]?.stringValue == "chatItemNotChanged", "\(same)")
                    let update = try await sIn.next("chatItemUpdated", timeout: .seconds(30))
                    #expect(update["chatItem"]?["chatItem"]?["meta"]?["itemId"]?.intValue == subItem, "\(update)")
                    #expect(text(update["chatItem"]) == "first, edited")
                    #expect(update["chatItem"]?["chatItem"]?["chatDir"]?["type"]?.stringValue == "channelRcv")
                    #expect(update["chatItem"]?["chatItem"]?["meta"]?["itemEdited"]?.boolValue == true)
                    #expect(update["chatItem"]?["chatInfo"]?["groupInfo"]?["groupId"]?.intValue == subGroup)

                    // A reaction of the owner, as the channel.
                    let reacted = await o.execute(#"/_reaction #\#(groupId) \#(ownerItem) on {"type": "emoji", "emoji": "👍"}"#)
                    #expect(reacted["type"]?.stringValue == "chatItemReaction", "\(reacted)")
                    #expect(reacted["added"]?.boolValue == true)
                    let reaction = try await sIn.next("chatItemReaction", timeout: .seconds(30))
                    #expect(reaction["added"]?.boolValue == true, "\(reaction)")
                    #expect(reaction["reaction"]?["chatReaction"]?["chatDir"]?["type"]?.stringValue == "channelRcv")
                    #expect(reaction["reaction"]?["chatReaction"]?["chatItem"]?["meta"]?["itemId"]?.intValue == subItem)
                    #expect(reaction["reaction"]?["chatReaction"]?["reaction"]?["emoji"]?.stringValue == "👍")
                    let counts = reaction["reaction"]?["chatReaction"]?["chatItem"]?["reactions"]?.arrayFirst
                    #expect(counts?["totalReacted"]?.intValue == 1, "\(String(describing: counts))")

                    // The second post deleted for everyone.
                    let deleted = await o.execute("/_delete item #\(groupId) \(ownerSecond) broadcast")
                    #expect(deleted["type"]?.stringValue == "chatItemsDeleted", "\(deleted)")
                    #expect(deleted["byUser"]?.boolValue == true)
                    let gone = try await sIn.next("chatItemsDeleted", timeout: .seconds(30))
                    #expect(gone["byUser"]?.boolValue == false, "\(gone)")
                    let deletion = gone["chatItemDeletions"]?.arrayFirst
                    #expect(deletion?["deletedChatItem"]?["chatItem"]?["meta"]?["itemId"]?.intValue == subSecond)
                    #expect(deletion?["toChatItem"]?["chatItem"]?["content"]?["type"]?.stringValue == "rcvDeleted", "\(gone)")

                    // Once each, though both relays brought them: a later post has come through
                    // both, and no second event waits.
                    _ = await postToChannel(o, groupId, "end")
                    _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "end" }, timeout: .seconds(30))
                    #expect(!sIn.contains("chatItemUpdated") && !sIn.contains("chatItemReaction") && !sIn.contains("chatItemsDeleted"))
                    let chat = await s.execute("/_get chat #\(subGroup) count=20")
                    guard case let .array(items)? = chat["chat"]?["chatItems"] else { throw TestFailure("\(chat)") }
                    #expect(items.count == 3, "\(items)")
                    #expect(items.first?["content"]?["msgContent"]?["text"]?.stringValue == "first, edited")
                    #expect(items.first?["meta"]?["msgVerified"]?["type"]?.stringValue == "signed")
                    #expect(items.dropFirst().first?["content"]?["type"]?.stringValue == "rcvDeleted", "\(items)")

                    // A subscriber acts on posts for everyone in no way; locally it may delete.
                    let subEdit = await s.execute(#"/_update item #\#(subGroup) \#(subItem) json {"msgContent": {"type": "text", "text": "mine"}}"#)
                    #expect(chatError(subEdit)?["type"]?.stringValue == "invalidChatItemUpdate", "\(subEdit)")
                    let subReact = await s.execute(#"/_reaction #\#(subGroup) \#(subItem) on {"type": "emoji", "emoji": "👍"}"#)
                    #expect(chatError(subReact)?["type"]?.stringValue == "groupUserRole", "\(subReact)")
                    let subDelete = await s.execute("/_delete item #\(subGroup) \(subItem) broadcast")
                    #expect(chatError(subDelete)?["type"]?.stringValue == "invalidChatItemDelete", "\(subDelete)")
                    let local = await s.execute("/_delete item #\(subGroup) \(subItem) internal")
                    #expect(local["type"]?.stringValue == "chatItemsDeleted", "\(local)")
                }
                // A subscriber joining later gets the edited post, not the deleted one.
                try await withEngine(dir, "late", relays: [relay.address]) { l, lIn in
                    let lateGroup = try await subscribe(l, lIn, 1, "late", link)
                    _ = try await lIn.next("chatItemUpdated", where: { text($0["chatItem"]) == "first, edited" }, timeout: .seconds(30))
                    _ = await postToChannel(o, groupId, "after")
                    _ = try await lIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "after" }, timeout: .seconds(30))
                    let chat = await l.execute("/_get chat #\(lateGroup) count=20")
                    guard case let .array(items)? = chat["chat"]?["chatItems"] else { throw TestFailure("\(chat)") }
                    let texts = items.compactMap { $0["content"]?["msgContent"]?["text"]?.stringValue }
                    #expect(texts == ["first, edited", "end", "after"], "\(texts)")
                }
            }
        }
    }
}
