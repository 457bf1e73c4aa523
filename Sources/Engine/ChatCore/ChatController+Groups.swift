import Agent
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

// Groups on the engine: each group's `GroupProtocol.GroupState` machine is fed one input at a
// time (a local command, a message or connection event on a member connection, an agent call's
// answer); the input's effects are committed in one chat-database transaction — the machine's
// records (members, membership, profile, introductions), the received content as items, the
// agent calls still to make (`group_action`, performed in order per group by
// ``drainGroupActions(_:)``), the forward-dedup row and the input's "handled" mark — and only then
// is the agent told the message was processed. A `kill -9` anywhere replays the input (nothing
// of it was committed) or finds it handled; a pending agent call is made again after a restart,
// sends with an idempotency key so that none goes twice.

/// The group machines in memory, the member connections, and per-group ordering.
struct GroupRuntime {
    /// Restored machines, by group id.
    var states: [Int64: GroupState] = [:]
    /// Member connections: agent connection → (group, member); loaded on first use.
    var connections: [Int64: GroupConnection]?
    /// Join requests sent through group links and not answered yet (their agent connections); loaded on first use.
    var linkJoins: Set<Int64>?
    /// Groups whose machine is in use (one input at a time per group), and who waits.
    var busy: Set<Int64> = []
    var waiters: [Int64: [CheckedContinuation<Void, Never>]] = [:]
    /// Groups whose actions are being performed, and those with actions added meanwhile.
    var draining: Set<Int64> = []
    var redrain: Set<Int64> = []
    /// Item sends being made, per member connection, and `sent` events that came for such a
    /// connection before the send was recorded (`conn:seq`), for ``trackGroupSend``.
    var itemSendsInFlight: [Int64: Int] = [:]
    var sentEarly: Set<String> = []
}

struct GroupConnection: Sendable {
    var groupId: Int64
    var userId: Int64
    var memberId: MemberId
}

/// What a committed input produced, for the events reported after the commit.
struct GroupOutcome: Sendable {
    var events: [GroupProtocol.GroupEvent] = []
    /// Items stored from received content (ids), and content refused (why).
    var receivedItems: [Int64] = []
    /// Items changed by received `x.msg.update`, `x.msg.del`, `x.msg.react` (``applyItemEvent``).
    var updatedItems: [Int64] = []
    var deletedItems: [GroupItemChange] = []
    var reactions: [GroupReactionChange] = []
    var refusedContent: [String] = []
    /// Malformed quotes of applied messages (kept without their quote), for the log.
    var droppedQuotes: [String] = []
    /// Member contacts made from received `x.grp.direct.inv` (+MemberContacts).
    var memberContacts: [ReceivedMemberContact] = []
    /// The store had this message already (a copy after a restart): nothing was applied.
    var duplicate = false
    var actions = 0
    /// The user's own items sent (`x.msg.new`, by shared msg id) and their recipients, whose
    /// delivery statuses are made in the same transaction (``expectGroupSends``).
    var itemSends: [(msgId: String, to: MemberId)] = []
}

/// Role names between the protocol and the model (an unknown role shows as `observer`, the least
/// the model can say).
enum GroupRoles {
    static func model(_ r: GroupProtocol.GroupMemberRole) -> ChatModel.GroupMemberRole { ChatModel.GroupMemberRole(rawValue: r.name) ?? .observer }
    static func proto(_ r: ChatModel.GroupMemberRole) -> GroupProtocol.GroupMemberRole { GroupProtocol.GroupMemberRole(name: r.rawValue) }
}

/// A group with its member rows, read in one go, turned into model values.
struct GroupView: Sendable {
    var group: GroupRecord
    var members: [GroupMemberRecord]
    var contactProfiles: [Int64: Profile]
    /// Set when `members` holds only some of the group's rows (``ChatController/readGroupView(_:_:rows:)``):
    /// the count of current members, which `info` cannot take from them.
    var currentMembers: Int?

    var membership: GroupMemberRecord? { members.first { $0.category == GroupProtocol.GroupMemberCategory.user.rawValue } }
    var others: [GroupMemberRecord] { members.filter { $0.category != GroupProtocol.GroupMemberCategory.user.rawValue } }

    func record(_ id: MemberId) -> GroupMemberRecord? { members.first { $0.memberId == id.text } }

    func member(_ r: GroupMemberRecord) -> GroupMember {
        let rowIds = Dictionary(members.map { ($0.memberId, $0.id ?? 0) }, uniquingKeysWith: { a, _ in a })
        let id = r.id ?? 0
        let profile = Stored.profile(r.profile) ?? r.contactId.flatMap { contactProfiles[$0] } ?? Profile(displayName: r.localDisplayName ?? "member")
        let category = ChatModel.GroupMemberCategory(rawValue: r.category) ?? .pre
        let invitedBy: InvitedBy
        switch category {
        case .invitee: invitedBy = .user
        case .host: invitedBy = r.contactId.map { .contact(byContactId: $0) } ?? .unknown
        case .user:
            let host = r.invitedBy.flatMap { h in members.first { $0.memberId == h } }
            invitedBy = host?.contactId.map { .contact(byContactId: $0) } ?? (r.invitedBy == nil ? .user : .unknown)
        default: invitedBy = .unknown
        }
        return GroupMember(
            groupMemberId: id, groupId: r.groupId, indexInGroup: id, memberId: r.memberId,
            memberRole: GroupRoles.model(GroupProtocol.GroupMemberRole(name: r.role)), memberCategory: category,
            memberStatus: ChatModel.GroupMemberStatus(rawValue: r.status) ?? .unknown, blockedByAdmin: r.blocked, invitedBy: invitedBy,
            invitedByGroupMemberId: r.invitedBy.flatMap { rowIds[$0] }, localDisplayName: r.localDisplayName ?? profile.displayName,
            memberProfile: LocalProfile(profileId: 4_000_000 + id, profile: profile), memberContactId: r.contactId,
            memberContactProfileId: 4_000_000 + id, createdAt: Stored.timestamp(r.createdAt), updatedAt: Stored.timestamp(r.updatedAt))
    }

    func member(_ id: MemberId) -> GroupMember? { record(id).map(member) }

    var info: GroupInfo { info(profileText: group.profile) }

    /// The group as the API shows it (with `profileText` instead of the stored profile, for a `fromGroup`).
    func info(profileText: String) -> GroupInfo {
        let profile = Stored.decode(ChatModel.GroupProfile.self, profileText) ?? ChatModel.GroupProfile(displayName: group.localDisplayName)
        let me = membership.map(member) ?? GroupMember(
            groupMemberId: 0, groupId: group.id ?? 0, indexInGroup: 0, memberId: "", memberRole: .observer, memberCategory: .user,
            memberStatus: .unknown, invitedBy: .unknown, localDisplayName: "", memberProfile: LocalProfile(profileId: 0, profile: Profile(displayName: "")),
            memberContactProfileId: 0, createdAt: Stored.timestamp(group.createdAt), updatedAt: Stored.timestamp(group.updatedAt))
        let current = currentMembers ?? members.filter { GroupProtocol.GroupMemberStatus(rawValue: $0.status)?.isCurrent == true }.count
        return GroupInfo(groupId: group.id ?? 0, localDisplayName: group.localDisplayName, groupProfile: profile,
                         fullGroupPreferences: Self.fullPreferences(profile.groupPreferences), membership: me,
                         createdAt: Stored.timestamp(group.createdAt), updatedAt: Stored.timestamp(group.updatedAt),
                         chatTs: group.chatTs.map(Stored.timestamp), customData: Stored.json(group.customData),
                         groupSummary: GroupSummary(currentMembers: Int64(current)))
    }

    /// Every group feature with its value: the profile's, else SimpleX's default for a new group.
    static func fullPreferences(_ p: GroupPreferences?) -> FullGroupPreferences {
        let on = GroupPreference(enable: .on), off = GroupPreference(enable: .off)
        let roleOn = RoleGroupPreference(enable: .on)
        return FullGroupPreferences(
            timedMessages: p?.timedMessages ?? TimedMessagesGroupPreference(enable: .off), directMessages: p?.directMessages ?? roleOn,
            fullDelete: p?.fullDelete ?? off, reactions: p?.reactions ?? on, voice: p?.voice ?? roleOn, files: p?.files ?? roleOn,
            simplexLinks: p?.simplexLinks ?? roleOn, reports: p?.reports ?? on, history: p?.history ?? on, support: p?.support ?? off,
            sessions: p?.sessions ?? RoleGroupPreference(enable: .off), comments: p?.comments ?? CommentsGroupPreference(enable: .off),
            signMessages: p?.signMessages ?? off, commands: p?.commands ?? [])
    }
}

extension ChatController {
    // MARK: - Reading groups

    func groupView(_ groupId: Int64) async throws -> GroupView {
        guard let view = try await dbRead({ db in try Self.readGroupView(db, groupId) }) else {
            throw ChatFailure.store(.groupNotFound(groupId: groupId))
        }
        return view
    }

    nonisolated static func readGroupView(_ db: Database, _ groupId: Int64) throws -> GroupView? {
        guard let g = try GroupRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM chat_group WHERE id = ?"), arguments: [groupId]),
              !g.deleted else { return nil }
        let members = try GroupMemberRecord.fetchAll(db.cachedStatement(sql: "SELECT * FROM group_member WHERE group_id = ? ORDER BY id"), arguments: [groupId])
        return GroupView(group: g, members: members, contactProfiles: try standInProfiles(db, members))
    }

    /// Contacts' profiles for the members without a readable one of their own — only those stand
    /// in (``GroupView/member(_:)``); the others' contacts are not read (this runs once per event).
    private nonisolated static func standInProfiles(_ db: Database, _ members: [GroupMemberRecord]) throws -> [Int64: Profile] {
        var profiles: [Int64: Profile] = [:]
        for id in Set(members.filter { Stored.profile($0.profile) == nil }.compactMap(\.contactId)) {
            if let text = try String.fetchOne(db.cachedStatement(sql: "SELECT profile FROM contact WHERE id = ?"), arguments: [id]),
               let p = Stored.profile(text) { profiles[id] = p }
        }
        return profiles
    }

    /// The member rows that showing these items needs: authors, moderators, quoted authors.
    nonisolated static func memberRows(shownBy records: [GroupItemRecord]) -> Set<Int64> {
        Set(records.flatMap { r in [r.memberRowId, r.deletedByRowId, Stored.decode(GroupItemQuote.self, r.quote)?.authorRowId].compactMap { $0 } })
    }

    /// A view with only the member rows an event names (`rows`), the user's membership and the
    /// members who invited them — what an item's event shows — and the current members counted
    /// in SQL: each received message's `newChatItems` no longer decodes every member row.
    nonisolated static func readGroupView(_ db: Database, _ groupId: Int64, rows: Set<Int64>) throws -> GroupView? {
        // Cached statements: this runs for every message received, and GRDB's query interface
        // would build and prepare each statement anew (a third of this function's time).
        guard let g = try GroupRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM chat_group WHERE id = ?"), arguments: [groupId]),
              !g.deleted else { return nil }
        let user = GroupProtocol.GroupMemberCategory.user.rawValue
        let named = rows.sorted()
        let placeholders = named.isEmpty ? "" : " OR id IN (" + Array(repeating: "?", count: named.count).joined(separator: ",") + ")"
        var members = try GroupMemberRecord.fetchAll(
            db.cachedStatement(sql: "SELECT * FROM group_member WHERE group_id = ? AND (category = ?\(placeholders)) ORDER BY id"),
            arguments: StatementArguments(values: [groupId.sqlValue, user.sqlValue] + named.map(\.sqlValue)))
        let inviters = Set(members.compactMap(\.invitedBy)).subtracting(members.map(\.memberId))
        if !inviters.isEmpty {
            members += try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && inviters.contains(GroupMemberRecord.Columns.memberId)).fetchAll(db)
            members.sort { ($0.id ?? 0) < ($1.id ?? 0) }
        }
        let current = try String.fetchAll(db.cachedStatement(sql: "SELECT status FROM group_member WHERE group_id = ?"), arguments: [groupId])
            .filter { GroupProtocol.GroupMemberStatus(rawValue: $0)?.isCurrent == true }.count
        return GroupView(group: g, members: members, contactProfiles: try standInProfiles(db, members), currentMembers: current)
    }

    /// A group's machine, restored from the store on first use.
    func groupState(_ groupId: Int64) async throws -> GroupState {
        if let s = groupRuntime.states[groupId] { return s }
        let view = try await groupView(groupId)
        guard let me = view.membership?.state else { throw ChatFailure.chat(.groupInternal(message: "group \(groupId) has no membership")) }
        let intros = try await dbRead { db in try GroupIntroRecord.filter(Column("group_id") == groupId).fetchAll(db) }
        let profile = (Stored.json(view.group.profile).flatMap { try? GroupProtocol.GroupProfile(json: $0) })
            ?? GroupProtocol.GroupProfile(displayName: view.group.localDisplayName)
        let state = GroupState(
            membership: me, profile: profile, members: view.others.compactMap(\.state),
            introductions: intros.compactMap { i in
                guard let re = MemberId(i.reMember), let to = MemberId(i.toMember), let st = Introduction.Status(rawValue: i.status) else { return nil }
                return Introduction(key: Introduction.Key(re: re, to: to), status: st)
            },
            pendingJoinRequest: view.group.pendingJoin)
        if let s = groupRuntime.states[groupId] { return s } // restored meanwhile
        let limited = state.withMemberLimit(limits.maxGroupMembers)
        groupRuntime.states[groupId] = limited
        return limited
    }

    /// The group and member of an agent connection, if it is a member connection.
    func groupConnection(_ conn: Int64) async throws -> GroupConnection? {
        if let known = groupRuntime.connections { return known[conn] }
        let map = try await dbRead { db -> [Int64: GroupConnection] in
            var map: [Int64: GroupConnection] = [:]
            let rows = try Row.fetchAll(db, sql: """
                SELECT m.agent_conn_id AS conn, m.group_id AS gid, g.user_id AS uid, m.member_id AS mid
                FROM group_member m JOIN chat_group g ON g.id = m.group_id WHERE m.agent_conn_id IS NOT NULL
                """)
            for r in rows {
                guard let mid = MemberId(r["mid"] as String) else { continue }
                map[r["conn"]] = GroupConnection(groupId: r["gid"], userId: r["uid"], memberId: mid)
            }
            return map
        }
        if groupRuntime.connections == nil { groupRuntime.connections = map }
        return groupRuntime.connections?[conn]
    }

    /// The agent connections of a user's group members (deleted with the user; its groups go by cascade).
    func groupConnections(userId: Int64) async throws -> [Int64] {
        let conns = try await dbRead { db in
            try Int64.fetchAll(db, sql: """
                SELECT m.agent_conn_id FROM group_member m JOIN chat_group g ON g.id = m.group_id
                WHERE g.user_id = ? AND m.agent_conn_id IS NOT NULL
                """, arguments: [userId])
        }
        for c in conns { groupRuntime.connections?[c] = nil }
        let groups = try await dbRead { db in try GroupRecord.filter(GroupRecord.Columns.userId == userId).fetchAll(db).compactMap(\.id) }
        for g in groups { groupRuntime.states[g] = nil }
        return conns
    }

    // MARK: - One input at a time per group

    private func lockGroup(_ id: Int64) async {
        if groupRuntime.busy.contains(id) {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in groupRuntime.waiters[id, default: []].append(c) }
        } else {
            groupRuntime.busy.insert(id)
        }
    }

    private func unlockGroup(_ id: Int64) {
        if var waiting = groupRuntime.waiters[id], !waiting.isEmpty {
            let next = waiting.removeFirst()
            groupRuntime.waiters[id] = waiting.isEmpty ? nil : waiting
            next.resume() // the group stays busy: handed over
        } else {
            groupRuntime.busy.remove(id)
        }
    }

    /// Runs one input through the group's machine and commits what it did (see the file's
    /// header). A refused input throws its `GroupError` and changes nothing. `dedup` is the
    /// (author, shared msg id) of a received forwardable message: when the store has it already,
    /// nothing is applied (`duplicate`). `mark` is the agent message this input is (recorded as
    /// handled); `extra` runs in the same transaction.
    func commitGroupInput(_ groupId: Int64, userId: Int64, _ input: GroupInput, dedup: (author: String, msgId: String)? = nil,
                          mark: (conn: Int64, seq: UInt64)? = nil, messageId: String? = nil,
                          extra: (@Sendable (Database) throws -> Void)? = nil) async throws -> GroupOutcome {
        await lockGroup(groupId)
        defer { unlockGroup(groupId) }
        let before = try await groupState(groupId)
        var next = before
        // A command's first message id may be chosen by the caller (to store its item with it).
        var first = messageId
        let effects = try next.handle(input) {
            if let id = first { first = nil; return id }
            return ChatMessage.newMessageId()
        }
        let pendingJoin = next.pendingJoinRequest
        let now = Timestamp.now()
        let outcome = try await dbWrite { db -> GroupOutcome in
            var out = GroupOutcome()
            if let mark { try GroupInputRecord(agentConnId: mark.conn, seq: Int64(mark.seq)).insert(db, onConflict: .ignore) }
            if let dedup {
                try GroupMsgRecord(groupId: groupId, authorMemberId: dedup.author, sharedMsgId: dedup.msgId).insert(db, onConflict: .ignore)
                if db.changesCount == 0 {
                    out.duplicate = true
                    return out
                }
            }
            try Self.applyEffects(db, effects, groupId: groupId, userId: userId, now: now, limits: self.limits, into: &out)
            // Cached statements on this path: it runs for every group message received or sent.
            try db.cachedStatement(sql: "UPDATE chat_group SET pending_join = ?, updated_at = ? WHERE id = ?").execute(arguments: [pendingJoin, now, groupId])
            try extra?(db)
            try Self.expectGroupSends(db, groupId: groupId, out.itemSends)
            return out
        }
        if outcome.duplicate { return outcome }
        groupRuntime.states[groupId] = next
        if outcome.actions > 0 { kickGroupActions(groupId) }
        // Reported while the group is still held, so that its events keep the inputs' order.
        // Committed already: a failure to report must not make the input run again.
        do { try await reportGroupOutcome(groupId, userId: userId, outcome) } catch {
            logger.warning("a group event could not be reported", metadata: ["group": "\(groupId)", "error": "\(error)"])
        }
        return outcome
    }

    /// Writes the effects of one input (inside its transaction).
    nonisolated static func applyEffects(_ db: Database, _ effects: [GroupEffect], groupId: Int64, userId: Int64, now: String,
                                         limits: ChatLimits, into out: inout GroupOutcome) throws {
        func enqueue(_ a: GroupPendingAction) throws {
            var r = GroupActionRecord(groupId: groupId, action: a.json.description)
            try r.insert(db)
            out.actions += 1
        }
        for effect in effects {
            switch effect {
            case let .send(env, to):
                try enqueue(.send(env, to: to))
                if env.event == "x.msg.new", let msgId = env.msgId { out.itemSends.append((msgId, to)) }
            case let .sendToContact(env, contact): try enqueue(.sendToContact(env, contact: contact))
            case let .createInvitation(m): try enqueue(.createInvitation(for: m))
            case let .joinConnection(m, req, info): try enqueue(.join(for: m, connRequest: req, info: info))
            case let .allowConnection(m, info): try enqueue(.allow(for: m, info: info))
            case let .acceptLinkRequest(m, request, info): try enqueue(.acceptRequest(for: m, request: request, info: info))
            case let .deleteConnection(m): try enqueue(.delete(for: m))
            case .deleteAllConnections: try enqueue(.deleteAll)
            case let .saveMember(s), let .saveMembership(s): try saveMember(db, s, groupId: groupId, userId: userId, now: now)
            case let .saveProfile(p):
                guard var g = try GroupRecord.fetchOne(db, key: groupId) else { continue }
                if p.displayName != Stored.json(g.profile)?["displayName"]?.stringValue {
                    g.localDisplayName = try LocalNames.rename(db, userId: userId, current: g.localDisplayName, displayName: p.displayName)
                }
                g.profile = p.json.description
                g.updatedAt = now
                try g.update(db)
            case let .saveIntroduction(key, status):
                if let status {
                    try GroupIntroRecord(groupId: groupId, reMember: key.re.text, toMember: key.to.text, status: status.rawValue).save(db)
                } else {
                    _ = try GroupIntroRecord.deleteOne(db, key: ["group_id": groupId, "re_member": key.re.text, "to_member": key.to.text])
                }
            case let .sendHistory(to):
                for env in try historyForwards(db, groupId: groupId) { try enqueue(.send(env, to: to)) }
            case let .applyContent(env, author, forwardedBy, blocked, msgTs):
                if env.event == directInvitationEvent, forwardedBy == nil {
                    try receivedDirectInvitation(db, env, author: author, blocked: blocked, groupId: groupId, userId: userId, now: now, into: &out)
                    continue
                }
                guard env.event == "x.msg.new" else {
                    try applyItemEvent(db, env, author: author, blocked: blocked, groupId: groupId, userId: userId, now: now, limits: limits, into: &out)
                    continue
                }
                let content: MsgContent
                do { content = try PeerInput.content(env.params["content"]) } catch {
                    out.refusedContent.append(error.message)
                    continue
                }
                _ = content
                func rowId(_ m: MemberId) throws -> Int64? {
                    try Int64.fetchOne(db.cachedStatement(sql: "SELECT id FROM group_member WHERE group_id = ? AND member_id = ?"), arguments: [groupId, m.text])
                }
                let authorRow = try rowId(author)
                let forwarderRow = try forwardedBy.flatMap(rowId)
                var quoteText: String?
                if let quote = env.params["quote"] {
                    // A malformed quote is dropped and the message kept, as in direct chats.
                    let ref: PeerInput.QuoteRef?
                    do { ref = try PeerInput.quote(quote) } catch {
                        out.droppedQuotes.append(error.message)
                        ref = nil
                    }
                    if let ref {
                        let quoted = try ref.msgId.flatMap { id in
                            try GroupItemRecord.filter(GroupItemRecord.Columns.groupId == groupId && GroupItemRecord.Columns.sharedMsgId == id).fetchOne(db)
                        }
                        quoteText = try Stored.text(GroupItemQuote(sharedMsgId: ref.msgId, sentAt: ref.sentAt, content: ref.content,
                                                                   itemId: quoted?.id, authorRowId: quoted?.memberRowId))
                    }
                }
                var item = GroupItemRecord(userId: userId, groupId: groupId, memberRowId: authorRow, forwardedByRowId: forwarderRow,
                                           content: env.params["content"]!.description, sharedMsgId: env.msgId, status: .rcvNew, blocked: blocked,
                                           createdAt: now, quote: quoteText, itemTs: itemTime(msgTs: msgTs, now: now))
                // A moderation that came first applies now (SimpleX `applyModeration`).
                if let moderator = try takePendingModeration(db, groupId: groupId, author: author, msgId: env.msgId) {
                    item.deleted = .moderated
                    item.deletedByRowId = moderator
                    item.updatedAt = now
                }
                try item.insert(db)
                out.receivedItems.append(item.id!)
                try db.cachedStatement(sql: "UPDATE chat_group SET chat_ts = ? WHERE id = ?").execute(arguments: [now, groupId])
            case let .emit(e):
                switch e {
                case let .deletedMember(by, member, true): try moderateAllOf(db, groupId: groupId, member: member, by: by, now: now)
                case let .deletedMemberUser(by, true): try moderateAllOf(db, groupId: groupId, member: nil, by: by, now: now)
                default: break
                }
                out.events.append(e)
            }
        }
    }

    /// The time of a received group item (SimpleX `itemTs`): a forwarded message's `msgTs` — when
    /// the forwarder received it, so a late joiner's history keeps its original times — clamped to
    /// the receive time `now` (a forged far-future `msgTs` cannot place an item ahead of the chat);
    /// nil (the receive time) for a message received directly, or a `msgTs` not in the `…Z` form.
    nonisolated static func itemTime(msgTs: String?, now: String) -> String? {
        guard let msgTs, let sent = ChatTimestamp(parsing: msgTs), let received = ChatTimestamp(parsing: now) else { return nil }
        return sent < received ? sent.description : nil
    }

    /// Stores a member as the machine has it. Its profile passes ``PeerInput`` (a malformed one
    /// keeps only its display name); its local name is unique among the user's names.
    nonisolated static func saveMember(_ db: Database, _ s: GroupMemberState, groupId: Int64, userId: Int64, now: String) throws {
        var r = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == s.memberId.text).fetchOne(db)
            ?? GroupMemberRecord(groupId: groupId, memberId: s.memberId.text, role: s.role.name, status: s.status.rawValue, category: s.category.rawValue,
                                 blocked: s.blocked, createdAt: now, updatedAt: now)
        r.role = s.role.name
        r.status = s.status.rawValue
        r.category = s.category.rawValue
        r.invitedBy = s.invitedBy?.text
        r.blocked = s.blocked
        r.viaLink = s.viaLink
        r.pendingConnected = s.pendingConnected
        r.contactId = s.contact ?? r.contactId
        r.updatedAt = now
        if let p = s.profile {
            let checked = (try? PeerInput.profile(p.json)) ?? Profile(displayName: p.displayName)
            let oldName = Stored.json(r.profile)?["displayName"]?.stringValue
            r.profile = try Stored.text(checked)
            if s.category == .user {
                r.localDisplayName = try UserRecord.fetchOne(db, key: userId)?.localDisplayName ?? checked.displayName
            } else {
                // A member who is a known contact under the same display name goes by the contact's
                // local name (as in SimpleX: `bob` in the group is the contact `bob`, not `bob_1`).
                let contactName = try r.contactId.flatMap { try ContactRecord.fetchOne(db, key: $0) }
                    .flatMap { c in Stored.profile(c.profile)?.displayName == checked.displayName ? c.localDisplayName : nil }
                let own = try memberOwnName(db, r.localDisplayName, userId: userId)
                if let contactName {
                    if contactName != r.localDisplayName { try LocalNames.release(db, userId: userId, name: own) }
                    r.localDisplayName = contactName
                } else if own == nil || oldName != checked.displayName {
                    r.localDisplayName = try LocalNames.rename(db, userId: userId, current: own, displayName: checked.displayName)
                }
            }
        } else if r.localDisplayName == nil, let contact = s.contact, let c = try ContactRecord.fetchOne(db, key: contact), let p = Stored.profile(c.profile) {
            r.localDisplayName = try c.localDisplayName ?? LocalNames.reserve(db, userId: userId, displayName: p.displayName)
        }
        try r.save(db)
    }

    /// A member's local name when the member holds it itself; nil when it has none or shares its
    /// contact's (a shared name is the contact's to free, never the member's).
    nonisolated static func memberOwnName(_ db: Database, _ name: String?, userId: Int64) throws -> String? {
        guard let name else { return nil }
        let shared = try !ContactRecord.filter(Column("user_id") == userId && Column("local_display_name") == name).isEmpty(db)
        return shared ? nil : name
    }

    /// A contact's local name when no group member shares it; nil when one does (the name stays
    /// taken, the member's own from then on, freed when its group is purged).
    nonisolated static func contactOwnName(_ db: Database, _ name: String?, userId: Int64) throws -> String? {
        guard let name else { return nil }
        let shared = try Bool.fetchOne(db, sql: """
            SELECT EXISTS (SELECT 1 FROM group_member m JOIN chat_group g ON g.id = m.group_id
                           WHERE g.user_id = ? AND m.local_display_name = ? AND m.category != ?)
            """, arguments: [userId, name, GroupProtocol.GroupMemberCategory.user.rawValue]) ?? false
        return shared ? nil : name
    }

    // MARK: - Agent events of member connections

    /// Handles an agent event if it is of a member connection; returns false for others.
    func handleGroupAgentEvent(_ event: AgentEvent) async throws -> Bool {
        guard let conn = event.connectionId else { return false }
        guard let ref = try await groupConnection(conn) else {
            // The host's answer on a join request sent through a group link (+GroupLinks).
            if case let .confirmation(_, info) = event, let join = try await groupLinkJoin(conn) {
                try await groupLinkJoinConfirmed(join, info: info)
                return true
            }
            return false
        }
        let input: GroupInput
        var mark: (conn: Int64, seq: UInt64)?
        var dedup: (author: String, msgId: String)?
        switch event {
        case let .confirmation(_, info):
            do {
                input = .confirmation(from: ref.memberId, info: try GroupMessage.decodeEnvelope(info, asConnInfo: true))
            } catch {
                reportGroupRefusal(ref, "a member's confirmation is malformed: \(error.message)")
                return true
            }
        case .connected:
            input = .connected(ref.memberId)
        case let .message(_, seq, body, _):
            if try await dbRead({ db in
                try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM group_input WHERE agent_conn_id = ? AND seq = ?"), arguments: [conn, Int64(seq)]) ?? false
            }) {
                await agent.messageProcessed(conn, seq: seq) // handled before a crash; the agent announced it again
                return true
            }
            mark = (conn, seq)
            do {
                let env = try GroupMessage.decodeEnvelope(body)
                input = .received(from: ref.memberId, env, brokerTs: Self.rfc3339Now())
                dedup = Self.dedupKey(from: ref.memberId, env)
            } catch {
                reportGroupRefusal(ref, "a member's message is malformed: \(error.message)")
                try await dbWrite { db in try GroupInputRecord(agentConnId: conn, seq: Int64(seq)).insert(db, onConflict: .ignore) }
                await agent.messageProcessed(conn, seq: seq)
                return true
            }
        case let .sent(_, seq):
            try await groupDelivery(conn, seqs: [seq], to: .sndSent, groupId: ref.groupId)
            return true
        case let .delivered(_, seqs):
            try await groupDelivery(conn, seqs: seqs, to: .sndRcvd, groupId: ref.groupId)
            return true
        case .undeliverable, .rejected:
            return true
        default:
            return false
        }
        var wantsReceipt = false
        do {
            let outcome = try await commitGroupInput(ref.groupId, userId: ref.userId, input, dedup: dedup, mark: mark)
            if case let .received(_, env, _) = input { wantsReceipt = try await groupReceiptWanted(ref, env, outcome) }
        } catch let e as SQLError {
            throw e // nothing committed: the event is handled again (`handleStoring`)
        } catch where Self.isStopping(error) || closing {
            throw error // the engine is stopping: nothing committed, the agent announces it again after the start
        } catch {
            // Refused (a GroupError), or its group is gone: never applied; logged, reported, and
            // (a message) acknowledged. A message that was still in flight when the user was
            // removed (or left, or the group was deleted) is expected: dropped quietly, as SimpleX does.
            let why = (error as? GroupError).map { "\($0.code.rawValue): \($0.message)" } ?? "\(Self.chatError(error))"
            if Self.isLateForGoneUser(input, error) {
                logger.debug("a group message for a user no longer in the group was dropped",
                             metadata: ["group": "\(ref.groupId)", "member": "\(ref.memberId)", "reason": "\(why)"])
            } else {
                reportGroupRefusal(ref, why)
            }
            if let mark { try await dbWrite { db in try GroupInputRecord(agentConnId: mark.conn, seq: Int64(mark.seq)).insert(db, onConflict: .ignore) } }
        }
        if let mark {
            await agent.messageProcessed(mark.conn, seq: mark.seq)
            if wantsReceipt { await agent.acknowledgeDelivery(mark.conn, seq: mark.seq, within: Agent.groupReceiptDelay) }
        }
        return true
    }

    /// A message received after the user's membership ended (`notJoined` is the machine's answer
    /// to any message then): one still in flight at the removal. Only this refusal goes unreported.
    nonisolated static func isLateForGoneUser(_ input: GroupInput, _ error: any Error) -> Bool {
        guard case .received = input, let e = error as? GroupError else { return false }
        return e.code == .notJoined
    }

    private func reportGroupRefusal(_ ref: GroupConnection, _ why: String) {
        logger.info("a group input was refused", metadata: ["group": "\(ref.groupId)", "member": "\(ref.memberId)", "reason": "\(why)"])
        sink.yield(.chatError(.error(.groupInternal(message: "group \(ref.groupId), member \(ref.memberId): \(why)"))))
    }

    /// The (author, shared msg id) a received message is deduplicated by, if it is forwardable.
    nonisolated static func dedupKey(from: MemberId, _ env: GroupEnvelope) -> (author: String, msgId: String)? {
        if case let .forward(f)? = try? env.groupMessage() {
            guard let author = f.memberId, let id = f.msg.msgId, f.msg.isForwardable else { return nil }
            return (author.text, id)
        }
        guard env.isForwardable, let id = env.msgId else { return nil }
        return (from.text, id)
    }

    /// Now as `YYYY-MM-DDTHH:MM:SS.sssZ` (UTC), written without a date formatter (one was made
    /// per received group message). Milliseconds, not SMP's whole seconds: it becomes a forward's
    /// `msgTs` and so the item's time at the members it is forwarded to, and a message forwarded in
    /// the second a member joined must not look older than the joining (a bot that skips the
    /// history it was sent would skip it).
    nonisolated static func rfc3339Now() -> String {
        ChatTimestamp.now().description
    }

    // MARK: - x.grp.inv on a contact connection

    /// An invitation from a contact: a new group in `invited` state, reported as `receivedGroupInvitation`.
    func receivedGroupInvitation(conn: Int64, seq: UInt64, body: [UInt8], contact row: ContactRow, user u: UserRow) async throws {
        if try await dbRead({ db in try GroupInputRecord.fetchOne(db, key: ["agent_conn_id": conn, "seq": Int64(seq)]) != nil }) { return }
        let invitation: GroupInvitation
        do {
            let env = try GroupMessage.decodeEnvelope(body)
            guard case let .invitation(inv)? = try env.groupMessage() else { throw GroupMessageError(.invalidValue, "not x.grp.inv") }
            invitation = inv
        } catch {
            throw ChatFailure.chat(.groupInternal(message: "x.grp.inv from contact \(row.id) is malformed: \(error)"))
        }
        let own = try MemberProfile(json: JSONValueEncoder().encode(u.profile))
        let (state, effects): (GroupState, [GroupEffect])
        do { (state, effects) = try GroupState.invited(by: row.id, invitation, ownProfile: own) } catch {
            try await dbWrite { db in try GroupInputRecord(agentConnId: conn, seq: Int64(seq)).insert(db, onConflict: .ignore) }
            throw ChatFailure.chat(.groupInternal(message: "x.grp.inv from contact \(row.id) refused: \(error.code.rawValue): \(error.message)"))
        }
        let now = Timestamp.now()
        let userId = u.id
        let pending = state.pendingJoinRequest
        let profile = invitation.groupProfile
        let (groupId, outcome) = try await dbWrite { db -> (Int64, GroupOutcome) in
            try GroupInputRecord(agentConnId: conn, seq: Int64(seq)).insert(db)
            let name = try LocalNames.reserve(db, userId: userId, displayName: profile.displayName)
            var g = GroupRecord(userId: userId, localDisplayName: name, profile: profile.json.description, pendingJoin: pending, createdAt: now,
                                updatedAt: now, chatTs: now)
            try g.insert(db)
            var out = GroupOutcome()
            try Self.applyEffects(db, effects, groupId: g.id!, userId: userId, now: now, limits: self.limits, into: &out)
            return (g.id!, out)
        }
        groupRuntime.states[groupId] = state.withMemberLimit(limits.maxGroupMembers)
        try await reportGroupOutcome(groupId, userId: userId, outcome)
    }

    // MARK: - Events

    /// `chatItemsDeleted` (not `byUser`) for a group's or channel's items a member or owner deleted:
    /// each as it was and, when it is marked rather than removed, as it is now.
    func reportDeletions(_ changes: [GroupItemChange], user: User, info: GroupInfo, view: GroupView) async throws {
        guard !changes.isEmpty else { return }
        var deletions: [ChatItemDeletion] = []
        for d in changes {
            let before = try await groupItemModels([d.before], view: view)[0]
            var after: ChatItem?
            if let a = d.after { after = try await groupItemModels([a], view: view)[0] }
            deletions.append(ChatItemDeletion(deletedChatItem: AChatItem(chatInfo: .group(groupInfo: info), chatItem: before),
                                              toChatItem: after.map { AChatItem(chatInfo: .group(groupInfo: info), chatItem: $0) }))
        }
        sink.yield(.chatItemsDeleted(user: user, chatItemDeletions: deletions, byUser: false, timed: false))
    }

    /// Reports what a committed input did: its API events and received items.
    func reportGroupOutcome(_ groupId: Int64, userId: Int64, _ outcome: GroupOutcome) async throws {
        for why in outcome.refusedContent {
            logger.info("group content not applied", metadata: ["group": "\(groupId)", "reason": "\(why)"])
        }
        for why in outcome.droppedQuotes {
            logger.info("a malformed quote was dropped", metadata: ["group": "\(groupId)", "error": "\(why)"])
        }
        guard !outcome.events.isEmpty || !outcome.receivedItems.isEmpty || !outcome.updatedItems.isEmpty || !outcome.deletedItems.isEmpty
            || !outcome.reactions.isEmpty || !outcome.memberContacts.isEmpty else { return }
        let u = try await user(userId)
        let user = userModel(u)
        // Only items received (the common case: a message): a view of their authors suffices.
        if outcome.events.isEmpty, outcome.updatedItems.isEmpty, outcome.deletedItems.isEmpty, outcome.reactions.isEmpty, outcome.memberContacts.isEmpty {
            let ids = outcome.receivedItems
            guard let (records, view) = try await dbRead({ db -> ([GroupItemRecord], GroupView)? in
                let records = try Self.groupItems(db, ids: ids)
                let rows = Self.memberRows(shownBy: records)
                return try Self.readGroupView(db, groupId, rows: rows).map { (records, $0) }
            }) else { return }
            let info = view.info
            let items = try await groupItemModels(records, view: view).map { AChatItem(chatInfo: .group(groupInfo: info), chatItem: $0) }
            sink.yield(.newChatItems(user: user, chatItems: items))
            return
        }
        guard let view = try await dbRead({ db in try Self.readGroupView(db, groupId) }) else { return }
        let info = view.info
        var contacts: [Int64: Contact] = [:]
        for case let .receivedGroupInvitation(id, _, _) in outcome.events {
            if let (cu, c) = try? await contact(id) { contacts[id] = contactModel(c, user: cu) }
        }
        for e in outcome.events {
            if let event = groupEvent(e, view: view, info: info, user: user, contacts: contacts) { sink.yield(.group(event)) }
        }
        if !outcome.receivedItems.isEmpty {
            let ids = outcome.receivedItems
            let records = try await dbRead { db in try GroupItemRecord.filter(ids.contains(GroupItemRecord.Columns.id)).order(GroupItemRecord.Columns.id).fetchAll(db) }
            let items = try await groupItemModels(records, view: view).map { AChatItem(chatInfo: .group(groupInfo: info), chatItem: $0) }
            sink.yield(.newChatItems(user: user, chatItems: items))
        }
        for id in outcome.updatedItems {
            guard let r = try await dbRead({ db in try GroupItemRecord.fetchOne(db, key: id) }) else { continue }
            sink.yield(.chatItemUpdated(user: user, chatItem: AChatItem(chatInfo: .group(groupInfo: info), chatItem: try await groupItemModels([r], view: view)[0])))
        }
        try await reportDeletions(outcome.deletedItems, user: user, info: info, view: view)
        for r in outcome.reactions {
            guard let rec = try await dbRead({ db in try GroupItemRecord.fetchOne(db, key: r.itemId) }),
                  let by = view.members.first(where: { $0.id == r.byRowId }) else { continue }
            let item = try await groupItemModels([rec], view: view)[0]
            sink.yield(.chatItemReaction(user: user, added: r.add, reaction: ACIReaction(
                chatInfo: .group(groupInfo: info), chatReaction: CIReaction(chatDir: .groupRcv(groupMember: view.member(by)), chatItem: item, sentAt: .now(), reaction: r.reaction))))
        }
        if !outcome.memberContacts.isEmpty { try await reportMemberContacts(outcome.memberContacts, view: view, info: info, user: u) }
    }

    /// The API event of a machine event; nil for those that answer the user's own commands.
    func groupEvent(_ e: GroupProtocol.GroupEvent, view: GroupView, info: GroupInfo, user: User, contacts: [Int64: Contact]) -> GroupChatEvent? {
        func m(_ id: MemberId) -> GroupMember? { view.member(id) }
        switch e {
        case let .receivedGroupInvitation(contact, fromRole, role):
            guard let c = contacts[contact] else { return nil }
            return .receivedGroupInvitation(ReceivedGroupInvitation(user: user, groupInfo: info, contact: c, fromMemberRole: GroupRoles.model(fromRole),
                                                                    memberRole: GroupRoles.model(role)))
        case let .userJoinedGroup(host):
            return m(host).map { .userJoinedGroup(UserJoinedGroup(user: user, groupInfo: info, hostMember: $0)) }
        case let .joinedGroupMember(id):
            return m(id).map { .joinedGroupMember(UserGroupMember(user: user, groupInfo: info, member: $0)) }
        case let .joinedGroupMemberConnecting(host, id):
            guard let h = m(host), let x = m(id) else { return nil }
            return .joinedGroupMemberConnecting(JoinedGroupMemberConnecting(user: user, groupInfo: info, hostMember: h, member: x))
        case let .connectedToGroupMember(id):
            return m(id).map { .connectedToGroupMember(UserGroupMember(user: user, groupInfo: info, member: $0)) }
        case let .memberRole(by?, id, from, to):
            guard let b = m(by), let x = m(id) else { return nil }
            return .memberRole(MemberRoleChanged(user: user, groupInfo: info, byMember: b, member: x, fromRole: GroupRoles.model(from), toRole: GroupRoles.model(to)))
        case let .userRole(by, from, to):
            guard let b = m(by) else { return nil }
            return .memberRole(MemberRoleChanged(user: user, groupInfo: info, byMember: b, member: info.membership, fromRole: GroupRoles.model(from),
                                                 toRole: GroupRoles.model(to)))
        case let .memberBlockedForAll(by?, id, blocked):
            guard let b = m(by), let x = m(id) else { return nil }
            return .memberBlockedForAll(MemberBlockedForAll(user: user, groupInfo: info, byMember: b, member: x, blocked: blocked))
        case let .deletedMember(by?, id, withMessages):
            guard let b = m(by), let x = m(id) else { return nil }
            return .deletedMember(DeletedMember(user: user, groupInfo: info, byMember: b, deletedMember: x, withMessages: withMessages))
        case let .deletedMemberUser(by, withMessages):
            return m(by).map { .deletedMemberUser(DeletedMemberUser(user: user, groupInfo: info, member: $0, withMessages: withMessages)) }
        case let .leftMember(id):
            return m(id).map { .leftMember(UserGroupMember(user: user, groupInfo: info, member: $0)) }
        case let .groupDeleted(by?):
            return m(by).map { .groupDeleted(UserGroupMember(user: user, groupInfo: info, member: $0)) }
        case let .groupUpdated(by?, from, _):
            return .groupUpdated(GroupUpdated(user: user, fromGroup: view.info(profileText: from.json.description), toGroup: info, member_: m(by)))
        case let .memberAcceptedByOther(by, id):
            guard let b = m(by), let x = m(id) else { return nil }
            return .memberAcceptedByOther(MemberAcceptedByOther(user: user, groupInfo: info, acceptingMember: b, member: x))
        case let .groupLinkConnecting(host):
            return m(host).map { .groupLinkConnecting(UserJoinedGroup(user: user, groupInfo: info, hostMember: $0)) }
        case let .memberUpdated(id, from, _):
            return m(id).map { .groupMemberUpdated(GroupMemberUpdated(user: user, groupInfo: info, fromMember: Self.memberBefore($0, profile: from), toMember: $0)) }
        case .sentGroupInvitation, .userAcceptedGroupSent, .leftMemberUser, .memberRole(nil, _, _, _), .memberBlockedForAll(nil, _, _),
             .deletedMember(nil, _, _), .groupDeleted(nil), .groupUpdated(nil, _, _), .memberAccepted:
            return nil // the user's own commands: answered by their responses
        }
    }

    /// A group item as the API shows it.
    func groupItemModel(_ r: GroupItemRecord, view: GroupView, reactions: [CIReactionCount] = [], verified: String? = nil) -> ChatItem {
        let content = Stored.decode(MsgContent.self, r.content) ?? .text("")
        let created = Stored.timestamp(r.createdAt)
        let sent = r.memberRowId == nil
        let author = r.memberRowId.flatMap { id in view.members.first { $0.id == id } }.map(view.member)
        // Deleted by its author: `…Deleted`; by a moderator: `…Moderated`; a blocked member's: `rcvBlocked`
        // (the content stays stored, and is not shown).
        let shown: CIContent = switch (r.deleted, sent) {
        case (.deleted?, true): .sndDeleted(deleteMode: .broadcast)
        case (.deleted?, false): .rcvDeleted(deleteMode: .broadcast)
        case (.moderated?, true): .sndModerated
        case (.moderated?, false): .rcvModerated
        case (nil, true): .sndMsgContent(content)
        case (nil, false): r.blocked ? .rcvBlocked : .rcvMsgContent(content)
        }
        let hidden = r.deleted != nil || (r.blocked && !sent)
        // SimpleX's texts of these contents.
        let hiddenText: String? = switch (r.deleted, hidden) {
        case (.deleted?, _): "deleted"
        case (.moderated?, _): "moderated"
        case (nil, true): "blocked by admin"
        case (nil, false): nil
        }
        let deletedTs = r.updatedAt.map(Stored.timestamp)
        let itemDeleted: CIDeleted? = switch (r.deleted, hidden) {
        case (.deleted?, _): .deleted(deletedTs: deletedTs, chatType: "group")
        case (.moderated?, _):
            // By a member, or (no row) by the user.
            .moderated(deletedTs: deletedTs, byGroupMember: r.deletedByRowId.flatMap { id in view.members.first { $0.id == id } }.map(view.member)
                ?? view.info.membership)
        case (nil, true): .blockedByAdmin(deletedTs: nil)
        case (nil, false): nil
        }
        let meta = CIMeta(itemId: r.id ?? 0, itemTs: r.itemTs.map(Stored.timestamp) ?? created, itemText: hiddenText ?? content.text, itemStatus: r.status.ciStatus, itemSharedMsgId: r.sharedMsgId,
                          itemDeleted: itemDeleted, itemEdited: r.edited, deletable: r.deleted == nil, editable: sent && r.deleted == nil, forwardedByMember: r.forwardedByRowId,
                          createdAt: created, updatedAt: r.updatedAt.map(Stored.timestamp) ?? created, msgVerified: Self.msgVerified(verified))
        // A channel post as the channel is stored as brought by its relay, its channel author
        // `#channel` (+ChannelItems): `channelRcv`.
        let dir: CIDirection = sent ? .groupSnd : r.channelAuthor == Self.channelAuthorTag ? .channelRcv
            : author.map { $0.memberRole == .relay ? .channelRcv : .groupRcv(groupMember: $0) } ?? .groupSnd
        let quote = Stored.decode(GroupItemQuote.self, r.quote).map { q -> CIQuote in
            // The quoted message's direction is known when this side has it: its own, or a member's.
            let quotedDir: CIDirection? = q.itemId == nil ? nil
                : q.authorRowId.map { id in view.members.first { $0.id == id }.map { .groupRcv(groupMember: view.member($0)) } } ?? .groupSnd
            return CIQuote(chatDir: quotedDir, itemId: q.itemId, sharedMsgId: q.sharedMsgId, sentAt: q.sentAt, content: q.content)
        }
        return ChatItem(chatDir: dir, meta: meta, content: shown, quotedItem: hidden ? nil : quote, reactions: reactions)
    }

    // MARK: - Performing actions

    /// Starts performing a group's pending actions (in a task `close()` waits for), unless that runs already.
    func kickGroupActions(_ groupId: Int64) {
        if groupRuntime.draining.contains(groupId) {
            groupRuntime.redrain.insert(groupId)
            return
        }
        groupRuntime.draining.insert(groupId)
        inBackground { await self.drainGroupActions(groupId) }
    }

    /// Pending actions of every group (after a restart). Also forgets old handled marks: the agent
    /// hands a connection's messages over in order and forgets each once it is acknowledged, so
    /// only the last few of a connection can come again.
    func resumeGroupActions() async {
        _ = try? await dbWrite { db in
            try db.execute(sql: """
                DELETE FROM group_input WHERE seq < (SELECT max(g.seq) FROM group_input g WHERE g.agent_conn_id = group_input.agent_conn_id) - 100
                """)
        }
        guard let ids = try? await dbRead({ db in try Int64.fetchAll(db, sql: "SELECT DISTINCT group_id FROM group_action") }) else { return }
        for id in ids { kickGroupActions(id) }
    }

    /// Performs a group's actions in order, each removed once done. One failing on a network
    /// fault is tried again with backoff; after several attempts it is dropped and reported.
    func drainGroupActions(_ groupId: Int64) async {
        defer { groupRuntime.draining.remove(groupId) }
        var attempts = 0
        while !closing {
            groupRuntime.redrain.remove(groupId)
            // Cached statements here and in `perform`: an action per member of every group message sent.
            guard let next = try? await dbRead({ db in
                try GroupActionRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM group_action WHERE group_id = ? ORDER BY id LIMIT 1"), arguments: [groupId])
            }) else {
                await purgeIfDeleted(groupId)
                // An action added while this looked (or purged) is taken now: a kick meanwhile only
                // marked `redrain`, as this loop was still running.
                if groupRuntime.redrain.contains(groupId) { continue }
                return
            }
            let id = next.id!
            do {
                try await perform(next)
                attempts = 0
            } catch {
                attempts += 1
                if attempts < 6 {
                    logger.info("a group action failed; retrying", metadata: ["group": "\(groupId)", "attempt": "\(attempts)", "error": "\(error)"])
                    try? await Task.sleep(for: .milliseconds(200 * (1 << attempts)))
                    continue
                }
                logger.warning("a group action failed; dropped", metadata: ["group": "\(groupId)", "error": "\(error)"])
                sink.yield(.chatError(Self.chatError(error)))
                attempts = 0
                _ = try? await dbWrite { db in try GroupActionRecord.deleteOne(db, key: id) }
            }
        }
    }

    private func memberConn(_ groupId: Int64, _ member: MemberId) async throws -> Int64? {
        try await dbRead { db in
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT agent_conn_id FROM group_member WHERE group_id = ? AND member_id = ?"), arguments: [groupId, member.text])
        }
    }

    private func perform(_ record: GroupActionRecord) async throws {
        let groupId = record.groupId, actionId = record.id!
        let done: @Sendable (Database) throws -> Void = { db in try db.cachedStatement(sql: "DELETE FROM group_action WHERE id = ?").execute(arguments: [actionId]) }
        guard let json = Stored.json(record.action), let action = GroupPendingAction(json: json) else {
            logger.warning("an unreadable group action was dropped", metadata: ["group": "\(groupId)"])
            try await dbWrite(done)
            return
        }
        switch action {
        case let .send(env, to):
            // The user's own messages are tracked per member (delivery statuses).
            let tracked = env.event == "x.msg.new" ? env.msgId : nil
            if let conn = try await memberConn(groupId, to) {
                if tracked != nil { groupRuntime.itemSendsInFlight[conn, default: 0] += 1 }
                defer {
                    if tracked != nil {
                        groupRuntime.itemSendsInFlight[conn, default: 1] -= 1
                        if groupRuntime.itemSendsInFlight[conn] == 0 { groupRuntime.itemSendsInFlight[conn] = nil }
                    }
                }
                let seq = try await sendKeyedIgnoringGone(conn, env, key: "grp-action:\(actionId)")
                if let seq, let tracked {
                    // Recorded in the action's own transaction: no extra write per member.
                    try await trackGroupSend(groupId: groupId, member: to, conn: conn, seq: seq, msgId: tracked, with: done)
                    return
                }
            }
            if let tracked {
                // Not sent: the member's connection is gone (it left or was removed meanwhile), so
                // it is no recipient of the item any more.
                try await untrackGroupSend(groupId: groupId, member: to, msgId: tracked, with: done)
                return
            }
            try await dbWrite(done)
        case let .sendToContact(env, contact):
            if let conn = try await dbRead({ db in try ContactRecord.fetchOne(db, key: contact)?.agentConnId }) {
                try await sendKeyedIgnoringGone(conn, env, key: "grp-action:\(actionId)")
            }
            try await dbWrite(done)
        case let .createInvitation(member):
            let (conn, link) = try await agentCall { try await agent.createInvitation() }
            guard let userId = try await dbRead({ db in try GroupRecord.fetchOne(db, key: groupId)?.userId }) else {
                try? await agent.deleteConnection(conn)
                try await dbWrite(done)
                return
            }
            let setConn: @Sendable (Database) throws -> Void = { db in
                _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == member.text)
                    .updateAll(db, GroupMemberRecord.Columns.agentConnId.set(to: conn))
                try done(db)
            }
            do {
                _ = try await commitGroupInput(groupId, userId: userId, .invitationCreated(for: member, connRequest: link.description), extra: setConn)
                groupRuntime.connections?[conn] = GroupConnection(groupId: groupId, userId: userId, memberId: member)
            } catch let e as GroupError {
                logger.info("an invitation was made for a member that no longer needs it", metadata: ["group": "\(groupId)", "error": "\(e.message)"])
                try? await agent.deleteConnection(conn)
                try await dbWrite(done)
            }
        case let .join(member, connRequest, info):
            guard let userId = try await dbRead({ db in try GroupRecord.fetchOne(db, key: groupId)?.userId }) else {
                try await dbWrite(done)
                return
            }
            let link: InvitationLink
            do { link = try InvitationLink(parsing: connRequest) } catch {
                logger.info("a member's invitation link is malformed; not joined", metadata: ["group": "\(groupId)"])
                try await dbWrite(done)
                return
            }
            let body = try GroupMessage.encode(info, asConnInfo: true)
            try await trackingJoin { () async throws -> ((), Int64) in
                let conn = try await agentCall { try await agent.join(link, info: body) }
                try await dbWrite { db in
                    _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == member.text)
                        .updateAll(db, GroupMemberRecord.Columns.agentConnId.set(to: conn))
                    try done(db)
                }
                _ = try await groupConnection(conn)
                groupRuntime.connections?[conn] = GroupConnection(groupId: groupId, userId: userId, memberId: member)
                return ((), conn)
            }
        case let .allow(member, info):
            if let conn = try await memberConn(groupId, member) {
                let body = try info.map { try GroupMessage.encode($0, asConnInfo: true) } ?? ChatMessage(event: "x.ok", params: .object([])).encoded
                do { try await agent.allow(conn, info: body) } catch let e as AgentError where e.code == .wrongState || e.code == .unknownConnection {
                    // allowed before a restart, or gone
                }
            }
            try await dbWrite(done)
        case let .acceptRequest(member, request, info):
            guard let userId = try await dbRead({ db in try GroupRecord.fetchOne(db, key: groupId)?.userId }) else {
                try? await agent.rejectRequest(request)
                try await dbWrite(done)
                return
            }
            let body = try GroupMessage.encode(info, asConnInfo: true)
            do {
                try await trackingJoin { () async throws -> ((), Int64) in
                    let conn = try await agent.acceptRequest(request, info: body)
                    try await dbWrite { db in
                        _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == member.text)
                            .updateAll(db, GroupMemberRecord.Columns.agentConnId.set(to: conn))
                        try done(db)
                    }
                    _ = try await groupConnection(conn)
                    groupRuntime.connections?[conn] = GroupConnection(groupId: groupId, userId: userId, memberId: member)
                    return ((), conn)
                }
            } catch let e as AgentError where e.code == .unknownConnection {
                _ = e
                // The request is gone (accepted before a restart, or expired): nothing to join.
                logger.info("a group link request was gone before it was accepted", metadata: ["group": "\(groupId)"])
                try await dbWrite(done)
            }
        case let .delete(member):
            if let conn = try await memberConn(groupId, member) { try await deleteMemberConnection(conn) }
            try await dbWrite(done)
        case let .joinMemberContact(contact):
            try await joinMemberContact(contact, done: done)
        case .deleteAll:
            let conns = try await dbRead { db in
                try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.agentConnId != nil).fetchAll(db).compactMap(\.agentConnId)
            }
            for conn in conns { try await deleteMemberConnection(conn) }
            try await dbWrite(done)
        }
    }

    @discardableResult
    private func sendKeyedIgnoringGone(_ conn: Int64, _ env: GroupEnvelope, key: String) async throws -> UInt64? {
        let body = try GroupMessage.encode(env)
        do {
            return try await agent.sendKeyed(conn, body, idempotencyKey: key).seq
        } catch let e as AgentError where e.code == .wrongState || e.code == .unknownConnection {
            logger.info("a group message was not sent: the connection is not up", metadata: ["connection": "\(conn)", "event": "\(env.event)"])
            return nil
        }
    }

    private func deleteMemberConnection(_ conn: Int64) async throws {
        do { try await agent.deleteConnection(conn) } catch let e as AgentError where e.code == .unknownConnection {}
        try await dbWrite { db in
            _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.agentConnId == conn).updateAll(db, GroupMemberRecord.Columns.agentConnId.set(to: nil as Int64?))
        }
        groupRuntime.connections?[conn] = nil
    }

    /// A group deleted by the user goes from the store once its last messages are out.
    private func purgeIfDeleted(_ groupId: Int64) async {
        await deleteGroupLinkIfGone(groupId)
        _ = try? await dbWrite { db in
            guard let g = try GroupRecord.fetchOne(db, key: groupId), g.deleted else { return }
            guard try GroupActionRecord.filter(GroupActionRecord.Columns.groupId == groupId).isEmpty(db) else { return }
            for m in try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId).fetchAll(db)
            where m.category != GroupProtocol.GroupMemberCategory.user.rawValue {
                try LocalNames.release(db, userId: g.userId, name: Self.memberOwnName(db, m.localDisplayName, userId: g.userId))
            }
            try LocalNames.release(db, userId: g.userId, name: g.localDisplayName)
            _ = try GroupRecord.deleteOne(db, key: groupId)
        }
        if (try? await dbRead({ db in try GroupRecord.fetchOne(db, key: groupId) })) == nil {
            groupRuntime.states[groupId] = nil
            channelRuntime.roles[groupId] = nil
        }
    }
}
