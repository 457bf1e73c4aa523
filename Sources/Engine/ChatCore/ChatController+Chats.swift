import ChatModel
import Foundation
import SwiftplexSQL
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
    func chatStats(contactId: Int64) async throws -> ChatStats {
        let (unread, minId) = try await dbRead { db -> (Int, Int64) in
            let unread = ChatItemRecord.filter(ChatItemRecord.Columns.contactId == contactId && ChatItemRecord.Columns.status == ItemStatus.rcvNew &&
                                               ChatItemRecord.Columns.deleted == false)
            return (try unread.fetchCount(db), try unread.select(min(ChatItemRecord.Columns.id), as: Int64?.self).fetchOne(db).flatMap { $0 } ?? 0)
        }
        return ModelOf.chatStats(unread: unread, minUnreadItemId: minId)
    }

    /// The chat list: contacts (newest activity first) with their last item and unread counts,
    /// waiting contact requests, and with `pendingConnections` the connections not yet made.
    public func getChats(userId: Int64, pendingConnections: Bool, count: Int, query: JSONValue?) async throws -> ChatResponse {
        let u = try await user(userId)
        let filter = try ChatListFilter(query: query)
        guard count > 0 else { throw ChatFailure(commandError: "count must be positive") }
        let empty = ModelOf.chatStats(unread: 0, minUnreadItemId: 0)
        var chats: [(ts: String, chat: AChat, unread: Int, name: String)] = []
        // Member contacts are direct chats from the start (their invitation's message is there), as in SimpleX.
        let memberContact = Column("group_member_row_id") != nil
        for c in try await contacts(userId: userId, [ContactState.ready, .deleted].contains(ContactRecord.Columns.status) || memberContact) {
            let contactId = c.id
            let last = try await dbRead { db in
                try ChatItemRecord.filter(ChatItemRecord.Columns.contactId == contactId).order(ChatItemRecord.Columns.id.desc).fetchOne(db)
            }.map(ItemRow.init)
            let stats = try await chatStats(contactId: c.id)
            var items: [ChatItem] = []
            if let last { items.append(try await itemModel(last)) }
            chats.append((c.chatTs ?? c.updatedAt, AChat(chatInfo: directInfo(c, user: u), chatItems: items, chatStats: stats),
                          stats.unreadCount, c.profile?.displayName ?? ""))
        }
        let requests = try await dbRead { db in
            try ContactRequestRecord.filter(ContactRequestRecord.Columns.userId == userId).order(ContactRequestRecord.Columns.id).fetchAll(db)
        }.map(RequestRow.init)
        for r in requests {
            chats.append((r.createdAt, AChat(chatInfo: .contactRequest(contactRequest: ModelOf.contactRequest(r)), chatItems: [], chatStats: empty),
                          0, r.profile.displayName))
        }
        if pendingConnections {
            for c in try await contacts(userId: userId, ContactRecord.Columns.status == ContactState.pending && !memberContact) {
                chats.append((c.createdAt, AChat(chatInfo: .contactConnection(contactConnection: ModelOf.pendingConnection(c, link: c.invitation)),
                                                 chatItems: [], chatStats: empty), 0, ""))
            }
        }
        chats += try await groupChats(user: u)
        let filtered = chats.filter { chat in
            switch filter {
            case .all: true
            case .unread: chat.unread > 0
            case .favorite: false // nothing can be made a favourite yet
            case let .search(text): text.isEmpty || chat.name.localizedCaseInsensitiveContains(text)
            }
        }
        let page = filtered.sorted { $0.ts > $1.ts }.prefix(count).map(\.chat)
        return .apiChats(user: userModel(u), chats: Array(page))
    }

    /// One contact's chat: a page of its items (oldest first) with its unread counts.
    public func getChat(contactId: Int64, page: ItemPage) async throws -> ChatResponse {
        let (u, c) = try await contact(contactId)
        let mine = ChatItemRecord.filter(ChatItemRecord.Columns.contactId == contactId)
        let id = ChatItemRecord.Columns.id
        let records: [ChatItemRecord]
        switch page {
        case let .last(n):
            guard n > 0 else { throw ChatFailure(commandError: "count must be positive") }
            records = try await dbRead { db in try mine.order(id.desc).limit(n).fetchAll(db) }.reversed()
        case let .after(anchor, n):
            guard n > 0 else { throw ChatFailure(commandError: "count must be positive") }
            _ = try await item(anchor, contactId: contactId)
            records = try await dbRead { db in try mine.filter(id > anchor).order(id.asc).limit(n).fetchAll(db) }
        case let .before(anchor, n):
            guard n > 0 else { throw ChatFailure(commandError: "count must be positive") }
            _ = try await item(anchor, contactId: contactId)
            records = try await dbRead { db in try mine.filter(id < anchor).order(id.desc).limit(n).fetchAll(db) }.reversed()
        }
        var items: [ChatItem] = []
        for r in records { items.append(try await itemModel(ItemRow(r))) }
        return .apiChat(user: userModel(u), chat: AChat(chatInfo: directInfo(c, user: u), chatItems: items, chatStats: try await chatStats(contactId: contactId)))
    }

    /// Marks every unread item of a contact's chat as read.
    public func readChat(contactId: Int64) async throws -> ChatResponse {
        let (u, _) = try await contact(contactId)
        try await dbWrite { db in
            _ = try ChatItemRecord.filter(ChatItemRecord.Columns.contactId == contactId && ChatItemRecord.Columns.status == ItemStatus.rcvNew)
                .updateAll(db, ChatItemRecord.Columns.status.set(to: ItemStatus.rcvRead))
        }
        return .cmdOk(user: userModel(u))
    }
}
