import Agent
import ChannelProtocol
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

// Channels on the engine (docs/channels.md §9): the owner's `ChannelOwnerState` and the relay's
// `ChannelRelayState` machines, fed one input at a time per channel. An input's state changes are
// written in one transaction (`channel`, `channel_member`), then its effects are performed in
// order in a task of their own (agent calls; an answer is the machine's next input) and its
// events reported.
//
// The agent calls that move a channel on are written to `channel_action` with the input that
// asked for them and made again at start when a crash or a shutdown cut them short
// (+ChannelActions).

/// The channel machines in memory, the channel connections, and per-channel ordering.
struct ChannelRuntime {
    var owners: [Int64: ChannelOwnerState] = [:]
    var relays: [Int64: ChannelRelayState] = [:]
    var subscribers: [Int64: ChannelSubscriberState] = [:]
    /// Agent connection → channel and member; loaded on first use.
    var connections: [Int64: ChannelConnection]?
    /// Each channel's role (`channel.role`, fixed when the row is made; group ids are never
    /// reused), read once instead of for every message (``channelRole(_:)``); dropped with the group.
    var roles: [Int64: String] = [:]
    var busy: Set<Int64> = []
    var waiters: [Int64: [CheckedContinuation<Void, Never>]] = [:]
    /// Channels whose delivery jobs are being sent, and those with jobs added meanwhile.
    var delivering: Set<Int64> = []
    var redeliver: Set<Int64> = []
    /// Tests: channel steps are left in `channel_action` (+ChannelActions).
    var holdSteps = false
    var unheldSteps: Set<String> = []
    /// Join steps being retried after a failure that may pass, with their attempts so far (+ChannelActions).
    var retries: [String: Int] = [:]
    /// `/relay test`s running, the tests waiting for their relay's answer (by test connection),
    /// and answers that came before their test waited (+RelayTest).
    var relayTestsInFlight = 0
    var relayTestWaiters: [Int64: CheckedContinuation<GroupEnvelope?, Never>] = [:]
    var relayTestAnswers: [Int64: GroupEnvelope] = [:]
    /// Channels whose link data an owner is publishing, and those to publish again after.
    var publishing: Set<Int64> = []
    var republish: Set<Int64> = []
}

struct ChannelConnection: Sendable {
    var groupId: Int64
    var memberId: MemberId
}

extension ChannelError {
    /// The channel layer's refusal as text for logs and `groupInternal` reports.
    var text: String { "\(code.rawValue): \(message)" }
}

extension ChatController {
    // MARK: - One input at a time per channel

    func lockChannel(_ id: Int64) async {
        if channelRuntime.busy.contains(id) {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in channelRuntime.waiters[id, default: []].append(c) }
        } else {
            channelRuntime.busy.insert(id)
        }
    }

    func unlockChannel(_ id: Int64) {
        if var waiting = channelRuntime.waiters[id], !waiting.isEmpty {
            let next = waiting.removeFirst()
            channelRuntime.waiters[id] = waiting.isEmpty ? nil : waiting
            next.resume()
        } else {
            channelRuntime.busy.remove(id)
        }
    }

    // MARK: - Reading channels

    func channelRecord(_ groupId: Int64) async throws -> ChannelRecord? {
        try await dbRead { db in try ChannelRecord.fetchOne(db, key: groupId) }
    }

    /// The channel's role as stored, nil for a group that is no channel (or no longer exists).
    func channelRole(_ groupId: Int64) async throws -> String? {
        if let known = channelRuntime.roles[groupId] { return known }
        guard let c = try await channelRecord(groupId) else { return nil }
        channelRuntime.roles[groupId] = c.role
        return c.role
    }

    /// The channel and member of an agent connection, if it is a channel connection.
    func channelConnection(_ conn: Int64) async throws -> ChannelConnection? {
        if let known = channelRuntime.connections { return known[conn] }
        let rows = try await dbRead { db in try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.agentConnId != nil).fetchAll(db) }
        var map: [Int64: ChannelConnection] = [:]
        for r in rows {
            guard let conn = r.agentConnId, let id = MemberId(r.memberId) else { continue }
            map[conn] = ChannelConnection(groupId: r.groupId, memberId: id)
        }
        if channelRuntime.connections == nil { channelRuntime.connections = map }
        return channelRuntime.connections?[conn]
    }

    func setChannelConnection(_ conn: Int64, groupId: Int64, member: MemberId) async throws {
        try await dbWrite { db in
            _ = try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && ChannelMemberRecord.Columns.memberId == member.text)
                .updateAll(db, ChannelMemberRecord.Columns.agentConnId.set(to: conn))
        }
        _ = try await channelConnection(conn)
        channelRuntime.connections?[conn] = ChannelConnection(groupId: groupId, memberId: member)
    }

    func channelMemberConn(_ groupId: Int64, _ member: MemberId) async throws -> Int64? {
        try await dbRead { db in
            try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && ChannelMemberRecord.Columns.memberId == member.text)
                .fetchOne(db)?.agentConnId
        }
    }

    /// The `send` effect of every channel role: one item, as a one-item batch, to a member's connection.
    func sendChannelItem(_ groupId: Int64, _ item: BatchItem, to member: MemberId) async throws {
        guard let conn = try await channelMemberConn(groupId, member) else { return }
        _ = try await agentCall { try await agent.send(conn, try ChannelBatch.encode([item])) }
    }

    /// The `deleteConnection` effect of every channel role: the member's connection, if it still has one.
    func deleteChannelConnection(_ groupId: Int64, member: MemberId) async throws {
        guard let conn = try await channelMemberConn(groupId, member) else { return }
        do { try await agent.deleteConnection(conn) } catch let e as AgentError where e.code == .unknownConnection {}
        channelRuntime.connections?[conn] = nil
    }

    nonisolated static func privateKey(_ text: String?) throws -> Ed25519.PrivateKey {
        guard let text, let bytes = Base64URL.decode(text) else { throw ChatFailure.chat(.groupInternal(message: "a channel key is missing")) }
        return try Ed25519.PrivateKey(secretBytes: bytes)
    }

    nonisolated static func memberProfile(_ p: Profile) throws -> MemberProfile {
        try MemberProfile(json: JSONValueEncoder().encode(p))
    }

    /// The owner's machine, restored from the store on first use.
    func ownerState(_ groupId: Int64) async throws -> ChannelOwnerState {
        if let s = channelRuntime.owners[groupId] { return s }
        guard let c = try await channelRecord(groupId), c.role == ChannelRecord.Role.owner.rawValue else {
            throw ChatFailure.store(.groupNotFound(groupId: groupId))
        }
        let view = try await groupView(groupId)
        let members = try await dbRead { db in try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId).fetchAll(db) }
        let u = try await user(view.group.userId)
        guard let memberId = MemberId(c.memberId), let pg = c.publicGroupId.flatMap(Base64URL.decode),
              let profile = Stored.json(view.group.profile).flatMap({ try? GroupProtocol.GroupProfile(json: $0) }) else {
            throw ChatFailure.chat(.groupInternal(message: "channel \(groupId) is stored incompletely"))
        }
        let relays = members.filter { $0.kind == "relay" }.compactMap { r -> OwnerRelay? in
            guard let id = MemberId(r.memberId), let st = ChannelProtocol.RelayStatus(rawValue: r.status) else { return nil }
            return OwnerRelay(memberId: id, chatRelayId: r.chatRelayId ?? 0, address: r.address ?? "", status: st, relayLink: r.relayLink, connected: r.connected)
        }
        // Subscribers the relays announced (and who did not leave): `x.grp.relay.new` goes out only when there are some.
        var subscribers: [MemberId: MemberKey] = [:]
        for m in members where m.kind == "subscriber" {
            guard let id = MemberId(m.memberId), let key = m.memberKey.flatMap({ MemberKey(text: $0) }),
                  let status = view.record(id)?.status, status != GroupProtocol.GroupMemberStatus.left.rawValue else { continue }
            subscribers[id] = key
        }
        let state = ChannelOwnerState(publicGroupId: pg, channelLink: c.channelLink, memberId: memberId, ownProfile: try await channelOwnProfile(groupId, view, memberId, u),
                                      key: try Self.privateKey(c.memberKey), profile: profile, relays: relays, subscribers: subscribers,
                                      left: view.record(memberId)?.status == GroupProtocol.GroupMemberStatus.left.rawValue, deleted: view.group.deleted)
        if let s = channelRuntime.owners[groupId] { return s }
        channelRuntime.owners[groupId] = state
        return state
    }

    /// The user's profile in a channel: in one made or joined incognito, the random profile its
    /// membership keeps; else the user's own.
    func channelOwnProfile(_ groupId: Int64, _ view: GroupView, _ memberId: MemberId, _ u: UserRow) async throws -> MemberProfile {
        let incognito = try await dbRead { db in try Bool.fetchOne(db, sql: "SELECT incognito FROM chat_group WHERE id = ?", arguments: [groupId]) } ?? false
        if incognito, let p = view.record(memberId).flatMap({ Stored.json($0.profile) }).flatMap({ try? MemberProfile(json: $0) }) { return p }
        return try Self.memberProfile(u.profile)
    }

    /// The relay's machine, restored from the store on first use.
    func relayState(_ groupId: Int64) async throws -> ChannelRelayState {
        if let s = channelRuntime.relays[groupId] { return s }
        guard let c = try await channelRecord(groupId), c.role == ChannelRecord.Role.relay.rawValue else {
            throw ChatFailure.store(.groupNotFound(groupId: groupId))
        }
        let view = try await groupView(groupId)
        let u = try await user(view.group.userId)
        guard let memberId = MemberId(c.memberId), let inviter = c.inviter.flatMap(MemberId.init),
              let status = c.relayStatus.flatMap(ChannelProtocol.RelayStatus.init(rawValue:)) else {
            throw ChatFailure.chat(.groupInternal(message: "channel \(groupId) is stored incompletely"))
        }
        let owners = (Stored.json(c.owners).map(Self.ownerKeys) ?? [])
        let subscribers = try await dbRead { db in
            try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && Column("kind") == "subscriber").fetchAll(db)
        }.compactMap { m -> RelaySubscriber? in
            guard let id = MemberId(m.memberId), let key = m.memberKey.flatMap({ MemberKey(text: $0) }),
                  let st = RelaySubscriber.Status(rawValue: m.status) else { return nil }
            let p = view.record(id).flatMap { Stored.json($0.profile) }.flatMap { try? MemberProfile(json: $0) } ?? MemberProfile(displayName: "subscriber")
            return RelaySubscriber(memberId: id, key: key, profile: p, status: st)
        }
        let profile = c.publicGroupId == nil ? nil : Stored.json(view.group.profile).flatMap { try? GroupProtocol.GroupProfile(json: $0) }
        // The latest posts for late joiners (`channel_history`, oldest first).
        let history = try await dbRead { db in
            try ChannelHistoryRecord.filter(ChannelHistoryRecord.Columns.groupId == groupId).order(ChannelHistoryRecord.Columns.id).fetchAll(db)
        }.compactMap { h -> ForwardedElement? in
            guard case let .forward(f)? = (try? ChannelBatch.decode([UInt8](h.body)))?.first else { return nil }
            return f
        }
        let state = ChannelRelayState(channelLink: c.channelLink, ownMemberId: memberId, ownProfile: try Self.memberProfile(u.profile), inviter: inviter,
                                      status: status, publicGroupId: c.publicGroupId.flatMap(Base64URL.decode), profile: profile, owners: owners,
                                      relayLink: c.relayLink, subscribers: subscribers, history: history, ownerConnected: c.ownerConnected)
        if let s = channelRuntime.relays[groupId] { return s }
        channelRuntime.relays[groupId] = state
        return state
    }

    nonisolated static func ownerKeysJSON(_ owners: [OwnerKey]) -> JSONValue {
        .array(owners.sorted { $0.memberId < $1.memberId }.map {
            .object([("memberId", .string($0.memberId.text)), ("memberKey", .string($0.key.text)), ("profile", $0.profile.json)])
        })
    }

    nonisolated static func ownerKeys(_ json: JSONValue) -> [OwnerKey] {
        guard case let .array(list) = json else { return [] }
        return list.compactMap { o in
            guard let id = o["memberId"]?.stringValue.flatMap(MemberId.init), let key = o["memberKey"]?.stringValue.flatMap({ MemberKey(text: $0) }),
                  let p = o["profile"], let profile = try? MemberProfile(json: p) else { return nil }
            return OwnerKey(memberId: id, key: key, profile: profile)
        }
    }

    // MARK: - Model values

    /// The channel as the API shows it: a group with `useRelays`, and the relay's own status.
    func channelInfo(_ view: GroupView, _ c: ChannelRecord) -> GroupInfo {
        var info = view.info
        info.useRelays = true
        if c.role == ChannelRecord.Role.relay.rawValue { info.relayOwnStatus = c.relayStatus.flatMap(ChatModel.RelayStatus.init(rawValue:)) }
        if let count = c.publicMemberCount { info.groupSummary.publicMemberCount = count }
        return info
    }

    /// The owner's channel link as a `GroupLink`.
    func channelLinkModel(_ c: ChannelRecord) -> GroupLink {
        GroupLink(userContactLinkId: c.agentAddressId ?? 0, connLinkContact: CreatedConnLink(connFullLink: c.fullLink ?? c.channelLink, connShortLink: c.channelLink),
                  shortLinkDataSet: true, groupLinkId: c.publicGroupId ?? "", acceptMemberRole: .observer)
    }

    /// The owner's relays, in the order they were added.
    func groupRelayModels(_ groupId: Int64, view: GroupView) async throws -> [GroupRelay] {
        let (members, relays) = try await dbRead { db in
            (try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && Column("kind") == "relay").order(Column("id")).fetchAll(db),
             try ChatRelayRecord.filter(Column("user_id") == view.group.userId).fetchAll(db))
        }
        return members.map { m in
            let chatRelay = relays.first { $0.id == m.chatRelayId }?.model
                ?? UserChatRelay(chatRelayId: m.chatRelayId ?? 0, address: m.address ?? "", relayProfile: .object([("displayName", ""), ("fullName", "")]), deleted: true)
            return GroupRelay(groupRelayId: m.id ?? 0, groupMemberId: view.record(MemberId(m.memberId)!)?.id ?? 0, userChatRelay: chatRelay,
                              relayStatus: ChatModel.RelayStatus(rawValue: m.status) ?? .new, relayLink: m.relayLink)
        }
    }

    // MARK: - Owner: creating a channel

    /// `/_public group <userId>[ incognito=on] <relayIds> <json GroupProfile>`: a channel — the
    /// group (`useRelays`), its `/c` link with data (the profile with `publicGroup`, the owner
    /// authorised by the link's root key, no relays yet) and `x.grp.relay.inv` to each chosen
    /// relay's address. Answers `publicGroupCreated` with the relays `invited`; when a relay's
    /// address cannot be reached, `publicGroupCreationFailed` with each relay's outcome, and
    /// nothing is kept.
    public func createPublicGroup(userId: Int64, incognito: Bool, relayIds: [Int64], profile given: JSONValue) async throws -> ChatResponse {
        let u = try await user(userId)
        try requireStarted()
        guard !relayIds.isEmpty else { throw ChatFailure.command("a channel needs at least one chat relay") }
        guard Set(relayIds).count == relayIds.count else { throw ChatFailure.command("a chat relay is named twice") }
        guard !u.chatRelay else { throw ChatFailure.command("a chat relay user cannot own channels") }
        let registered = try await chatRelays(userId: userId)
        var chosen: [ChatRelayRecord] = []
        for id in relayIds {
            guard let r = registered.first(where: { $0.id == id }) else { throw ChatFailure.store(.userChatRelayNotFound(chatRelayId: id)) }
            chosen.append(r)
        }
        guard case .object = given, let rawName = given["displayName"]?.stringValue else { throw ChatFailure.command("GroupProfile needs a displayName") }
        let name = try Self.checkedName(rawName)
        var base = given
        base.set("displayName", .string(name))
        base.remove("publicGroup")
        let firstProfile: GroupProtocol.GroupProfile
        do { firstProfile = try GroupProtocol.GroupProfile(json: base) } catch { throw ChatFailure.command("GroupProfile: \(error.message)") }

        // Keys: the link's root key (publicGroupId = sha256 of its public key) and the owner's member key.
        let root = Ed25519.PrivateKey()
        let publicGroupId = Digest.sha256(root.publicKey.bytes)
        let memberKey = Ed25519.PrivateKey()
        let memberId = Self.newMemberId()
        let (addressId, full) = try await agentCall { try await agent.createAddress() }
        var madeConnections: [Int64] = []
        func undo() async {
            for c in madeConnections { try? await agent.deleteConnection(c) }
            try? await agent.deleteAddress(addressId)
        }
        let channelLink: String
        let profile: GroupProtocol.GroupProfile
        do {
            let owner = LinkOwner.authorized(ownerId: Base64URL.decode(memberId.text) ?? [], key: memberKey, senderId: full.queue.senderId, by: root)
            func data(_ p: GroupProtocol.GroupProfile) -> ShortLinkData {
                ShortLinkData(direct: false, owners: [owner], relays: [], userData: GroupShortLinkData(groupProfile: p, publicMemberCount: 1).bytes)
            }
            // The link is known once made; then the profile names it (SimpleX `publicGroup.groupLink`).
            let owned = try await agentCall { try await agent.createShortLink(forAddress: addressId, link: full, kind: .channel, data: data(firstProfile), rootKey: root) }
            channelLink = owned.link.description
            var json = base
            json.set("publicGroup", .object([("groupType", "channel"), ("groupLink", .string(channelLink)), ("publicGroupId", .string(Base64URL.encode(publicGroupId)))]))
            profile = try GroupProtocol.GroupProfile(json: json)
            try await agentCall { try await agent.updateShortLink(forAddress: addressId, link: full, owned: owned, data: data(profile)) }
        } catch {
            await undo()
            throw error
        }

        let now = Timestamp.now()
        // Incognito: a random profile for this channel only — the relays, and the subscribers the
        // owner is introduced to, see only it (the membership keeps it).
        let ownProfile = incognito ? Self.randomProfile() : u.profile
        let own = try Self.memberProfile(ownProfile)
        let record = ChannelRecord(groupId: 0, role: ChannelRecord.Role.owner.rawValue, channelLink: channelLink, publicGroupId: Base64URL.encode(publicGroupId),
                                   memberId: memberId.text, memberKey: Base64URL.encode(memberKey.secretBytes), rootKey: Base64URL.encode(root.secretBytes),
                                   agentAddressId: addressId, fullLink: full.description, createdAt: now)
        let ownText = try Stored.text(ownProfile)
        let profileText = profile.json.description
        let groupId: Int64
        do {
            groupId = try await dbWrite { db -> Int64 in
                let local = try LocalNames.reserve(db, userId: userId, displayName: profile.displayName)
                var g = GroupRecord(userId: userId, localDisplayName: local, profile: profileText, createdAt: now, updatedAt: now, chatTs: now)
                try g.insert(db)
                let gid = g.id!
                if incognito { try db.execute(sql: "UPDATE chat_group SET incognito = 1 WHERE id = ?", arguments: [gid]) }
                var me = GroupMemberRecord(groupId: gid, memberId: memberId.text, role: GroupProtocol.GroupMemberRole.owner.name,
                                           status: GroupProtocol.GroupMemberStatus.connected.rawValue, category: GroupProtocol.GroupMemberCategory.user.rawValue,
                                           profile: ownText, blocked: false, createdAt: now, updatedAt: now)
                me.localDisplayName = try UserRecord.fetchOne(db, key: userId)?.localDisplayName
                try me.insert(db)
                var c = record
                c.groupId = gid
                try c.insert(db)
                return gid
            }
        } catch {
            await undo()
            throw error
        }
        var state = ChannelOwnerState(publicGroupId: publicGroupId, channelLink: channelLink, memberId: memberId, ownProfile: own, key: memberKey, profile: profile)
        channelRuntime.owners[groupId] = state

        // Each relay: `new`, then the contact request with `x.grp.relay.inv` → `invited`.
        var results: [AddRelayResult] = []
        var failed = false
        for r in chosen {
            do {
                let relayMember = Self.newMemberId()
                let effects = try await runOwner(groupId, .addRelay(memberId: relayMember, chatRelayId: r.id ?? 0, address: r.address))
                for case let .joinRelayAddress(id, address, info) in effects {
                    if let conn = try await inviteRelay(groupId, relay: id, address: address, info: info) { madeConnections.append(conn) }
                }
                results.append(AddRelayResult(relay: r.model))
            } catch {
                failed = true
                results.append(AddRelayResult(relay: r.model, relayError: Self.chatError(error)))
            }
        }
        if failed {
            await undo()
            _ = try? await dbWrite { db in
                if let g = try GroupRecord.fetchOne(db, key: groupId) { try LocalNames.release(db, userId: userId, name: g.localDisplayName) }
                _ = try GroupRecord.deleteOne(db, key: groupId)
            }
            channelRuntime.owners[groupId] = nil
            channelRuntime.roles[groupId] = nil
            for c in madeConnections { channelRuntime.connections?[c] = nil }
            return .channel(.publicGroupCreationFailed(PublicGroupCreationFailed(user: userModel(u), addRelayResults: results)))
        }
        state = try await ownerState(groupId)
        _ = state
        let view = try await groupView(groupId)
        guard let c = try await channelRecord(groupId) else { throw ChatFailure.store(.groupNotFound(groupId: groupId)) }
        return .channel(.publicGroupCreated(PublicGroupCreated(user: userModel(u), groupInfo: channelInfo(view, c), groupLink: channelLinkModel(c),
                                                               groupRelays: try await groupRelayModels(groupId, view: view))))
    }

    /// `/_get relays #<groupId>`: the channel's relays (owner).
    public func getGroupRelays(groupId: Int64) async throws -> ChatResponse {
        let (u, view) = try await groupAndUser(groupId)
        guard let c = try await channelRecord(groupId), c.role != ChannelRecord.Role.relay.rawValue else {
            throw ChatFailure.command("#\(groupId) is not a channel this user owns or subscribes to")
        }
        if c.role == ChannelRecord.Role.subscriber.rawValue {
            // A subscriber's relays, with its counters for each (+ChannelManagement).
            return .channel(.groupRelays(GroupRelaysList(user: userModel(u), groupInfo: channelInfo(view, c), groupRelays: try await subscriberRelayModels(groupId, view: view))))
        }
        return .channel(.groupRelays(GroupRelaysList(user: userModel(u), groupInfo: channelInfo(view, c), groupRelays: try await groupRelayModels(groupId, view: view))))
    }

    /// A command's invitation of a relay (`/_public group`, `/_add relays`), as its durable step
    /// (`ownerJoinRelayAddress`, written with `addRelay`): the contact request, then `invited`.
    /// A failure that may pass (the relay's server down) leaves the relay `new` with its step,
    /// retried with backoff (nil is returned); a final one throws. Returns the new connection.
    func inviteRelay(_ groupId: Int64, relay: MemberId, address: String, info: GroupEnvelope) async throws -> Int64? {
        let step = ChannelStep.ownerJoinRelayAddress(relay: relay, address: address, info: info)
        if channelStepHeld(step) { return nil } // tests: as a crash after the commit leaves it
        let conn: Int64
        do {
            conn = try await joinRelayAddress(groupId, relay: relay, address: address, info: info)
        } catch {
            if retryChannelStepLater(groupId, step, error) { return nil }
            await channelStepDone(groupId, step)
            throw error
        }
        _ = try await runOwner(groupId, .invitationSent(relay))
        await channelStepDone(groupId, step)
        return conn
    }

    /// Sends the contact request with `x.grp.relay.inv` to a relay's address; returns the new connection.
    func joinRelayAddress(_ groupId: Int64, relay: MemberId, address: String, info: GroupEnvelope) async throws -> Int64 {
        let short: ShortLink
        do { short = try ShortLink(parsing: address) } catch { throw ChatFailure(ChannelError(.invalidLink, "the chat relay address cannot be read: \(error)")) }
        guard case let .contact(link) = try await agentCall({ try await agent.resolve(short) }) else {
            throw ChatFailure(ChannelError(.notRelayAddress, "the chat relay address does not name a contact address"))
        }
        let body = try GroupMessage.encode(info, asConnInfo: true)
        return try await trackingJoin { () async throws -> (Int64, Int64) in
            let conn = try await agentCall { try await agent.joinAddress(link, info: body, autoAllow: false) }
            try await setChannelConnection(conn, groupId: groupId, member: relay)
            return (conn, conn)
        }
    }

    // MARK: - Owner: running the machine

    /// Runs one input through the owner's machine and stores what it changed; returns the effects
    /// still to perform (``performOwnerEffects(_:_:)``). A refused input throws and changes nothing.
    @discardableResult
    func runOwner(_ groupId: Int64, _ input: ChannelOwnerInput) async throws -> [ChannelOwnerEffect] {
        await lockChannel(groupId)
        defer { unlockChannel(groupId) }
        var state = try await ownerState(groupId)
        let effects: [ChannelOwnerEffect]
        do { effects = try state.handle(input, newMessageId: ChatMessage.newMessageId) } catch { throw ChatFailure(error) }
        let now = Timestamp.now()
        var steps = effects.compactMap(ChannelStep.init)
        if case .deleteChannel = input {
            // The deletion is one durable step (+ChannelActions, +ChannelManagement): the signed
            // `x.grp.del` to the relays, the connections and the link deleted, the group purged.
            var item: BatchItem?
            var relays: [MemberId] = []
            for case let .send(i, to) in effects {
                item = i
                relays.append(to)
            }
            if let item { steps.append(.ownerDeleteChannel(item: item, relays: relays)) }
        }
        let allSteps = steps
        try await dbWrite { db in
            try Self.queueChannelSteps(db, groupId: groupId, allSteps) // (+ChannelActions)
            if case .deleteChannel = input { _ = try GroupRecord.filter(key: groupId).updateAll(db, GroupRecord.Columns.deleted.set(to: true)) }
            for e in effects {
                switch e {
                case let .saveRelay(r): try Self.saveOwnerRelay(db, groupId: groupId, r, now: now)
                case let .saveProfile(p): try Self.saveChannelProfile(db, groupId: groupId, p, now: now)
                default: break
                }
            }
        }
        channelRuntime.owners[groupId] = state
        return effects
    }

    /// A channel's new profile (`x.grp.info`, `/_group_profile`): the group's profile and, when
    /// its name changed, the group's local name.
    nonisolated static func saveChannelProfile(_ db: Database, groupId: Int64, _ p: GroupProtocol.GroupProfile, now: String) throws {
        guard var g = try GroupRecord.fetchOne(db, key: groupId) else { return }
        if p.displayName != Stored.json(g.profile)?["displayName"]?.stringValue {
            g.localDisplayName = try LocalNames.rename(db, userId: g.userId, current: g.localDisplayName, displayName: p.displayName)
        }
        g.profile = p.json.description
        g.updatedAt = now
        try g.update(db)
    }

    /// `groupUpdated` for a channel profile changed by its owner (subscriber and relay).
    func reportChannelProfileUpdate(_ groupId: Int64, from old: GroupProtocol.GroupProfile, by owner: MemberId?) async throws {
        let view = try await groupView(groupId)
        guard let c = try await channelRecord(groupId) else { return }
        let u = try await user(view.group.userId)
        let to = channelInfo(view, c)
        var from = to
        from.groupProfile = try JSONValueDecoder().decode(ChatModel.GroupProfile.self, from: old.json)
        sink.yield(.group(.groupUpdated(GroupUpdated(user: userModel(u), fromGroup: from, toGroup: to, member_: owner.flatMap { view.member($0) }))))
    }

    nonisolated static func saveOwnerRelay(_ db: Database, groupId: Int64, _ r: OwnerRelay, now: String) throws {
        var m = try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == groupId && ChannelMemberRecord.Columns.memberId == r.memberId.text).fetchOne(db)
            ?? ChannelMemberRecord(groupId: groupId, memberId: r.memberId.text, kind: "relay", status: r.status.rawValue)
        m.chatRelayId = r.chatRelayId
        m.address = r.address
        m.status = r.status.rawValue
        m.relayLink = r.relayLink
        m.connected = r.connected
        try m.save(db)
        // The relay as a group member (role `relay`), for the API's `GroupMember`.
        let memberStatus: GroupProtocol.GroupMemberStatus = switch r.status {
        case .new, .invited: .invited
        case .accepted, .acknowledgedRoster: r.connected ? .connected : .accepted
        case .active: .connected
        case .inactive: .removed
        case .rejected: .left
        }
        var gm = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == r.memberId.text).fetchOne(db)
            ?? GroupMemberRecord(groupId: groupId, memberId: r.memberId.text, role: GroupProtocol.GroupMemberRole.relay.name, status: memberStatus.rawValue,
                                 category: GroupProtocol.GroupMemberCategory.invitee.rawValue, blocked: false, createdAt: now, updatedAt: now)
        if gm.id == nil, let relay = try ChatRelayRecord.fetchOne(db, key: r.chatRelayId) {
            let name = Stored.decode(RelayProfile.self, relay.relayProfile)?.displayName ?? relay.name
            gm.profile = try Stored.text(Profile(displayName: name))
            gm.localDisplayName = try LocalNames.reserve(db, userId: try GroupRecord.fetchOne(db, key: groupId)?.userId ?? 0, displayName: name)
        }
        gm.status = memberStatus.rawValue
        gm.updatedAt = now
        try gm.save(db)
    }

    /// Runs an input and performs its effects (in order); a refusal is logged and reported.
    func feedOwner(_ groupId: Int64, _ input: ChannelOwnerInput) async {
        do {
            let effects = try await runOwner(groupId, input)
            await performOwnerEffects(groupId, effects)
        } catch {
            reportChannelRefusal(groupId, error)
        }
    }

    func reportChannelRefusal(_ groupId: Int64, _ error: any Error) {
        let why = "\(Self.chatError(error))"
        logger.info("a channel input was refused", metadata: ["group": "\(groupId)", "reason": "\(why)"])
        sink.yield(.chatError(.error(.groupInternal(message: "channel \(groupId): \(why)"))))
    }

    /// Performs the owner's effects in order: agent calls (whose answers are the next inputs) and events.
    func performOwnerEffects(_ groupId: Int64, _ effects: [ChannelOwnerEffect]) async {
        for effect in effects {
            let step = ChannelStep(effect)
            if channelStepHeld(step) { continue }
            do {
                switch effect {
                case .saveRelay, .saveProfile: break
                case let .joinRelayAddress(id, address, info):
                    _ = try await joinRelayAddress(groupId, relay: id, address: address, info: info)
                    await feedOwner(groupId, .invitationSent(id))
                case let .fetchRelayLinkData(id, link):
                    let entity = try await relayLinkEntity(link)
                    await feedOwner(groupId, .relayLinkData(relay: id, linkEntityId: entity))
                case let .allowConnection(id):
                    if let conn = try await channelMemberConn(groupId, id) {
                        try await agentCall { try await agent.allow(conn, info: ChatMessage(event: "x.ok", params: .object([])).encoded) }
                    }
                case let .publishLinkData(data):
                    try await publishCoalesced(groupId, data)
                case let .send(item, to):
                    try await sendChannelItem(groupId, item, to: to)
                case let .deleteConnection(id):
                    try await deleteChannelConnection(groupId, member: id)
                case let .emit(e):
                    try await reportOwnerEvent(groupId, e)
                }
            } catch {
                // A relay's address unreachable for a while: kept and tried again (+ChannelActions).
                if retryChannelStepLater(groupId, step, error) { continue }
                reportChannelRefusal(groupId, error)
            }
            await channelStepDone(groupId, step) // (+ChannelActions)
        }
    }

    /// A relay link's entity id: the relay's member id, from its link data's user data
    /// (`relayMemberId`, **Swiftplex**: SimpleX carries it as the link's `linkEntityId`).
    private func relayLinkEntity(_ link: String) async throws -> MemberId {
        let short: ShortLink
        do { short = try ShortLink(parsing: link) } catch { throw ChatFailure(ChannelError(.invalidLink, "the relay's link cannot be read: \(error)")) }
        guard short.kind == .group else { throw ChatFailure(ChannelError(.invalidLink, "a relay's channel link is a group link (/g)")) }
        let resolved = try await agentCall { try await agent.resolveWithData(short) }
        guard let data = resolved.data, let json = try? JSONValue.parse(utf8: data.userData, maxDepth: 8, maxBytes: 8192),
              let id = json["relayMemberId"]?.stringValue.flatMap(MemberId.init) else {
            throw ChatFailure(ChannelError(.linkDataMismatch, "the relay's link data names no member"))
        }
        return id
    }

    /// Publishes the channel link's data, one publish at a time per channel: one asked for while
    /// another runs is made once after it, with the owner's state then (subscribers joining in a
    /// burst each move the count: one `LSET` for the burst, not one per join).
    private func publishCoalesced(_ groupId: Int64, _ first: ChannelLinkData) async throws {
        if channelRuntime.publishing.contains(groupId) {
            channelRuntime.republish.insert(groupId)
            return
        }
        channelRuntime.publishing.insert(groupId)
        defer { channelRuntime.publishing.remove(groupId) }
        var data = first
        while true {
            let published = try await publishChannelLinkData(groupId, data)
            await feedOwner(groupId, .linkDataPublished(relays: published))
            guard channelRuntime.republish.remove(groupId) != nil else { return }
            data = try await ownerState(groupId).linkData
        }
    }

    /// Publishes the channel link's data (the owner, the profile, the accepted relays' links,
    /// the member count); returns the relay links published.
    private func publishChannelLinkData(_ groupId: Int64, _ data: ChannelLinkData) async throws -> [String] {
        guard let c = try await channelRecord(groupId), let addressId = c.agentAddressId, let fullText = c.fullLink,
              case let .contact(full)? = try? AgentLink(parsing: fullText) else {
            throw ChatFailure.chat(.groupInternal(message: "channel \(groupId) has no link to publish"))
        }
        let root = try Self.privateKey(c.rootKey)
        let memberKey = try Self.privateKey(c.memberKey)
        let short = try ShortLink(parsing: c.channelLink)
        var relays: [ShortLink] = []
        for l in data.relays { if let s = try? ShortLink(parsing: l) { relays.append(s) } }
        let owner = LinkOwner.authorized(ownerId: Base64URL.decode(c.memberId) ?? [], key: memberKey, senderId: full.queue.senderId, by: root)
        let linkData = ShortLinkData(direct: false, owners: [owner], relays: relays,
                                     userData: GroupShortLinkData(groupProfile: data.profile, publicMemberCount: data.publicMemberCount).bytes)
        try await agentCall { try await agent.updateShortLink(forAddress: addressId, link: full, owned: OwnedShortLink(link: short, rootKey: root), data: linkData) }
        let count = Int64(data.publicMemberCount)
        try await dbWrite { db in try db.execute(sql: "UPDATE channel SET public_member_count = ? WHERE group_id = ?", arguments: [count, groupId]) }
        return relays.map(\.description)
    }

    /// A channel member's `group_member` status (the owner learns a subscriber left).
    func markChannelMember(_ groupId: Int64, _ id: MemberId, _ status: GroupProtocol.GroupMemberStatus) async throws {
        let now = Timestamp.now()
        try await dbWrite { db in
            _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == id.text)
                .updateAll(db, Column("status").set(to: status.rawValue), Column("updated_at").set(to: now))
        }
    }

    private func reportOwnerEvent(_ groupId: Int64, _ e: ChannelEvent) async throws {
        let view = try await groupView(groupId)
        guard let c = try await channelRecord(groupId) else { return }
        let u = try await user(view.group.userId)
        let info = channelInfo(view, c)
        switch e {
        case let .groupRelayUpdated(relay, _), let .relayRejected(relay, _):
            guard case .groupRelayUpdated = e else { return } // a rejection was reported with its status
            let relays = try await groupRelayModels(groupId, view: view)
            guard let member = view.member(relay), let r = relays.first(where: { $0.groupMemberId == member.groupMemberId }) else { return }
            sink.yield(.channel(.groupRelayUpdated(GroupRelayUpdated(user: userModel(u), groupInfo: info, member: member, groupRelay: r))))
        case let .groupLinkDataUpdated(_, changed):
            sink.yield(.channel(.groupLinkDataUpdated(GroupLinkDataUpdated(user: userModel(u), groupInfo: info, groupLink: channelLinkModel(c),
                                                                           groupRelays: try await groupRelayModels(groupId, view: view), relaysChanged: changed))))
        case let .joinedGroupMemberConnecting(relay, member):
            guard let h = view.member(relay), let m = view.member(member) else { return }
            sink.yield(.group(.joinedGroupMemberConnecting(JoinedGroupMemberConnecting(user: userModel(u), groupInfo: info, hostMember: h, member: m))))
        case let .leftMember(id):
            try await markChannelMember(groupId, id, .left)
            guard let m = try await groupView(groupId).member(id) else { return }
            sink.yield(.group(.leftMember(UserGroupMember(user: userModel(u), groupInfo: info, member: m))))
        default:
            logger.debug("a channel event is not reported yet", metadata: ["group": "\(groupId)", "event": "\(e)"])
        }
    }

    // MARK: - Relay: invitations on the relay address

    /// A contact request on a chat relay user's address: an owner's `x.grp.relay.inv`
    /// (``RelayDirectory``). Anything else is refused unseen.
    func relayAddressRequest(user u: UserRow, request: Int64, info: [UInt8]) async throws {
        func refuse(_ why: String) async {
            refusedRelayAddressRequests += 1
            logger.info("a contact request to a chat relay address was refused", metadata: ["reason": "\(why)"])
            try? await agent.rejectRequest(request)
        }
        let env: GroupEnvelope
        do { env = try GroupMessage.decodeEnvelope(info, asConnInfo: true) } catch { return await refuse("not a channel message: \(error.message)") }
        if env.event == ChannelMessage.Event.relayTest.rawValue { return try await answerRelayTest(user: u, request: request, env) } // (+RelayTest)
        let own = try Self.memberProfile(u.profile)
        let decision: RelayDirectory.Decision
        let directory = RelayDirectory(rejectedLinks: try await refusedChannelLinks(userId: u.id))
        do { decision = try directory.invitation(env, ownMemberProfile: own, newMessageId: ChatMessage.newMessageId) } catch {
            return await refuse(error.text)
        }
        switch decision {
        case let .reject(answer):
            // Answered with `x.grp.relay.reject`; the connection is not kept.
            let body = try GroupMessage.encode(answer, asConnInfo: true)
            let agent = self.agent
            inBackground { _ = try await agent.acceptRequest(request, info: body) }
        case let .serve(state, effects):
            guard case let .relayInvitation(inv)? = try? env.channelMessage() else { return await refuse("not an invitation") }
            if await relayPolicyRefusal(invitation: inv, userId: u.id) != nil {
                // The operator's policy (+RelayPolicy): answered like a refused rejoin, nothing kept.
                let body = try GroupMessage.encode(ChannelMessage.relayReject(.unknown("relay_policy")).envelope(msgId: ChatMessage.newMessageId()), asConnInfo: true)
                let agent = self.agent
                inBackground { _ = try await agent.acceptRequest(request, info: body) }
                return
            }
            let userId = u.id
            let now = Timestamp.now()
            let ownText = try Stored.text(u.profile)
            let inviterText = inv.fromMemberProfile.json.description
            let groupId = try await dbWrite { db -> Int64 in
                // The channel's profile comes with its link data; until then the group has a placeholder.
                let placeholder = GroupProtocol.GroupProfile(displayName: "channel")
                let local = try LocalNames.reserve(db, userId: userId, displayName: placeholder.displayName)
                var g = GroupRecord(userId: userId, localDisplayName: local, profile: placeholder.json.description, createdAt: now, updatedAt: now, chatTs: now)
                try g.insert(db)
                let gid = g.id!
                var me = GroupMemberRecord(groupId: gid, memberId: state.ownMemberId.text, role: GroupProtocol.GroupMemberRole.relay.name,
                                           status: GroupProtocol.GroupMemberStatus.accepted.rawValue, category: GroupProtocol.GroupMemberCategory.user.rawValue,
                                           profile: ownText, blocked: false, createdAt: now, updatedAt: now)
                me.localDisplayName = try UserRecord.fetchOne(db, key: userId)?.localDisplayName
                try me.insert(db)
                var owner = GroupMemberRecord(groupId: gid, memberId: state.inviter.text, role: GroupProtocol.GroupMemberRole.owner.name,
                                              status: GroupProtocol.GroupMemberStatus.accepted.rawValue, category: GroupProtocol.GroupMemberCategory.host.rawValue,
                                              profile: inviterText, blocked: false, createdAt: now, updatedAt: now)
                owner.localDisplayName = try LocalNames.reserve(db, userId: userId, displayName: inv.fromMemberProfile.displayName)
                try owner.insert(db)
                var c = ChannelRecord(groupId: gid, role: ChannelRecord.Role.relay.rawValue, channelLink: state.channelLink, memberId: state.ownMemberId.text,
                                      relayStatus: state.status.rawValue, inviter: state.inviter.text, ownerRequest: request, createdAt: now)
                try c.insert(db)
                var m = ChannelMemberRecord(groupId: gid, memberId: state.inviter.text, kind: "owner", status: "invited")
                try m.insert(db)
                try Self.queueChannelSteps(db, groupId: gid, effects.compactMap(ChannelStep.init)) // (+ChannelActions)
                return gid
            }
            channelRuntime.relays[groupId] = state
            inBackground { await self.performRelayEffects(groupId, effects) }
        }
    }

    /// Runs one input through the relay's machine and stores its state; returns the effects.
    @discardableResult
    func runRelay(_ groupId: Int64, _ input: ChannelRelayInput, request: Int64? = nil) async throws -> [ChannelRelayEffect] {
        await lockChannel(groupId)
        defer { unlockChannel(groupId) }
        var state = try await relayState(groupId)
        let before = state.profile
        let lastPost = state.history.last
        let revision = state.historyRevision
        let effects: [ChannelRelayEffect]
        do { effects = try state.handle(input, newMessageId: ChatMessage.newMessageId) } catch { throw ChatFailure(error) }
        let now = Timestamp.now()
        let snapshot = state
        let profileChanged = state.profile != before
        try await dbWrite { db in
            guard var c = try ChannelRecord.fetchOne(db, key: groupId) else { return }
            // (+ChannelActions) A subscriber's acceptance needs its request: `request` is the join's.
            var steps = effects.compactMap(ChannelStep.init)
            if let request {
                for case let .acceptSubscriber(id, info) in effects { steps.append(.relayAcceptSubscriber(member: id, request: request, info: info)) }
            }
            try Self.queueChannelSteps(db, groupId: groupId, steps)
            c.relayStatus = snapshot.status.rawValue
            c.publicGroupId = snapshot.publicGroupId.map(Base64URL.encode)
            c.relayLink = snapshot.relayLink
            c.owners = Self.ownerKeysJSON(Array(snapshot.owners.values)).description
            c.ownerConnected = snapshot.isOwnerConnected
            try c.update(db)
            if profileChanged, let p = snapshot.profile { try Self.saveChannelProfile(db, groupId: groupId, p, now: now) }
            // The relay's own membership follows its status.
            let own: GroupProtocol.GroupMemberStatus = switch snapshot.status {
            case .active: .connected
            case .inactive: .removed
            case .rejected: .left
            default: .accepted
            }
            _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == snapshot.ownMemberId.text)
                .updateAll(db, Column("status").set(to: own.rawValue), Column("updated_at").set(to: now))
            for case let .saveSubscriber(sub) in effects { try Self.saveRelaySubscriber(db, groupId: groupId, sub, now: now) }
            for case let .forgetSubscriber(id) in effects { try Self.forgetRelaySubscriber(db, groupId: groupId, id) }
            // Delivery jobs are committed with the input that made them (+ChannelMembers).
            for case let .deliver(fwd, to) in effects where !to.isEmpty {
                var job = ChannelDeliveryRecord(groupId: groupId, body: Data(try ChannelBatch.encode([.forward(fwd)])),
                                                recipients: JSONValue.array(to.map { .string($0.text) }).description, createdAt: now)
                try job.insert(db)
            }
            // A post (or an update of one) kept for late joiners: stored with the input, the newest
            // `historyLimit` kept; a post deleted leaves it with its updates — the stored history
            // is written again then (rare; at most `historyLimit` rows).
            if snapshot.historyRevision != revision {
                _ = try ChannelHistoryRecord.filter(ChannelHistoryRecord.Columns.groupId == groupId).deleteAll(db)
                for post in snapshot.history {
                    var h = ChannelHistoryRecord(groupId: groupId, body: Data(try ChannelBatch.encode([.forward(post)])))
                    try h.insert(db)
                }
            } else if let post = snapshot.history.last, post != lastPost {
                var h = ChannelHistoryRecord(groupId: groupId, body: Data(try ChannelBatch.encode([.forward(post)])))
                try h.insert(db)
                try db.execute(sql: """
                    DELETE FROM channel_history WHERE group_id = ? AND id NOT IN
                    (SELECT id FROM channel_history WHERE group_id = ? ORDER BY id DESC LIMIT ?)
                    """, arguments: [groupId, groupId, snapshot.historyLimit])
            }
            if snapshot.isOwnerConnected {
                _ = try GroupMemberRecord.filter(GroupMemberRecord.Columns.groupId == groupId && GroupMemberRecord.Columns.memberId == snapshot.inviter.text)
                    .updateAll(db, Column("status").set(to: GroupProtocol.GroupMemberStatus.connected.rawValue))
            }
        }
        channelRuntime.relays[groupId] = state
        return effects
    }

    /// Returns the error when the input was cut short by something that passes (see
    /// ``passingChannelFailure(_:)``); nil when it was applied or refused for good.
    @discardableResult
    func feedRelay(_ groupId: Int64, _ input: ChannelRelayInput) async -> (any Error)? {
        do {
            let effects = try await runRelay(groupId, input)
            await performRelayEffects(groupId, effects)
        } catch {
            if let passing = passingChannelFailure(error) { return passing }
            reportChannelRefusal(groupId, error)
        }
        return nil
    }

    /// A failure that says nothing about the input — a database fault (reported, and retried
    /// by `handleStoring`) or the engine stopping — or nil for a refusal of the input itself.
    func passingChannelFailure(_ error: any Error) -> (any Error)? {
        if error is SQLError { return error }
        if Self.isStopping(error) || closing { return error }
        return nil
    }

    /// Performs the relay's effects in order.
    func performRelayEffects(_ groupId: Int64, _ effects: [ChannelRelayEffect]) async {
        for effect in effects {
            let step = ChannelStep(effect)
            if channelStepHeld(step) { continue }
            do {
                switch effect {
                case .saveStatus, .saveSubscriber, .forgetSubscriber: break
                case let .fetchChannelLinkData(link):
                    let data = try await channelLinkData(link, groupId: groupId)
                    await feedRelay(groupId, .channelLinkData(data))
                case let .createRelayLink(entityId):
                    let link = try await createRelayLink(groupId, entityId: entityId)
                    await feedRelay(groupId, .relayLinkCreated(link))
                case let .acceptOwner(owner, info):
                    guard let request = try await channelRecord(groupId)?.ownerRequest else { continue }
                    let body = try GroupMessage.encode(info, asConnInfo: true)
                    try await trackingJoin { () async throws -> ((), Int64) in
                        let conn = try await agentCall { try await agent.acceptRequest(request, info: body) }
                        try await setChannelConnection(conn, groupId: groupId, member: owner)
                        try await dbWrite { db in _ = try ChannelRecord.filter(key: groupId).updateAll(db, Column("owner_request").set(to: nil as Int64?)) }
                        return ((), conn)
                    }
                case let .send(item, to):
                    try await sendChannelItem(groupId, item, to: to)
                case let .deleteConnection(id):
                    try await deleteChannelConnection(groupId, member: id)
                case .acceptSubscriber:
                    break // performed by the request's handler, which holds the request (+ChannelMembers)
                case .deliver:
                    kickChannelDeliveries(groupId)
                case .deleteAllConnections:
                    try await stopServingChannel(groupId) // (+ChannelManagement)
                case let .rememberRejected(link):
                    try await rememberRefusedChannel(groupId, link)
                case let .emit(e):
                    try await reportRelayEvent(groupId, e)
                }
            } catch {
                reportChannelRefusal(groupId, error)
            }
            await channelStepDone(groupId, step) // (+ChannelActions)
        }
    }

    /// A channel link's data as the channel machines read it: `publicGroupId` = sha256 of the root
    /// key that signed it, the profile and subscriber count from its user data, the owners (their
    /// profiles as the relay knows them: the inviter's from the invitation), the relay links.
    private func channelLinkData(_ link: String, groupId: Int64) async throws -> ChannelLinkData {
        let short: ShortLink
        do { short = try ShortLink(parsing: link) } catch { throw ChatFailure(ChannelError(.invalidLink, "the channel link cannot be read: \(error)")) }
        guard short.kind == .channel else { throw ChatFailure(ChannelError(.invalidLink, "not a channel link (/c)")) }
        let resolved = try await agentCall { try await agent.resolveWithData(short) }
        guard let data = resolved.data, let root = resolved.rootKey else { throw ChatFailure(ChannelError(.linkDataMismatch, "the channel link has no data")) }
        let group: GroupShortLinkData
        do { group = try GroupShortLinkData(bytes: data.userData) } catch { throw ChatFailure(error) }
        let view = try await groupView(groupId)
        let owners = data.owners.compactMap { o -> OwnerKey? in
            guard let id = MemberId(Base64URL.encode(o.ownerId)) else { return nil }
            let profile = view.record(id).flatMap { Stored.json($0.profile) }.flatMap { try? MemberProfile(json: $0) }
                ?? MemberProfile(displayName: "owner")
            return OwnerKey(memberId: id, key: MemberKey(o.key), profile: profile)
        }
        return ChannelLinkData(publicGroupId: Digest.sha256(root.bytes), profile: group.groupProfile, owners: owners,
                               relays: data.relays.map(\.description), publicMemberCount: group.publicMemberCount ?? 0)
    }

    /// The relay's own link for this channel: a group link (`/g`) with data — the relay's profile
    /// and its member id (`relayMemberId`) as user data.
    private func createRelayLink(_ groupId: Int64, entityId: MemberId) async throws -> String {
        let view = try await groupView(groupId)
        let u = try await user(view.group.userId)
        let (addressId, full) = try await agentCall { try await agent.createAddress(groupLinkId: Base64URL.encode(Sodium.randomBytes(16))) }
        let relayProfile = RelayProfile(displayName: u.profile.displayName, fullName: u.profile.fullName)
        let userData = JSONValue.object([("relayProfile", try JSONValueEncoder().encode(relayProfile)), ("relayMemberId", .string(entityId.text))])
        let owned: OwnedShortLink
        do {
            owned = try await agentCall {
                try await agent.createShortLink(forAddress: addressId, link: full, kind: .group, data: ShortLinkData(direct: true, userData: Array(userData.text.utf8)))
            }
        } catch {
            try? await agent.deleteAddress(addressId)
            throw error
        }
        let link = owned.link.description
        try await dbWrite { db in
            _ = try ChannelRecord.filter(key: groupId).updateAll(db, Column("agent_address_id").set(to: addressId), Column("full_link").set(to: full.description))
        }
        return link
    }

    private func reportRelayEvent(_ groupId: Int64, _ e: ChannelEvent) async throws {
        let view = try await groupView(groupId)
        guard let c = try await channelRecord(groupId) else { return }
        let u = try await user(view.group.userId)
        let info = channelInfo(view, c)
        switch e {
        case let .userJoinedGroup(host):
            guard let h = view.member(host) else { return }
            sink.yield(.group(.userJoinedGroup(UserJoinedGroup(user: userModel(u), groupInfo: info, hostMember: h))))
        case let .joinedGroupMember(id):
            guard let m = view.member(id) else { return }
            sink.yield(.group(.joinedGroupMember(UserGroupMember(user: userModel(u), groupInfo: info, member: m))))
        case let .leftMember(id):
            if view.record(id)?.role == GroupProtocol.GroupMemberRole.owner.name { try await markChannelMember(groupId, id, .left) }
            guard let m = try await groupView(groupId).member(id) else { return }
            sink.yield(.group(.leftMember(UserGroupMember(user: userModel(u), groupInfo: info, member: m))))
        case let .deletedMemberUser(by):
            // The owner removed this relay: it forwarded the removal and stopped.
            guard let m = view.member(by) else { return }
            sink.yield(.group(.deletedMemberUser(DeletedMemberUser(user: userModel(u), groupInfo: info, member: m, withMessages: false))))
        case let .groupUpdated(from, _):
            try await reportChannelProfileUpdate(groupId, from: from, by: c.inviter.flatMap(MemberId.init))
        case let .groupDeleted(by):
            // The owner deleted the channel: the relay forwarded it and stops serving it.
            try await markChannelMember(groupId, MemberId(c.memberId) ?? by, .deleted)
            guard let m = view.member(by) else { return }
            sink.yield(.group(.groupDeleted(UserGroupMember(user: userModel(u), groupInfo: channelInfo(try await groupView(groupId), c), member: m))))
        default:
            logger.debug("a channel event is not reported yet", metadata: ["group": "\(groupId)", "event": "\(e)"])
        }
    }

    // MARK: - Agent events of channel connections

    /// Runs an input now (so that the connection's next message finds its state) and performs its
    /// effects in a task of their own (they may wait on a peer's relay); a refusal is reported.
    private func runInOrder<Effect: Sendable>(_ groupId: Int64, _ run: () async throws -> [Effect],
                                              perform: @escaping @Sendable ([Effect]) async -> Void) async {
        do {
            let effects = try await run()
            inBackground { await perform(effects) }
        } catch {
            reportChannelRefusal(groupId, error)
        }
    }

    /// Handles an agent event if it is of a channel connection; returns false for others.
    func handleChannelAgentEvent(_ event: AgentEvent) async throws -> Bool {
        if try await takeRelayTestAnswer(event) { return true } // a chat relay's test answer (+RelayTest)
        guard let conn = event.connectionId, let ref = try await channelConnection(conn) else { return false }
        switch event {
        case .confirmation, .connected, .message: break
        default: return true // the rest (a delivery's `sent`, receipts) is not a channel input: no store read for it
        }
        guard let stored = try await channelRole(ref.groupId) else { return false }
        let groupId = ref.groupId
        let role = ChannelRecord.Role(rawValue: stored)
        switch event {
        case let .confirmation(_, info):
            let env: GroupEnvelope
            do { env = try GroupMessage.decodeEnvelope(info, asConnInfo: true) } catch {
                reportChannelRefusal(groupId, ChatFailure(ChannelError(.malformedMessage, "a confirmation is malformed: \(error.message)")))
                return true
            }
            // The input is committed now, in the agent's order; its effects run in a task.
            switch role {
            case .owner?: await runInOrder(groupId) { try await self.runOwner(groupId, .relayConfirmation(from: ref.memberId, info: env)) } perform: { await self.performOwnerEffects(groupId, $0) }
            case .subscriber?: await runInOrder(groupId) { try await self.runSubscriber(groupId, .confirmation(from: ref.memberId, info: env)) } perform: { await self.performSubscriberEffects(groupId, $0) }
            default: break
            }
        case .connected:
            switch role {
            case .owner?: await runInOrder(groupId) { try await self.runOwner(groupId, .connected(ref.memberId)) } perform: { await self.performOwnerEffects(groupId, $0) }
            case .relay?: await runInOrder(groupId) { try await self.runRelay(groupId, .connected(ref.memberId)) } perform: { await self.performRelayEffects(groupId, $0) }
            case .subscriber?: await runInOrder(groupId) { try await self.runSubscriber(groupId, .connected(ref.memberId)) } perform: { await self.performSubscriberEffects(groupId, $0) }
            case nil: break
            }
        case let .message(_, seq, body, _):
            // Binary batches (`=`): each item is one input, in order.
            let items: [BatchItem]
            do { items = try ChannelBatch.decode(body) } catch {
                reportChannelRefusal(groupId, ChatFailure(ChannelError(.malformedMessage, "a channel message is malformed: \(error.message)")))
                await agent.messageProcessed(conn, seq: seq)
                return true
            }
            let brokerTs = Int64(Date().timeIntervalSince1970)
            var cutShort: (any Error)?
            for item in items {
                let failure: (any Error)?
                switch role {
                case .owner?: failure = await receivedByOwner(groupId, from: ref.memberId, item)
                case .relay?: failure = await feedRelay(groupId, .received(from: ref.memberId, item, brokerTs: brokerTs))
                case .subscriber?: failure = await feedSubscriber(groupId, .received(from: ref.memberId, item))
                case nil: failure = nil
                }
                if let failure {
                    cutShort = failure
                    break
                }
            }
            // Marked processed only when every item was applied or refused for good. Cut short
            // by a database fault, the event is handled again (`handleStoring`: the items already
            // applied come again as repeats, which the machines drop); by the engine stopping, the
            // agent keeps the message and announces it again after the start.
            if let cutShort {
                if cutShort is SQLError, !closing { throw cutShort }
                return true
            }
            await agent.messageProcessed(conn, seq: seq)
        default:
            break
        }
        return true
    }
}
