import Foundation
import GRDB
import SwiftplexBase

/// Which items of a chat `/_get chat` returns; items always come oldest first.
public enum ItemPage: Sendable, Equatable {
    /// The newest `count` items.
    case last(Int)
    /// Up to `count` items right after the item with this id.
    case after(Int64, Int)
    /// Up to `count` items right before the item with this id.
    case before(Int64, Int)
}

/// The `/_get chats` filter (a ChatListQuery).
public enum ChatListFilter: Sendable, Equatable {
    case all
    case unread
    case favorite
    case search(String)

    /// Reads a ChatListQuery object; a malformed one is a `commandError`.
    public init(query: JSONValue?) throws {
        guard let query else { self = .all; return }
        switch query["type"]?.stringValue {
        case "filters":
            guard let favorite = query["favorite"]?.boolValue, let unread = query["unread"]?.boolValue else {
                throw ChatFailure(commandError: "a filters ChatListQuery needs favorite and unread booleans")
            }
            self = favorite ? .favorite : unread ? .unread : .all
        case "search":
            guard let text = query["search"]?.stringValue else { throw ChatFailure(commandError: "a search ChatListQuery needs search text") }
            self = .search(text)
        default:
            throw ChatFailure(commandError: "ChatListQuery type must be filters or search")
        }
    }
}

extension ChatController {
    /// Unread received items of a contact's chat, as ChatStats.
    func chatStats(contactId: Int64) throws -> (json: JSONValue, unread: Int64) {
        let (unread, minId) = try dbRead { db -> (Int64, Int64) in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS n, MIN(id) AS first FROM chat_item WHERE contact_id = ? AND status = 'rcvNew' AND deleted = 0",
                                       arguments: [contactId])
            return (row?["n"] ?? 0, row?["first"] ?? 0)
        }
        return (ChatJSON.chatStats(unread: unread, minUnreadItemId: minId), unread)
    }

    func directInfo(_ c: ChatJSON.ContactRow, user u: UserRow) -> JSONValue {
        .object([("type", .string("direct")), ("contact", contactJSON(c, user: u))])
    }

    /// The chat list: contacts (newest activity first) with their last item and unread counts,
    /// waiting contact requests, and with `pendingConnections` the connections not yet made.
    public func getChats(userId: Int64, pendingConnections: Bool, count: Int, query: JSONValue?) throws -> JSONValue {
        let u = try user(userId)
        let filter = try ChatListFilter(query: query)
        guard count > 0 else { throw ChatFailure(commandError: "count must be positive") }
        var chats: [(ts: String, chat: JSONValue, unread: Int64, name: String)] = []
        for c in try contacts(userId: userId, where: "status IN ('ready', 'deleted')") {
            let last = try dbRead { db in try Self.itemRow(db, where: "contact_id = ? ORDER BY id DESC LIMIT 1", [c.id]) }
            let stats = try chatStats(contactId: c.id)
            chats.append((c.chatTs ?? c.updatedAt, .object([
                ("chatInfo", directInfo(c, user: u)), ("chatItems", .array(try last.map { [try itemJSON($0)] } ?? [])), ("chatStats", stats.json),
            ]), stats.unread, c.profile?["displayName"]?.stringValue ?? ""))
        }
        let requests = try dbRead { db in
            try Row.fetchAll(db, sql: "SELECT * FROM contact_request WHERE user_id = ? ORDER BY id", arguments: [userId]).map { r in
                (id: r["id"] as Int64, profile: (try? JSONValue.parse(r["profile"] as String)) ?? .object([]), createdAt: r["created_at"] as String,
                 localName: r["local_display_name"] as String?)
            }
        }
        for r in requests {
            chats.append((r.createdAt, .object([
                ("chatInfo", .object([("type", .string("contactRequest")), ("contactRequest", ChatJSON.contactRequest(id: r.id, profile: r.profile, createdAt: r.createdAt, localName: r.localName))])),
                ("chatItems", .array([])), ("chatStats", ChatJSON.chatStats(unread: 0, minUnreadItemId: 0)),
            ]), 0, r.profile["displayName"]?.stringValue ?? ""))
        }
        if pendingConnections {
            for c in try contacts(userId: userId, where: "status = 'pending'") {
                chats.append((c.createdAt, .object([
                    ("chatInfo", .object([("type", .string("contactConnection")), ("contactConnection", pendingJSON(c, link: c.invitation))])),
                    ("chatItems", .array([])), ("chatStats", ChatJSON.chatStats(unread: 0, minUnreadItemId: 0)),
                ]), 0, ""))
            }
        }
        let filtered = chats.filter { chat in
            switch filter {
            case .all: true
            case .unread: chat.unread > 0
            case .favorite: false // nothing can be made a favourite yet
            case let .search(text): text.isEmpty || chat.name.localizedCaseInsensitiveContains(text)
            }
        }
        let page = filtered.sorted { $0.ts > $1.ts }.prefix(count).map(\.chat)
        return response("apiChats", u, [("chats", .array(Array(page)))])
    }

    /// One contact's chat: a page of its items (oldest first) with its unread counts.
    public func getChat(contactId: Int64, page: ItemPage) throws -> JSONValue {
        let (u, c) = try contact(contactId)
        let rows: [ItemRow]
        switch page {
        case let .last(n):
            guard n > 0 else { throw ChatFailure(commandError: "count must be positive") }
            rows = try dbRead { db in try Self.itemRows(db, "contact_id = ? ORDER BY id DESC LIMIT ?", [contactId, n]) }.reversed()
        case let .after(anchor, n):
            guard n > 0 else { throw ChatFailure(commandError: "count must be positive") }
            _ = try item(anchor, contactId: contactId)
            rows = try dbRead { db in try Self.itemRows(db, "contact_id = ? AND id > ? ORDER BY id ASC LIMIT ?", [contactId, anchor, n]) }
        case let .before(anchor, n):
            guard n > 0 else { throw ChatFailure(commandError: "count must be positive") }
            _ = try item(anchor, contactId: contactId)
            rows = try dbRead { db in try Self.itemRows(db, "contact_id = ? AND id < ? ORDER BY id DESC LIMIT ?", [contactId, anchor, n]) }.reversed()
        }
        let chat = JSONValue.object([
            ("chatInfo", directInfo(c, user: u)), ("chatItems", .array(try rows.map { try itemJSON($0) })), ("chatStats", try chatStats(contactId: contactId).json),
        ])
        return response("apiChat", u, [("chat", chat)])
    }

    /// Marks every unread item of a contact's chat as read.
    public func readChat(contactId: Int64) throws -> JSONValue {
        let (u, _) = try contact(contactId)
        try dbWrite { db in
            try db.execute(sql: "UPDATE chat_item SET status = 'rcvRead' WHERE contact_id = ? AND status = 'rcvNew'", arguments: [contactId])
        }
        return cmdOk(u)
    }

    nonisolated static func itemRows(_ db: Database, _ clause: String, _ args: StatementArguments) throws -> [ItemRow] {
        try Int64.fetchAll(db, sql: "SELECT id FROM chat_item WHERE \(clause)", arguments: args).compactMap {
            try itemRow(db, where: "id = ?", [$0])
        }
    }
}
