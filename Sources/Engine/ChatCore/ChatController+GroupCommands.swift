import Agent
import ChatModel
import Foundation
import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto
import SwiftplexSQL
import Synchronization

// The bot API's group commands. Each is checked with `GroupPermissions` first (so that the API
// answers `groupUserRole` with the role it needs), then fed to the group's machine
// (``commitGroupInput``), and answered with the 7.0.2 package's response.

extension ChatController {
    /// A new member id: 12 random bytes in base64url, as SimpleX makes them.
    nonisolated static func newMemberId() -> MemberId { MemberId(Base64URL.encode(Sodium.randomBytes(12)))! }

    /// The group (not deleted) and its user, or `groupNotFound`.
    func groupAndUser(_ groupId: Int64) async throws -> (UserRow, GroupView) {
        let view = try await groupView(groupId)
        return (try await user(view.group.userId), view)
    }

    /// The API error of a refused command.
    func groupFailure(_ e: GroupError, view: GroupView, contactName: String? = nil) -> ChatFailure {
        switch e.code {
        case .notAuthorized: .chat(.groupUserRole(groupInfo: view.info, requiredRole: GroupRoles.model(e.requiredRole ?? .owner)))
        case .notJoined: .chat(.groupNotJoined(groupInfo: view.info))
        case .duplicateMember: .chat(.groupDuplicateMember(contactName: contactName ?? ""))
        case .memberNotCurrent: .chat(.groupMemberNotActive)
        case .groupFull: .command("the group has as many members as its limit allows (\(limits.maxGroupMembers); groups.max_members in the host configuration): \(e.message)")
        default: .chat(.groupInternal(message: "\(e.code.rawValue): \(e.message)"))
        }
    }

    /// The user's own role and state allow `action` (on a member of role `target`): else the API error.
    func requireGroupPermission(_ view: GroupView, _ action: GroupProtocol.GroupAction, target: GroupProtocol.GroupMemberRole? = nil) throws {
        guard let me = view.membership?.state, me.status.isCurrent else { throw ChatFailure.chat(.groupNotJoined(groupInfo: view.info)) }
        if let refused = GroupPermissions.check(actor: me.role, action: action, target: target) { throw groupFailure(refused, view: view) }
    }

    /// Runs a command's input, mapping a refusal to the API error and reporting the events it made.
    @discardableResult
    func runGroupCommand(_ view: GroupView, userId: Int64, _ input: GroupInput, messageId: String? = nil, contactName: String? = nil,
                         extra: (@Sendable (Database) throws -> Void)? = nil) async throws -> GroupOutcome {
        let groupId = view.group.id ?? 0
        // A channel's members are its machine's (+Channels): the group commands do not apply yet.
        if try await channelRecord(groupId) != nil { throw ChatFailure.command("this command is not supported in channels yet") }
        do {
            return try await commitGroupInput(groupId, userId: userId, input, messageId: messageId, extra: extra)
        } catch let e as GroupError {
            throw groupFailure(e, view: view, contactName: contactName)
        }
    }

    /// The member rows named by a command (`groupMemberId`s), or `groupMemberNotFound`.
    func namedMembers(_ view: GroupView, _ ids: [Int64]) throws -> [GroupMemberRecord] {
        try ids.map { id in
            guard let r = view.others.first(where: { $0.id == id }) else { throw ChatFailure.store(.groupMemberNotFound(groupMemberId: id)) }
            return r
        }
    }

    // MARK: - Commands

    /// `/_group <userId> <GroupProfile>`: a new group, the user its owner (`groupCreated`).
    public func createGroup(userId: Int64, incognito: Bool, profile given: JSONValue) async throws -> ChatResponse {
        guard !incognito else { throw ChatFailure.command("incognito groups are not supported yet") }
        let u = try await user(userId)
        let profile = try Self.groupProfile(given)
        guard !profile.isPublicGroup else { throw ChatFailure.command("a channel (publicGroup) is not created with /_group") }
        let own = try MemberProfile(json: JSONValueEncoder().encode(u.profile))
        let state = GroupState(creator: Self.newMemberId(), profile: own, groupProfile: profile)
        let now = Timestamp.now()
        let membership = state.membership
        let groupId = try await dbWrite { db -> Int64 in
            let local = try LocalNames.reserve(db, userId: userId, displayName: profile.displayName)
            var g = GroupRecord(userId: userId, localDisplayName: local, profile: profile.json.description, createdAt: now, updatedAt: now, chatTs: now)
            try g.insert(db)
            try Self.saveMember(db, membership, groupId: g.id!, userId: userId, now: now)
            return g.id!
        }
        groupRuntime.states[groupId] = state.withMemberLimit(limits.maxGroupMembers)
        let view = try await groupView(groupId)
        return .group(.groupCreated(UserGroup(user: userModel(u), groupInfo: view.info)))
    }

    /// `/_add #<groupId> <contactId> <role>`: invites a contact (`sentGroupInvitation`).
    public func addMember(groupId: Int64, contactId: Int64, role: ChatModel.GroupMemberRole) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        let (cu, c) = try await contact(contactId)
        guard cu.id == u.id else { throw ChatFailure.store(.contactNotFound(contactId: contactId)) }
        guard c.ready else { throw ChatFailure.chat(.contactNotReady(contact: contactModel(c, user: u))) }
        try requireStarted()
        let proto = GroupRoles.proto(role)
        try requireGroupPermission(view, .invite(as: proto))
        let memberId = Self.newMemberId()
        let profile = try c.profile.map { try MemberProfile(json: JSONValueEncoder().encode($0)) }
        try await runGroupCommand(view, userId: u.id, .addMember(contact: c.id, memberId: memberId, role: proto, profile: profile),
                                  contactName: c.localName ?? c.profile?.displayName)
        let after = try await groupView(groupId)
        guard let member = after.member(memberId) else { throw ChatFailure.chat(.groupInternal(message: "the invited member was not stored")) }
        return .group(.sentGroupInvitation(SentGroupInvitation(user: userModel(u), groupInfo: after.info, contact: contactModel(c, user: u), member: member)))
    }

    /// `/_join #<groupId>`: accepts an invitation (`userAcceptedGroupSent`); `userJoinedGroup` follows.
    public func joinGroup(groupId: Int64) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        try requireStarted()
        try await runGroupCommand(view, userId: u.id, .join)
        let after = try await groupView(groupId)
        let host = after.others.first { $0.category == GroupProtocol.GroupMemberCategory.host.rawValue }
        var hostContact: Contact?
        if let id = host?.contactId, let (_, c) = try? await contact(id) { hostContact = contactModel(c, user: u) }
        return .group(.userAcceptedGroupSent(UserAcceptedGroupSent(user: userModel(u), groupInfo: after.info, hostContact: hostContact)))
    }

    /// `/_members #<groupId>`: the members but the user (`groupMembers`).
    public func listMembers(groupId: Int64) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        // A channel's group as every other channel answer shows it (`useRelays`, a relay's own status).
        let info = try await channelRecord(groupId).map { channelInfo(view, $0) } ?? view.info
        return .group(.groupMembers(GroupMembers(user: userModel(u), group: Group(groupInfo: info, members: view.others.map(view.member)))))
    }

    /// `/_groups <userId>[ @<contactId>][ <search>]` (`groupsList`).
    public func listGroups(userId: Int64, contactId: Int64?, search: String?) async throws -> ChatResponse {
        let u = try await user(userId)
        let (views, channels) = try await dbRead { db -> ([GroupView], [Int64: ChannelRecord]) in
            let ids = try GroupRecord.filter(GroupRecord.Columns.userId == userId && GroupRecord.Columns.deleted == false)
                .order(GroupRecord.Columns.id).fetchAll(db).compactMap(\.id)
            // Channels are listed as the API shows them elsewhere: `useRelays`, a relay's own status.
            let channels = try ChannelRecord.filter(ids.contains(ChannelRecord.Columns.groupId)).fetchAll(db)
            return (try ids.compactMap { try Self.readGroupView(db, $0) }, Dictionary(channels.map { ($0.groupId, $0) }, uniquingKeysWith: { a, _ in a }))
        }
        let groups = views.filter { v in
            if let contactId, !v.others.contains(where: { $0.contactId == contactId }) { return false }
            if let search, !search.isEmpty {
                let info = v.info
                return info.localDisplayName.localizedCaseInsensitiveContains(search) || info.groupProfile.fullName.localizedCaseInsensitiveContains(search)
            }
            return true
        }
        return .group(.groupsList(GroupsList(user: userModel(u), groups: groups.map { v in channels[v.group.id ?? 0].map { channelInfo(v, $0) } ?? v.info })))
    }

    /// A command on named members (role, block, remove): the group and its user, the members
    /// named (`groupMemberNotFound` for an unknown one), the user's permission for `action` on each
    /// (all checked before anything is sent), then the machine's `input` for each member in turn,
    /// on the group as it is by then; `respond` answers with the user, the group afterwards and
    /// the members as they are now (in the order named).
    func runOnMembers(groupId: Int64, memberIds: [Int64], action: GroupProtocol.GroupAction, input: (MemberId) -> GroupInput,
                      respond: (User, GroupInfo, [GroupMember]) -> GroupResponse) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        let targets = try namedMembers(view, memberIds)
        for t in targets { try requireGroupPermission(view, action, target: GroupProtocol.GroupMemberRole(name: t.role)) }
        try requireStarted()
        for t in targets {
            guard let id = MemberId(t.memberId) else { continue }
            try await runGroupCommand(try await groupView(groupId), userId: u.id, input(id))
        }
        let after = try await groupView(groupId)
        return .group(respond(userModel(u), after.info, targets.compactMap { MemberId($0.memberId).flatMap(after.member) }))
    }

    /// `/_member role #<groupId> <ids> <role>` (`membersRoleUser`).
    public func setMembersRole(groupId: Int64, memberIds: [Int64], role: ChatModel.GroupMemberRole) async throws -> ChatResponse {
        let proto = GroupRoles.proto(role)
        return try await runOnMembers(groupId: groupId, memberIds: memberIds, action: .changeRole(to: proto), input: { .changeRole($0, to: proto) }) {
            .membersRoleUser(MembersRoleUser(user: $0, groupInfo: $1, members: $2, toRole: role))
        }
    }

    /// `/_block #<groupId> <ids> blocked=on|off` (`membersBlockedForAllUser`).
    public func blockMembers(groupId: Int64, memberIds: [Int64], blocked: Bool) async throws -> ChatResponse {
        try await runOnMembers(groupId: groupId, memberIds: memberIds, action: .block, input: { .block($0, blocked: blocked) }) {
            .membersBlockedForAllUser(MembersBlockedForAllUser(user: $0, groupInfo: $1, members: $2, blocked: blocked))
        }
    }

    /// `/_remove #<groupId> <ids>[ messages=on]` (`userDeletedMembers`).
    public func removeMembers(groupId: Int64, memberIds: [Int64], withMessages: Bool) async throws -> ChatResponse {
        if let removed = try await removeChannelRelays(groupId: groupId, memberIds: memberIds) { return removed } // a channel's relays (+ChannelManagement)
        return try await runOnMembers(groupId: groupId, memberIds: memberIds, action: .remove, input: { .remove($0, messages: withMessages) }) {
            .userDeletedMembers(UserDeletedMembers(user: $0, groupInfo: $1, members: $2, withMessages: withMessages))
        }
    }

    /// `/_leave #<groupId>` (`leftMemberUser`).
    public func leaveGroup(groupId: Int64) async throws -> ChatResponse {
        if let left = try await leaveChannel(groupId: groupId) { return left } // a channel's subscriber (+ChannelMembers)
        let (u, view) = try await groupAndUser(groupId)
        try await runGroupCommand(view, userId: u.id, .leave)
        await dropGroupLink(groupId) // (+GroupLinks)
        return .group(.leftMemberUser(UserGroup(user: userModel(u), groupInfo: try await groupView(groupId).info)))
    }

    /// `/_delete #<groupId>`: an owner deletes the group for everyone (`x.grp.del`); a member who
    /// left or was removed deletes it locally; a current member that is not the owner is refused
    /// (`groupUserRole` owner), as in SimpleX. The group goes from the store once its messages are out.
    public func deleteGroup(groupId: Int64) async throws -> ChatResponse {
        if let deleted = try await deleteChannelAsOwner(groupId: groupId) { return deleted } // a channel's owner (+ChannelManagement)
        let (u, view) = try await groupAndUser(groupId)
        guard let me = view.membership?.state else { throw ChatFailure.store(.groupNotFound(groupId: groupId)) }
        let info = view.info
        if me.status.isCurrent {
            guard me.role == .owner else { throw ChatFailure.chat(.groupUserRole(groupInfo: info, requiredRole: .owner)) }
            try await runGroupCommand(view, userId: u.id, .deleteGroup, extra: { db in
                _ = try GroupRecord.filter(key: groupId).updateAll(db, GroupRecord.Columns.deleted.set(to: true))
            })
        } else {
            try await dbWrite { db in
                var a = GroupActionRecord(groupId: groupId, action: GroupPendingAction.deleteAll.json.description)
                try a.insert(db)
                _ = try GroupRecord.filter(key: groupId).updateAll(db, GroupRecord.Columns.deleted.set(to: true))
            }
        }
        await dropGroupLink(groupId) // (+GroupLinks)
        kickGroupActions(groupId)
        return .group(.groupDeletedUser(GroupDeletedUser(user: userModel(u), groupInfo: info)))
    }

    /// A group profile from a command's JSON: an object with a valid `displayName` (normalised),
    /// `fullName` defaulting to "", readable both as the API's `GroupProfile` and the protocol's.
    /// `keeping`: fields taken from the current profile whatever the JSON says (a channel's
    /// `publicGroup`).
    nonisolated static func groupProfile(_ given: JSONValue, keeping kept: [(String, JSONValue)] = []) throws -> GroupProtocol.GroupProfile {
        guard case .object = given else { throw ChatFailure.command("the group profile must be an object") }
        var json = given
        json.set("displayName", .string(try checkedName(given["displayName"]?.stringValue ?? "")))
        if json["fullName"] == nil { json.set("fullName", .string("")) }
        for (key, value) in kept { json.set(key, value) }
        do {
            _ = try JSONValueDecoder().decode(ChatModel.GroupProfile.self, from: json)
            return try GroupProtocol.GroupProfile(json: json)
        } catch {
            throw ChatFailure.command("malformed group profile: \(error)")
        }
    }

    /// `/_group_profile #<groupId> <GroupProfile>` (owner; `groupUpdated`).
    public func updateGroupProfile(groupId: Int64, profile given: JSONValue) async throws -> ChatResponse {
        if let updated = try await updateChannelProfile(groupId: groupId, profile: given) { return updated } // a channel (+ChannelManagement)
        let (u, view) = try await groupAndUser(groupId)
        let profile = try Self.groupProfile(given)
        try requireGroupPermission(view, .updateProfile)
        try requireStarted()
        try await runGroupCommand(view, userId: u.id, .updateProfile(profile))
        let after = try await groupView(groupId)
        return .group(.groupUpdated(GroupUpdated(user: userModel(u), fromGroup: view.info, toGroup: after.info, msgSigned: false)))
    }

    /// `/_send #<groupId> json [...]`: messages to every member (`newChatItems`, `groupSnd`). A
    /// `quotedItemId` (an item of this group) travels as SimpleX's `quote`, with the quoted
    /// message's shared id, time, direction and author (`msgRef.memberId`) and its content.
    public func sendToGroup(groupId: Int64, messages: [JSONValue]) async throws -> ChatResponse {
        if let posted = try await sendChannelPosts(groupId: groupId, messages: messages) { return posted } // a channel (+ChannelMembers)
        let (u, view) = try await groupAndUser(groupId)
        try requireGroupPermission(view, .sendContent)
        // Everything is checked before anything is sent, so a bad message loses none of the others.
        var checked: [(JSONValue, GroupItemRecord?)] = []
        for m in messages {
            guard let json = m["msgContent"], (try? PeerInput.content(json)) != nil else {
                throw ChatFailure.command("each message needs a msgContent object with a type")
            }
            var quoted: GroupItemRecord?
            if let q = m["quotedItemId"], q != .null {
                guard let qid = q.int64Value else { throw ChatFailure.command("quotedItemId must be a chat item id") }
                guard let found = try await dbRead({ db in try GroupItemRecord.fetchOne(db, key: qid) }), found.groupId == groupId else {
                    throw ChatFailure.store(.chatItemNotFound(itemId: qid))
                }
                guard found.sharedMsgId != nil, Stored.decode(MsgContent.self, found.content) != nil else { throw ChatFailure.store(.invalidQuote) }
                quoted = found
            }
            checked.append((json, quoted))
        }
        try requireStarted()
        var items: [AChatItem] = []
        for (json, quoted) in checked {
            let msgId = ChatMessage.newMessageId()
            let userId = u.id
            let now = Timestamp.now()
            let itemId = ItemIdBox()
            var params: [(String, JSONValue)] = [("content", json)]
            var quoteText: String?
            if let quoted, let quotedMsgId = quoted.sharedMsgId, let quotedContent = Stored.decode(MsgContent.self, quoted.content) {
                var ref: [(String, JSONValue)] = [("msgId", .string(quotedMsgId)), ("sentAt", .string(quoted.createdAt)),
                                                  ("sent", .bool(quoted.memberRowId == nil))]
                let author = quoted.memberRowId.flatMap { id in view.members.first { $0.id == id } } ?? (quoted.memberRowId == nil ? view.membership : nil)
                if let author { ref.append(("memberId", .string(author.memberId))) }
                params.append(("quote", .object([("msgRef", .object(ref)), ("content", Stored.json(quoted.content) ?? .null)])))
                quoteText = try Stored.text(GroupItemQuote(sharedMsgId: quotedMsgId, sentAt: Stored.timestamp(quoted.createdAt), content: quotedContent,
                                                           itemId: quoted.id, authorRowId: quoted.memberRowId))
            }
            try await runGroupCommand(try await groupView(groupId), userId: u.id, .sendContent(event: "x.msg.new", params: .object(params)),
                                      messageId: msgId, extra: { [quoteText] db in
                                          var item = GroupItemRecord(userId: userId, groupId: groupId, content: json.description, sharedMsgId: msgId,
                                                                     status: .sndNew, blocked: false, createdAt: now, quote: quoteText)
                                          try item.insert(db)
                                          itemId.set(item.id!)
                                          _ = try GroupRecord.filter(key: groupId).updateAll(db, Column("chat_ts").set(to: now))
                                      })
            let after = try await groupView(groupId)
            guard let id = itemId.value, let record = try await dbRead({ db in try GroupItemRecord.fetchOne(db, key: id) }) else { continue }
            items.append(AChatItem(chatInfo: .group(groupInfo: after.info), chatItem: groupItemModel(record, view: after)))
        }
        return .newChatItems(user: userModel(u), chatItems: items)
    }

    /// `/_get chat #<groupId> …`: a page of the group's items, oldest first.
    public func getGroupChat(groupId: Int64, page: ItemPage) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        let mine = GroupItemRecord.filter(GroupItemRecord.Columns.groupId == groupId)
        let id = GroupItemRecord.Columns.id
        let records: [GroupItemRecord]
        func anchor(_ a: Int64) async throws {
            guard try await dbRead({ db in try mine.filter(id == a).isEmpty(db) }) == false else { throw ChatFailure.store(.chatItemNotFound(itemId: a)) }
        }
        switch page {
        case let .last(n):
            guard n > 0 else { throw ChatFailure.command("count must be positive") }
            records = try await dbRead { db in try mine.order(id.desc).limit(n).fetchAll(db) }.reversed()
        case let .after(a, n):
            guard n > 0 else { throw ChatFailure.command("count must be positive") }
            try await anchor(a)
            records = try await dbRead { db in try mine.filter(id > a).order(id.asc).limit(n).fetchAll(db) }
        case let .before(a, n):
            guard n > 0 else { throw ChatFailure.command("count must be positive") }
            try await anchor(a)
            records = try await dbRead { db in try mine.filter(id < a).order(id.desc).limit(n).fetchAll(db) }.reversed()
        }
        return .apiChat(user: userModel(u), chat: AChat(chatInfo: .group(groupInfo: view.info), chatItems: try await groupItemModels(records, view: view),
                                                        chatStats: try await groupChatStats(groupId)))
    }

    func groupChatStats(_ groupId: Int64) async throws -> ChatStats {
        let (unread, minId) = try await dbRead { db -> (Int, Int64) in
            let unread = GroupItemRecord.filter(GroupItemRecord.Columns.groupId == groupId && GroupItemRecord.Columns.status == ItemStatus.rcvNew)
            return (try unread.fetchCount(db), try unread.select(min(GroupItemRecord.Columns.id), as: Int64?.self).fetchOne(db).flatMap { $0 } ?? 0)
        }
        return ModelOf.chatStats(unread: unread, minUnreadItemId: minId)
    }

    /// `/_read chat #<groupId>`.
    public func readGroupChat(groupId: Int64) async throws -> ChatResponse {
        let (u, _) = try await groupAndUser(groupId)
        try await dbWrite { db in
            _ = try GroupItemRecord.filter(GroupItemRecord.Columns.groupId == groupId && GroupItemRecord.Columns.status == ItemStatus.rcvNew)
                .updateAll(db, GroupItemRecord.Columns.status.set(to: ItemStatus.rcvRead))
        }
        return .cmdOk(user: userModel(u))
    }

    /// `/_set custom #<groupId>[ <json>]`.
    public func setGroupCustomData(groupId: Int64, data: JSONValue?) async throws -> ChatResponse {
        let (u, _) = try await groupAndUser(groupId)
        let text = data?.description
        try await dbWrite { db in _ = try GroupRecord.filter(key: groupId).updateAll(db, Column("custom_data").set(to: text)) }
        return .cmdOk(user: userModel(u))
    }

    /// The user's groups for `/_get chats`: (activity, chat, unread count, name).
    func groupChats(user u: UserRow) async throws -> [(ts: String, chat: AChat, unread: Int, name: String)] {
        let userId = u.id
        let views = try await dbRead { db -> [GroupView] in
            let ids = try GroupRecord.filter(GroupRecord.Columns.userId == userId && GroupRecord.Columns.deleted == false).fetchAll(db).compactMap(\.id)
            return try ids.compactMap { try Self.readGroupView(db, $0) }
        }
        var chats: [(ts: String, chat: AChat, unread: Int, name: String)] = []
        for v in views {
            let gid = v.group.id ?? 0
            let last = try await dbRead { db in try GroupItemRecord.filter(GroupItemRecord.Columns.groupId == gid).order(GroupItemRecord.Columns.id.desc).fetchOne(db) }
            let stats = try await groupChatStats(gid)
            chats.append((v.group.chatTs ?? v.group.updatedAt,
                          AChat(chatInfo: .group(groupInfo: v.info), chatItems: last.map { [groupItemModel($0, view: v)] } ?? [], chatStats: stats),
                          stats.unreadCount, v.group.localDisplayName))
        }
        return chats
    }
}

/// The id of an item inserted inside a transaction closure, read after it.
final class ItemIdBox: Sendable {
    private let stored = Mutex<Int64?>(nil)
    func set(_ v: Int64) { stored.withLock { $0 = v } }
    var value: Int64? { stored.withLock { $0 } }
}
