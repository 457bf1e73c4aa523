import Agent
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

// Group links and admission review (SimpleX `APICreateGroupLink`, `processUserContactRequest`'s
// group link branch, `acceptGroupJoinRequestAsync`, `APIAcceptMember`).
//
// A group link is a contact address owned by the group (`group_link`): its full link carries the
// group link id as client data, its short link is a `/g` link. A request to it becomes a member
// through the group's machine (`linkRequest`): the member row, and the agent call that accepts
// the request with `x.grp.link.inv` (`group_action`), commit together. The joiner keeps its
// request in `group_link_join` until the host's `x.grp.link.inv` arrives as the confirmation on
// the join connection, which makes the group (the row goes in the same transaction).

extension ChatController {
    // MARK: - The host's commands

    func groupLink(_ groupId: Int64) async throws -> GroupLinkRecord? {
        try await dbRead { db in try GroupLinkRecord.filter(GroupLinkRecord.Columns.groupId == groupId).fetchOne(db) }
    }

    func groupLinkModel(_ r: GroupLinkRecord) -> GroupLink {
        GroupLink(userContactLinkId: r.id ?? 0, connLinkContact: CreatedConnLink(connFullLink: r.link, connShortLink: r.shortLink),
                  shortLinkDataSet: r.shortLink != nil, groupLinkId: r.groupLinkId,
                  acceptMemberRole: GroupRoles.model(GroupProtocol.GroupMemberRole(name: r.role)))
    }

    /// The user may manage the group's link for joiners with `role`: admin, and a role of at most
    /// `member` (else `groupMemberInitialRole`, as SimpleX).
    private func requireLinkPermission(_ view: GroupView, role: ChatModel.GroupMemberRole) throws {
        let proto = GroupRoles.proto(role)
        guard proto >= .observer, proto <= .member else {
            throw ChatFailure.chat(.groupMemberInitialRole(groupInfo: view.info, initialRole: role))
        }
        try requireGroupPermission(view, .manageLink(joinAs: proto))
    }

    /// `/_create link #<groupId> [<role>]`: a new group link (`groupLinkCreated`); `short` also
    /// makes its `/g` short link.
    public func createGroupLink(groupId: Int64, role: ChatModel.GroupMemberRole, short: Bool = true) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        try requireStarted()
        try requireLinkPermission(view, role: role)
        if try await groupLink(groupId) != nil { throw ChatFailure.store(.duplicateGroupLink(groupInfo: view.info)) }
        let groupLinkId = Base64URL.encode(Sodium.randomBytes(16))
        let (addressId, link) = try await agentCall { try await agent.createAddress(groupLinkId: groupLinkId) }
        var shortLink: String?
        if short {
            do {
                shortLink = try await agentCall { try await agent.shortLink(forAddress: addressId, link: link) }.description
            } catch {
                try? await agent.deleteAddress(addressId)
                throw error
            }
        }
        let fresh = GroupLinkRecord(groupId: groupId, agentAddressId: addressId, groupLinkId: groupLinkId, link: link.description,
                                    shortLink: shortLink, role: role.rawValue, createdAt: Timestamp.now())
        let record: GroupLinkRecord
        do {
            record = try await dbWrite { db in
                var r = fresh
                try r.insert(db)
                return r
            }
        } catch {
            try? await agent.deleteAddress(addressId)
            throw error
        }
        return .group(.groupLinkCreated(UserGroupLink(user: userModel(u), groupInfo: view.info, groupLink: groupLinkModel(record))))
    }

    /// `/_set link role #<groupId> <role>` (`groupLink`).
    public func setGroupLinkRole(groupId: Int64, role: ChatModel.GroupMemberRole) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        guard var record = try await groupLink(groupId) else { throw ChatFailure.store(.groupLinkNotFound(groupInfo: view.info)) }
        try requireLinkPermission(view, role: role)
        record.role = role.rawValue
        let (id, text) = (record.id, role.rawValue)
        try await dbWrite { db in _ = try GroupLinkRecord.filter(key: id).updateAll(db, Column("role").set(to: text)) }
        return .group(.groupLink(UserGroupLink(user: userModel(u), groupInfo: view.info, groupLink: groupLinkModel(record))))
    }

    /// `/_get link #<groupId>` (`groupLink`).
    public func getGroupLink(groupId: Int64) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        guard let record = try await groupLink(groupId) else { throw ChatFailure.store(.groupLinkNotFound(groupInfo: view.info)) }
        return .group(.groupLink(UserGroupLink(user: userModel(u), groupInfo: view.info, groupLink: groupLinkModel(record))))
    }

    /// `/_delete link #<groupId>` (`groupLinkDeleted`): its queue goes from the relay, so the link
    /// (full or short) takes no more requests.
    public func deleteGroupLink(groupId: Int64) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        guard let record = try await groupLink(groupId) else { throw ChatFailure.store(.groupLinkNotFound(groupInfo: view.info)) }
        try requireGroupPermission(view, .manageLink(joinAs: .member))
        try await agentCall { try await agent.deleteAddress(record.agentAddressId) }
        _ = try await dbWrite { db in try GroupLinkRecord.deleteOne(db, key: record.id) }
        return .group(.groupLinkDeleted(UserGroup(user: userModel(u), groupInfo: view.info)))
    }

    /// A group that is gone (deleted, left) takes its link with it.
    func deleteGroupLinkIfGone(_ groupId: Int64) async {
        guard let g = try? await dbRead({ db in try GroupRecord.fetchOne(db, key: groupId) }), g.deleted else { return }
        await dropGroupLink(groupId)
    }

    /// Deletes the group's link, if it has one (its address on the relay, then the row); a relay
    /// that cannot be reached leaves it for the purge to try again.
    func dropGroupLink(_ groupId: Int64) async {
        guard let record = try? await groupLink(groupId) else { return }
        do { try await agent.deleteAddress(record.agentAddressId) } catch let e as AgentError where e.code == .unknownConnection {} catch {
            logger.info("a deleted group's link could not be deleted yet", metadata: ["group": "\(groupId)", "error": "\(error)"])
            return
        }
        _ = try? await dbWrite { db in try GroupLinkRecord.deleteOne(db, key: record.id) }
    }

    /// `/_accept member #<groupId> <groupMemberId> <role>`: admits a member waiting for review
    /// (`memberAccepted`).
    public func acceptMember(groupId: Int64, groupMemberId: Int64, role: ChatModel.GroupMemberRole) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        let row = try namedMembers(view, [groupMemberId])[0]
        guard let state = row.state else { throw ChatFailure.store(.groupMemberNotFound(groupMemberId: groupMemberId)) }
        guard state.isPending else { throw ChatFailure.chat(.groupMemberNotActive) }
        try requireStarted()
        try requireGroupPermission(view, .admit(as: GroupRoles.proto(role)))
        try await runGroupCommand(view, userId: u.id, .acceptMember(state.memberId, role: GroupRoles.proto(role)))
        let after = try await groupView(groupId)
        guard let member = after.member(state.memberId) else { throw ChatFailure.chat(.groupInternal(message: "the accepted member was not stored")) }
        return .group(.memberAccepted(UserGroupMember(user: userModel(u), groupInfo: after.info, member: member)))
    }

    // MARK: - Requests through the link (host)

    /// A contact request to a group link: a new member through the group's machine. Returns false
    /// when the address is not a group link.
    func groupLinkRequest(addressId: Int64, request: Int64, info: [UInt8]) async throws -> Bool {
        guard let link = try await dbRead({ db in
            try GroupLinkRecord.filter(GroupLinkRecord.Columns.agentAddressId == addressId).fetchOne(db)
        }) else { return false }
        let groupId = link.groupId
        func refuse(_ why: String) async {
            logger.info("a group link request was refused", metadata: ["group": "\(groupId)", "reason": "\(why)"])
            try? await agent.rejectRequest(request)
        }
        guard let view = try? await groupView(groupId) else {
            await refuse("the group is gone")
            await deleteGroupLinkIfGone(groupId)
            return true
        }
        let userId = view.group.userId
        guard try await admitContactRequest(addressId: addressId, userId: userId) else {
            refusedContactRequests += 1
            await refuse("too many requests")
            return true
        }
        // The joiner's `x.contact {profile, contactReqId?}` (or a bare `x.info {profile}`).
        guard let message = try? ChatMessage(decoding: info), message.event == "x.contact" || message.event == "x.info",
              let profileJSON = message.params["profile"], let checked = try? PeerInput.profile(profileJSON),
              let profile = try? MemberProfile(json: JSONValueEncoder().encode(checked)) else {
            await refuse("the request carries no readable profile")
            return true
        }
        let xContactId = message.params["contactReqId"]?.stringValue.flatMap { ContactAddressLink.isGroupLinkId($0) ? $0 : nil }
        let memberId = Self.newMemberId()
        let role = GroupProtocol.GroupMemberRole(name: link.role)
        let removed = GroupProtocol.GroupMemberStatus.allCases.filter(\.isRemoved).map(\.rawValue)
        let mark: @Sendable (Database) throws -> Void = { db in
            if let xContactId {
                // A request sent again (the joiner reconnecting) is the member it made already.
                let existing = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.xContactId == xContactId
                    && !removed.contains(Column("status"))).fetchCount(db)
                guard existing == 0 else { throw RepeatedLinkRequest() }
            }
            _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == memberId.text)
                .updateAll(db, GroupMemberRecord.Columns.xContactId.set(to: xContactId))
        }
        do {
            _ = try await commitGroupInput(groupId, userId: userId, .linkRequest(memberId: memberId, role: role, profile: profile, request: request,
                                                                                 review: view.groupProfileReviewsAll), extra: mark)
        } catch is RepeatedLinkRequest {
            await refuse("a request this joiner sent already")
        } catch let e as GroupError {
            await refuse("\(e.code.rawValue): \(e.message)")
        }
        return true
    }

    // MARK: - Joining through a link

    /// The pending join request of an agent connection, if it is one (loaded once, then kept).
    func groupLinkJoin(_ conn: Int64) async throws -> GroupLinkJoinRecord? {
        if groupRuntime.linkJoins == nil {
            let ids = try await dbRead { db in try Int64.fetchAll(db, sql: "SELECT agent_conn_id FROM group_link_join") }
            if groupRuntime.linkJoins == nil { groupRuntime.linkJoins = Set(ids) }
        }
        guard groupRuntime.linkJoins?.contains(conn) == true else { return nil }
        return try await dbRead { db in try GroupLinkJoinRecord.filter(GroupLinkJoinRecord.Columns.agentConnId == conn).fetchOne(db) }
    }

    /// `/_connect` with a group link: a join request with the user's profile and a request id
    /// (`x.contact {profile, contactReqId}`), answered `sentInvitation`. Connecting again while the
    /// request waits answers with the same pending connection (nothing is sent twice); the host
    /// also refuses a second request with the same id.
    /// `incognito` joins with a random profile made for this group only (`customUserProfile`): the
    /// membership keeps it, so the members (and member contacts made in the group) see only it.
    func connectGroupLink(user u: UserRow, address: ContactAddressLink, short: String?, incognito: Bool) async throws -> ChatResponse {
        let full = address.description
        if let own = try await dbRead({ db in try GroupLinkRecord.filter(GroupLinkRecord.Columns.link == full).fetchOne(db) }),
           let view = try? await groupView(own.groupId) {
            throw ChatFailure.chat(.groupDuplicateMember(contactName: view.group.localDisplayName)) // the user's own group
        }
        if let joined = try await knownGroup(userId: u.id, link: full) {
            throw ChatFailure.chat(.groupDuplicateMember(contactName: joined.group.localDisplayName))
        }
        let userId = u.id
        if let previous = try await dbRead({ db in
            try GroupLinkJoinRecord.filter(GroupLinkJoinRecord.Columns.userId == userId && GroupLinkJoinRecord.Columns.link == full).fetchOne(db)
        }) {
            // A request through this link waits for the host already: the same pending connection.
            let custom = try await joinIncognitoProfile(previous)
            return .sentInvitation(user: userModel(u), connection: pendingJoinConnection(previous, groupLinkId: address.groupLinkId), customUserProfile: custom)
        }
        let xContactId = Base64URL.encode(Sodium.randomBytes(16))
        let custom = incognito ? Self.randomProfile() : nil
        let customText = try custom.map(Stored.text)
        let info = ChatMessage(event: "x.contact", params: .object([
            ("profile", try JSONValueEncoder().encode(custom ?? u.profile)), ("contactReqId", .string(xContactId)),
        ])).encoded
        let record = try await trackingJoin { () async throws -> (GroupLinkJoinRecord, Int64) in
            let conn = try await agentCall { try await agent.joinAddress(address, info: info, autoAllow: false) }
            let row = try await dbWrite { db -> GroupLinkJoinRecord in
                var r = GroupLinkJoinRecord(userId: userId, agentConnId: conn, link: full, shortLink: short, xContactId: xContactId, createdAt: Timestamp.now())
                try r.insert(db)
                if let customText {
                    try db.execute(sql: "UPDATE group_link_join SET incognito_profile = ? WHERE id = ?", arguments: [customText, r.id])
                }
                return r
            }
            groupRuntime.linkJoins?.insert(conn)
            return (row, conn)
        }
        return .sentInvitation(user: userModel(u), connection: pendingJoinConnection(record, groupLinkId: address.groupLinkId), customUserProfile: custom)
    }

    /// The random profile a join request was sent with, when it was sent incognito.
    func joinIncognitoProfile(_ join: GroupLinkJoinRecord) async throws -> Profile? {
        let id = join.id
        return Stored.profile(try await dbRead { db in
            try String.fetchOne(db, sql: "SELECT incognito_profile FROM group_link_join WHERE id = ?", arguments: [id])
        })
    }

    func pendingJoinConnection(_ record: GroupLinkJoinRecord, groupLinkId: String?) -> PendingContactConnection {
        let created = Stored.timestamp(record.createdAt)
        return PendingContactConnection(pccConnId: 3_000_000 + (record.id ?? 0), pccAgentConnId: String(record.agentConnId), pccConnStatus: .joined,
                                        viaContactUri: true, groupLinkId: groupLinkId, createdAt: created, updatedAt: created)
    }

    /// The group the user is in (not deleted, membership not gone) that it joined by `link`.
    func knownGroup(userId: Int64, link: String) async throws -> GroupView? {
        let ids = try await dbRead { db in
            try Int64.fetchAll(db, sql: "SELECT id FROM chat_group WHERE user_id = ? AND via_link = ? AND deleted = 0", arguments: [userId, link])
        }
        for id in ids {
            if let view = try? await groupView(id), let me = view.membership?.state, !me.status.isRemoved { return view }
        }
        return nil
    }

    /// The host answered a join request: with `x.grp.link.inv` the group is made (the user
    /// `accepted` or waiting for review), the connection allowed with the user's profile, and
    /// `groupLinkConnecting` reported; a `x.grp.link.reject` or anything else ends the request.
    func groupLinkJoinConfirmed(_ join: GroupLinkJoinRecord, info: [UInt8]) async throws {
        let conn = join.agentConnId
        func end(_ why: String) async throws {
            logger.info("a group link join ended", metadata: ["reason": "\(why)"])
            try? await agent.deleteConnection(conn)
            _ = try await dbWrite { db in try GroupLinkJoinRecord.deleteOne(db, key: join.id) }
            groupRuntime.linkJoins?.remove(conn)
            sink.yield(.chatError(.error(.groupInternal(message: "joining through a group link: \(why)"))))
        }
        let invitation: GroupLinkInvitation
        do {
            let env = try GroupMessage.decodeEnvelope(info, asConnInfo: true)
            switch try env.groupMessage() {
            case let .linkInvitation(inv)?: invitation = inv
            case let .linkRejection(rej)?: return try await end("the host rejected the request: \(rej.rejectionReason)")
            default: return try await end("the host answered \(env.event), not x.grp.link.inv")
            }
        } catch let e as GroupMessageError {
            return try await end("the host's answer is malformed: \(e.message)")
        }
        let u = try await user(join.userId)
        let custom = try await joinIncognitoProfile(join)
        let own = try MemberProfile(json: JSONValueEncoder().encode(custom ?? u.profile))
        let (state, effects): (GroupState, [GroupEffect])
        do { (state, effects) = try GroupState.joinedViaLink(invitation, ownProfile: own) } catch {
            return try await end("refused: \(error.code.rawValue): \(error.message)")
        }
        let now = Timestamp.now()
        let userId = u.id
        let profile = invitation.groupProfile
        let host = invitation.fromMember.memberId
        let (groupId, outcome) = try await dbWrite { db -> (Int64, GroupOutcome) in
            _ = try GroupLinkJoinRecord.deleteOne(db, key: join.id)
            let name = try LocalNames.reserve(db, userId: userId, displayName: profile.displayName)
            var g = GroupRecord(userId: userId, localDisplayName: name, profile: profile.json.description, createdAt: now, updatedAt: now, chatTs: now,
                                viaLink: join.link)
            try g.insert(db)
            if custom != nil { try db.execute(sql: "UPDATE chat_group SET incognito = 1 WHERE id = ?", arguments: [g.id!]) }
            var out = GroupOutcome()
            try Self.applyEffects(db, effects, groupId: g.id!, userId: userId, now: now, limits: self.limits, into: &out)
            _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == g.id! && GroupMemberRecord.Columns.memberId == host.text)
                .updateAll(db, GroupMemberRecord.Columns.agentConnId.set(to: conn))
            return (g.id!, out)
        }
        groupRuntime.linkJoins?.remove(conn)
        groupRuntime.states[groupId] = state.withMemberLimit(limits.maxGroupMembers)
        _ = try await groupConnection(conn)
        groupRuntime.connections?[conn] = GroupConnection(groupId: groupId, userId: userId, memberId: host)
        if outcome.actions > 0 { kickGroupActions(groupId) }
        try await reportGroupOutcome(groupId, userId: userId, outcome)
    }

    // MARK: - Plans

    /// `/_connect plan` for a group link: `ownLink` (the user's own group's), `known` (a group the
    /// user joined by it), `connectingConfirmReconnect` (a request waiting), else `ok`.
    func groupLinkPlan(userId: Int64, full: String) async throws -> GroupLinkPlan {
        if let own = try await dbRead({ db in try GroupLinkRecord.filter(GroupLinkRecord.Columns.link == full).fetchOne(db) }),
           let view = try? await groupView(own.groupId), view.group.userId == userId {
            return .ownLink(groupInfo: view.info)
        }
        if let known = try await knownGroup(userId: userId, link: full) { return .known(groupInfo: known.info) }
        let waiting = try await dbRead { db in
            try !GroupLinkJoinRecord.filter(GroupLinkJoinRecord.Columns.userId == userId && GroupLinkJoinRecord.Columns.link == full).isEmpty(db)
        }
        return waiting ? .connectingConfirmReconnect : .ok
    }
}

/// A join request with a request id (`contactReqId`) this group made a member for already.
struct RepeatedLinkRequest: Error {}

extension GroupView {
    /// `memberAdmission.review == "all"` in the stored profile.
    var groupProfileReviewsAll: Bool {
        (Stored.json(group.profile).flatMap { try? GroupProtocol.GroupProfile(json: $0) })?.reviewsAllMembers ?? false
    }
}
