import SwiftplexBase

/// One group as the local user sees it — its members, the introductions it hosts, the messages it
/// has seen — and the pure state machine of the group protocol (p2p groups: a full mesh of member
/// connections, with the member who invited a newcomer introducing it to everyone).
///
/// `handle(_:newMessageId:)` takes a local command, a message received from a member or a
/// connection event, checks it (roles through ``GroupPermissions``, membership, state), and
/// returns the effects for the engine to perform. A refused input throws a ``GroupError`` and
/// changes nothing. No I/O, no clock, no randomness: message ids come from `newMessageId`.
///
/// ```
/// host H invites B; M is in the group already
/// H: addMember ─→ createInvitation ─invitationCreated→ x.grp.inv ⇒ B (contact)
/// B: join ─→ joinConnection(x.grp.acpt)        H: confirmation(x.grp.acpt) ─→ allowConnection
/// H,B: connected ─→ H: x.grp.mem.new(B) ⇒ M;  x.grp.mem.intro(M) ⇒ B;  history ⇒ B
/// B: intro ─→ createInvitation ─invitationCreated→ x.grp.mem.inv(M) ⇒ H ─→ x.grp.mem.fwd(B) ⇒ M
/// M: fwd ─→ joinConnection(x.grp.mem.info)      B: confirmation(x.grp.mem.info) ─→ allowConnection
/// B,M: connected ─→ x.grp.mem.con ⇒ H (each)    until then H forwards B's and M's messages
/// ```
public struct GroupState: Sendable {
    /// The user's own membership (category `user`).
    public private(set) var membership: GroupMemberState
    public private(set) var profile: GroupProfile
    public private(set) var members: [MemberId: GroupMemberState] = [:]
    /// Host only: introductions in progress or done.
    public private(set) var introductions: [Introduction.Key: Introduction.Status] = [:]
    /// Host only: for each member, the members it has an introduction with (either way round), so
    /// that a leave touches only that member's introductions, not every one the group ever had.
    private var introPartners: [MemberId: Set<MemberId>] = [:]
    /// Host only: for each member, the members whose messages to and from it the host still
    /// forwards (an introduction neither side has finished reporting): a message's forwarding
    /// costs what those members need, not a scan of every introduction.
    private var forwardPartners: [MemberId: Set<MemberId>] = [:]
    /// The most members the group takes (the user included; invitees and members waiting for
    /// review count, members who left or were removed do not); nil: no limit. Set by the engine
    /// from its limits; not stored with the group.
    public private(set) var memberLimit: Int?
    /// Messages seen, per author.
    public private(set) var dedup: ForwardDedup
    /// The invitation's connection request, kept until the user joins.
    public private(set) var pendingJoinRequest: String?

    /// A new group created by the user, who is its owner (`/_group`).
    public init(creator memberId: MemberId, profile ownProfile: MemberProfile, groupProfile: GroupProfile, dedup: ForwardDedup = ForwardDedup()) {
        membership = GroupMemberState(memberId: memberId, role: .owner, status: .creator, category: .user, profile: ownProfile)
        profile = groupProfile
        self.dedup = dedup
    }

    /// A group as stored (the engine restores the machine from its database).
    public init(membership: GroupMemberState, profile: GroupProfile, members: [GroupMemberState],
                introductions: [Introduction] = [], pendingJoinRequest: String? = nil, dedup: ForwardDedup = ForwardDedup()) {
        self.membership = membership
        self.profile = profile
        for m in members { self.members[m.memberId] = m }
        self.pendingJoinRequest = pendingJoinRequest
        self.dedup = dedup
        for i in introductions {
            self.introductions[i.key] = i.status
            reindex(i.key)
        }
    }

    /// An invitation received from a contact (`x.grp.inv` on the direct connection): the group as
    /// the invitee first knows it — itself `invited`, the inviter as its host. SimpleX
    /// `processGroupInvitation`: the inviter must be admin or above and at least the invited role;
    /// the two member ids must differ; a channel's profile cannot come this way.
    public static func invited(by contact: ContactRef, _ invitation: GroupInvitation, ownProfile: MemberProfile,
                               dedup: ForwardDedup = ForwardDedup()) throws(GroupError) -> (GroupState, [GroupEffect]) {
        let from = invitation.fromMember, me = invitation.invitedMember
        try GroupPermissions.authorize(actor: from.memberRole, action: .invite(as: me.memberRole))
        guard from.memberId != me.memberId else { throw GroupError(.duplicateMember, "x.grp.inv: inviter and invitee have the same member id") }
        guard !invitation.groupProfile.isPublicGroup else { throw GroupError(.invalidState, "x.grp.inv: a channel cannot be joined by invitation") }
        let host = GroupMemberState(memberId: from.memberId, role: from.memberRole, status: .invited, category: .host, contact: contact)
        let state = GroupState(
            membership: GroupMemberState(memberId: me.memberId, role: me.memberRole, status: .invited, category: .user,
                                         profile: ownProfile, invitedBy: from.memberId),
            profile: invitation.groupProfile, members: [host], pendingJoinRequest: invitation.connRequest, dedup: dedup
        )
        return (state, [
            .saveMembership(state.membership), .saveMember(host), .saveProfile(invitation.groupProfile),
            .emit(.receivedGroupInvitation(contact: contact, fromMemberRole: from.memberRole, memberRole: me.memberRole)),
        ])
    }

    /// A group joined through its link, as the joiner first knows it from the host's
    /// `x.grp.link.inv` (connection info on the join connection): the user `accepted` — or
    /// `pending_review` when the host accepted it for review or the profile asks every joiner to be
    /// reviewed (SimpleX `acceptanceToStatus`) — the host `accepted` until the connection is up.
    /// The connection is allowed with the user's profile (`x.info`), and `groupLinkConnecting` reported.
    public static func joinedViaLink(_ invitation: GroupLinkInvitation, ownProfile: MemberProfile,
                                     dedup: ForwardDedup = ForwardDedup()) throws(GroupError) -> (GroupState, [GroupEffect]) {
        let from = invitation.fromMember, me = invitation.invitedMember
        try GroupPermissions.authorize(actor: from.memberRole, action: .invite(as: me.memberRole))
        guard from.memberId != me.memberId else { throw GroupError(.duplicateMember, "x.grp.link.inv: host and joiner have the same member id") }
        guard !invitation.groupProfile.isPublicGroup else { throw GroupError(.invalidState, "x.grp.link.inv: a channel is not joined this way") }
        let status: GroupMemberStatus = switch invitation.accepted {
        case .pendingApproval?: .pendingApproval
        case .pendingReview?: .pendingReview
        case .accepted?, nil: invitation.groupProfile.reviewsAllMembers ? .pendingReview : .accepted
        }
        let name = invitation.fromMemberName.isEmpty ? String(from.memberId.text.prefix(7)) : invitation.fromMemberName
        let host = GroupMemberState(memberId: from.memberId, role: from.memberRole, status: .accepted, category: .host,
                                    profile: MemberProfile(displayName: name))
        let state = GroupState(
            membership: GroupMemberState(memberId: me.memberId, role: me.memberRole, status: status, category: .user,
                                         profile: ownProfile, invitedBy: from.memberId),
            profile: invitation.groupProfile, members: [host], dedup: dedup
        )
        let allow = GroupEnvelope(msgId: nil, event: "x.info", params: .object([("profile", ownProfile.json)]))
        return (state, [
            .saveMembership(state.membership), .saveMember(host), .saveProfile(invitation.groupProfile),
            .allowConnection(for: host.memberId, info: allow), .emit(.groupLinkConnecting(host: host.memberId)),
        ])
    }

    public func member(_ id: MemberId) -> GroupMemberState? { members[id] }

    /// The member who brought the user in.
    public var host: GroupMemberState? { membership.invitedBy.flatMap { members[$0] } }

    /// Handles one input. On success the state has moved and the effects say what to do; on a
    /// ``GroupError`` nothing changed.
    public mutating func handle(_ input: GroupInput, newMessageId: () -> String) throws(GroupError) -> [GroupEffect] {
        var next = self
        let effects = try withoutActuallyEscaping(newMessageId) { (ids) throws(GroupError) -> [GroupEffect] in
            var run = Run(newMessageId: ids)
            try next.apply(input, &run)
            return run.effects
        }
        self = next
        return effects
    }
}

/// The effects of one `handle` call, being collected.
struct Run {
    let newMessageId: () -> String
    var effects: [GroupEffect] = []

    mutating func envelope(_ message: GroupMessage) -> GroupEnvelope { message.envelope(msgId: newMessageId()) }
}

extension GroupState {
    private var isHost: Bool { membership.role >= .admin }

    private var userActive: Bool { membership.status.isCurrent }

    /// In the group or waiting for admission: member connections may still be made.
    private var userJoining: Bool { membership.status.isCurrent || membership.isPending }

    private func requireActive() throws(GroupError) {
        guard userActive else { throw GroupError(.notJoined, "the user is not in the group (\(membership.status.rawValue))") }
    }

    private func requireMember(_ id: MemberId, _ what: String) throws(GroupError) -> GroupMemberState {
        guard let m = members[id] else { throw GroupError(.unknownMember, "\(what): unknown member \(id)") }
        return m
    }

    /// Members the user's messages go to directly: connected ones. Members still being introduced
    /// get them from the host (forwarding); invitees still connecting, as pending messages.
    private func recipients(excluding: MemberId? = nil) -> [MemberId] {
        members.values.filter { $0.isConnected && $0.memberId != excluding }.map(\.memberId).sorted()
    }

    private mutating func save(_ m: GroupMemberState, _ run: inout Run) {
        members[m.memberId] = m
        run.effects.append(.saveMember(m))
    }

    private mutating func saveMembership(_ run: inout Run) { run.effects.append(.saveMembership(membership)) }

    private mutating func setIntro(_ key: Introduction.Key, _ status: Introduction.Status?, _ run: inout Run) {
        introductions[key] = status
        reindex(key)
        run.effects.append(.saveIntroduction(key, status))
    }

    /// Brings the two members' entries in ``introPartners`` and ``forwardPartners`` in line with
    /// the introductions between them (there may be one each way round).
    private mutating func reindex(_ key: Introduction.Key) {
        let a = key.re, b = key.to
        let there = introductions[Introduction.Key(re: a, to: b)], back = introductions[Introduction.Key(re: b, to: a)]
        Self.link(&introPartners, a, b, there != nil || back != nil)
        Self.link(&forwardPartners, a, b, there?.needsForwarding == true || back?.needsForwarding == true)
    }

    private static func link(_ index: inout [MemberId: Set<MemberId>], _ a: MemberId, _ b: MemberId, _ linked: Bool) {
        if linked {
            index[a, default: []].insert(b)
            index[b, default: []].insert(a)
        } else {
            for (x, y) in [(a, b), (b, a)] {
                index[x]?.remove(y)
                if index[x]?.isEmpty == true { index[x] = nil }
            }
        }
    }

    private mutating func dropIntroductions(involving id: MemberId, _ run: inout Run) {
        var keys: [Introduction.Key] = []
        for partner in introPartners[id] ?? [] {
            for key in [Introduction.Key(re: id, to: partner), Introduction.Key(re: partner, to: id)] where introductions[key] != nil {
                keys.append(key)
            }
        }
        for key in keys.sorted(by: { ($0.re, $0.to) < ($1.re, $1.to) }) { setIntro(key, nil, &run) }
    }

    /// The same group, taking at most `limit` members (the user included); nil: no limit.
    public func withMemberLimit(_ limit: Int?) -> GroupState {
        var s = self
        s.memberLimit = limit
        return s
    }

    /// Refuses a new member when the group is at its ``memberLimit``.
    private func requireRoom() throws(GroupError) {
        guard let limit = memberLimit else { return }
        let count = members.values.reduce(1) { $1.status.isRemoved || $1.status == .unknown ? $0 : $0 + 1 }
        guard count < limit else { throw GroupError(.groupFull, "the group has \(count) members, its limit (\(limit))") }
    }

    /// A member is gone (left or removed): its connection and introductions go, its messages are
    /// refused from now on.
    private mutating func memberGone(_ m: GroupMemberState, status: GroupMemberStatus, _ run: inout Run) {
        var m = m
        m.status = status
        save(m, &run)
        run.effects.append(.deleteConnection(for: m.memberId))
        dropIntroductions(involving: m.memberId, &run)
        dedup.forget(author: m.memberId)
    }

    private mutating func userGone(status: GroupMemberStatus, _ run: inout Run) {
        membership.status = status
        saveMembership(&run)
        run.effects.append(.deleteAllConnections)
        for key in introductions.keys.sorted(by: { ($0.re, $0.to) < ($1.re, $1.to) }) { setIntro(key, nil, &run) }
    }

    private func broadcast(_ env: GroupEnvelope, _ run: inout Run, excluding: MemberId? = nil) {
        for id in recipients(excluding: excluding) { run.effects.append(.send(env, to: id)) }
    }

    mutating func apply(_ input: GroupInput, _ run: inout Run) throws(GroupError) {
        switch input {
        case let .addMember(contact, memberId, role, profile): try addMember(contact, memberId, role, profile, &run)
        case .join: try join(&run)
        case let .changeRole(id, to): try changeRole(id, to, &run)
        case let .remove(id, messages): try remove(id, messages, &run)
        case let .block(id, blocked): try block(id, blocked, &run)
        case .leave: try leave(&run)
        case .deleteGroup: try deleteGroup(&run)
        case let .updateProfile(p): try updateProfile(p, &run)
        case let .sendContent(event, params): try sendContent(event, params, &run)
        case let .linkRequest(id, role, profile, request, review): try linkRequest(id, role, profile, request, review, &run)
        case let .acceptMember(id, role): try acceptMember(id, role, &run)
        case let .updateMembershipProfile(p): try updateMembershipProfile(p, &run)
        case let .received(from, env, brokerTs): try received(from, env, brokerTs, &run)
        case let .invitationCreated(id, connRequest): try invitationCreated(id, connRequest, &run)
        case let .confirmation(from, info): try confirmation(from, info, &run)
        case let .connected(id): try connected(id, &run)
        }
    }

    // MARK: Local commands

    private mutating func addMember(_ contact: ContactRef, _ id: MemberId, _ role: GroupMemberRole, _ profile: MemberProfile?, _ run: inout Run) throws(GroupError) {
        try requireActive()
        try GroupPermissions.authorize(actor: membership.role, action: .invite(as: role))
        guard id != membership.memberId, members[id] == nil else { throw GroupError(.duplicateMember, "member id \(id) is in the group already") }
        try requireRoom()
        if let existing = members.values.first(where: { $0.contact == contact && $0.category == .invitee && !$0.status.isRemoved }) {
            throw GroupError(.duplicateMember, "the contact is invited already as \(existing.memberId)")
        }
        save(GroupMemberState(memberId: id, role: role, status: .invited, category: .invitee, profile: profile, invitedBy: membership.memberId, contact: contact), &run)
        run.effects.append(.createInvitation(for: id))
    }

    /// SimpleX `acceptGroupJoinRequestAsync`: the joiner becomes a member (invitee, via the link)
    /// with the link's role, `pending_review` when every joiner is reviewed; the host answers with
    /// `x.grp.link.inv` as connection info.
    private mutating func linkRequest(_ id: MemberId, _ role: GroupMemberRole, _ joiner: MemberProfile, _ request: Int64, _ review: Bool,
                                      _ run: inout Run) throws(GroupError) {
        try requireActive()
        try GroupPermissions.authorize(actor: membership.role, action: .invite(as: role))
        guard id != membership.memberId, members[id] == nil else { throw GroupError(.duplicateMember, "member id \(id) is in the group already") }
        try requireRoom()
        // SimpleX's `groupSize`: the current members (the user included) before the joiner.
        let size = members.values.filter { $0.status.isCurrent }.count + 1
        let m = GroupMemberState(memberId: id, role: role, status: review ? .pendingReview : .accepted, category: .invitee, profile: joiner,
                                 invitedBy: membership.memberId, viaLink: true)
        save(m, &run)
        let invitation = GroupLinkInvitation(
            fromMember: MemberIdRole(membership.memberId, membership.role), fromMemberName: ownProfile.displayName,
            invitedMember: MemberIdRole(id, role), groupProfile: profile, accepted: .accepted,
            groupSize: size)
        run.effects.append(.acceptLinkRequest(for: id, request: request, info: run.envelope(.linkInvitation(invitation))))
    }

    /// SimpleX `APIAcceptMember`: a member waiting for review is admitted with `role` — told with
    /// `x.grp.link.acpt` (as are the moderators it was introduced to), then, once its connection is
    /// up, announced and introduced to everyone else (`introduceToRemaining`).
    private mutating func acceptMember(_ id: MemberId, _ role: GroupMemberRole, _ run: inout Run) throws(GroupError) {
        try requireActive()
        var m = try requireMember(id, "accepting")
        guard m.isPending else { throw GroupError(.invalidState, "member \(id) is not waiting for review (\(m.status.rawValue))") }
        try GroupPermissions.authorize(actor: membership.role, action: .admit(as: role))
        let accept = run.envelope(.linkAccept(acceptance: .accepted, role: role, memberId: id))
        for mod in moderators(excluding: id) where introductions[Introduction.Key(re: mod, to: id)] != nil {
            run.effects.append(.send(accept, to: mod))
        }
        m.role = role
        if m.pendingConnected {
            run.effects.append(.send(accept, to: id))
            m.status = .connected
            m.pendingConnected = false
            save(m, &run)
            introduce(m, to: members.values.filter { $0.isConnected && $0.memberId != id && introductions[Introduction.Key(re: $0.memberId, to: id)] == nil }, &run)
        } else {
            // Not connected yet: admitted now; told and introduced to everyone when the connection is up.
            m.status = .accepted
            save(m, &run)
        }
        run.effects.append(.emit(.memberAccepted(id)))
    }

    /// Connected moderators and above (who review joiners), sorted.
    private func moderators(excluding: MemberId) -> [MemberId] {
        members.values.filter { $0.isConnected && $0.role >= .moderator && $0.memberId != excluding }.map(\.memberId).sorted()
    }

    private mutating func join(_ run: inout Run) throws(GroupError) {
        guard membership.status == .invited, let connRequest = pendingJoinRequest, var host = self.host else {
            throw GroupError(.invalidState, "no invitation to accept (membership is \(membership.status.rawValue))")
        }
        let info = run.envelope(.accept(memberId: membership.memberId))
        run.effects.append(.joinConnection(for: host.memberId, connRequest: connRequest, info: info))
        pendingJoinRequest = nil
        membership.status = .accepted
        saveMembership(&run)
        host.status = .accepted
        save(host, &run)
        run.effects.append(.emit(.userAcceptedGroupSent))
    }

    private mutating func changeRole(_ id: MemberId, _ to: GroupMemberRole, _ run: inout Run) throws(GroupError) {
        try requireActive()
        var m = try requireMember(id, "changing role")
        guard m.status.isCurrent else { throw GroupError(.memberNotCurrent, "member \(id) is \(m.status.rawValue)") }
        try GroupPermissions.authorize(actor: membership.role, action: .changeRole(to: to), target: m.role)
        guard m.role != to else { return }
        broadcast(run.envelope(.memberRole(memberId: id, role: to)), &run)
        let from = m.role
        m.role = to
        save(m, &run)
        run.effects.append(.emit(.memberRole(by: nil, member: id, from: from, to: to)))
    }

    private mutating func remove(_ id: MemberId, _ messages: Bool, _ run: inout Run) throws(GroupError) {
        try requireActive()
        let m = try requireMember(id, "removing")
        guard !m.status.isRemoved else { throw GroupError(.memberNotCurrent, "member \(id) is \(m.status.rawValue)") }
        try GroupPermissions.authorize(actor: membership.role, action: .remove, target: m.role)
        // The removed member gets it too, so that it knows.
        broadcast(run.envelope(.memberDelete(memberId: id, messages: messages)), &run)
        memberGone(m, status: .removed, &run)
        run.effects.append(.emit(.deletedMember(by: nil, member: id, withMessages: messages)))
    }

    private mutating func block(_ id: MemberId, _ blocked: Bool, _ run: inout Run) throws(GroupError) {
        try requireActive()
        var m = try requireMember(id, "blocking")
        guard m.status.isCurrent else { throw GroupError(.memberNotCurrent, "member \(id) is \(m.status.rawValue)") }
        try GroupPermissions.authorize(actor: membership.role, action: .block, target: m.role)
        guard m.blocked != blocked else { return }
        // As SimpleX, the blocked member is not told (`x.grp.mem.restrict` about it is ignored there anyway).
        broadcast(run.envelope(.memberRestrict(memberId: id, restriction: blocked ? .blocked : .unrestricted)), &run, excluding: id)
        m.blocked = blocked
        save(m, &run)
        run.effects.append(.emit(.memberBlockedForAll(by: nil, member: id, blocked: blocked)))
    }

    private mutating func leave(_ run: inout Run) throws(GroupError) {
        guard !membership.status.isRemoved else { throw GroupError(.notJoined, "the user is not in the group (\(membership.status.rawValue))") }
        broadcast(run.envelope(.leave), &run)
        userGone(status: .left, &run)
        run.effects.append(.emit(.leftMemberUser))
    }

    private mutating func deleteGroup(_ run: inout Run) throws(GroupError) {
        try requireActive()
        try GroupPermissions.authorize(actor: membership.role, action: .deleteGroup)
        broadcast(run.envelope(.delete), &run)
        userGone(status: .deleted, &run)
        run.effects.append(.emit(.groupDeleted(by: nil)))
    }

    private mutating func updateProfile(_ p: GroupProfile, _ run: inout Run) throws(GroupError) {
        try requireActive()
        try GroupPermissions.authorize(actor: membership.role, action: .updateProfile)
        guard !p.isPublicGroup else { throw GroupError(.invalidState, "a group's profile cannot make it a channel") }
        guard p != profile else { return }
        broadcast(run.envelope(.info(p)), &run)
        let old = profile
        profile = p
        run.effects.append(.saveProfile(p))
        run.effects.append(.emit(.groupUpdated(by: nil, from: old, to: p)))
    }

    /// SimpleX sends the user's new profile to a group's members as `x.info` (before its next
    /// message there, `userMemberProfileUpdatedAt`); **Swiftplex** sends it at once.
    private mutating func updateMembershipProfile(_ p: MemberProfile, _ run: inout Run) throws(GroupError) {
        try requireActive()
        guard membership.profile != p else { return }
        broadcast(GroupEnvelope(msgId: run.newMessageId(), event: GroupMessage.profileEvent, params: .object([("profile", p.json)])), &run)
        membership.profile = p
        saveMembership(&run)
    }

    private mutating func sendContent(_ event: String, _ params: JSONValue, _ run: inout Run) throws(GroupError) {
        try requireActive()
        guard GroupMessage.Event(rawValue: event) == nil else {
            throw GroupError(.invalidState, "\(event) is a group control message, not content")
        }
        try checkContent(actor: membership, event: event, params: params)
        broadcast(GroupEnvelope(msgId: run.newMessageId(), event: event, params: params), &run)
    }

    /// Who may send which content: `x.msg.new`/`x.msg.update` need a role above observer
    /// (`memberCanSend`); `x.msg.del` naming another member's message is moderation (moderator
    /// and at least the author's role, `groupMessageDelete`).
    private func checkContent(actor: GroupMemberState, event: String, params: JSONValue) throws(GroupError) {
        switch event {
        case "x.msg.new", "x.msg.update", "x.grp.direct.inv":
            try GroupPermissions.authorize(actor: actor.role, action: .sendContent)
        case "x.msg.del":
            guard let text = params["memberId"]?.stringValue else { return }
            guard let target = MemberId(text) else { throw GroupError(.malformedMessage, "x.msg.del: memberId is not a member id") }
            guard target != actor.memberId else { return }
            let targetRole: GroupMemberRole
            if target == membership.memberId {
                targetRole = membership.role
            } else {
                guard let m = members[target] else { throw GroupError(.unknownMember, "x.msg.del: unknown member \(target)") }
                targetRole = m.role
            }
            try GroupPermissions.authorize(actor: actor.role, action: .deleteMessage, target: targetRole)
        default:
            return
        }
    }

    // MARK: Connection events

    private mutating func invitationCreated(_ id: MemberId, _ connRequest: String, _ run: inout Run) throws(GroupError) {
        let m = try requireMember(id, "invitation created")
        switch (m.category, m.status) {
        case (.invitee, .invited):
            guard let contact = m.contact else { throw GroupError(.invalidState, "invitee \(id) has no contact") }
            let invitation = GroupInvitation(
                fromMember: MemberIdRole(membership.memberId, membership.role), invitedMember: MemberIdRole(id, m.role),
                connRequest: connRequest, groupProfile: profile, groupSize: members.values.filter { $0.status.isCurrent }.count + 1
            )
            run.effects.append(.sendToContact(run.envelope(.invitation(invitation)), contact: contact))
            run.effects.append(.emit(.sentGroupInvitation(member: id, contact: contact)))
        case (.pre, .introduced):
            guard let host = host else { throw GroupError(.invalidState, "no host to send the invitation to") }
            var m = m
            m.status = .introInvited
            save(m, &run)
            run.effects.append(.send(run.envelope(.memberInvitation(memberId: id, IntroInvitation(groupConnReq: connRequest))), to: host.memberId))
        default:
            throw GroupError(.invalidState, "no invitation was asked for member \(id) (\(m.category.rawValue), \(m.status.rawValue))")
        }
    }

    private mutating func confirmation(_ id: MemberId, _ info: GroupEnvelope, _ run: inout Run) throws(GroupError) {
        guard userJoining else { throw GroupError(.notJoined, "the user is not in the group (\(membership.status.rawValue))") }
        var m = try requireMember(id, "confirmation")
        guard !m.status.isRemoved else { throw GroupError(.memberNotCurrent, "member \(id) is \(m.status.rawValue)") }
        let message: GroupMessage?
        do { message = try info.groupMessage() } catch { throw GroupError(.malformedMessage, error.message) }
        switch (m.category, m.status, message) {
        case let (.invitee, .invited, .accept(memberId)?):
            // SimpleX: the joiner's `x.grp.acpt` must carry the id it was invited with.
            guard memberId == id else { throw GroupError(.unexpectedSender, "x.grp.acpt: member id does not match the invitation") }
            m.status = .accepted
            save(m, &run)
            run.effects.append(.allowConnection(for: id, info: nil))
        case let (.pre, .introInvited, .memberInfo(memberId, memberProfile)?):
            guard memberId == id else { throw GroupError(.unexpectedSender, "x.grp.mem.info: member id does not match the introduction") }
            m.profile = memberProfile
            save(m, &run)
            run.effects.append(.allowConnection(for: id, info: run.envelope(.memberInfo(memberId: membership.memberId, profile: ownProfile))))
        default:
            throw GroupError(.invalidState, "unexpected confirmation \(info.event) from member \(id) (\(m.category.rawValue), \(m.status.rawValue))")
        }
    }

    private var ownProfile: MemberProfile { membership.profile ?? MemberProfile(displayName: String(membership.memberId.text.prefix(7))) }

    private mutating func connected(_ id: MemberId, _ run: inout Run) throws(GroupError) {
        var m = try requireMember(id, "connected")
        guard !m.status.isRemoved, userJoining else {
            throw GroupError(.memberNotCurrent, "member \(id) is \(m.status.rawValue), user is \(membership.status.rawValue)")
        }
        switch m.category {
        case .host:
            guard m.status == .accepted else { throw GroupError(.invalidState, "host connected before the user joined") }
            m.status = .connected
            save(m, &run)
            // A joiner waiting for review stays pending until the host's `x.grp.link.acpt`.
            if !membership.isPending { membership.status = .connected }
            saveMembership(&run)
            run.effects.append(.emit(.userJoinedGroup(host: id)))
        case .invitee:
            guard m.status == .accepted || (m.isPending && m.viaLink && !m.pendingConnected) else {
                throw GroupError(.invalidState, "invitee \(id) connected in status \(m.status.rawValue)")
            }
            // SimpleX `sendXGrpLinkMem`: a link joiner learns the host's profile.
            if m.viaLink { run.effects.append(.send(run.envelope(.linkMember(profile: ownProfile)), to: id)) }
            if m.isPending {
                // SimpleX `introduceToModerators`: the joiner hears it waits for review, and
                // meets the moderators only (they see it announced with its support scope).
                m.pendingConnected = true
                save(m, &run)
                run.effects.append(.emit(.joinedGroupMember(id)))
                if m.status == .pendingReview {
                    run.effects.append(.send(run.envelope(.linkAccept(acceptance: .pendingReview, role: m.role, memberId: id)), to: id))
                    introduce(m, to: moderators(excluding: id).compactMap { members[$0] }, scope: .member(id), &run)
                }
                return
            }
            if m.viaLink && profile.reviewsAllMembers {
                // Admitted before its connection was up: it still waits for the word.
                run.effects.append(.send(run.envelope(.linkAccept(acceptance: .accepted, role: m.role, memberId: id)), to: id))
            }
            m.status = .connected
            save(m, &run)
            run.effects.append(.emit(.joinedGroupMember(id)))
            introduceToAll(m, &run)
        case .pre, .post:
            guard m.status == .introInvited else { throw GroupError(.invalidState, "member \(id) connected in status \(m.status.rawValue)") }
            m.status = .connected
            save(m, &run)
            run.effects.append(.emit(.connectedToGroupMember(id)))
            // Tell whoever introduced us that the pair is connected, so it stops forwarding
            // (SimpleX `sendXGrpMemCon`: a pre-member's is the user's host, a post-member's its inviter).
            let introducer = m.category == .pre ? membership.invitedBy : m.invitedBy
            if let introducer, members[introducer]?.isConnected == true {
                run.effects.append(.send(run.envelope(.memberConnected(memberId: id)), to: introducer))
            }
        case .user:
            throw GroupError(.invalidState, "the user's own member id cannot connect")
        }
    }

    /// The host's part when an invitee connects (SimpleX `introduceToAll`): announce it to every
    /// connected member, introduce every connected member to it, then history.
    private mutating func introduceToAll(_ newMember: GroupMemberState, _ run: inout Run) {
        introduce(newMember, to: members.values.filter { $0.isConnected && $0.memberId != newMember.memberId }, &run)
    }

    /// Announces `newMember` to `recipients` (`x.grp.mem.new`, with `scope` for a member still
    /// under review) and introduces each of them to it, then sends the history.
    private mutating func introduce(_ newMember: GroupMemberState, to recipients: [GroupMemberState], scope: MessageScope? = nil, _ run: inout Run) {
        let others = recipients.sorted { $0.memberId < $1.memberId }
        let announce = run.envelope(.memberNew(newMember.info, scope: scope))
        for m in others { run.effects.append(.send(announce, to: m.memberId)) }
        for m in others {
            run.effects.append(.send(run.envelope(.memberIntro(m.info, restrictions: m.blocked ? .blocked : nil)), to: newMember.memberId))
            setIntro(Introduction.Key(re: m.memberId, to: newMember.memberId), .sent, &run)
        }
        if scope == nil { run.effects.append(.sendHistory(to: newMember.memberId)) }
    }

    // MARK: Received messages

    private mutating func received(_ from: MemberId, _ env: GroupEnvelope, _ brokerTs: String, _ run: inout Run) throws(GroupError) {
        guard !membership.status.isRemoved else { throw GroupError(.notJoined, "the user is not in the group (\(membership.status.rawValue))") }
        let sender = try requireMember(from, env.event)
        guard !sender.status.isRemoved else { throw GroupError(.memberNotCurrent, "\(env.event) from member \(from), who is \(sender.status.rawValue)") }
        let message: GroupMessage?
        do { message = try env.groupMessage() } catch { throw GroupError(.malformedMessage, error.message) }

        if case let .forward(fwd)? = message {
            try receivedForward(fwd, forwarder: sender, &run)
            return
        }
        if env.isForwardable {
            switch dedup.record(author: from, msgId: env.msgId, forwardedBy: nil) {
            case .new: break
            case let .duplicate(forwardedBy):
                // Came forwarded first; now directly: the host may stop (SimpleX answers the
                // duplicate with `x.grp.mem.con`).
                if let forwardedBy, members[forwardedBy]?.isConnected == true {
                    run.effects.append(.send(run.envelope(.memberConnected(memberId: from)), to: forwardedBy))
                }
                return
            }
        }
        // The host forwards to members not yet connected to the sender — chosen before the
        // message is applied, as a leave or removal drops the sender's introductions.
        let targets = isHost && env.isForwardable && !sender.blocked ? forwardTargets(of: from) : []
        try process(env, message, author: sender, forwardedBy: nil, brokerTs: brokerTs, &run)
        if !targets.isEmpty {
            let fwd = GroupForward(memberId: from, memberName: sender.profile?.displayName ?? "", msgTs: brokerTs, msg: env)
            let out = run.envelope(.forward(fwd))
            for t in targets where members[t]?.isConnected == true { run.effects.append(.send(out, to: t)) }
        }
    }

    /// SimpleX `forwardMsgs` (p2p): to members introduced to the sender (if it is our invitee) and
    /// to our invitees the sender was introduced to, while neither has reported the connection.
    private func forwardTargets(of sender: MemberId) -> [MemberId] {
        (forwardPartners[sender] ?? []).filter { members[$0]?.isConnected == true }.sorted()
    }

    private mutating func receivedForward(_ fwd: GroupForward, forwarder: GroupMemberState, _ run: inout Run) throws(GroupError) {
        // SimpleX `isMemberGrpFwdRelay`: in p2p groups only admins and owners forward.
        try GroupPermissions.authorize(actor: forwarder.role, action: .host)
        guard let authorId = fwd.memberId else {
            throw GroupError(.invalidState, "x.grp.msg.forward without memberId is a channel's, not in a group")
        }
        guard fwd.msg.isForwardable else {
            throw GroupError(.malformedMessage, "x.grp.msg.forward: \(fwd.msg.event) is never forwarded")
        }
        let inner: GroupMessage?
        do { inner = try fwd.msg.groupMessage() } catch { throw GroupError(.malformedMessage, error.message) }
        guard authorId != membership.memberId else { throw GroupError(.invalidState, "x.grp.msg.forward of the user's own message") }
        var author: GroupMemberState
        if let known = members[authorId] {
            author = known
        } else {
            // SimpleX creates the unknown author with the group's default role for unknown members
            // (author in p2p groups), except for a leave, which there is nothing to apply to.
            if inner == .leave { return }
            author = GroupMemberState(memberId: authorId, role: .author, status: .unknown, category: .pre,
                                      profile: fwd.memberName.isEmpty ? nil : MemberProfile(displayName: fwd.memberName), invitedBy: forwarder.memberId)
            save(author, &run)
        }
        guard !author.status.isRemoved else {
            throw GroupError(.memberNotCurrent, "forwarded \(fwd.msg.event) from member \(authorId), who is \(author.status.rawValue)")
        }
        // Forwards are expected only from the member who introduced us to the author: our host or
        // the author's inviter (SimpleX `expectedForwarder`); an unknown author's from any admin.
        // The user's own removal may come from any admin that got it directly (SimpleX `xGrpMemDel`
        // `forwardToMember`), possibly before the author's own copy.
        var removesUser = false
        if case let .memberDelete(id, _)? = inner, id == membership.memberId { removesUser = true }
        let expected = forwarder.memberId == membership.invitedBy || author.invitedBy == forwarder.memberId || author.status == .unknown
        guard expected || removesUser else {
            throw GroupError(.unexpectedSender, "member \(forwarder.memberId) may not forward messages of \(authorId)")
        }
        if !expected {
            // Taken only because it removes the user: nothing shows that its author sent it, so the
            // forwarder must itself be allowed to remove the user — otherwise an admin could pass
            // off an owner's removal of an owner (or of an admin) as the owner's.
            try GroupPermissions.authorize(actor: forwarder.role, action: .remove, target: membership.role)
        }
        switch dedup.record(author: authorId, msgId: fwd.msg.msgId, forwardedBy: forwarder.memberId) {
        case .new: break
        case .duplicate: return
        }
        author = members[authorId] ?? author
        try process(fwd.msg, inner, author: author, forwardedBy: forwarder.memberId, brokerTs: fwd.msgTs, &run)
    }

    /// Applies one message from `author` (received directly, or forwarded by `forwardedBy`).
    private mutating func process(_ env: GroupEnvelope, _ message: GroupMessage?, author a: GroupMemberState, forwardedBy: MemberId?,
                                  brokerTs: String, _ run: inout Run) throws(GroupError) {
        guard let message else {
            // Content.
            guard a.status.isCurrent || a.status == .unknown else {
                throw GroupError(.memberNotCurrent, "\(env.event) from member \(a.memberId), who is \(a.status.rawValue)")
            }
            if env.event == GroupMessage.profileEvent {
                // SimpleX `xInfoMember`: any member's own profile, forwarded like content.
                let p: MemberProfile
                do { p = try MemberProfile(json: env.params["profile"] ?? .null) } catch { throw GroupError(.malformedMessage, error.message) }
                guard a.profile != p else { return }
                var m = a
                m.profile = p
                save(m, &run)
                run.effects.append(.emit(.memberUpdated(a.memberId, from: a.profile, to: p)))
                return
            }
            try checkContent(actor: a, event: env.event, params: env.params)
            run.effects.append(.applyContent(env, author: a.memberId, forwardedBy: forwardedBy, blocked: a.blocked,
                                             msgTs: forwardedBy == nil ? nil : brokerTs))
            return
        }
        let direct = forwardedBy == nil
        switch message {
        case .invitation, .accept, .linkInvitation, .linkRejection, .memberInfo:
            throw GroupError(.invalidState, "\(env.event) is not sent over a member connection")
        case .forward:
            throw GroupError(.malformedMessage, "nested x.grp.msg.forward")
        case let .linkMember(p):
            guard direct, a.category == .host else { throw GroupError(.unexpectedSender, "x.grp.link.mem only comes from the host") }
            var h = a
            h.profile = p
            save(h, &run)
        case let .linkAccept(acceptance, role, id):
            try GroupPermissions.authorize(actor: a.role, action: .admit(as: role))
            if id == membership.memberId {
                guard acceptance == .accepted else { return }
                guard membership.isPending else { return }
                membership.role = role
                membership.status = .connected
                saveMembership(&run)
                run.effects.append(.emit(.userJoinedGroup(host: a.memberId)))
            } else {
                var m = try requireMember(id, env.event)
                m.role = role
                if m.status == .pendingReview || m.status == .pendingApproval { m.status = .announced }
                save(m, &run)
                run.effects.append(.emit(.memberAcceptedByOther(by: a.memberId, member: id)))
            }
        case let .memberNew(info, scope):
            // SimpleX `xGrpMemNew` with `checkHostRole`.
            try GroupPermissions.authorize(actor: a.role, action: .invite(as: info.memberRole))
            guard info.memberId != membership.memberId else { return }
            guard members[info.memberId] == nil || members[info.memberId]?.status == .unknown else {
                throw GroupError(.duplicateMember, "x.grp.mem.new: member \(info.memberId) exists")
            }
            let m = GroupMemberState(memberId: info.memberId, role: info.memberRole, status: scope == nil ? .announced : .pendingReview,
                                     category: .post, profile: info.profile, invitedBy: a.memberId)
            save(m, &run)
            run.effects.append(.emit(.joinedGroupMemberConnecting(host: a.memberId, member: m.memberId)))
        case let .memberIntro(info, restriction):
            guard direct, a.category == .host else { throw GroupError(.unexpectedSender, "x.grp.mem.intro only comes from the host") }
            try GroupPermissions.authorize(actor: a.role, action: .host)
            guard info.memberId != membership.memberId, members[info.memberId] == nil else {
                throw GroupError(.duplicateMember, "x.grp.mem.intro: member \(info.memberId) exists")
            }
            let m = GroupMemberState(memberId: info.memberId, role: info.memberRole, status: .introduced, category: .pre,
                                     profile: info.profile, invitedBy: a.memberId, blocked: restriction?.isBlocked ?? false)
            save(m, &run)
            run.effects.append(.createInvitation(for: m.memberId))
        case let .memberInvitation(id, intro):
            guard direct, a.category == .invitee else { throw GroupError(.unexpectedSender, "x.grp.mem.inv only comes from an invitee") }
            let key = Introduction.Key(re: id, to: a.memberId)
            guard let status = introductions[key] else {
                // The introduced member left or was removed meanwhile (its introductions went with it).
                if let re = members[id], re.status.isRemoved { return }
                throw GroupError(.invalidState, "x.grp.mem.inv: \(id) was not introduced to \(a.memberId)")
            }
            guard status == .sent else { return }
            guard let re = members[id], re.status.isCurrent else {
                // The introduced member left meanwhile: nothing to pass on.
                setIntro(key, nil, &run)
                return
            }
            setIntro(key, .invitationReceived, &run)
            run.effects.append(.send(run.envelope(.memberForward(a.info, intro)), to: re.memberId))
            setIntro(key, .invitationForwarded, &run)
        case let .memberForward(info, intro):
            try GroupPermissions.authorize(actor: a.role, action: .invite(as: info.memberRole))
            guard info.memberId != membership.memberId else { throw GroupError(.invalidState, "x.grp.mem.fwd about the user") }
            var m = members[info.memberId] ?? GroupMemberState(memberId: info.memberId, role: info.memberRole, status: .announced,
                                                               category: .post, profile: info.profile, invitedBy: a.memberId)
            guard m.status == .announced || m.status == .unknown || m.status == .pendingReview else {
                throw GroupError(.invalidState, "x.grp.mem.fwd: member \(info.memberId) is \(m.status.rawValue)")
            }
            m.status = .introInvited
            if m.profile == nil { m.profile = info.profile }
            if m.invitedBy == nil { m.invitedBy = a.memberId }
            save(m, &run)
            run.effects.append(.joinConnection(for: m.memberId, connRequest: intro.groupConnReq,
                                               info: run.envelope(.memberInfo(memberId: membership.memberId, profile: ownProfile))))
        case let .memberConnected(id):
            _ = try requireMember(id, env.event)
            if let s = introductions[Introduction.Key(re: id, to: a.memberId)] {
                setIntro(Introduction.Key(re: id, to: a.memberId), s == .reConnected || s == .connected ? .connected : .toConnected, &run)
            }
            if let s = introductions[Introduction.Key(re: a.memberId, to: id)] {
                setIntro(Introduction.Key(re: a.memberId, to: id), s == .toConnected || s == .connected ? .connected : .reConnected, &run)
            }
        case let .memberRole(id, role):
            if id == membership.memberId {
                try GroupPermissions.authorize(actor: a.role, action: .changeRole(to: role), target: membership.role)
                let from = membership.role
                guard from != role else { return }
                membership.role = role
                saveMembership(&run)
                run.effects.append(.emit(.userRole(by: a.memberId, from: from, to: role)))
            } else {
                var m = try requireMember(id, env.event)
                try GroupPermissions.authorize(actor: a.role, action: .changeRole(to: role), target: m.role)
                let from = m.role
                guard from != role else { return }
                m.role = role
                save(m, &run)
                run.effects.append(.emit(.memberRole(by: a.memberId, member: id, from: from, to: role)))
            }
        case let .memberRestrict(id, restriction):
            // SimpleX ignores one about the user (it may be sent to the blocked member too).
            guard id != membership.memberId else { return }
            var m = try requireMember(id, env.event)
            try GroupPermissions.authorize(actor: a.role, action: .block, target: m.role)
            guard m.blocked != restriction.isBlocked else { return }
            m.blocked = restriction.isBlocked
            save(m, &run)
            run.effects.append(.emit(.memberBlockedForAll(by: a.memberId, member: id, blocked: m.blocked)))
        case let .memberDelete(id, messages):
            if id == membership.memberId {
                try GroupPermissions.authorize(actor: a.role, action: .remove, target: membership.role)
                userGone(status: .removed, &run)
                run.effects.append(.emit(.deletedMemberUser(by: a.memberId, withMessages: messages)))
            } else {
                let m = try requireMember(id, env.event)
                try GroupPermissions.authorize(actor: a.role, action: .remove, target: m.role)
                guard !m.status.isRemoved else { return }
                // A forwarding admin passes the removal to the removed member before dropping its
                // connection (SimpleX `xGrpMemDel`, `forwardToMember`).
                if isHost, direct, m.isConnected {
                    let fwd = GroupForward(memberId: a.memberId, memberName: a.profile?.displayName ?? "", msgTs: brokerTs, msg: env)
                    run.effects.append(.send(run.envelope(.forward(fwd)), to: id))
                }
                memberGone(m, status: .removed, &run)
                run.effects.append(.emit(.deletedMember(by: a.memberId, member: id, withMessages: messages)))
            }
        case .leave:
            memberGone(a, status: .left, &run)
            run.effects.append(.emit(.leftMember(a.memberId)))
        case .delete:
            try GroupPermissions.authorize(actor: a.role, action: .deleteGroup)
            userGone(status: .deleted, &run)
            run.effects.append(.emit(.groupDeleted(by: a.memberId)))
        case let .info(p):
            try GroupPermissions.authorize(actor: a.role, action: .updateProfile)
            guard !p.isPublicGroup else { throw GroupError(.invalidState, "x.grp.info: publicGroup is not allowed in groups") }
            guard p != profile else { return }
            let old = profile
            profile = p
            run.effects.append(.saveProfile(p))
            run.effects.append(.emit(.groupUpdated(by: a.memberId, from: old, to: p)))
        case let .preferences(prefs):
            // SimpleX `xGrpPrefs`: the owner's, the profile's `groupPreferences` replaced.
            try GroupPermissions.authorize(actor: a.role, action: .updateProfile)
            var json = profile.json
            json.set("groupPreferences", prefs)
            let p: GroupProfile
            do { p = try GroupProfile(json: json) } catch { throw GroupError(.malformedMessage, error.message) }
            guard p != profile else { return }
            let old = profile
            profile = p
            run.effects.append(.saveProfile(p))
            run.effects.append(.emit(.groupUpdated(by: a.memberId, from: old, to: p)))
        }
    }
}

extension GroupMessage {
    /// `x.info {profile}`: a member's own profile (content, not a group event of this enum).
    public static let profileEvent = "x.info"
}
