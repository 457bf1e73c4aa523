import ChatAPI
import PluginHost
import SwiftplexBase

/// Received direct messages read back from a foreign engine (SimpleX's library or CLI) through
/// the documented bot API, so that the plugins' marks work there too: a plugin that was given a
/// message before a crash, or that the host never reached while it was down, is given the
/// messages after its mark at the next start — as on Swiftplex's engine, which answers the same
/// questions from its store directly (``ReceivedItemFeed``).
///
/// Item ids are the engine's chat item ids, which grow across all chats of a database. The
/// questions:
/// - the newest item: `/_get chats <userId> count=…` (`APIGetChats`), each chat with its last item;
/// - the received items after a mark: for each contact whose last item is newer than the mark,
///   `/_get chat @<contactId> count=N`, then `before=<oldest> count=N` back to the mark (an
///   `after=` anchor must be an item of that chat, which the mark need not be), the items
///   `directRcv` announced again as the `newChatItems` event they came with.
///
/// Each call reads every contact's items back from its newest to the mark, so a long catch-up
/// costs more here than on Swiftplex's engine, which reads forward from the mark in its store.
///
/// A reply a plugin sends again while handling a message a second time is sent again: foreign
/// engines keep no idempotency keys. Delivery to plugins is at least once there, exactly once on
/// Swiftplex's engine.
struct ForeignItemFeed: Sendable {
    let engine: any BotEngine
    let userId: Int64
    /// Items read per `/_get chat` call.
    var page = 100

    struct FeedError: Error, CustomStringConvertible {
        let description: String
    }

    var feed: ReceivedItemFeed {
        ReceivedItemFeed(lastItemId: { try await lastItemId() }, eventsAfter: { after, limit in try await eventsAfter(after, limit: limit) })
    }

    /// Every chat of a user as `/_get chats` lists it (`APIGetChats`, no filter): each chat's
    /// `chatInfo` with its last item, contact requests (`chatInfo.type` `contactRequest`) among them.
    static func chatList(_ engine: any BotEngine, userId: Int64) async throws -> [JSONValue] {
        let line = "/_get chats \(userId) count=1000000 {\"type\": \"filters\", \"favorite\": false, \"unread\": false}"
        let answer = await engine.execute(line, idempotencyKey: nil)
        guard answer["type"]?.stringValue == "apiChats", let chats = answer["chats"]?.arrayValue else {
            throw FeedError(description: "the engine's answer to /_get chats is not apiChats: \(answer.description.prefix(300))")
        }
        return chats
    }

    /// The engine's active user object (`/user`), as events carry it.
    static func activeUser(_ engine: any BotEngine) async throws -> JSONValue {
        let answer = await engine.execute("/user", idempotencyKey: nil)
        guard answer["type"]?.stringValue == "activeUser", let user = answer["user"] else {
            throw FeedError(description: "the engine's answer to /user is not activeUser: \(answer.description.prefix(300))")
        }
        return user
    }

    /// Every chat of the user with its newest item id (0 when it has none); contacts by id.
    func chats() async throws -> (newest: Int64, contacts: [(contactId: Int64, lastItemId: Int64)]) {
        let chats = try await Self.chatList(engine, userId: userId)
        var newest: Int64 = 0
        var contacts: [(Int64, Int64)] = []
        for chat in chats {
            let last = (chat["chatItems"]?.arrayValue ?? []).compactMap { $0["meta"]?["itemId"]?.int64Value }.max() ?? 0
            newest = max(newest, last)
            if chat["chatInfo"]?["type"]?.stringValue == "direct", let id = chat["chatInfo"]?["contact"]?["contactId"]?.int64Value {
                contacts.append((id, last))
            }
        }
        return (newest, contacts)
    }

    func lastItemId() async throws -> Int64 { try await chats().newest }

    /// The events of received direct messages after `after`, oldest first, at most `limit`.
    func eventsAfter(_ after: Int64, limit: Int) async throws -> [(itemId: Int64, json: String)] {
        let (_, contacts) = try await chats()
        var user: JSONValue?
        var found: [(itemId: Int64, json: String)] = []
        for contact in contacts where contact.lastItemId > after {
            let (chatInfo, items) = try await items(of: contact.contactId, after: after)
            for item in items where item["chatDir"]?["type"]?.stringValue == "directRcv" {
                guard let id = item["meta"]?["itemId"]?.int64Value else { continue }
                if user == nil { user = try await Self.activeUser(engine) }
                let event = JSONValue.object([
                    ("type", .string("newChatItems")), ("user", user ?? .null),
                    ("chatItems", .array([.object([("chatInfo", chatInfo), ("chatItem", item)])])),
                ])
                found.append((id, event.description))
            }
        }
        return Array(found.sorted { $0.itemId < $1.itemId }.prefix(limit))
    }

    /// A contact's items newer than `after` (oldest first) and the chat's `chatInfo`.
    private func items(of contactId: Int64, after: Int64) async throws -> (JSONValue, [JSONValue]) {
        var collected: [JSONValue] = []
        var chatInfo: JSONValue = .null
        var line = "/_get chat @\(contactId) count=\(page)"
        while true {
            let answer = await engine.execute(line, idempotencyKey: nil)
            guard answer["type"]?.stringValue == "apiChat", let chat = answer["chat"] else {
                throw FeedError(description: "the engine's answer to /_get chat @\(contactId) is not apiChat: \(answer.description.prefix(300))")
            }
            chatInfo = chat["chatInfo"] ?? .null
            let items = chat["chatItems"]?.arrayValue ?? []
            let ids = items.compactMap { $0["meta"]?["itemId"]?.int64Value }
            collected = items.filter { ($0["meta"]?["itemId"]?.int64Value ?? 0) > after } + collected
            guard let oldest = ids.min(), oldest > after, items.count >= page else { break }
            line = "/_get chat @\(contactId) before=\(oldest) count=\(page)"
        }
        return (chatInfo, collected)
    }
}

extension BotHost {
    /// The received chat item a `newChatItems` event announces, from its JSON when the host could
    /// not type it (a foreign engine's newer fields): the newest `directRcv` item's id.
    static func receivedItemId(json: String) -> Int64? {
        guard json.contains("\"newChatItems\""), json.contains("directRcv"), let value = try? JSONValue.parse(json),
              value["type"]?.stringValue == "newChatItems" else { return nil }
        return (value["chatItems"]?.arrayValue ?? [])
            .filter { $0["chatItem"]?["chatDir"]?["type"]?.stringValue == "directRcv" }
            .compactMap { $0["chatItem"]?["meta"]?["itemId"]?.int64Value }.max()
    }
}
