@testable import ChatCore
import ChatTestSupport
import Foundation
import SwiftplexSQL
import NIOConcurrencyHelpers
import SwiftplexBase
import Testing
@testable import ChatAPI

/// `/_send` with an idempotency key (what the bot host gives the sends of a plugin handling a
/// received message, so a replay after a crash does not answer twice).
@Suite(.timeLimit(.minutes(3))) struct IdempotentSendTests: LiveRelaySuite {
    static func send(_ api: ChatAPI, to contact: Int, _ t: String, key: String?) async -> JSONValue {
        await api.execute(#"/_send @\#(contact) json [{"msgContent": {"type": "text", "text": "\#(t)"}, "mentions": {}}]"#, idempotencyKey: key)
    }

    static func itemId(_ r: JSONValue) -> Int? { r["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue }

    /// Sent items of `text` in the chat database.
    static func sentItems(_ api: ChatAPI, _ text: String) async throws -> [SQLRow] {
        let store = await api.controller.store.db
        return try await store.read { db in
            try SQLRow.fetchAll(db, sql: "SELECT id, agent_seq FROM chat_item WHERE sent = 1 AND json_extract(content, '$.text') = ?", arguments: [text])
        }
    }

    /// Waits for `last` at the peer and returns the texts it received until then, in order.
    static func receivedUntil(_ inbox: ChatInbox, _ last: String, _ texts: Set<String>) async throws -> [String] {
        var got: [String] = []
        while true {
            let e = try await inbox.next("newChatItems", where: { e in texts.contains(text(e["chatItems"]?.arrayFirst) ?? "") || text(e["chatItems"]?.arrayFirst) == last })
            let t = text(e["chatItems"]?.arrayFirst) ?? ""
            got.append(t)
            if t == last { return got }
        }
    }

    @Test func theSameKeyTwiceSendsOnceAndReturnsTheSameItem() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "a", relays: [relay.address]) { a, aInbox in
                try await withEngine(dir, "b", relays: [relay.address]) { b, bInbox in
                    let (benInA, _) = try await connectPair(a, aInbox, b, bInbox)
                    let first = await Self.send(a, to: benInA, "answer", key: "echo:17:0")
                    let again = await Self.send(a, to: benInA, "answer", key: "echo:17:0")
                    #expect(first["type"]?.stringValue == "newChatItems", "\(first)")
                    #expect(Self.itemId(first) != nil && Self.itemId(first) == Self.itemId(again), "\(first) \(again)")
                    // Another key is another send; no key is an ordinary send.
                    let other = await Self.send(a, to: benInA, "answer", key: "echo:18:0")
                    #expect(Self.itemId(other) != Self.itemId(first))
                    _ = await Self.send(a, to: benInA, "end", key: nil)
                    let got = try await Self.receivedUntil(bInbox, "end", ["answer"])
                    #expect(got == ["answer", "answer", "end"])
                    #expect(try await Self.sentItems(a, "answer").count == 2)
                }
            }
        }
    }

    @Test func aKeyRecordedByTheAgentWhoseItemWasNotStoredGetsItsItemOnceAndIsNotSentAgain() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "a", relays: [relay.address]) { a, aInbox in
                try await withEngine(dir, "b", relays: [relay.address]) { b, bInbox in
                    let (benInA, _) = try await connectPair(a, aInbox, b, bInbox)
                    let first = await Self.send(a, to: benInA, "answer", key: "echo:42:0")
                    let firstId = try #require(Self.itemId(first))
                    let seq = try #require(try await Self.sentItems(a, "answer").first?["agent_seq"] as Int64?)
                    // The state a crash between the agent's commit and the item's insert leaves: the
                    // agent has the key (and sent the message), the chat database has no item.
                    let queue = await a.controller.store.db
                    try await queue.write { db in try db.execute(sql: "DELETE FROM chat_item WHERE id = ?", arguments: [firstId]) }
                    #expect(try await Self.sentItems(a, "answer").isEmpty)

                    let replayed = await Self.send(a, to: benInA, "answer", key: "echo:42:0")
                    let replayedId = try #require(Self.itemId(replayed), "\(replayed)")
                    let again = await Self.send(a, to: benInA, "answer", key: "echo:42:0")
                    #expect(Self.itemId(again) == replayedId)
                    let items = try await Self.sentItems(a, "answer")
                    #expect(items.count == 1)
                    #expect(items.first?["agent_seq"] as Int64? == seq)

                    _ = await Self.send(a, to: benInA, "end", key: nil)
                    let got = try await Self.receivedUntil(bInbox, "end", ["answer"])
                    #expect(got == ["answer", "end"])
                }
            }
        }
    }
}
