import Agent
import ChannelProtocol
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase

// Channels on the engine, continued: managing a channel's relays and leaving it (docs/channels.md
// §9) — the owner adding relays (`/_add relays`) and removing them (`/_remove`), a relay's
// operator leaving (`/_leave`, the channel refused until `/_relay allow`), the owner leaving, a
// relay that stops serving, and the subscriber's view of its relays with their counters.

extension ChatController {
    // MARK: - Owner: adding and removing relays

    /// `/_add relays #<groupId> <relayId,…>`: each relay is invited as at creation (`new` →
    /// `invited` → `accepted` → `active`); once active, the channel's subscribers learn it through
    /// `x.grp.relay.new` (forwarded by the other relays) and join through it. Answers
    /// `groupRelaysAdded` with the added relays; when a relay's address cannot be reached, that
    /// relay is dropped and the answer is `groupRelaysAddFailed` with each relay's outcome (those
    /// without `relayError` were added and go on).
    public func addGroupRelays(groupId: Int64, relayIds: [Int64]) async throws -> ChatResponse {
        let (u, _) = try await groupAndUser(groupId)
        guard let c = try await channelRecord(groupId), c.role == ChannelRecord.Role.owner.rawValue else {
            throw ChatFailure.command("#\(groupId) is not a channel this user owns")
        }
        try requireStarted()
        guard !relayIds.isEmpty else { throw ChatFailure.command("name at least one chat relay") }
        guard Set(relayIds).count == relayIds.count else { throw ChatFailure.command("a chat relay is named twice") }
        let registered = try await chatRelays(userId: u.id)
        var chosen: [ChatRelayRecord] = []
        for id in relayIds {
            guard let r = registered.first(where: { $0.id == id }) else { throw ChatFailure.store(.userChatRelayNotFound(chatRelayId: id)) }
            chosen.append(r)
        }
        let state = try await ownerState(groupId)
        guard !state.left, !state.deleted else { throw ChatFailure(ChannelError(.invalidState, "the owner left the channel")) }
        for r in chosen where state.relays.values.contains(where: { $0.chatRelayId == r.id && $0.status.isCurrent }) {
            throw ChatFailure(ChannelError(.duplicateMember, "chat relay \(r.id ?? 0) serves the channel already"))
        }
        var results: [AddRelayResult] = []
        var added: [MemberId] = []
        for r in chosen {
            let relayMember = Self.newMemberId()
            do {
                let effects = try await runOwner(groupId, .addRelay(memberId: relayMember, chatRelayId: r.id ?? 0, address: r.address))
                for case let .joinRelayAddress(id, address, info) in effects {
                    _ = try await inviteRelay(groupId, relay: id, address: address, info: info) // (+Channels)
                }
                added.append(relayMember)
                results.append(AddRelayResult(relay: r.model))
            } catch {
                await dropUninvitedRelay(groupId, relayMember)
                results.append(AddRelayResult(relay: r.model, relayError: Self.chatError(error)))
            }
        }
        guard results.allSatisfy({ $0.relayError == nil }) else {
            return .channel(.groupRelaysAddFailed(PublicGroupCreationFailed(user: userModel(u), addRelayResults: results)))
        }
        let view = try await groupView(groupId)
        let ids = Set(added.compactMap { view.record($0)?.id })
        let relays = try await groupRelayModels(groupId, view: view).filter { ids.contains($0.groupMemberId) }
        guard let now = try await channelRecord(groupId) else { throw ChatFailure.store(.groupNotFound(groupId: groupId)) }
        return .channel(.groupRelaysAdded(PublicGroupCreated(user: userModel(u), groupInfo: channelInfo(view, now), groupLink: channelLinkModel(now),
                                                             groupRelays: relays)))
    }

    /// A relay whose invitation could not be sent: its rows go and the owner's machine is read
    /// again from the store without it.
    private func dropUninvitedRelay(_ groupId: Int64, _ id: MemberId) async {
        await lockChannel(groupId)
        defer { unlockChannel(groupId) }
        let conn = try? await channelMemberConn(groupId, id)
        if let conn {
            try? await agent.deleteConnection(conn)
            channelRuntime.connections?[conn] = nil
        }
        _ = try? await dbWrite { db in
            _ = try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && ChannelMemberRecord.Columns.memberId == id.text).deleteAll(db)
            if let gm = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == id.text).fetchOne(db) {
                if let userId = try GroupRecord.fetchOne(db, key: groupId)?.userId { try LocalNames.release(db, userId: userId, name: gm.localDisplayName) }
                _ = try gm.delete(db)
            }
        }
        channelRuntime.owners[groupId] = nil
    }

    /// `/_remove #<groupId> <relay groupMemberId>,…` in a channel the user owns: each relay is
    /// removed — a signed `x.grp.mem.del` to every relay (the removed one forwards it to its
    /// subscribers and stops; the others forward it so that subscribers drop it), its connection
    /// deleted, `inactive`, the channel link's data published without it. Answers
    /// `userDeletedMembers`. Nil for a group that is no channel.
    func removeChannelRelays(groupId: Int64, memberIds: [Int64]) async throws -> ChatResponse? {
        guard let c = try await channelRecord(groupId) else { return nil }
        guard c.role == ChannelRecord.Role.owner.rawValue else { throw ChatFailure.command("only a channel's owner removes its relays") }
        let (u, view) = try await groupAndUser(groupId)
        try requireStarted()
        let rows = try namedMembers(view, memberIds)
        var ids: [MemberId] = []
        for r in rows {
            guard r.role == GroupProtocol.GroupMemberRole.relay.name, let id = MemberId(r.memberId) else {
                throw ChatFailure.command("only chat relays are removed from a channel: \(r.localDisplayName ?? r.memberId) is a subscriber")
            }
            ids.append(id)
        }
        for id in ids {
            let effects = try await runOwner(groupId, .removeRelay(id))
            await performOwnerEffects(groupId, effects)
        }
        let after = try await groupView(groupId)
        let members = ids.compactMap { after.member($0) }
        return .group(.userDeletedMembers(UserDeletedMembers(user: userModel(u), groupInfo: channelInfo(after, c), members: members, withMessages: false,
                                                             msgSigned: true)))
    }

    // MARK: - Owner: the channel's profile, deleting the channel

    /// `/_group_profile #<groupId> <json>` on a channel: only its owner changes it. The new
    /// profile keeps the channel's `publicGroup` (its link and id); it goes signed (`x.grp.info`)
    /// to every active relay, which applies it and forwards it to its subscribers (`groupUpdated`
    /// at each), and the channel link's data is published with it, so that new subscribers see
    /// it. Answers `groupUpdated` (`msgSigned`). Nil for a group that is no channel.
    func updateChannelProfile(groupId: Int64, profile given: JSONValue) async throws -> ChatResponse? {
        guard let c = try await channelRecord(groupId) else { return nil }
        let (u, view) = try await groupAndUser(groupId)
        guard c.role == ChannelRecord.Role.owner.rawValue else { throw ChatFailure.chat(.groupUserRole(groupInfo: channelInfo(view, c), requiredRole: .owner)) }
        guard case .object = given else { throw ChatFailure.command("the group profile must be an object") }
        let state = try await ownerState(groupId)
        guard !state.left, !state.deleted else { throw ChatFailure(ChannelError(.invalidState, "the owner left the channel")) }
        // The channel's identity is not the owner's to change here: its link and id stay.
        let profile = try Self.groupProfile(given, keeping: state.profile.json["publicGroup"].map { [("publicGroup", $0)] } ?? [])
        try requireStarted()
        let effects = try await runOwner(groupId, .updateProfile(profile))
        await performOwnerEffects(groupId, effects)
        let after = try await groupView(groupId)
        return .group(.groupUpdated(GroupUpdated(user: userModel(u), fromGroup: channelInfo(view, c), toGroup: channelInfo(after, c), msgSigned: true)))
    }

    /// `/_delete #<groupId>` of a channel's owner (SimpleX `APIDeleteGroup`): a signed
    /// `x.grp.del` to every active relay — each forwards it to its subscribers (`groupDeleted`
    /// there and at the relay), then stops serving and deletes its link — then the owner's
    /// connections, its channel link and the group go. The decision and what is left to do are
    /// one `channel_action` step committed with it: a crash part-way is finished at start.
    /// Answers `groupDeletedUser`. Nil for a group that is not a channel this user owns.
    func deleteChannelAsOwner(groupId: Int64) async throws -> ChatResponse? {
        guard let c = try await channelRecord(groupId), c.role == ChannelRecord.Role.owner.rawValue else { return nil }
        let (u, view) = try await groupAndUser(groupId)
        try requireStarted()
        let info = channelInfo(view, c)
        let effects = try await runOwner(groupId, .deleteChannel)
        var item: BatchItem?
        var relays: [MemberId] = []
        for case let .send(i, to) in effects {
            item = i
            relays.append(to)
        }
        if let item {
            await finishChannelDeletion(groupId, item: item, relays: relays)
        } else {
            // No active relay to tell: only the local part.
            await finishChannelDeletion(groupId, item: nil, relays: [])
        }
        return .group(.groupDeletedUser(GroupDeletedUser(user: userModel(u), groupInfo: info)))
    }

    /// The owner's deletion, made (again) until done: `x.grp.del` to the relays (a relay already
    /// gone is skipped), every connection of the channel and its link deleted, then the group and
    /// its rows (its `channel_action` step with them).
    func finishChannelDeletion(_ groupId: Int64, item: BatchItem?, relays: [MemberId]) async {
        if let item, channelStepHeld(.ownerDeleteChannel(item: item, relays: relays)) { return }
        do {
            if let item {
                for r in relays {
                    do { try await sendChannelItem(groupId, item, to: r) } catch {
                        logger.info("x.grp.del was not sent to a relay", metadata: ["group": "\(groupId)", "reason": "\(Self.chatError(error))"])
                    }
                }
            }
            try await deleteChannelConnections(groupId)
            if let address = try await channelRecord(groupId)?.agentAddressId {
                do { try await agent.deleteAddress(address) } catch let e as AgentError where e.code == .unknownConnection {}
            }
            guard !closing else { return } // cut short: made again at start
            try await dbWrite { db in
                guard let g = try GroupRecord.fetchOne(db, key: groupId) else { return }
                for m in try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId).fetchAll(db)
                where m.category != GroupProtocol.GroupMemberCategory.user.rawValue {
                    try LocalNames.release(db, userId: g.userId, name: Self.memberOwnName(db, m.localDisplayName, userId: g.userId))
                }
                try LocalNames.release(db, userId: g.userId, name: g.localDisplayName)
                _ = try GroupRecord.deleteOne(db, key: groupId) // the channel's rows and steps with it
            }
            channelRuntime.owners[groupId] = nil
            channelRuntime.roles[groupId] = nil
        } catch {
            reportChannelRefusal(groupId, error)
        }
    }

    // MARK: - Leaving

    /// `/_leave #<groupId>` of a channel's relay: a plain `x.grp.leave` to the owner and every
    /// subscriber, its connections and its channel link deleted, its own status `rejected`, and the
    /// channel (by link) refused from now on — `x.grp.relay.inv` for it is answered
    /// `x.grp.relay.reject` until `/_relay allow #g` (SimpleX `leaveChannelRelay`).
    func leaveChannelAsRelay(groupId: Int64, _ c: ChannelRecord) async throws -> ChatResponse {
        let (u, _) = try await groupAndUser(groupId)
        try requireStarted()
        let effects = try await runRelay(groupId, .leave)
        await performRelayEffects(groupId, effects)
        let view = try await groupView(groupId)
        guard let now = try await channelRecord(groupId) else { throw ChatFailure.store(.groupNotFound(groupId: groupId)) }
        return .group(.leftMemberUser(UserGroup(user: userModel(u), groupInfo: channelInfo(view, now))))
    }

    /// `/_leave #<groupId>` of the channel's owner (SimpleX `APILeaveGroup` →
    /// `leaveGroupSendMsg`, then `deleteGroupLinkIfExists`): a signed `x.grp.leave` to every
    /// relay (each forwards it to its subscribers: `leftMember`), the relays' connections deleted,
    /// then the channel link itself (its address and short link data) — nobody can join any more.
    /// The owner's membership is `left`; it no longer posts or manages relays.
    func leaveChannelAsOwner(groupId: Int64, _ c: ChannelRecord) async throws -> ChatResponse {
        let (u, _) = try await groupAndUser(groupId)
        try requireStarted()
        let effects = try await runOwner(groupId, .leave)
        let now = Timestamp.now()
        try await dbWrite { db in
            _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == c.memberId)
                .updateAll(db, Column("status").set(to: GroupProtocol.GroupMemberStatus.left.rawValue), Column("updated_at").set(to: now))
        }
        await performOwnerEffects(groupId, effects)
        if let address = c.agentAddressId {
            do { try await agent.deleteAddress(address) } catch let e as AgentError where e.code == .unknownConnection {}
            try await dbWrite { db in _ = try ChannelRecord.filter(key: groupId).updateAll(db, Column("agent_address_id").set(to: nil as Int64?)) }
        }
        let view = try await groupView(groupId)
        return .group(.leftMemberUser(UserGroup(user: userModel(u), groupInfo: channelInfo(view, c))))
    }

    // MARK: - Relay: stopping, refused channels

    /// The relay stops serving a channel (removed by the owner, or its operator left): what it
    /// still has to forward (the removal itself) goes out first — its delivery jobs are waited for,
    /// up to 30 s — then every connection of the channel and its per-channel link are deleted.
    func stopServingChannel(_ groupId: Int64) async throws {
        for _ in 0..<300 {
            if closing { break }
            let pending = try await dbRead { db in
                try ChannelDeliveryRecord.filter(ChannelDeliveryRecord.Columns.groupId == groupId).fetchCount(db)
            }
            if pending == 0 && !channelRuntime.delivering.contains(groupId) { break }
            try? await Task.sleep(for: .milliseconds(100))
        }
        try await deleteChannelConnections(groupId)
        if let address = try await channelRecord(groupId)?.agentAddressId {
            do { try await agent.deleteAddress(address) } catch let e as AgentError where e.code == .unknownConnection {}
            try await dbWrite { db in _ = try ChannelRecord.filter(key: groupId).updateAll(db, Column("agent_address_id").set(to: nil as Int64?)) }
        }
    }

    /// The relay's operator left `channelLink`: refused (persistently) until `/_relay allow`.
    func rememberRefusedChannel(_ groupId: Int64, _ channelLink: String) async throws {
        let userId = try await groupView(groupId).group.userId
        let now = Timestamp.now()
        try await dbWrite { db in
            var r = ChannelRefusedRecord(userId: userId, channelLink: channelLink, groupId: groupId, createdAt: now)
            try r.insert(db, onConflict: .replace)
        }
    }

    /// The channel links a relay user refuses (``RelayDirectory``).
    func refusedChannelLinks(userId: Int64) async throws -> Set<String> {
        try await dbRead { db in
            Set(try ChannelRefusedRecord.filter(ChannelRefusedRecord.Columns.userId == userId).fetchAll(db).map(\.channelLink))
        }
    }

    /// `/_relay allow #<groupId>`: the relay serves the channel it left again when its owner
    /// invites it (`relayGroupAllowed`). A channel the relay does not refuse is `channelError`
    /// `invalidState`.
    public func allowRelayGroup(groupId: Int64) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        guard let c = try await channelRecord(groupId), c.role == ChannelRecord.Role.relay.rawValue else {
            throw ChatFailure.command("#\(groupId) is not a channel this chat relay served")
        }
        let userId = u.id
        let link = c.channelLink
        let removed = try await dbWrite { db in
            try ChannelRefusedRecord.filter(ChannelRefusedRecord.Columns.userId == userId && ChannelRefusedRecord.Columns.channelLink == link).deleteAll(db)
        }
        guard removed > 0 else { throw ChatFailure(ChannelError(.invalidState, "this relay does not refuse the channel")) }
        return .channel(.relayGroupAllowed(UserGroup(user: userModel(u), groupInfo: channelInfo(view, c))))
    }

    // MARK: - Subscriber: its relays

    /// A subscriber's relays as `GroupRelay`s with their counters (**Swiftplex** `relayStats`):
    /// the relay's link as its address, `invited` while joining, `accepted`, `active` when
    /// connected, `inactive` when gone.
    func subscriberRelayModels(_ groupId: Int64, view: GroupView) async throws -> [GroupRelay] {
        let state = try await subscriberState(groupId)
        let rows = try await dbRead { db in
            try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && Column("kind") == "relay").order(Column("id")).fetchAll(db)
        }
        return rows.compactMap { m -> GroupRelay? in
            guard let id = MemberId(m.memberId), let r = state.relays[id] else { return nil }
            let status: ChatModel.RelayStatus = switch r.status {
            case .joining: .invited
            case .accepted: .accepted
            case .connected: .active
            case .gone: .inactive
            }
            let profile = JSONValue.object([("displayName", .string(r.profile.displayName)), ("fullName", .string(r.profile.fullName))])
            let stats = RelayStats(received: r.firstCopies, duplicates: max(0, r.delivered - r.firstCopies), missed: state.missing(through: id), rejected: r.rejected)
            return GroupRelay(groupRelayId: m.id ?? 0, groupMemberId: view.record(id)?.id ?? 0,
                              userChatRelay: UserChatRelay(chatRelayId: 0, address: r.link, relayProfile: profile),
                              relayStatus: status, relayLink: r.link, relayStats: stats)
        }
    }

    /// The stored signature checks of channel posts (`channel_item_check`) among these items.
    nonisolated static func channelItemChecks(_ db: Database, itemIds: [Int64]) throws -> [Int64: String] {
        guard !itemIds.isEmpty else { return [:] }
        let marks = Array(repeating: "?", count: itemIds.count).joined(separator: ",")
        var out: [Int64: String] = [:]
        // A cached statement: this runs for every group and channel item reported.
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT item_id, msg_verified FROM channel_item_check WHERE item_id IN (\(marks))"),
                                    arguments: StatementArguments(itemIds)) {
            out[row["item_id"]] = row["msg_verified"]
        }
        return out
    }

    /// `meta.msgVerified` of a stored check (SimpleX `MsgVerified`).
    nonisolated static func msgVerified(_ stored: String?) -> MsgVerified? {
        switch stored {
        case MessageVerification.verified.rawValue?: .signed(sigStatus: .verified)
        case MessageVerification.sigMissing.rawValue?: .sigMissing
        default: nil
        }
    }
}
