import ChannelProtocol
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase

// The owner's events on channel posts (docs/channels.md §9 "Updates, deletions and reactions"):
// `/_update item`, `/_delete item … broadcast` and `/_reaction` on a post the owner made are sent
// as the channel — `x.msg.update`, `x.msg.del`, `x.msg.react` with `asGroup`, signed with the
// channel binding — to every active relay, which forwards them like posts. A subscriber verifies
// each, takes the first copy (the store's `group_msg` by author and msg id, across relays and
// restarts) and applies it to the post it names: a received post is found by its shared msg id
// and its channel author (`group_item.channel_author`: `#channel`, or the owner's member id) —
// not by the relay that brought it.

/// What a subscriber's received channel content changed, reported after the commit.
struct ChannelContentOutcome: Sendable {
    var newItems: [(Int64, ContentSender)] = []
    var updatedItems: [Int64] = []
    var deletedItems: [GroupItemChange] = []
    var reactions: [ChannelReactionChange] = []
    var refused: [String] = []

    var isEmpty: Bool { newItems.isEmpty && updatedItems.isEmpty && deletedItems.isEmpty && reactions.isEmpty }
}

/// A reaction of the channel (or of an owner) on a post, for the `chatItemReaction` event.
struct ChannelReactionChange: Sendable {
    var itemId: Int64
    var sender: ContentSender
    var reaction: MsgReaction
    var add: Bool
}

extension ChatController {
    /// `group_item.channel_author` (and `group_msg.author_member_id`) of a post made as the channel.
    nonisolated static let channelAuthorTag = "#channel"

    nonisolated static func channelAuthor(_ sender: ContentSender) -> String {
        switch sender {
        case .channel: channelAuthorTag
        case let .member(id): id.text
        }
    }

    // MARK: - Owner

    /// The channel of `groupId` when the user owns it; nil when the group is no channel. A
    /// channel the user subscribes to or relays: `groupUserRole` (owner) — only the owner acts on
    /// a channel's posts for everyone.
    func ownedChannel(_ groupId: Int64, view: GroupView) async throws -> ChannelRecord? {
        guard let c = try await channelRecord(groupId) else { return nil }
        guard c.role == ChannelRecord.Role.owner.rawValue else {
            throw ChatFailure.chat(.groupUserRole(groupInfo: channelInfo(view, c), requiredRole: .owner))
        }
        return c
    }

    /// Runs the owner's event on a post through its machine: the signed element for each active relay.
    private func ownerPostEvent(_ groupId: Int64, _ input: ChannelOwnerInput) async throws -> [ChannelOwnerEffect] {
        await lockChannel(groupId)
        defer { unlockChannel(groupId) }
        var state = try await ownerState(groupId)
        let effects: [ChannelOwnerEffect]
        do { effects = try state.handle(input, newMessageId: ChatMessage.newMessageId) } catch { throw ChatFailure(error) }
        channelRuntime.owners[groupId] = state
        return effects
    }

    private func channelAChatItem(_ record: GroupItemRecord, view: GroupView, _ c: ChannelRecord) async throws -> AChatItem {
        AChatItem(chatInfo: .group(groupInfo: channelInfo(view, c)), chatItem: try await groupItemModels([record], view: view)[0])
    }

    /// `/_update item #g <id> json …` of the owner's post: `x.msg.update` as the channel
    /// (`chatItemUpdated`). The caller checked the item is the user's, not deleted, and changed.
    func updateChannelPost(_ c: ChannelRecord, item: GroupItemRecord, msgId: String, content json: JSONValue, user u: UserRow,
                           view: GroupView) async throws -> ChatResponse {
        let groupId = c.groupId
        try requireStarted()
        let effects = try await ownerPostEvent(groupId, .updatePost(msgId: msgId, content: json, asGroup: true))
        let (text, now, itemId) = (json.description, Timestamp.now(), item.id ?? 0)
        try await dbWrite { db in
            _ = try GroupItemRecord.filter(key: itemId).updateAll(db, Column("content").set(to: text), Column("edited").set(to: true), Column("updated_at").set(to: now))
        }
        await performOwnerEffects(groupId, effects)
        return .chatItemUpdated(user: userModel(u), chatItem: try await channelAChatItem(try await groupItem(itemId, groupId: groupId), view: view, c))
    }

    /// `/_delete item #g <ids> broadcast` of the owner's posts: `x.msg.del` as the channel for
    /// each (`chatItemsDeleted`, `byUser`). The caller checked every item first.
    func deleteChannelPosts(_ c: ChannelRecord, items: [GroupItemRecord], user u: UserRow, view: GroupView) async throws -> ChatResponse {
        let groupId = c.groupId
        try requireStarted()
        var deletions: [ChatItemDeletion] = []
        for item in items {
            guard let msgId = item.sharedMsgId, let id = item.id else { continue }
            let before = try await channelAChatItem(item, view: view, c)
            let effects = try await ownerPostEvent(groupId, .deletePost(msgId: msgId, asGroup: true))
            let now = Timestamp.now()
            try await dbWrite { db in
                _ = try GroupItemRecord.filter(key: id).updateAll(db, Column("deleted").set(to: GroupItemDeletion.deleted), Column("updated_at").set(to: now))
            }
            await performOwnerEffects(groupId, effects)
            deletions.append(ChatItemDeletion(deletedChatItem: before, toChatItem: try await channelAChatItem(try await groupItem(id, groupId: groupId), view: view, c)))
        }
        return .chatItemsDeleted(user: userModel(u), chatItemDeletions: deletions, byUser: true, timed: false)
    }

    /// `/_reaction #g <id> on|off <reaction>` of the owner on its post: `x.msg.react` as the
    /// channel (`chatItemReaction`). Kept as the user's reaction; the same caps as in groups.
    func reactToChannelPost(_ c: ChannelRecord, item: GroupItemRecord, msgId: String, add: Bool, reaction: MsgReaction, user u: UserRow,
                            view: GroupView) async throws -> ChatResponse {
        let groupId = c.groupId
        let itemId = item.id ?? 0
        let key = Reactions.json(reaction).description
        let (myId, limits) = (c.memberId, self.limits)
        let (has, full) = try await dbRead { db -> (Bool, Bool) in
            let onItem = GroupReactionRecord.filter(GroupReactionRecord.Columns.itemId == itemId)
            let mine = onItem.filter(GroupReactionRecord.Columns.byMember == myId)
            return (try !mine.filter(GroupReactionRecord.Columns.reaction == key).isEmpty(db),
                    try mine.fetchCount(db) >= limits.maxReactionsPerMember || onItem.fetchCount(db) >= limits.maxReactionsPerItem)
        }
        if add, !has, full {
            throw ChatFailure.command("too many reactions on this item (at most \(limits.maxReactionsPerMember) of yours, \(limits.maxReactionsPerItem) in all)")
        }
        try requireStarted()
        if has != add {
            let effects = try await ownerPostEvent(groupId, .reactToPost(msgId: msgId, reaction: Reactions.json(reaction), add: add, asGroup: true))
            let now = Timestamp.now()
            try await dbWrite { db in
                if add {
                    try GroupReactionRecord(itemId: itemId, byMember: myId, sent: true, reaction: key, createdAt: now).insert(db, onConflict: .ignore)
                } else {
                    _ = try GroupReactionRecord.deleteOne(db, key: ["item_id": itemId, "by_member": myId, "reaction": key])
                }
            }
            await performOwnerEffects(groupId, effects)
        }
        let after = try await groupView(groupId)
        let model = try await groupItemModels([try await groupItem(itemId, groupId: groupId)], view: after)[0]
        return .chatItemReaction(user: userModel(u), added: add, reaction: ACIReaction(
            chatInfo: .group(groupInfo: channelInfo(after, c)), chatReaction: CIReaction(chatDir: .groupSnd, chatItem: model, sentAt: .now(), reaction: reaction)))
    }

    // MARK: - Subscriber (inside the input's transaction)

    /// A verified owner message's content, first copy (the machine deduplicated it in memory;
    /// the store's `group_msg` by author and msg id is the last word, across restarts): a post
    /// becomes an item; an update, deletion or reaction is applied to the post it names — found
    /// by its shared msg id and channel author, as SimpleX's `groupMessageUpdate`,
    /// `groupMessageDelete`, `groupMsgReaction` find an item by its author. What does not fit
    /// (an unknown post, another author's, a deleted one) is refused and logged.
    nonisolated static func applyChannelContent(_ db: Database, _ env: GroupEnvelope, sender: ContentSender, relay: MemberId,
                                                verification: MessageVerification, groupId: Int64, now: String, limits: ChatLimits,
                                                userId: inout Int64?, into out: inout ChannelContentOutcome) throws {
        let kinds: Set<String> = ["x.msg.new", "x.msg.update", "x.msg.del", "x.msg.react"]
        guard kinds.contains(env.event) else {
            out.refused.append("\(env.event) is not shown in channels yet")
            return
        }
        guard let msgId = env.msgId, !msgId.isEmpty else {
            out.refused.append("\(env.event) without a msgId")
            return
        }
        let author = channelAuthor(sender)
        // The store's dedup across relays (and restarts): (author, shared msg id).
        try GroupMsgRecord(groupId: groupId, authorMemberId: author, sharedMsgId: msgId).insert(db, onConflict: .ignore)
        guard db.changesCount > 0 else { return }
        if userId == nil { userId = try Int64.fetchOne(db.cachedStatement(sql: "SELECT user_id FROM chat_group WHERE id = ?"), arguments: [groupId]) }
        guard let user = userId else { return }
        // Cached statements: this runs for the first copy of every post.
        func rowId(_ member: String) throws -> Int64? {
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT id FROM group_member WHERE group_id = ? AND member_id = ?"), arguments: [groupId, member])
        }
        /// A new received item: as the channel, kept under the relay that brought it first (an
        /// item has a member row); the channel author says whose it is.
        func insertItem(_ content: JSONValue, edited: Bool) throws {
            let relayRow = try rowId(relay.text)
            let authorRow: Int64? = switch sender {
            case .channel: relayRow
            case let .member(id): try rowId(id.text) ?? relayRow
            }
            var item = GroupItemRecord(userId: user, groupId: groupId, memberRowId: authorRow, forwardedByRowId: relayRow, content: content.description,
                                       sharedMsgId: env.event == "x.msg.new" ? msgId : env.params["msgId"]?.stringValue, status: .rcvNew, blocked: false,
                                       createdAt: now, edited: edited, channelAuthor: author)
            try item.insert(db)
            // Its signature check (`meta.msgVerified`).
            try db.cachedStatement(sql: "INSERT INTO channel_item_check (item_id, msg_verified) VALUES (?, ?)").execute(arguments: [item.id, verification.rawValue])
            try db.cachedStatement(sql: "UPDATE chat_group SET chat_ts = ? WHERE id = ?").execute(arguments: [now, groupId])
            out.newItems.append((item.id!, sender))
        }
        /// The post `target` by `postAuthor`.
        func post(_ target: String, by postAuthor: String) throws -> GroupItemRecord? {
            try GroupItemRecord.filter(GroupItemRecord.Columns.groupId == groupId && GroupItemRecord.Columns.sharedMsgId == target &&
                                       GroupItemRecord.Columns.channelAuthor == postAuthor).order(GroupItemRecord.Columns.id).fetchOne(db)
        }
        if env.event == "x.msg.new" {
            guard let content = env.params["content"], (try? PeerInput.content(content)) != nil else {
                out.refused.append("x.msg.new without a valid content")
                return
            }
            try insertItem(content, edited: false)
            return
        }
        guard let target = env.params["msgId"]?.stringValue, !target.isEmpty, target.utf8.count <= 256 else {
            out.refused.append("\(env.event) names no post (msgId)")
            return
        }
        switch env.event {
        case "x.msg.update":
            guard let json = env.params["content"], (try? PeerInput.content(json)) != nil else {
                out.refused.append("x.msg.update without a valid content")
                return
            }
            guard var found = try post(target, by: author) else {
                // As SimpleX (and groups here): an update of a post this side does not have makes it, edited.
                try insertItem(json, edited: true)
                return
            }
            guard found.deleted == nil else {
                out.refused.append("x.msg.update of a deleted post")
                return
            }
            // A verified post is changed only by a verified update (SimpleX `groupMessageUpdate`).
            if verification != .verified, try channelItemChecks(db, itemIds: [found.id ?? 0])[found.id ?? 0] == MessageVerification.verified.rawValue {
                out.refused.append("x.msg.update of a verified post is not verified")
                return
            }
            if try found.edit(to: json, at: now, db) { out.updatedItems.append(found.id!) }
        case "x.msg.del":
            guard let found = try post(target, by: author) else {
                out.refused.append("x.msg.del of a post this side does not have")
                return
            }
            guard found.deleted == nil else { return }
            var after = found
            after.deleted = .deleted
            after.updatedAt = now
            try after.update(db)
            out.deletedItems.append(GroupItemChange(before: found, after: after))
        default: // x.msg.react
            guard let g = try GroupRecord.fetchOne(db, key: groupId), reactionsAllowed(profile: g.profile) else {
                out.refused.append("x.msg.react: reactions are off in this channel")
                return
            }
            guard let raw = env.params["reaction"], let add = env.params["add"]?.boolValue, let reaction = Reactions.canonical(raw) else {
                out.refused.append("x.msg.react: a reaction outside the allowed set, or no add")
                return
            }
            // The reacted post's author: `memberId` names an owner; absent, the channel.
            let postAuthor = env.params["memberId"]?.stringValue ?? channelAuthorTag
            guard let found = try post(target, by: postAuthor), let itemId = found.id, found.deleted == nil else {
                out.refused.append("x.msg.react on a post this side does not have")
                return
            }
            let key = Reactions.json(reaction).description
            let onItem = GroupReactionRecord.filter(GroupReactionRecord.Columns.itemId == itemId)
            let mine = onItem.filter(GroupReactionRecord.Columns.byMember == author)
            let has = try !mine.filter(GroupReactionRecord.Columns.reaction == key).isEmpty(db)
            guard has != add else { return }
            if add {
                guard try mine.fetchCount(db) < limits.maxReactionsPerMember, try onItem.fetchCount(db) < limits.maxReactionsPerItem else {
                    out.refused.append("x.msg.react over the cap")
                    return
                }
                try GroupReactionRecord(itemId: itemId, byMember: author, sent: false, reaction: key, createdAt: now).insert(db)
            } else {
                _ = try GroupReactionRecord.deleteOne(db, key: ["item_id": itemId, "by_member": author, "reaction": key])
            }
            out.reactions.append(ChannelReactionChange(itemId: itemId, sender: sender, reaction: reaction, add: add))
        }
    }

    /// The events of what a subscriber's input changed: `newChatItems`, `chatItemUpdated`,
    /// `chatItemsDeleted` (not `byUser`), `chatItemReaction` — as the channel (`channelRcv`) or
    /// an owner.
    func reportChannelContent(_ groupId: Int64, _ out: ChannelContentOutcome) async throws {
        for why in out.refused {
            logger.info("channel content not applied", metadata: ["group": "\(groupId)", "reason": "\(why)"])
        }
        guard !out.isEmpty else { return }
        let view = try await groupView(groupId)
        guard let c = try await channelRecord(groupId) else { return }
        let user = userModel(try await user(view.group.userId))
        let info = channelInfo(view, c)
        func items(_ ids: [Int64]) async throws -> [AChatItem] {
            let records = try await dbRead { db in try Self.groupItems(db, ids: ids) }
            return try await groupItemModels(records, view: view).map { AChatItem(chatInfo: .group(groupInfo: info), chatItem: $0) }
        }
        if !out.newItems.isEmpty { sink.yield(.newChatItems(user: user, chatItems: try await items(out.newItems.map(\.0)))) }
        for item in try await items(out.updatedItems) { sink.yield(.chatItemUpdated(user: user, chatItem: item)) }
        try await reportDeletions(out.deletedItems, user: user, info: info, view: view)
        for r in out.reactions {
            guard let item = try await items([r.itemId]).first else { continue }
            let dir: CIDirection = switch r.sender {
            case .channel: .channelRcv
            case let .member(id): view.member(id).map { .groupRcv(groupMember: $0) } ?? .channelRcv
            }
            sink.yield(.chatItemReaction(user: user, added: r.add, reaction: ACIReaction(
                chatInfo: .group(groupInfo: info), chatReaction: CIReaction(chatDir: dir, chatItem: item.chatItem, sentAt: .now(), reaction: r.reaction))))
        }
    }
}
