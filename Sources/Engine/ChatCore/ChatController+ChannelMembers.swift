import Agent
import ChannelProtocol
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

// Channels on the engine, continued: subscribers (joining a `/c` link through every relay with
// `x.member`, the `ChannelSubscriberState` machine), the relay's side of them (requests on its
// per-channel link, introductions, forwarding), and the owner's posts.

extension ChatController {
    // MARK: - Relay: subscribers

    nonisolated static func saveRelaySubscriber(_ db: Database, groupId: Int64, _ s: RelaySubscriber, now: String) throws {
        var m = try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && ChannelMemberRecord.Columns.memberId == s.memberId.text).fetchOne(db)
            ?? ChannelMemberRecord(groupId: groupId, memberId: s.memberId.text, kind: "subscriber", status: s.status.rawValue)
        m.status = s.status.rawValue
        m.memberKey = s.key.text
        m.connected = s.status == .connected
        try m.save(db)
        let status: GroupProtocol.GroupMemberStatus = switch s.status {
        case .accepted: .accepted
        case .connected: .connected
        case .left: .left
        case .removed: .removed
        }
        try saveChannelGroupMember(db, groupId: groupId, memberId: s.memberId, role: .observer, category: .invitee, status: status, profile: s.profile, now: now)
    }

    /// A subscriber the relay forgot (``ChannelRelayInput/dropSubscriber(_:)``): its rows go.
    nonisolated static func forgetRelaySubscriber(_ db: Database, groupId: Int64, _ id: MemberId) throws {
        _ = try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && ChannelMemberRecord.Columns.memberId == id.text).deleteAll(db)
        _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == id.text).deleteAll(db)
    }

    /// A channel member as a `group_member` row (for the API's `GroupMember`): made on first sight
    /// with its profile and a local name, its status kept current.
    nonisolated static func saveChannelGroupMember(_ db: Database, groupId: Int64, memberId: MemberId, role: GroupProtocol.GroupMemberRole,
                                                   category: GroupProtocol.GroupMemberCategory, status: GroupProtocol.GroupMemberStatus,
                                                   profile: MemberProfile?, now: String) throws {
        var gm = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == memberId.text).fetchOne(db)
            ?? GroupMemberRecord(groupId: groupId, memberId: memberId.text, role: role.name, status: status.rawValue, category: category.rawValue,
                                 blocked: false, createdAt: now, updatedAt: now)
        if gm.id == nil || gm.profile == nil, let profile {
            let checked = (try? PeerInput.profile(profile.json)) ?? Profile(displayName: profile.displayName)
            gm.profile = try Stored.text(checked)
            if gm.localDisplayName == nil, let userId = try GroupRecord.fetchOne(db, key: groupId)?.userId {
                gm.localDisplayName = try LocalNames.reserve(db, userId: userId, displayName: checked.displayName)
            }
        }
        gm.status = status.rawValue
        gm.updatedAt = now
        try gm.save(db)
    }

    /// A contact request on a relay's per-channel link: a subscriber's `x.member`. Returns false
    /// when the address is no channel's.
    func channelLinkRequest(addressId: Int64, request: Int64, info: [UInt8]) async throws -> Bool {
        guard let c = try await dbRead({ db in try ChannelRecord.filter(ChannelRecord.Columns.agentAddressId == addressId).fetchOne(db) }) else { return false }
        let groupId = c.groupId
        guard c.role == ChannelRecord.Role.relay.rawValue else {
            try? await agent.rejectRequest(request) // an owner's /c link takes no requests: subscribers go to relays
            return true
        }
        let env: GroupEnvelope
        do { env = try GroupMessage.decodeEnvelope(info, asConnInfo: true) } catch {
            logger.info("a join request to a channel was refused", metadata: ["group": "\(groupId)", "reason": "\(error.message)"])
            try? await agent.rejectRequest(request)
            return true
        }
        if await relayPolicyRefusal(joinTo: groupId) != nil { // the operator's policy (+RelayPolicy)
            try? await agent.rejectRequest(request)
            return true
        }
        let effects: [ChannelRelayEffect]
        do { effects = try await runRelay(groupId, .joinRequest(info: env), request: request) } catch {
            logger.info("a join request to a channel was refused", metadata: ["group": "\(groupId)", "reason": "\(Self.chatError(error))"])
            try? await agent.rejectRequest(request)
            return true
        }
        inBackground {
            // Written to `channel_action` with the input (+ChannelActions): made again at start if cut short.
            for case let .acceptSubscriber(id, answer) in effects {
                let step = ChannelStep.relayAcceptSubscriber(member: id, request: request, info: answer)
                if await self.channelStepHeld(step) { continue }
                do { try await self.acceptChannelSubscriber(groupId, id, request: request, info: answer) } catch {
                    await self.reportChannelRefusal(groupId, error)
                }
                await self.channelStepDone(groupId, step)
            }
            await self.performRelayEffects(groupId, effects.filter { if case .acceptSubscriber = $0 { false } else { true } })
        }
        return true
    }

    /// Accepts a subscriber's request on the relay's per-channel link with `x.grp.link.inv`.
    func acceptChannelSubscriber(_ groupId: Int64, _ id: MemberId, request: Int64, info: GroupEnvelope) async throws {
        let body = try GroupMessage.encode(info, asConnInfo: true)
        try await trackingJoin { () async throws -> ((), Int64) in
            let conn = try await agentCall { try await agent.acceptRequest(request, info: body) }
            try await setChannelConnection(conn, groupId: groupId, member: id)
            return ((), conn)
        }
    }

    /// Starts sending a channel's delivery jobs (in a task `close()` waits for), unless that runs already.
    func kickChannelDeliveries(_ groupId: Int64) {
        if channelRuntime.delivering.contains(groupId) {
            channelRuntime.redeliver.insert(groupId)
            return
        }
        channelRuntime.delivering.insert(groupId)
        inBackground { await self.drainChannelDeliveries(groupId) }
    }

    /// Delivery jobs left by a shutdown or a crash (`run()` starts it).
    func resumeChannelDeliveries() async {
        guard let ids = try? await dbRead({ db in try Int64.fetchAll(db, sql: "SELECT DISTINCT group_id FROM channel_delivery") }) else { return }
        for id in ids { kickChannelDeliveries(id) }
    }

    /// Subscribers a delivery job sends to in one agent transaction; the job's cursor is saved
    /// after each such batch.
    static let channelDeliveryBatch = 50

    /// Sends a channel's delivery jobs in order: each job's batch to its subscribers, 50 at a time
    /// in one agent transaction (``Agent/sendMany(_:to:)``, each send with its idempotency key),
    /// the cursor saved after each 50, then the job is removed. A subscriber whose connection is
    /// gone is skipped; a network or store fault is retried with backoff, the job kept.
    func drainChannelDeliveries(_ groupId: Int64) async {
        defer { channelRuntime.delivering.remove(groupId) }
        var attempts = 0
        while !closing {
            channelRuntime.redeliver.remove(groupId)
            // The next job and the subscribers' connections, in one read.
            guard let (job, conns) = try? await dbRead({ db -> (ChannelDeliveryRecord, [String: Int64])? in
                guard let job = try ChannelDeliveryRecord.filter(ChannelDeliveryRecord.Columns.groupId == groupId).order(ChannelDeliveryRecord.Columns.id).fetchOne(db) else {
                    return nil
                }
                var conns: [String: Int64] = [:]
                let rows = try Row.fetchAll(db, sql: "SELECT member_id, agent_conn_id FROM channel_member WHERE group_id = ? AND agent_conn_id IS NOT NULL",
                                            arguments: [groupId])
                for row in rows { conns[row["member_id"]] = row["agent_conn_id"] }
                return (job, conns)
            }) else {
                if channelRuntime.redeliver.contains(groupId) { continue }
                return
            }
            let jobId = job.id!
            var remaining = (Stored.json(job.recipients).flatMap { j -> [String]? in
                guard case let .array(a) = j else { return nil }
                return a.compactMap(\.stringValue)
            } ?? []).compactMap(MemberId.init)
            let body = [UInt8](job.body)
            do {
                while !remaining.isEmpty, !closing {
                    let batch = remaining.prefix(Self.channelDeliveryBatch)
                    let sends = batch.compactMap { id in conns[id.text].map { (connection: $0, idempotencyKey: "chdl:\(jobId):\(id.text)") } }
                    let outcomes = try await agent.sendMany(body, to: sends)
                    let skipped = outcomes.filter { if case .refused = $0 { true } else { false } }.count
                    if skipped > 0 || sends.count < batch.count {
                        logger.info("a channel delivery skipped subscribers whose connection is not up",
                                    metadata: ["group": "\(groupId)", "skipped": "\(skipped + batch.count - sends.count)"])
                    }
                    remaining.removeFirst(batch.count)
                    if remaining.isEmpty { break }
                    let left = JSONValue.array(remaining.map { .string($0.text) }).description
                    try await dbWrite { db in _ = try ChannelDeliveryRecord.filter(key: jobId).updateAll(db, Column("recipients").set(to: left)) }
                }
                if closing { return }
                try await dbWrite { db in _ = try ChannelDeliveryRecord.deleteOne(db, key: jobId) }
                attempts = 0
            } catch {
                attempts += 1
                logger.info("a channel delivery failed; retrying", metadata: ["group": "\(groupId)", "attempt": "\(attempts)", "error": "\(error)"])
                let left = JSONValue.array(remaining.map { .string($0.text) }).description
                _ = try? await dbWrite { db in _ = try ChannelDeliveryRecord.filter(key: jobId).updateAll(db, Column("recipients").set(to: left)) }
                try? await Task.sleep(for: .milliseconds(200 * (1 << min(attempts, 6))))
            }
        }
    }

    // MARK: - Owner: what relays send, posts

    /// A relay's item at the owner: `x.grp.mem.new` about a subscriber (its profile kept), `x.grp.leave`.
    /// Returns the error when the input was cut short by something that passes (a database
    /// fault, the engine stopping) rather than refused: its message must stay with the agent.
    @discardableResult
    func receivedByOwner(_ groupId: Int64, from relay: MemberId, _ item: BatchItem) async -> (any Error)? {
        var announced: MemberInfo?
        if case let .element(e) = item, let env = try? e.envelope(), case let .memberNew(info, _)? = try? env.groupMessage() { announced = info }
        do {
            let effects = try await runOwner(groupId, .received(from: relay, item))
            if let info = announced {
                let now = Timestamp.now()
                let profile = info.profile
                try await dbWrite { db in
                    var m = try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && ChannelMemberRecord.Columns.memberId == info.memberId.text).fetchOne(db)
                        ?? ChannelMemberRecord(groupId: groupId, memberId: info.memberId.text, kind: "subscriber", status: "announced")
                    m.memberKey = info.memberKey
                    try m.save(db)
                    try Self.saveChannelGroupMember(db, groupId: groupId, memberId: info.memberId, role: .observer, category: .pre, status: .announced,
                                                    profile: profile, now: now)
                }
            }
            await performOwnerEffects(groupId, effects)
        } catch {
            if let passing = passingChannelFailure(error) { return passing }
            reportChannelRefusal(groupId, error)
        }
        return nil
    }

    /// `/_send #<groupId> json …` in a channel the user owns: each message is posted as the channel
    /// (`asGroup`), signed, to every active relay; stored as the user's item. Nil when the group is
    /// not a channel the user owns.
    func sendChannelPosts(groupId: Int64, messages: [JSONValue]) async throws -> ChatResponse? {
        guard let c = try await channelRecord(groupId) else { return nil }
        guard c.role == ChannelRecord.Role.owner.rawValue else { throw ChatFailure.command("only a channel's owner posts in it") }
        let (u, view) = try await groupAndUser(groupId)
        var contents: [JSONValue] = []
        for m in messages {
            guard let json = m["msgContent"], (try? PeerInput.content(json)) != nil else {
                throw ChatFailure.command("each message needs a msgContent object with a type")
            }
            contents.append(json)
        }
        try requireStarted()
        var stored: [GroupItemRecord] = []
        for json in contents {
            let msgId = ChatMessage.newMessageId()
            var first: String? = msgId
            let effects: [ChannelOwnerEffect]
            do {
                await lockChannel(groupId)
                defer { unlockChannel(groupId) }
                var state = try await ownerState(groupId)
                do {
                    effects = try state.handle(.post(content: json, asGroup: true)) {
                        if let id = first { first = nil; return id }
                        return ChatMessage.newMessageId()
                    }
                } catch { throw ChatFailure(error) }
                channelRuntime.owners[groupId] = state
            }
            let now = Timestamp.now()
            let text = json.description
            let userId = u.id
            let item = try await dbWrite { db -> GroupItemRecord in
                var item = GroupItemRecord(userId: userId, groupId: groupId, memberRowId: nil, content: text, sharedMsgId: msgId, status: .sndSent,
                                           blocked: false, createdAt: now)
                try item.insert(db)
                _ = try GroupRecord.filter(key: groupId).updateAll(db, Column("chat_ts").set(to: now))
                return item
            }
            stored.append(item)
            await performOwnerEffects(groupId, effects)
        }
        let info = channelInfo(view, c)
        let items = try await groupItemModels(stored, view: view).map { AChatItem(chatInfo: .group(groupInfo: info), chatItem: $0) }
        return .newChatItems(user: userModel(u), chatItems: items)
    }

    // MARK: - Subscriber

    /// `/_leave #<groupId>` of a subscriber: a signed `x.grp.leave` to every connected relay (each
    /// forwards it to the owner: `leftMember` there), then every connection of the channel is
    /// deleted (`leftMemberUser`). Nil for a group that is no channel the user subscribes to.
    func leaveChannel(groupId: Int64) async throws -> ChatResponse? {
        guard let c = try await channelRecord(groupId) else { return nil }
        switch ChannelRecord.Role(rawValue: c.role) {
        case .relay?: return try await leaveChannelAsRelay(groupId: groupId, c) // (+ChannelManagement)
        case .owner?: return try await leaveChannelAsOwner(groupId: groupId, c)
        default: break
        }
        let (u, _) = try await groupAndUser(groupId)
        try requireStarted()
        let effects = try await runSubscriber(groupId, .leave)
        let now = Timestamp.now()
        try await dbWrite { db in
            _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == c.memberId)
                .updateAll(db, Column("status").set(to: GroupProtocol.GroupMemberStatus.left.rawValue), Column("updated_at").set(to: now))
        }
        await performSubscriberEffects(groupId, effects)
        let view = try await groupView(groupId)
        return .group(.leftMemberUser(UserGroup(user: userModel(u), groupInfo: channelInfo(view, c))))
    }

    /// Deletes every agent connection of a channel (its queues go from their relays; what their
    /// outboxes hold is delivered first).
    func deleteChannelConnections(_ groupId: Int64) async throws {
        let conns = try await dbRead { db in
            try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && ChannelMemberRecord.Columns.agentConnId != nil).fetchAll(db)
                .compactMap(\.agentConnId)
        }
        for conn in conns {
            do { try await agent.deleteConnection(conn) } catch let e as AgentError where e.code == .unknownConnection {}
            try await dbWrite { db in
                _ = try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.agentConnId == conn)
                    .updateAll(db, ChannelMemberRecord.Columns.agentConnId.set(to: nil as Int64?), Column("connected").set(to: false))
            }
            channelRuntime.connections?[conn] = nil
        }
    }

    /// A channel link's data; a link that names none (not found, or not a channel's) is `invalidConnReq`.
    private func channelLinkWithData(_ short: ShortLink) async throws -> (ResolvedShortLink, ShortLinkData, Ed25519.PublicKey) {
        let resolved: ResolvedShortLink
        do { resolved = try await agent.resolveWithData(short) } catch let e as AgentError where e.code == .badLink || e.code == .linkNotFound {
            throw ChatFailure.chat(.invalidConnReq)
        } catch let e as AgentError {
            throw Self.failure(e)
        }
        guard let data = resolved.data, let root = resolved.rootKey else { throw ChatFailure.chat(.invalidConnReq) }
        return (resolved, data, root)
    }

    /// A `/c` link given to `/_connect plan`: `groupLink` `ok` with the link's relays and the
    /// channel's profile, `ownLink` for the owner's own channel, `known` once joined.
    func channelPlan(user u: UserRow, short: ShortLink) async throws -> ChatResponse {
        let link = short.description
        let mine = try await dbRead { db in
            try ChannelRecord.filter(Column("channel_link") == link).fetchAll(db)
        }
        for c in mine {
            guard let view = try? await groupView(c.groupId), view.group.userId == u.id else { continue }
            let info = channelInfo(view, c)
            let plan: GroupLinkPlan = c.role == ChannelRecord.Role.owner.rawValue ? .ownLink(groupInfo: info) : .known(groupInfo: info)
            return .connectionPlan(user: userModel(u), connLink: CreatedConnLink(connFullLink: c.fullLink ?? link, connShortLink: link), connectionPlan: .groupLink(plan))
        }
        let (resolved, data, root) = try await channelLinkWithData(short)
        let group: GroupShortLinkData
        do { group = try GroupShortLinkData(bytes: data.userData) } catch { throw ChatFailure(error) }
        let info = GroupShortLinkInfo(direct: data.direct, groupRelays: data.relays.map(\.description), publicGroupId: Base64URL.encode(Digest.sha256(root.bytes)))
        return .connectionPlan(user: userModel(u), connLink: CreatedConnLink(connFullLink: resolved.link.description, connShortLink: link),
                               connectionPlan: .groupLink(.okChannel(groupSLinkInfo: info, groupSLinkData: Stored.json(String(decoding: group.bytes, as: UTF8.self)))))
    }

    /// `/connect` (or `/_connect <userId>`) with a `/c` link: the channel (as a group with its
    /// profile from the link data), then `x.member` to every relay of the link
    /// (`startedConnectionToGroup`). Each relay accepts with `x.grp.link.inv`; `userJoinedGroup`
    /// follows per relay.
    /// `incognito` joins with a random profile made for this channel only (SimpleX
    /// `CFGetRelayDataJoin`: the same incognito profile to every relay): the membership keeps it,
    /// so relays and owners see only it.
    func joinChannel(user u: UserRow, short: ShortLink, incognito: Bool) async throws -> ChatResponse {
        let link = short.description
        let userId = u.id
        let existing = try await dbRead { db in try ChannelRecord.filter(Column("channel_link") == link).fetchAll(db) }
        for c in existing {
            if let view = try? await groupView(c.groupId), view.group.userId == userId {
                throw ChatFailure.chat(.groupDuplicateMember(contactName: view.group.localDisplayName))
            }
        }
        let (resolved, data) = try await readChannelLinkData(short)
        let owners = data.owners
        let key = Ed25519.PrivateKey()
        let memberId = Self.newMemberId()
        let ownProfile = incognito ? Self.randomProfile() : u.profile
        let own = try Self.memberProfile(ownProfile)
        let (state, effects): (ChannelSubscriberState, [ChannelSubscriberEffect])
        do { (state, effects) = try ChannelSubscriberState.joining(data, channelLink: link, memberId: memberId, ownProfile: own, key: key) } catch {
            throw ChatFailure(error)
        }
        let now = Timestamp.now()
        let ownText = try Stored.text(ownProfile)
        let profileText = data.profile.json.description
        let record = ChannelRecord(groupId: 0, role: ChannelRecord.Role.subscriber.rawValue, channelLink: link, publicGroupId: Base64URL.encode(data.publicGroupId),
                                   memberId: memberId.text, memberKey: Base64URL.encode(key.secretBytes), fullLink: resolved.link.description,
                                   owners: Self.ownerKeysJSON(owners).description, createdAt: now, publicMemberCount: Int64(data.publicMemberCount))
        let groupId = try await dbWrite { db -> Int64 in
            let local = try LocalNames.reserve(db, userId: userId, displayName: data.profile.displayName)
            var g = GroupRecord(userId: userId, localDisplayName: local, profile: profileText, createdAt: now, updatedAt: now, chatTs: now, viaLink: link)
            try g.insert(db)
            let gid = g.id!
            if incognito { try db.execute(sql: "UPDATE chat_group SET incognito = 1 WHERE id = ?", arguments: [gid]) }
            var me = GroupMemberRecord(groupId: gid, memberId: memberId.text, role: GroupProtocol.GroupMemberRole.observer.name,
                                       status: GroupProtocol.GroupMemberStatus.accepted.rawValue, category: GroupProtocol.GroupMemberCategory.user.rawValue,
                                       profile: ownText, blocked: false, createdAt: now, updatedAt: now)
            me.localDisplayName = try UserRecord.fetchOne(db, key: userId)?.localDisplayName
            try me.insert(db)
            var c = record
            c.groupId = gid
            try c.insert(db)
            try Self.queueChannelSteps(db, groupId: gid, effects.compactMap(ChannelStep.init)) // (+ChannelActions)
            return gid
        }
        channelRuntime.subscribers[groupId] = state
        // Each relay's link data, then `x.member` to it; the first relay joined before answering.
        await performSubscriberEffects(groupId, effects)
        let view = try await groupView(groupId)
        guard let c = try await channelRecord(groupId) else { throw ChatFailure.store(.groupNotFound(groupId: groupId)) }
        return .channel(.startedConnectionToGroup(UserGroup(user: userModel(u), groupInfo: channelInfo(view, c))))
    }

    /// A channel link's data as a subscriber reads it (the agent checked its signatures).
    func readChannelLinkData(_ short: ShortLink) async throws -> (ResolvedShortLink, ChannelLinkData) {
        let (resolved, raw, root) = try await channelLinkWithData(short)
        let group: GroupShortLinkData
        do { group = try GroupShortLinkData(bytes: raw.userData) } catch { throw ChatFailure(error) }
        let owners = raw.owners.compactMap { o -> OwnerKey? in
            MemberId(Base64URL.encode(o.ownerId)).map { OwnerKey(memberId: $0, key: MemberKey(o.key), profile: MemberProfile(displayName: "owner")) }
        }
        return (resolved, ChannelLinkData(publicGroupId: Digest.sha256(root.bytes), profile: group.groupProfile, owners: owners,
                                          relays: raw.relays.map(\.description), publicMemberCount: group.publicMemberCount ?? 0))
    }

    /// `/_get group link data #<groupId>` (SimpleX `APIGetUpdatedGroupLinkData`, a PLAN's command
    /// string): the channel link's data read again. A subscriber syncs its relays with it (joins
    /// the relays it lists that it does not know — relays the owner added while the
    /// subscriber missed their `x.grp.relay.new` — and drops those it no longer lists) and takes
    /// its profile, owners and `publicMemberCount`; the owner and a relay read the count.
    /// Answer: `groupInfo {user, groupInfo}` with `groupSummary.publicMemberCount`.
    public func refreshChannelLinkData(groupId: Int64) async throws -> ChatResponse {
        let (u, _) = try await groupAndUser(groupId)
        guard let c = try await channelRecord(groupId) else { throw ChatFailure.command("group link data is read for channels only") }
        try requireStarted()
        let short: ShortLink
        do { short = try ShortLink(parsing: c.channelLink) } catch { throw ChatFailure(ChannelError(.invalidLink, "the channel's link cannot be read: \(error)")) }
        let (_, data) = try await readChannelLinkData(short)
        if c.role == ChannelRecord.Role.subscriber.rawValue {
            let effects = try await runSubscriber(groupId, .linkDataRefreshed(data))
            await performSubscriberEffects(groupId, effects)
        }
        let count = Int64(data.publicMemberCount)
        try await dbWrite { db in try db.execute(sql: "UPDATE channel SET public_member_count = ? WHERE group_id = ?", arguments: [count, groupId]) }
        guard let after = try await channelRecord(groupId) else { throw ChatFailure.store(.groupNotFound(groupId: groupId)) }
        return .channel(.groupInfo(UserGroup(user: userModel(u), groupInfo: channelInfo(try await groupView(groupId), after))))
    }

    /// At start (`/_start`): each channel the engine's users subscribe to reads its link data
    /// again and syncs its relays with it (`refreshChannelLinkData`) — a bot has no moment of
    /// "opening the channel", when SimpleX's apps do it. A failure (the link unreachable, the
    /// channel gone) is logged; the next start tries again. A channel with steps left undone is
    /// left to them.
    func resyncSubscribedChannels() async {
        guard let ids = try? await dbRead({ db -> [Int64] in
            try Row.fetchAll(db, sql: "SELECT group_id FROM channel WHERE role = ?", arguments: [ChannelRecord.Role.subscriber.rawValue]).map { $0["group_id"] }
        }) else { return }
        for groupId in ids {
            guard let s = try? await subscriberState(groupId), !s.left, !s.deleted else { continue }
            // A channel with steps still to make (a join cut short by the stop) carries on with
            // them instead: read now, its link data would name relays whose own reads are still
            // under way, and each would be read (and joined) twice. The next start syncs it.
            let midway = (try? await dbRead { db in try !ChannelActionRecord.filter(ChannelActionRecord.Columns.groupId == groupId).isEmpty(db) }) ?? true
            if midway { continue }
            do { _ = try await refreshChannelLinkData(groupId: groupId) } catch {
                if closing { return }
                logger.info("a channel's link data was not read again", metadata: ["group": "\(groupId)", "error": "\(error)"])
            }
        }
    }

    /// The subscriber's machine, restored from the store on first use.
    func subscriberState(_ groupId: Int64) async throws -> ChannelSubscriberState {
        if let s = channelRuntime.subscribers[groupId] { return s }
        guard let c = try await channelRecord(groupId), c.role == ChannelRecord.Role.subscriber.rawValue else {
            throw ChatFailure.store(.groupNotFound(groupId: groupId))
        }
        let view = try await groupView(groupId)
        let u = try await user(view.group.userId)
        guard let memberId = MemberId(c.memberId), let pg = c.publicGroupId.flatMap(Base64URL.decode),
              let profile = Stored.json(view.group.profile).flatMap({ try? GroupProtocol.GroupProfile(json: $0) }) else {
            throw ChatFailure.chat(.groupInternal(message: "channel \(groupId) is stored incompletely"))
        }
        let members = try await dbRead { db in
            try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && Column("kind") == "relay").fetchAll(db)
        }
        let relays = members.compactMap { m -> SubscriberRelay? in
            guard let id = MemberId(m.memberId), let st = SubscriberRelay.Status(rawValue: m.status), let link = m.relayLink else { return nil }
            let p = view.record(id).flatMap { Stored.json($0.profile) }.flatMap { try? MemberProfile(json: $0) } ?? MemberProfile(displayName: "relay")
            var r = SubscriberRelay(memberId: id, link: link, profile: p, status: st)
            r.delivered = m.delivered
            r.firstCopies = m.firstCopies
            r.rejected = m.rejected
            r.baseline = m.baseline
            return r
        }
        // The posts taken lately (`group_msg`): a late copy after the restart is a duplicate for
        // the counters too. A post as the channel is kept as `#channel`: under each owner here.
        let owners = Stored.json(c.owners).map(Self.ownerKeys) ?? []
        let recent = try await dbRead { db -> [(String, String)] in
            try Row.fetchAll(db, sql: "SELECT author_member_id, shared_msg_id FROM group_msg WHERE group_id = ? ORDER BY \(db.dialect.insertionOrder) DESC LIMIT 2000",
                             arguments: [groupId]).map { ($0[0], $0[1]) }
        }
        // Every owner control event ever applied: a relay must not replay one, however old.
        let control = try await dbRead { db -> [ForwardDedup.Key] in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT author_member_id, shared_msg_id FROM channel_control_msg WHERE group_id = ?"), arguments: [groupId])
                .compactMap { row in MemberId(row[0] as String).map { ForwardDedup.Key(author: $0, msgId: row[1]) } }
        }
        var dedup = ForwardDedup()
        for (author, msgId) in recent.reversed() {
            for a in author == "#channel" ? owners.map(\.memberId) : MemberId(author).map({ [$0] }) ?? [] {
                _ = dedup.record(author: a, msgId: msgId, forwardedBy: nil)
            }
        }
        let state = ChannelSubscriberState(publicGroupId: pg, channelLink: c.channelLink, memberId: memberId,
                                           ownProfile: try await channelOwnProfile(groupId, view, memberId, u),
                                           profile: profile, owners: owners, key: try Self.privateKey(c.memberKey),
                                           requireSignedContent: true, relays: relays, uniqueMessages: c.uniqueMessages, dedup: dedup,
                                           appliedControl: control)
        if let s = channelRuntime.subscribers[groupId] { return s }
        channelRuntime.subscribers[groupId] = state
        return state
    }

    @discardableResult
    func runSubscriber(_ groupId: Int64, _ input: ChannelSubscriberInput) async throws -> [ChannelSubscriberEffect] {
        await lockChannel(groupId)
        defer { unlockChannel(groupId) }
        var state = try await subscriberState(groupId)
        let relaysBefore = state.relays, ownersBefore = state.owners, connectedBefore = !state.connectedRelays.isEmpty
        let uniqueBefore = state.uniqueMessages
        let effects: [ChannelSubscriberEffect]
        do { effects = try state.handle(input, newMessageId: ChatMessage.newMessageId) } catch {
            channelRuntime.subscribers[groupId] = state // a refused forward counts against its relay
            throw ChatFailure(error)
        }
        let now = Timestamp.now()
        let snapshot = state
        // A forward (every copy of every post) moves its relay's counters: one UPDATE of them (they
        // must survive a restart: `relayStats`); the relay's member rows and the channel's owners
        // are written only when they change, and the channel's count of unique messages only then.
        let ownersChanged = snapshot.owners != ownersBefore
        let uniqueChanged = snapshot.uniqueMessages != uniqueBefore
        let nowConnected = !connectedBefore && !snapshot.connectedRelays.isEmpty
        let countersOnly: @Sendable (SubscriberRelay) -> Bool = { r in
            guard let old = relaysBefore[r.memberId] else { return false }
            return old.status == r.status && old.link == r.link && old.profile == r.profile
        }
        let limits = self.limits
        let content = try await dbWrite { db -> ChannelContentOutcome in
            try Self.queueChannelSteps(db, groupId: groupId, effects.compactMap(ChannelStep.init)) // (+ChannelActions)
            var content = ChannelContentOutcome()
            var userId: Int64?
            for e in effects {
                switch e {
                case let .saveRelay(r) where countersOnly(r):
                    try db.cachedStatement(sql: """
                        UPDATE channel_member SET delivered = ?, first_copies = ?, rejected = ?, baseline = ? WHERE group_id = ? AND member_id = ?
                        """).execute(arguments: [r.delivered, r.firstCopies, r.rejected, r.baseline, groupId, r.memberId.text])
                case let .saveRelay(r):
                    var m = try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && ChannelMemberRecord.Columns.memberId == r.memberId.text).fetchOne(db)
                        ?? ChannelMemberRecord(groupId: groupId, memberId: r.memberId.text, kind: "relay", status: r.status.rawValue)
                    m.status = r.status.rawValue
                    m.relayLink = r.link
                    m.connected = r.status == .connected
                    m.delivered = r.delivered
                    m.firstCopies = r.firstCopies
                    m.rejected = r.rejected
                    m.baseline = r.baseline
                    try m.save(db)
                    let status: GroupProtocol.GroupMemberStatus = switch r.status {
                    case .joining: .accepted
                    case .accepted: .accepted
                    case .connected: .connected
                    case .gone: .removed
                    }
                    try Self.saveChannelGroupMember(db, groupId: groupId, memberId: r.memberId, role: .relay, category: .host, status: status, profile: r.profile, now: now)
                case let .saveProfile(p):
                    try Self.saveChannelProfile(db, groupId: groupId, p, now: now)
                case let .recordControl(key):
                    try db.cachedStatement(sql: "INSERT INTO channel_control_msg (group_id, author_member_id, shared_msg_id) VALUES (?, ?, ?)")
                        .execute(arguments: [groupId, key.author.text, key.msgId])
                case let .applyContent(env, sender, relay, verification):
                    try Self.applyChannelContent(db, env, sender: sender, relay: relay, verification: verification, groupId: groupId, now: now,
                                                 limits: limits, userId: &userId, into: &content) // (+ChannelItems)
                default: break
                }
            }
            if ownersChanged || uniqueChanged, var c = try ChannelRecord.fetchOne(db, key: groupId) {
                c.owners = Self.ownerKeysJSON(Array(snapshot.owners.values)).description
                c.uniqueMessages = snapshot.uniqueMessages
                try c.update(db)
            }
            if nowConnected {
                _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == snapshot.memberId.text)
                    .updateAll(db, Column("status").set(to: GroupProtocol.GroupMemberStatus.connected.rawValue))
            }
            return content
        }
        channelRuntime.subscribers[groupId] = state
        try await reportChannelContent(groupId, content) // (+ChannelItems)
        return effects
    }

    /// Returns the error when the input was cut short by something that passes (see
    /// ``passingChannelFailure(_:)``); nil when it was applied or refused for good.
    @discardableResult
    func feedSubscriber(_ groupId: Int64, _ input: ChannelSubscriberInput) async -> (any Error)? {
        do {
            let effects = try await runSubscriber(groupId, input)
            await performSubscriberEffects(groupId, effects)
        } catch {
            if let passing = passingChannelFailure(error) { return passing }
            reportChannelRefusal(groupId, error)
        }
        return nil
    }

    func performSubscriberEffects(_ groupId: Int64, _ effects: [ChannelSubscriberEffect]) async {
        for effect in effects {
            let step = ChannelStep(effect)
            if channelStepHeld(step) { continue }
            var retrying = false
            do {
                switch effect {
                case .saveRelay, .saveProfile, .recordControl, .applyContent: break
                case let .fetchRelayLinkData(link):
                    let (entity, profile, _) = try await relayLinkData(link)
                    await feedSubscriber(groupId, .relayLinkData(link: link, linkEntityId: entity, relayProfile: profile))
                case let .joinRelay(id, link, info):
                    let (_, _, full) = try await relayLinkData(link)
                    let body = try GroupMessage.encode(info, asConnInfo: true)
                    try await trackingJoin { () async throws -> ((), Int64) in
                        let conn = try await agentCall { try await agent.joinAddress(full, info: body, autoAllow: false) }
                        try await setChannelConnection(conn, groupId: groupId, member: id)
                        return ((), conn)
                    }
                case let .allowConnection(id, info):
                    if let conn = try await channelMemberConn(groupId, id) {
                        let body = try GroupMessage.encode(info, asConnInfo: true)
                        try await agentCall { try await agent.allow(conn, info: body) }
                    }
                case let .send(item, to):
                    try await sendChannelItem(groupId, item, to: to)
                case let .deleteConnection(id):
                    try await deleteChannelConnection(groupId, member: id)
                case .deleteAllConnections:
                    try await deleteChannelConnections(groupId)
                case let .emit(e):
                    try await reportSubscriberEvent(groupId, e)
                }
            } catch {
                // A join step that failed for a while (a relay down, its queue full): kept and
                // tried again with backoff (+ChannelActions).
                retrying = retryChannelStepLater(groupId, step, error)
                if !retrying { reportChannelRefusal(groupId, error) }
            }
            if !retrying { await channelStepDone(groupId, step) } // (+ChannelActions)
        }
    }

    /// A relay's per-channel link: its member id and profile from the link data, and the full
    /// link to join.
    private func relayLinkData(_ link: String) async throws -> (MemberId, MemberProfile, ContactAddressLink) {
        let short: ShortLink
        do { short = try ShortLink(parsing: link) } catch { throw ChatFailure(ChannelError(.invalidLink, "the relay's link cannot be read: \(error)")) }
        guard short.kind == .group else { throw ChatFailure(ChannelError(.invalidLink, "a relay's channel link is a group link (/g)")) }
        let resolved = try await agentCall { try await agent.resolveWithData(short) }
        guard case let .contact(full) = resolved.link, let data = resolved.data,
              let json = try? JSONValue.parse(utf8: data.userData, maxDepth: 8, maxBytes: 8192),
              let id = json["relayMemberId"]?.stringValue.flatMap(MemberId.init) else {
            throw ChatFailure(ChannelError(.linkDataMismatch, "the relay's link data names no member"))
        }
        let profile = json["relayProfile"].flatMap { try? MemberProfile(json: $0) } ?? MemberProfile(displayName: "relay")
        return (id, profile, full)
    }

    private func reportSubscriberEvent(_ groupId: Int64, _ e: ChannelEvent) async throws {
        let view = try await groupView(groupId)
        guard let c = try await channelRecord(groupId) else { return }
        let u = try await user(view.group.userId)
        let info = channelInfo(view, c)
        switch e {
        case let .groupLinkConnecting(relay):
            guard let h = view.member(relay) else { return }
            sink.yield(.group(.groupLinkConnecting(UserJoinedGroup(user: userModel(u), groupInfo: info, hostMember: h))))
        case let .userJoinedGroup(host):
            guard let h = view.member(host) else { return }
            sink.yield(.group(.userJoinedGroup(UserJoinedGroup(user: userModel(u), groupInfo: info, hostMember: h))))
        case let .messageRejected(relay, reason):
            logger.info("a channel message was refused", metadata: ["group": "\(groupId)", "relay": "\(relay)", "reason": "\(reason.text)"])
        case let .leftMember(id):
            // An owner left the channel (a member row for it if the subscriber had none).
            let profile = try await subscriberState(groupId).owners[id]?.profile
            let now = Timestamp.now()
            try await dbWrite { db in
                try Self.saveChannelGroupMember(db, groupId: groupId, memberId: id, role: .owner, category: .pre, status: .left, profile: profile, now: now)
            }
            guard let m = try await groupView(groupId).member(id) else { return }
            sink.yield(.group(.leftMember(UserGroupMember(user: userModel(u), groupInfo: info, member: m))))
        case let .groupUpdated(from, _):
            try await reportChannelProfileUpdate(groupId, from: from, by: nil)
        case let .groupDeleted(by):
            // The owner deleted the channel: the subscriber's membership is `deleted` (SimpleX
            // `GSMemGroupDeleted`); `/_delete #g` then removes it locally.
            let profile = try await subscriberState(groupId).owners[by]?.profile
            let now = Timestamp.now()
            try await dbWrite { db in
                if try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == by.text).fetchOne(db) == nil {
                    try Self.saveChannelGroupMember(db, groupId: groupId, memberId: by, role: .owner, category: .pre, status: .connected, profile: profile, now: now)
                }
                _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == c.memberId)
                    .updateAll(db, Column("status").set(to: GroupProtocol.GroupMemberStatus.deleted.rawValue), Column("updated_at").set(to: now))
            }
            let after = try await groupView(groupId)
            guard let m = after.member(by) else { return }
            sink.yield(.group(.groupDeleted(UserGroupMember(user: userModel(u), groupInfo: channelInfo(after, c), member: m))))
        default:
            logger.debug("a channel event is not reported yet", metadata: ["group": "\(groupId)", "event": "\(e)"])
        }
    }
}
