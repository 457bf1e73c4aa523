import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase

// Group items beyond plain sends: edits (`x.msg.update`), deletions by the author and by
// moderators (`x.msg.del`, with the author's `memberId` when moderating), reactions
// (`x.msg.react`), the history a host sends a new member, and `messages=on` removals. The user's
// commands go through the group's machine like sends (``commitGroupInput``: the message to every
// member and the item's change in one transaction); received ones are applied inside the
// transaction of the message that carries them (``applyItemEvent``), after the machine has checked
// the sender (roles, moderation rights, expected forwarder).

/// An item changed by a received message, for the events reported after the commit.
struct GroupItemChange: Sendable {
    var before: GroupItemRecord
    var after: GroupItemRecord?
}

/// A reaction added or removed by a member, for the `chatItemReaction` event.
struct GroupReactionChange: Sendable {
    var itemId: Int64
    var byRowId: Int64
    var reaction: MsgReaction
    var add: Bool
}

extension ChatController {
    // MARK: - Models

    /// A group item as the API shows it, with its reaction counts.
    func groupItemModels(_ records: [GroupItemRecord], view: GroupView) async throws -> [ChatItem] {
        let ids = records.compactMap(\.id)
        let (counts, checks) = try await dbRead { db in (try Self.groupReactionCounts(db, itemIds: ids), try Self.channelItemChecks(db, itemIds: ids)) }
        return records.map { groupItemModel($0, view: view, reactions: counts[$0.id ?? 0] ?? [], verified: checks[$0.id ?? 0]) }
    }

    nonisolated static func groupReactionCounts(_ db: Database, itemIds: [Int64]) throws -> [Int64: [CIReactionCount]] {
        guard !itemIds.isEmpty else { return [:] }
        let placeholders = Array(repeating: "?", count: itemIds.count).joined(separator: ",")
        let rows = try Row.fetchAll(db.cachedStatement(sql: """
            SELECT item_id, reaction, max(sent) AS mine, count(reaction) AS total FROM group_reaction
            WHERE item_id IN (\(placeholders)) GROUP BY item_id, reaction ORDER BY item_id, min(created_at)
            """), arguments: StatementArguments(itemIds))
        var out: [Int64: [CIReactionCount]] = [:]
        for row in rows {
            guard let reaction = Stored.decode(MsgReaction.self, row["reaction"]) else { continue }
            out[row["item_id"], default: []].append(CIReactionCount(reaction: reaction, userReacted: (row["mine"] as Int? ?? 0) > 0, totalReacted: row["total"]))
        }
        return out
    }

    /// One item of a group, or `chatItemNotFound`.
    func groupItem(_ itemId: Int64, groupId: Int64) async throws -> GroupItemRecord {
        guard let item = try await dbRead({ db in try GroupItemRecord.fetchOne(db, key: itemId) }), item.groupId == groupId else {
            throw ChatFailure.store(.chatItemNotFound(itemId: itemId))
        }
        return item
    }

    private func groupAChatItem(_ record: GroupItemRecord, view: GroupView) async throws -> AChatItem {
        AChatItem(chatInfo: .group(groupInfo: view.info), chatItem: try await groupItemModels([record], view: view)[0])
    }

    /// Whether the group's `reactions` preference is on (SimpleX's default for a group: on).
    nonisolated static func reactionsAllowed(profile: String) -> Bool {
        Stored.json(profile)?["groupPreferences"]?["reactions"]?["enable"]?.stringValue != "off"
    }

    // MARK: - Commands

    /// `/_update item #<groupId> <itemId> json <UpdatedMessage>`: the user's own message, changed for
    /// every member (`x.msg.update`; `chatItemUpdated`, `chatItemNotChanged` when it is the same).
    public func updateGroupItem(groupId: Int64, itemId: Int64, message: JSONValue) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        let item = try await groupItem(itemId, groupId: groupId)
        guard item.memberRowId == nil, item.deleted == nil, let msgId = item.sharedMsgId else { throw ChatFailure.chat(.invalidChatItemUpdate) }
        guard let json = message["msgContent"], case .object = json, (try? PeerInput.content(json)) != nil else {
            throw ChatFailure.command("UpdatedMessage needs a msgContent object with a type")
        }
        try requireGroupPermission(view, .sendContent)
        if Stored.json(item.content) == json {
            return .chatItemNotChanged(user: userModel(u), chatItem: try await groupAChatItem(item, view: view))
        }
        if let c = try await ownedChannel(groupId, view: view) { // a channel's post (+ChannelItems)
            return try await updateChannelPost(c, item: item, msgId: msgId, content: json, user: u, view: view)
        }
        try requireStarted()
        let (text, now) = (json.description, Timestamp.now())
        try await runGroupCommand(view, userId: u.id, .sendContent(event: "x.msg.update", params: .object([("msgId", .string(msgId)), ("content", json)])),
                                  extra: { db in
                                      _ = try GroupItemRecord.filter(key: itemId).updateAll(db, Column("content").set(to: text), Column("edited").set(to: true),
                                                                                            Column("updated_at").set(to: now))
                                  })
        let after = try await groupView(groupId)
        return .chatItemUpdated(user: userModel(u), chatItem: try await groupAChatItem(try await groupItem(itemId, groupId: groupId), view: after))
    }

    /// `/_delete item #<groupId> <ids> broadcast|internal|internalMark`: `broadcast` deletes the
    /// user's own messages for every member (`x.msg.del`); `internal` removes items here only;
    /// `internalMark` marks them deleted here only (`chatItemsDeleted`, `byUser`). Every item is
    /// checked before anything is sent.
    public func deleteGroupItems(groupId: Int64, itemIds: [Int64], broadcast: Bool, markOnly: Bool) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        guard !itemIds.isEmpty else { throw ChatFailure.command("no items to delete") }
        var items: [GroupItemRecord] = []
        for id in itemIds { items.append(try await groupItem(id, groupId: groupId)) }
        if broadcast {
            for item in items where item.memberRowId != nil || item.deleted != nil || item.sharedMsgId == nil {
                throw ChatFailure.chat(.invalidChatItemDelete)
            }
            guard view.membership?.state?.status.isCurrent == true else { throw ChatFailure.chat(.groupNotJoined(groupInfo: view.info)) }
            if let c = try await ownedChannel(groupId, view: view) { // a channel's posts (+ChannelItems)
                return try await deleteChannelPosts(c, items: items, user: u, view: view)
            }
            try requireStarted()
        }
        var deletions: [ChatItemDeletion] = []
        for item in items {
            let id = item.id ?? 0
            let current = try await groupView(groupId)
            let before = try await groupAChatItem(item, view: current)
            if broadcast, let msgId = item.sharedMsgId {
                let now = Timestamp.now()
                try await runGroupCommand(current, userId: u.id, .sendContent(event: "x.msg.del", params: .object([("msgId", .string(msgId))])),
                                          extra: { db in
                                              _ = try GroupItemRecord.filter(key: id).updateAll(db, Column("deleted").set(to: GroupItemDeletion.deleted),
                                                                                                Column("updated_at").set(to: now))
                                          })
                deletions.append(ChatItemDeletion(deletedChatItem: before, toChatItem: try await groupAChatItem(try await groupItem(id, groupId: groupId), view: current)))
            } else if markOnly {
                var after = item
                after.deleted = after.deleted ?? .deleted
                after.updatedAt = Timestamp.now()
                let marked = after
                try await dbWrite { db in try marked.update(db) }
                deletions.append(ChatItemDeletion(deletedChatItem: before, toChatItem: try await groupAChatItem(marked, view: current)))
            } else {
                _ = try await dbWrite { db in try GroupItemRecord.deleteOne(db, key: id) }
                deletions.append(ChatItemDeletion(deletedChatItem: before))
            }
        }
        return .chatItemsDeleted(user: userModel(u), chatItemDeletions: deletions, byUser: true, timed: false)
    }

    /// `/_delete member item #<groupId> <ids>`: a moderator deletes members' messages for everyone
    /// (`x.msg.del` with the author's `memberId`; moderator and at least the author's role, as
    /// SimpleX's `groupMessageDelete`). Every item and the permission on each are checked before
    /// anything is sent.
    public func deleteMemberItems(groupId: Int64, itemIds: [Int64]) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        guard !itemIds.isEmpty else { throw ChatFailure.command("no items to delete") }
        var targets: [(GroupItemRecord, GroupMemberRecord)] = []
        for id in itemIds {
            let item = try await groupItem(id, groupId: groupId)
            guard let row = item.memberRowId, let author = view.members.first(where: { $0.id == row }), item.deleted == nil, item.sharedMsgId != nil else {
                throw ChatFailure.chat(.invalidChatItemDelete)
            }
            try requireGroupPermission(view, .deleteMessage, target: GroupProtocol.GroupMemberRole(name: author.role))
            targets.append((item, author))
        }
        try requireStarted()
        var deletions: [ChatItemDeletion] = []
        for (item, author) in targets {
            let id = item.id ?? 0
            let current = try await groupView(groupId)
            let before = try await groupAChatItem(item, view: current)
            let now = Timestamp.now()
            let params: JSONValue = .object([("msgId", .string(item.sharedMsgId ?? "")), ("memberId", .string(author.memberId))])
            try await runGroupCommand(current, userId: u.id, .sendContent(event: "x.msg.del", params: params), extra: { db in
                _ = try GroupItemRecord.filter(key: id).updateAll(db, Column("deleted").set(to: GroupItemDeletion.moderated),
                                                                  Column("deleted_by_row_id").set(to: nil as Int64?), Column("updated_at").set(to: now))
            })
            deletions.append(ChatItemDeletion(deletedChatItem: before, toChatItem: try await groupAChatItem(try await groupItem(id, groupId: groupId), view: current)))
        }
        return .chatItemsDeleted(user: userModel(u), chatItemDeletions: deletions, byUser: true, timed: false)
    }

    /// `/_reaction #<groupId> <itemId> on|off <MsgReaction>` (`x.msg.react` with the item's shared
    /// id and its author's `memberId`; `chatItemReaction`). The same emoji set and caps as in
    /// direct chats; the group's `reactions` preference must be on.
    public func reactGroupItem(groupId: Int64, itemId: Int64, add: Bool, reaction json: JSONValue) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        let item = try await groupItem(itemId, groupId: groupId)
        guard let reaction = Reactions.canonical(json) else {
            throw ChatFailure.command("a reaction is {\"type\":\"emoji\",\"emoji\":…} with one of \(Reactions.allowedEmoji.sorted().joined(separator: " "))")
        }
        guard item.deleted == nil, !(item.blocked && item.memberRowId != nil), let msgId = item.sharedMsgId else { throw ChatFailure.chat(.invalidChatItemUpdate) }
        guard Self.reactionsAllowed(profile: view.group.profile) else { throw ChatFailure.command("reactions are off in this group") }
        guard let me = view.membership, me.state?.status.isCurrent == true else { throw ChatFailure.chat(.groupNotJoined(groupInfo: view.info)) }
        if let c = try await ownedChannel(groupId, view: view) { // the owner on its post (+ChannelItems)
            guard item.memberRowId == nil else { throw ChatFailure.chat(.invalidChatItemUpdate) }
            return try await reactToChannelPost(c, item: item, msgId: msgId, add: add, reaction: reaction, user: u, view: view)
        }
        let author = item.memberRowId.flatMap { row in view.members.first { $0.id == row } } ?? me
        let key = Reactions.json(reaction).description
        let (myId, limits) = (me.memberId, self.limits)
        let has = try await dbRead { db in
            try !GroupReactionRecord.filter(GroupReactionRecord.Columns.itemId == itemId && GroupReactionRecord.Columns.byMember == myId &&
                                            GroupReactionRecord.Columns.reaction == key).isEmpty(db)
        }
        if add, !has, try await dbRead({ db in
            let onItem = GroupReactionRecord.filter(GroupReactionRecord.Columns.itemId == itemId)
            return try onItem.filter(GroupReactionRecord.Columns.byMember == myId).fetchCount(db) >= limits.maxReactionsPerMember
                || onItem.fetchCount(db) >= limits.maxReactionsPerItem
        }) {
            throw ChatFailure.command("too many reactions on this item (at most \(limits.maxReactionsPerMember) of yours, \(limits.maxReactionsPerItem) in all)")
        }
        try requireStarted()
        if has != add {
            let now = Timestamp.now()
            let params: JSONValue = .object([("msgId", .string(msgId)), ("memberId", .string(author.memberId)), ("reaction", Reactions.json(reaction)),
                                             ("add", .bool(add))])
            try await runGroupCommand(view, userId: u.id, .sendContent(event: "x.msg.react", params: params), extra: { db in
                if add {
                    try GroupReactionRecord(itemId: itemId, byMember: myId, sent: true, reaction: key, createdAt: now).insert(db, onConflict: .ignore)
                } else {
                    _ = try GroupReactionRecord.deleteOne(db, key: ["item_id": itemId, "by_member": myId, "reaction": key])
                }
            })
        }
        let after = try await groupView(groupId)
        let model = try await groupItemModels([try await groupItem(itemId, groupId: groupId)], view: after)[0]
        return .chatItemReaction(user: userModel(u), added: add, reaction: ACIReaction(
            chatInfo: .group(groupInfo: after.info), chatReaction: CIReaction(chatDir: .groupSnd, chatItem: model, sentAt: .now(), reaction: reaction)))
    }

    // MARK: - Received (inside the message's transaction)

    /// Applies a member's `x.msg.update`, `x.msg.del` or `x.msg.react` (as SimpleX's
    /// `groupMessageUpdate`, `groupMessageDelete`, `groupMsgReaction`). The machine has checked
    /// the sender already (a moderation's role included); this finds the item — by the author's
    /// member row and the shared id, so that nobody reaches another member's message by its id —
    /// and refuses what does not fit (not the author's, deleted, unknown, over the reaction cap).
    nonisolated static func applyItemEvent(_ db: Database, _ env: GroupEnvelope, author: MemberId, blocked: Bool, groupId: Int64, userId: Int64,
                                           now: String, limits: ChatLimits, into out: inout GroupOutcome) throws {
        let rows = GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId)
        guard let authorRow = try rows.filter(GroupMemberRecord.Columns.memberId == author.text).fetchOne(db)?.id else {
            out.refusedContent.append("\(env.event) from an unknown member")
            return
        }
        guard let msgId = env.params["msgId"]?.stringValue, !msgId.isEmpty, msgId.utf8.count <= 256 else {
            out.refusedContent.append("\(env.event) without a msgId")
            return
        }
        let membership = try rows.filter(GroupMemberRecord.Columns.category == GroupProtocol.GroupMemberCategory.user.rawValue).fetchOne(db)
        /// The item with this shared id by `member` (nil: the user's own).
        func item(by member: Int64?) throws -> GroupItemRecord? {
            try GroupItemRecord.filter(GroupItemRecord.Columns.groupId == groupId && GroupItemRecord.Columns.sharedMsgId == msgId &&
                                       GroupItemRecord.Columns.memberRowId == member).order(GroupItemRecord.Columns.id).fetchOne(db)
        }
        /// The row of the member a `memberId` param names (nil: the user), or false when unknown.
        func rowOf(_ text: String) throws -> (known: Bool, row: Int64?) {
            if text == membership?.memberId { return (true, nil) }
            guard let r = try rows.filter(GroupMemberRecord.Columns.memberId == text).fetchOne(db) else { return (false, nil) }
            return (true, r.id)
        }
        switch env.event {
        case "x.msg.update":
            guard let json = env.params["content"], (try? PeerInput.content(json)) != nil else {
                out.refusedContent.append("x.msg.update without a valid content")
                return
            }
            if var found = try item(by: authorRow) {
                guard found.deleted == nil else {
                    out.refusedContent.append("x.msg.update of a deleted message")
                    return
                }
                if try found.edit(to: json, at: now, db) { out.updatedItems.append(found.id!) }
            } else {
                // As SimpleX: an update of a message this side does not have makes it, edited.
                var made = GroupItemRecord(userId: userId, groupId: groupId, memberRowId: authorRow, content: json.description, sharedMsgId: msgId,
                                           status: .rcvNew, blocked: blocked, createdAt: now, edited: true)
                try made.insert(db)
                out.updatedItems.append(made.id!)
                _ = try GroupRecord.filter(key: groupId).updateAll(db, Column("chat_ts").set(to: now))
            }
        case "x.msg.del":
            let named = env.params["memberId"]?.stringValue
            if named == nil || named == author.text {
                guard let found = try item(by: authorRow) else {
                    out.refusedContent.append("x.msg.del of a message this side does not have")
                    return
                }
                try markDeleted(db, found, .deleted, by: nil, now: now, into: &out)
            } else if let named {
                // Moderation: the machine checked that the sender may delete this author's messages.
                let (known, row) = try rowOf(named)
                guard known else {
                    out.refusedContent.append("x.msg.del (moderation) of an unknown member's message")
                    return
                }
                guard let found = try item(by: row) else {
                    // As SimpleX (`createCIModeration`): kept, and applied when the message comes
                    // (a moderation can overtake a message the host forwards). The user's own
                    // messages are all here already.
                    guard row != nil else { return }
                    try db.execute(sql: """
                        INSERT INTO group_pending_moderation (group_id, author_member_id, shared_msg_id, moderator_row_id, created_at)
                        VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
                        """, arguments: [groupId, named, msgId, authorRow, now])
                    // Bounded: the oldest go beyond the last `pendingModerationsKept` of the group.
                    try db.execute(sql: """
                        DELETE FROM group_pending_moderation WHERE group_id = ? AND id <= (
                            SELECT id FROM group_pending_moderation WHERE group_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?)
                        """, arguments: [groupId, groupId, pendingModerationsKept])
                    return
                }
                try markDeleted(db, found, .moderated, by: authorRow, now: now, into: &out)
            }
        case "x.msg.react":
            guard let g = try GroupRecord.fetchOne(db, key: groupId), reactionsAllowed(profile: g.profile) else {
                out.refusedContent.append("x.msg.react: reactions are off in this group")
                return
            }
            guard let raw = env.params["reaction"], let add = env.params["add"]?.boolValue, let reaction = Reactions.canonical(raw) else {
                out.refusedContent.append("x.msg.react: a reaction outside the allowed set, or no add")
                return
            }
            var found: GroupItemRecord?
            if let named = env.params["memberId"]?.stringValue {
                let (known, row) = try rowOf(named)
                if known { found = try item(by: row) }
            } else {
                found = try GroupItemRecord.filter(GroupItemRecord.Columns.groupId == groupId && GroupItemRecord.Columns.sharedMsgId == msgId)
                    .order(GroupItemRecord.Columns.id).fetchOne(db)
            }
            guard let found, let itemId = found.id, found.deleted == nil else {
                out.refusedContent.append("x.msg.react on a message this side does not have")
                return
            }
            let key = Reactions.json(reaction).description
            let onItem = GroupReactionRecord.filter(GroupReactionRecord.Columns.itemId == itemId)
            let mine = onItem.filter(GroupReactionRecord.Columns.byMember == author.text)
            let has = try !mine.filter(GroupReactionRecord.Columns.reaction == key).isEmpty(db)
            guard has != add else { return }
            if add {
                guard try mine.fetchCount(db) < limits.maxReactionsPerMember, try onItem.fetchCount(db) < limits.maxReactionsPerItem else {
                    out.refusedContent.append("x.msg.react over the cap")
                    return
                }
                try GroupReactionRecord(itemId: itemId, byMember: author.text, sent: false, reaction: key, createdAt: now).insert(db)
            } else {
                _ = try GroupReactionRecord.deleteOne(db, key: ["item_id": itemId, "by_member": author.text, "reaction": key])
            }
            out.reactions.append(GroupReactionChange(itemId: itemId, byRowId: authorRow, reaction: reaction, add: add))
        default:
            out.refusedContent.append("\(env.event) in groups is not supported yet")
        }
    }

    /// Moderations of messages not received yet, kept per group (the newest).
    nonisolated static let pendingModerationsKept = 1_000

    /// A moderation that came before the message (`group_pending_moderation`): taken (deleted), and
    /// the moderator's row returned, when the moderator may still delete this author's messages.
    nonisolated static func takePendingModeration(_ db: Database, groupId: Int64, author: MemberId, msgId: String?) throws -> Int64? {
        // A cached statement: this looks for every group message received (almost never finds one).
        guard let msgId, let row = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT id, moderator_row_id FROM group_pending_moderation WHERE group_id = ? AND author_member_id = ? AND shared_msg_id = ?
            """), arguments: [groupId, author.text, msgId]) else { return nil }
        try db.execute(sql: "DELETE FROM group_pending_moderation WHERE id = ?", arguments: [row["id"] as Int64])
        let members = GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId)
        guard let moderator = try members.filter(GroupMemberRecord.Columns.id == (row["moderator_row_id"] as Int64)).fetchOne(db),
              let authorRole = try members.filter(GroupMemberRecord.Columns.memberId == author.text).fetchOne(db)?.role,
              GroupProtocol.GroupPermissions.check(actor: GroupProtocol.GroupMemberRole(name: moderator.role), action: .deleteMessage,
                                                   target: GroupProtocol.GroupMemberRole(name: authorRole)) == nil else { return nil }
        return moderator.id
    }

    private nonisolated static func markDeleted(_ db: Database, _ item: GroupItemRecord, _ how: GroupItemDeletion, by: Int64?, now: String,
                                                into out: inout GroupOutcome) throws {
        guard item.deleted == nil else { return }
        var after = item
        after.deleted = how
        after.deletedByRowId = by
        after.updatedAt = now
        try after.update(db)
        out.deletedItems.append(GroupItemChange(before: item, after: after))
    }

    /// A removal with `messages=on`: the removed member's messages (nil: the user's own) are
    /// marked moderated by the remover (nil: the user), as SimpleX marks them.
    nonisolated static func moderateAllOf(_ db: Database, groupId: Int64, member: MemberId?, by: MemberId?, now: String) throws {
        let rows = GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId)
        let authorRow = try member.flatMap { m in try rows.filter(GroupMemberRecord.Columns.memberId == m.text).fetchOne(db)?.id }
        if member != nil, authorRow == nil { return }
        let byRow = try by.flatMap { m in try rows.filter(GroupMemberRecord.Columns.memberId == m.text).fetchOne(db)?.id }
        _ = try GroupItemRecord.filter(GroupItemRecord.Columns.groupId == groupId && GroupItemRecord.Columns.memberRowId == authorRow &&
                                       GroupItemRecord.Columns.deleted == nil)
            .updateAll(db, Column("deleted").set(to: GroupItemDeletion.moderated), Column("deleted_by_row_id").set(to: byRow), Column("updated_at").set(to: now))
    }

    // MARK: - History for a new member

    /// The last messages of the group, for a member who just joined (SimpleX `sendHistory`: up to
    /// 100 items with text, none of a blocked member or deleted, each as `x.grp.msg.forward` with
    /// its author, the author's name shortened to 16 characters, its time and its shared id), when
    /// the group's `history` preference is on. Each is its own message here (SimpleX batches them;
    /// a receiver takes either). Quotes are not carried.
    nonisolated static func historyForwards(_ db: Database, groupId: Int64, limit: Int = 100) throws -> [GroupEnvelope] {
        guard let g = try GroupRecord.fetchOne(db, key: groupId),
              Stored.json(g.profile)?["groupPreferences"]?["history"]?["enable"]?.stringValue != "off" else { return [] }
        let members = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId).fetchAll(db)
        let byRow = Dictionary(members.compactMap { m in m.id.map { ($0, m) } }, uniquingKeysWith: { a, _ in a })
        guard let me = members.first(where: { $0.category == GroupProtocol.GroupMemberCategory.user.rawValue }) else { return [] }
        let items = try GroupItemRecord.filter(GroupItemRecord.Columns.groupId == groupId && GroupItemRecord.Columns.deleted == nil &&
                                               GroupItemRecord.Columns.blocked == false)
            .order(GroupItemRecord.Columns.id.desc).limit(limit).fetchAll(db).reversed()
        var out: [GroupEnvelope] = []
        for item in items {
            guard let msgId = item.sharedMsgId, let content = Stored.json(item.content),
                  let mc = Stored.decode(MsgContent.self, item.content), !mc.text.isEmpty else { continue }
            guard let author = item.memberRowId.map({ byRow[$0] }) ?? me, !author.blocked, let authorId = MemberId(author.memberId) else { continue }
            let name = Stored.profile(author.profile)?.displayName ?? author.localDisplayName ?? ""
            let short = name.count <= 16 ? name : String(name.prefix(16)) + "…"
            let inner = GroupEnvelope(msgId: msgId, event: "x.msg.new", params: .object([("content", content)]))
            let env = GroupMessage.forward(GroupForward(memberId: authorId, memberName: short, msgTs: item.itemTs ?? item.createdAt, msg: inner))
                .envelope(msgId: ChatMessage.newMessageId())
            // One too large to forward (content near the limit) is left out rather than failing the send.
            guard (try? GroupMessage.encode(env)) != nil else { continue }
            out.append(env)
        }
        return out
    }
}

// MARK: - Delivery statuses in small groups

extension ChatController {
    /// SimpleX `smallGroupsRcptsMemLimit`: receipts are sent in groups of at most this many current members.
    nonisolated static let smallGroupReceiptsLimit = 20

    /// Whether a received message earns the author a delivery receipt (SimpleX: a new `x.msg.new`
    /// received directly, in a group of at most 20 current members, when the user sends receipts).
    func groupReceiptWanted(_ ref: GroupConnection, _ env: GroupEnvelope, _ outcome: GroupOutcome) async throws -> Bool {
        guard env.event == "x.msg.new", !outcome.duplicate, !outcome.receivedItems.isEmpty,
              let state = groupRuntime.states[ref.groupId] else { return false }
        let current = state.members.values.filter { $0.status.isCurrent }.count + 1
        guard current <= Self.smallGroupReceiptsLimit else { return false }
        return try await user(ref.userId).sendReceipts
    }

    /// Makes the delivery statuses of the user's items just sent (inside the send's transaction):
    /// `sndNew` for every recipient, with no agent message yet. The item's status is thus judged
    /// against all its recipients from the start — not against those whose send was made so far,
    /// which flipped it between `sndSent` and `sndSentPartial` (and reported it) per member.
    nonisolated static func expectGroupSends(_ db: Database, groupId: Int64, _ sends: [(msgId: String, to: MemberId)]) throws {
        guard !sends.isEmpty else { return }
        let rows = try Row.fetchAll(db.cachedStatement(sql: "SELECT member_id, id FROM group_member WHERE group_id = ?"), arguments: [groupId])
        let rowOf = Dictionary(rows.map { ($0["member_id"] as String, $0["id"] as Int64) }, uniquingKeysWith: { a, _ in a })
        var items: [String: Int64] = [:]
        for (msgId, to) in sends {
            if items[msgId] == nil {
                guard let id = try ownGroupItemId(db, groupId: groupId, msgId: msgId) else { continue }
                items[msgId] = id
            }
            guard let itemId = items[msgId], let row = rowOf[to.text] else { continue }
            try GroupSndStatusRecord(itemId: itemId, memberRowId: row, agentConnId: nil, seq: nil, status: .sndNew).insert(db, onConflict: .ignore)
        }
    }

    /// The user's own item with this shared id in the group.
    nonisolated static func ownGroupItemId(_ db: Database, groupId: Int64, msgId: String) throws -> Int64? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT id FROM group_item WHERE group_id = ? AND shared_msg_id = ? AND member_row_id IS NULL ORDER BY id LIMIT 1"),
                           arguments: [groupId, msgId])
    }

    /// The (item, member row) of the delivery status of the user's item `msgId` to `member`.
    private nonisolated static func sendStatusKey(_ db: Database, groupId: Int64, member: MemberId, msgId: String) throws -> (item: Int64, row: Int64)? {
        guard let itemId = try ownGroupItemId(db, groupId: groupId, msgId: msgId),
              let row = try Int64.fetchOne(db.cachedStatement(sql: "SELECT id FROM group_member WHERE group_id = ? AND member_id = ?"), arguments: [groupId, member.text])
        else { return nil }
        return (itemId, row)
    }

    /// Records that the user's item `msgId` went to `member` as agent message `seq` on `conn`
    /// (`sndNew`, or `sndSent` when the relay's `sent` came first), and updates the item's status
    /// when that changed it. `with` runs in the same transaction (the action's deletion).
    func trackGroupSend(groupId: Int64, member: MemberId, conn: Int64, seq: UInt64, msgId: String,
                        with also: @escaping @Sendable (Database) throws -> Void) async throws {
        let key = "\(conn):\(seq)"
        let early = groupRuntime.sentEarly.remove(key) != nil
        let changed = try await dbWrite { db -> Int64? in
            try also(db)
            guard let (itemId, row) = try Self.sendStatusKey(db, groupId: groupId, member: member, msgId: msgId) else { return nil }
            let status: ItemStatus = early ? .sndSent : .sndNew
            // The status was made with the send (``expectGroupSends``), `sndNew`: nothing moves it
            // before it has its agent message.
            try db.cachedStatement(sql: "UPDATE group_snd_status SET agent_conn_id = ?, seq = ?, status = ? WHERE item_id = ? AND member_row_id = ?")
                .execute(arguments: [conn, Int64(seq), status, itemId, row])
            if db.changesCount == 0 {
                // A send queued before statuses were made with it.
                try GroupSndStatusRecord(itemId: itemId, memberRowId: row, agentConnId: conn, seq: Int64(seq), status: status).insert(db)
            } else if !early {
                return nil // still `sndNew`: the item's status is the same
            }
            return try Self.refreshGroupItemStatus(db, itemId: itemId) ? itemId : nil
        }
        if let changed { try await reportGroupItemStatuses(groupId, itemIds: [changed]) }
        // A `sent` that came while this was being recorded.
        if !early, groupRuntime.sentEarly.remove(key) != nil {
            try await groupDelivery(conn, seqs: [seq], to: .sndSent, groupId: groupId)
        }
    }

    /// The user's item `msgId` was not sent to `member` (its connection is gone: it left or was
    /// removed meanwhile): that member is no recipient, its status goes. `with` runs in the same
    /// transaction (the action's deletion).
    func untrackGroupSend(groupId: Int64, member: MemberId, msgId: String, with also: @escaping @Sendable (Database) throws -> Void) async throws {
        let changed = try await dbWrite { db -> Int64? in
            try also(db)
            guard let (itemId, row) = try Self.sendStatusKey(db, groupId: groupId, member: member, msgId: msgId),
                  try GroupSndStatusRecord.deleteOne(db, key: ["item_id": itemId, "member_row_id": row]) else { return nil }
            return try Self.refreshGroupItemStatus(db, itemId: itemId) ? itemId : nil
        }
        if let changed { try await reportGroupItemStatuses(groupId, itemIds: [changed]) }
    }

    /// A member connection's `sent` (the relay has it) or `delivered` (the member's receipt) for
    /// agent messages `seqs`: their per-member statuses move on, and the items whose overall status
    /// changed are reported (`chatItemsStatusesUpdated`).
    func groupDelivery(_ conn: Int64, seqs: [UInt64], to status: ItemStatus, groupId: Int64) async throws {
        let from: [ItemStatus] = status == .sndSent ? [.sndNew] : [.sndNew, .sndSent]
        let (changed, missing) = try await dbWrite { db -> ([Int64], [UInt64]) in
            var items: [Int64] = []
            var missing: [UInt64] = []
            // Cached statements: this runs for every member's `sent` and receipt of every message.
            let find = try db.cachedStatement(sql: "SELECT item_id, status FROM group_snd_status WHERE agent_conn_id = ? AND seq = ? LIMIT 1")
            let move = try db.cachedStatement(sql: "UPDATE group_snd_status SET status = ? WHERE agent_conn_id = ? AND seq = ?")
            for seq in seqs {
                guard let r = try Row.fetchOne(find, arguments: [conn, Int64(seq)]) else {
                    missing.append(seq)
                    continue
                }
                let itemId: Int64 = r["item_id"]
                guard let current = r["status"] as ItemStatus?, from.contains(current) else { continue }
                try move.execute(arguments: [status, conn, Int64(seq)])
                if !items.contains(itemId) { items.append(itemId) }
            }
            return (try items.filter { try Self.refreshGroupItemStatus(db, itemId: $0) }, missing)
        }
        // Only while an item send is being made on this connection can its `sent` come first.
        if status == .sndSent, groupRuntime.itemSendsInFlight[conn] != nil {
            for seq in missing { groupRuntime.sentEarly.insert("\(conn):\(seq)") }
        }
        if !changed.isEmpty { try await reportGroupItemStatuses(groupId, itemIds: changed) }
    }

    /// The item's overall status from its members' (SimpleX `membersGroupItemStatus`): received
    /// by all (`sndRcvd` complete), by some (partial), else sent to all / some, else `sndNew`.
    /// Counted in SQL (an item has a status per member). Whether it changed.
    nonisolated static func refreshGroupItemStatus(_ db: Database, itemId: Int64) throws -> Bool {
        let (rcvd, sent) = (ItemStatus.sndRcvd.rawValue, ItemStatus.sndSent.rawValue)
        guard let counts = try Row.fetchOne(db.cachedStatement(sql: """
            SELECT count(*) AS total, count(CASE WHEN status = ? THEN 1 END) AS rcvd, count(CASE WHEN status IN (?, ?) THEN 1 END) AS sent
            FROM group_snd_status WHERE item_id = ?
            """), arguments: [rcvd, sent, rcvd, itemId]),
            let current = try ItemStatus.fetchOne(db.cachedStatement(sql: "SELECT status FROM group_item WHERE id = ?"), arguments: [itemId])
        else { return false }
        let (total, received, sentTo): (Int, Int, Int) = (counts["total"], counts["rcvd"], counts["sent"])
        guard total > 0 else { return false }
        let overall: ItemStatus = received == total ? .sndRcvd : received > 0 ? .sndRcvdPartial
            : sentTo == total ? .sndSent : sentTo > 0 ? .sndSentPartial : .sndNew
        guard overall != current else { return false }
        try db.cachedStatement(sql: "UPDATE group_item SET status = ? WHERE id = ?").execute(arguments: [overall, itemId])
        return true
    }

    /// The group items of `ids`, in id order, through a cached statement (one per count of ids:
    /// reports of received items and statuses read them for every message).
    nonisolated static func groupItems(_ db: Database, ids: [Int64]) throws -> [GroupItemRecord] {
        let unique = Array(Set(ids))
        guard !unique.isEmpty else { return [] }
        let marks = Array(repeating: "?", count: unique.count).joined(separator: ",")
        return try GroupItemRecord.fetchAll(db.cachedStatement(sql: "SELECT * FROM group_item WHERE id IN (\(marks)) ORDER BY id"), arguments: StatementArguments(unique))
    }

    func reportGroupItemStatuses(_ groupId: Int64, itemIds: [Int64]) async throws {
        guard !itemIds.isEmpty else { return }
        guard let (records, view) = try await dbRead({ db -> ([GroupItemRecord], GroupView)? in
            let records = try Self.groupItems(db, ids: itemIds)
            let rows = Self.memberRows(shownBy: records)
            return try Self.readGroupView(db, groupId, rows: rows).map { (records, $0) }
        }) else { return }
        guard !records.isEmpty else { return }
        let u = try await user(view.group.userId)
        let info = view.info
        let items = try await groupItemModels(records, view: view).map { AChatItem(chatInfo: .group(groupInfo: info), chatItem: $0) }
        sink.yield(.chatItemsStatusesUpdated(user: userModel(u), chatItems: items))
    }
}
