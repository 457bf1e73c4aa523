import Agent
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase

// Member contacts (SimpleX `APICreateMemberContact`, `APISendMemberContactInvitation`,
// `APIAcceptMemberContact`, Subscriber `xGrpDirectInv`): a direct chat with a group member,
// negotiated over the member connection. The inviting side makes a one-time invitation and a
// contact for it (`/_create member contact`), then sends the member `x.grp.direct.inv {connReq,
// content?}` on the group connection (`/_invite member contact`). The member's side makes a
// contact from it (`newMemberContactReceivedInv`) and joins the invitation with its profile
// (`x.info`) — at once when the user accepts member contacts automatically, else on
// `/_accept member contact` — after which the ordinary direct-contact handshake connects both
// (`contactConnected`). Contact and member are linked both ways (`contactGroupMemberId`,
// `memberContactId`). The group's `directMessages` preference (with its role) gates both ends.

/// Where member contacts keep their state: columns of `contact` and `user` (migration
/// `v7-member-contacts`, which also adds incognito joins' columns: `group_link_join.incognito_profile`,
/// `chat_group.incognito`).
enum MemberContactStore {
    static func register(_ m: inout [SQLMigration]) {
        m.append(SQLMigration("v7-member-contacts: member contacts", sql: """
                ALTER TABLE contact ADD COLUMN group_member_row_id INTEGER;
                ALTER TABLE contact ADD COLUMN grp_inv_sent INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE contact ADD COLUMN direct_inv TEXT;
                ALTER TABLE "user" ADD COLUMN auto_accept_member_contacts INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE group_link_join ADD COLUMN incognito_profile TEXT;
                ALTER TABLE chat_group ADD COLUMN incognito INTEGER NOT NULL DEFAULT 0;
                """))
    }
}

/// A member contact made from a received `x.grp.direct.inv`, reported after its input's commit.
struct ReceivedMemberContact: Sendable {
    var contactId: Int64
    var memberRowId: Int64
    /// The invitation's message, stored in the new direct chat.
    var itemId: Int64?
}

extension ChatController {
    static let directInvitationEvent = "x.grp.direct.inv"

    /// Whether the group's `directMessages` preference lets a member of `role` open direct chats
    /// (SimpleX `groupFeatureMemberAllowed SGFDirectMessages`).
    nonisolated static func directMessagesAllowed(_ view: GroupView, role: GroupProtocol.GroupMemberRole) -> Bool {
        let pref = view.info.fullGroupPreferences.directMessages
        guard pref.enable == .on else { return false }
        return pref.role.map { role >= GroupRoles.proto($0) } ?? true
    }

    // MARK: - Commands

    /// `/_create member contact #<groupId> <groupMemberId>`: a one-time invitation and a contact
    /// for it, linked to the member (`newMemberContact`); nothing is sent yet.
    public func createMemberContact(groupId: Int64, groupMemberId: Int64) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        let member = try namedMembers(view, [groupMemberId])[0]
        try requireGroupPermission(view, .sendContent)
        guard let me = view.membership?.state, Self.directMessagesAllowed(view, role: me.role) else {
            throw ChatFailure(commandError: "direct messages not allowed")
        }
        guard member.agentConnId != nil, member.state?.isConnected == true else { throw ChatFailure.chat(.groupMemberNotActive) }
        guard member.contactId == nil else { throw ChatFailure(commandError: "member contact already exists") }
        try requireStarted()
        let (conn, link) = try await agentCall { try await agent.createInvitation() }
        let now = Timestamp.now()
        let userId = u.id
        let memberRow = groupMemberId
        let profile = member.profile
        let localName = member.localDisplayName
        let incognito = try await incognitoProfile(groupId: groupId, view: view)
        let contactId: Int64
        do {
            contactId = try await dbWrite { db -> Int64 in
                // The member may have gained a contact meanwhile (a concurrent command or invitation).
                guard var m = try GroupMemberRecord.fetchOne(db, key: memberRow), m.contactId == nil else {
                    throw ChatFailure(commandError: "member contact already exists")
                }
                var c = ContactRecord(userId: userId, agentConnId: conn, profile: profile, status: .pending, viaAddress: false, accepted: false,
                                      invitation: link.description, createdAt: now, updatedAt: now, incognitoProfile: incognito,
                                      localDisplayName: localName, groupMemberRowId: memberRow)
                try c.insert(db)
                m.contactId = c.id
                try m.update(db, columns: [GroupMemberRecord.Columns.contactId])
                return c.id!
            }
        } catch {
            try? await agent.deleteConnection(conn)
            throw error
        }
        let (after, contact) = try await memberContactViews(groupId: groupId, contactId: contactId, user: u)
        return .group(.newMemberContact(MemberContact(user: userModel(u), contact: contact, groupInfo: after.info,
                                                      member: after.member(after.members.first { $0.id == memberRow }!))))
    }

    /// `/_invite member contact @<contactId>[ text …| json …]`: sends the member `x.grp.direct.inv`
    /// with the contact's invitation (and the message, stored in the direct chat) over the group
    /// connection (`newMemberContactSentInv`). The send is a group action: durable, sent once.
    public func sendMemberContactInvitation(contactId: Int64, content given: JSONValue?) async throws -> ChatResponse {
        var content: MsgContent?
        if let given {
            do { content = try PeerInput.content(given) } catch { throw ChatFailure(commandError: "malformed MsgContent: \(error.message)") }
        }
        let (u, c) = try await contact(contactId)
        guard let memberRow = c.groupMemberRowId,
              let groupId = try await dbRead({ db in try GroupMemberRecord.fetchOne(db, key: memberRow)?.groupId }) else {
            throw ChatFailure.store(.memberContactGroupMemberNotFound(contactId: contactId))
        }
        guard let invitation = c.invitation, c.directInv == nil else {
            throw ChatFailure(commandError: "the contact was made from the member's invitation, not for one")
        }
        guard !c.grpInvSent else { throw ChatFailure(commandError: "x.grp.direct.inv already sent") }
        let view = try await groupView(groupId)
        guard let member = view.members.first(where: { $0.id == memberRow }), let memberId = MemberId(member.memberId),
              member.agentConnId != nil, member.state?.isConnected == true else { throw ChatFailure.chat(.groupMemberNotActive) }
        try requireGroupPermission(view, .sendContent)
        var params: [(String, JSONValue)] = [("connReq", .string(invitation))]
        let contentJSON = try content.map { try JSONValueEncoder().encode($0) }
        if let contentJSON { params.append(("content", contentJSON)) }
        let env = GroupEnvelope(msgId: ChatMessage.newMessageId(), event: Self.directInvitationEvent, params: .object(params))
        do { _ = try GroupMessage.encode(env) } catch { throw ChatFailure(commandError: "the invitation is too large: \(error.message)") }
        let now = Timestamp.now()
        let userId = u.id
        let action = GroupPendingAction.send(env, to: memberId).json.description
        let itemId = try await dbWrite { db -> Int64? in
            guard let row = try ContactRecord.fetchOne(db, key: contactId), !row.grpInvSent else {
                throw ChatFailure(commandError: "x.grp.direct.inv already sent")
            }
            var a = GroupActionRecord(groupId: groupId, action: action)
            try a.insert(db)
            _ = try ContactRecord.filter(key: contactId).updateAll(db, Column("grp_inv_sent").set(to: true), ContactRecord.Columns.updatedAt.set(to: now))
            guard let contentJSON else { return nil }
            var item = ChatItemRecord(userId: userId, contactId: contactId, sent: true, content: contentJSON.description, sharedMsgId: env.msgId,
                                      status: .sndNew, createdAt: now)
            try item.insert(db)
            _ = try ContactRecord.filter(key: contactId).updateAll(db, ContactRecord.Columns.chatTs.set(to: now))
            return item.id
        }
        kickGroupActions(groupId)
        let (after, contact) = try await memberContactViews(groupId: groupId, contactId: contactId, user: u)
        if let itemId, let content, let record = try await dbRead({ db in try ChatItemRecord.fetchOne(db, key: itemId) }) {
            let row = try await self.contact(contactId).1
            let item = ModelOf.chatItem(ItemRow(record, content: content, quoted: nil), reactions: [])
            sink.yield(.newChatItems(user: userModel(u), chatItems: [aChatItem(user: u, contact: row, item: item)]))
        }
        return .group(.newMemberContactSentInv(MemberContact(user: userModel(u), contact: contact, groupInfo: after.info,
                                                             member: after.member(after.members.first { $0.id == memberRow }!))))
    }

    /// `/_accept member contact @<contactId>`: joins a member's invitation (`memberContactAccepted`);
    /// the contact connects as any other (`contactConnected`).
    public func acceptMemberContact(contactId: Int64) async throws -> ChatResponse {
        let (u, c) = try await contact(contactId)
        guard let inv = c.directInv, let groupId = inv.fromGroupId_ else {
            throw ChatFailure(commandError: "the contact has no member invitation to accept")
        }
        guard !inv.groupDirectInvStartedConnection else { throw ChatFailure(commandError: "the member's invitation is accepted already") }
        try requireStarted()
        var started = inv
        started.groupDirectInvStartedConnection = true
        let text = try Stored.text(started)
        let action = GroupPendingAction.joinMemberContact(contact: contactId).json.description
        let now = Timestamp.now()
        try await dbWrite { db in
            _ = try ContactRecord.filter(key: contactId).updateAll(db, Column("direct_inv").set(to: text), ContactRecord.Columns.updatedAt.set(to: now))
            var a = GroupActionRecord(groupId: groupId, action: action)
            try a.insert(db)
        }
        kickGroupActions(groupId)
        return .group(.memberContactAccepted(UserContact(user: userModel(u), contact: contactModel(try await contact(contactId).1, user: u))))
    }

    /// `/_set accept member contacts <userId> on|off` (`cmdOk`): whether members' invitations are joined at once.
    public func setAutoAcceptMemberContacts(userId: Int64, enabled: Bool) async throws -> ChatResponse {
        _ = try await user(userId)
        try await userWrite { db in
            _ = try UserRecord.filter(key: userId).updateAll(db, Column("auto_accept_member_contacts").set(to: enabled))
        }
        return .cmdOk(user: userModel(try await user(userId)))
    }

    /// A deleted member contact is no longer the member's (`memberContactId` cleared), so that a
    /// new one can be made; the group's machine is read again from the store.
    func memberContactDeleted(_ c: ContactRow) async {
        guard let memberRow = c.groupMemberRowId else { return }
        let contactId = c.id
        let groupId = try? await dbWrite { db -> Int64? in
            _ = try GroupMemberRecord.filter(key: memberRow).filter(GroupMemberRecord.Columns.contactId == contactId)
                .updateAll(db, GroupMemberRecord.Columns.contactId.set(to: nil as Int64?))
            return try GroupMemberRecord.fetchOne(db, key: memberRow)?.groupId
        }
        if let groupId = groupId ?? nil { groupRuntime.states[groupId] = nil }
    }

    /// The membership's profile (stored JSON) when the user joined the group incognito: what its
    /// member contacts are shown too (SimpleX: "reuse membership incognito profile").
    func incognitoProfile(groupId: Int64, view: GroupView) async throws -> String? {
        let incognito = try await dbRead { db in try Bool.fetchOne(db, sql: "SELECT incognito FROM chat_group WHERE id = ?", arguments: [groupId]) }
        return incognito == true ? view.membership?.profile : nil
    }

    /// The group and the member contact as the API shows them, read after a change.
    private func memberContactViews(groupId: Int64, contactId: Int64, user u: UserRow) async throws -> (GroupView, Contact) {
        let view = try await groupView(groupId)
        return (view, contactModel(try await contact(contactId).1, user: u))
    }

    // MARK: - Received

    /// A member's `x.grp.direct.inv` (an `applyContent` effect, in its input's transaction; the
    /// machine checked the member may send): refused when the group's `directMessages` does not
    /// allow the member's role, ignored from a blocked member (SimpleX `xGrpDirectInv`). Makes the
    /// contact, linked to the member, with the invitation (and its message as the first item), and
    /// — when the user accepts member contacts automatically — the action that joins it.
    nonisolated static func receivedDirectInvitation(_ db: Database, _ env: GroupEnvelope, author: MemberId, blocked: Bool, groupId: Int64,
                                                     userId: Int64, now: String, into out: inout GroupOutcome) throws {
        guard !blocked else {
            out.refusedContent.append("x.grp.direct.inv: member \(author) is blocked (ignoring)")
            return
        }
        guard let view = try readGroupView(db, groupId), let member = view.record(author), let memberRow = member.id,
              let role = member.state?.role else { return }
        guard directMessagesAllowed(view, role: role) else {
            out.refusedContent.append("x.grp.direct.inv: direct messages not allowed")
            return
        }
        guard let connReq = env.params["connReq"]?.stringValue, (try? InvitationLink(parsing: connReq)) != nil else {
            out.refusedContent.append("x.grp.direct.inv: connReq is not an invitation link")
            return
        }
        var content: MsgContent?
        if let json = env.params["content"], json != .null {
            do { content = try PeerInput.content(json) } catch {
                out.refusedContent.append("x.grp.direct.inv: \(error.message)")
                return
            }
        }
        // SimpleX joins an existing contact of the member (and settles two invitations crossing);
        // Swiftplex makes member contacts only for members without one.
        guard member.contactId == nil else {
            out.refusedContent.append("x.grp.direct.inv: member \(author) has a contact already")
            return
        }
        let auto = try UserRecord.fetchOne(db, key: userId)?.autoAcceptMemberContacts ?? false
        // In a group joined incognito, the contact is shown the same random profile.
        let incognito = try Bool.fetchOne(db, sql: "SELECT incognito FROM chat_group WHERE id = ?", arguments: [groupId]) == true
            ? view.membership?.profile : nil
        let inv = GroupDirectInvitation(groupDirectInvLink: connReq, fromGroupId_: groupId, fromGroupMemberId_: memberRow,
                                        fromGroupMemberConnId_: member.agentConnId, groupDirectInvStartedConnection: auto)
        // No agent connection until the invitation is joined: a placeholder no agent event names
        // (negative, made unique as minus the row id once the row has one).
        var c = ContactRecord(userId: userId, agentConnId: -Int64.random(in: 1_000_000_000...Int64.max), profile: member.profile, status: .pending,
                              viaAddress: false, accepted: false, invitation: nil, createdAt: now, updatedAt: now, incognitoProfile: incognito, chatTs: now,
                              localDisplayName: member.localDisplayName, groupMemberRowId: memberRow, directInv: try Stored.text(inv))
        try c.insert(db)
        let contactId = c.id!
        c.agentConnId = -contactId
        try c.update(db, columns: [ContactRecord.Columns.agentConnId])
        var m = member
        m.contactId = contactId
        try m.update(db, columns: [GroupMemberRecord.Columns.contactId])
        var itemId: Int64?
        if let content, let json = env.params["content"] {
            _ = content
            var item = ChatItemRecord(userId: userId, contactId: contactId, sent: false, content: json.description, sharedMsgId: env.msgId,
                                      status: .rcvNew, createdAt: now)
            try item.insert(db)
            itemId = item.id
        }
        if auto {
            var a = GroupActionRecord(groupId: groupId, action: GroupPendingAction.joinMemberContact(contact: contactId).json.description)
            try a.insert(db)
            out.actions += 1
        }
        out.memberContacts.append(ReceivedMemberContact(contactId: contactId, memberRowId: memberRow, itemId: itemId))
    }

    /// Reports the member contacts an input made: `newMemberContactReceivedInv`, then the
    /// invitation's message as `newChatItems` in the direct chat.
    func reportMemberContacts(_ made: [ReceivedMemberContact], view: GroupView, info: GroupInfo, user u: UserRow) async throws {
        for r in made {
            guard let member = view.members.first(where: { $0.id == r.memberRowId }) else { continue }
            let row = try await contact(r.contactId).1
            sink.yield(.group(.newMemberContactReceivedInv(MemberContact(user: userModel(u), contact: contactModel(row, user: u), groupInfo: info,
                                                                         member: view.member(member)))))
            guard let itemId = r.itemId, let record = try await dbRead({ db in try ChatItemRecord.fetchOne(db, key: itemId) }),
                  let content = Stored.decode(MsgContent.self, record.content) else { continue }
            let item = ModelOf.chatItem(ItemRow(record, content: content, quoted: nil), reactions: [])
            sink.yield(.newChatItems(user: userModel(u), chatItems: [aChatItem(user: u, contact: row, item: item)]))
        }
    }

    // MARK: - Joining

    /// The `joinMemberContact` group action: joins the member's invitation with the user's profile
    /// (`x.info`), recording the new connection on the contact in the action's own transaction
    /// (`done`). A contact deleted meanwhile, or joined already, is done.
    func joinMemberContact(_ contactId: Int64, done: @escaping @Sendable (Database) throws -> Void) async throws {
        guard let (u, c) = try? await contact(contactId), c.agentConnId < 0, let inv = c.directInv else {
            try await dbWrite(done)
            return
        }
        let link: InvitationLink
        do { link = try InvitationLink(parsing: inv.groupDirectInvLink) } catch {
            logger.info("a member's direct invitation is malformed; not joined", metadata: ["contact": "\(contactId)"])
            try await dbWrite(done)
            return
        }
        let info = try profileInfo(ownProfile(for: c, user: u))
        try await trackingJoin { () async throws -> ((), Int64) in
            // Joined and recorded in a task of its own, which `close()` does not cancel (it waits
            // for it): once the join has taken the invitation's queue, a join made again at the
            // next start would fail. (A crash in between still leaves that window.)
            let conn = try await Task {
                let conn = try await self.agentCall { try await self.agent.join(link, info: info) }
                try await self.dbWrite { db in
                    _ = try ContactRecord.filter(key: contactId).updateAll(db, ContactRecord.Columns.agentConnId.set(to: conn))
                    try done(db)
                }
                return conn
            }.value
            return ((), conn)
        }
    }
}
