import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

/// A chat relay's channels it refuses (SimpleX: the operator left them; keyed by the channel's
/// link), and its decision on each owner's invitation.
public struct RelayDirectory: Sendable, Hashable {
    public private(set) var rejectedLinks: Set<String>

    public init(rejectedLinks: Set<String> = []) { self.rejectedLinks = rejectedLinks }

    public enum Decision: Sendable {
        /// Accept the owner's contact request with this connection info (`x.grp.relay.reject`)
        /// and keep nothing else.
        case reject(info: GroupEnvelope)
        /// Serve the channel: the new channel's state and the effects to start with.
        case serve(ChannelRelayState, [ChannelRelayEffect])
    }

    /// SimpleX `xGrpRelayInv`: an invitation (the connection info of a contact request on the
    /// relay's address) for a channel the relay left is refused with `x.grp.relay.reject
    /// {reason: "rejoin_rejected"}`; otherwise the relay records the request (own status
    /// `invited`) and fetches the channel's link data.
    public func invitation(_ info: GroupEnvelope, ownMemberProfile: MemberProfile, newMessageId: () -> String) throws(ChannelError) -> Decision {
        let message: ChannelMessage?
        do { message = try info.channelMessage() } catch { throw ChannelError.malformed(error) }
        guard case let .relayInvitation(inv)? = message else {
            throw ChannelError(.unexpectedSender, "a relay's address accepts only x.grp.relay.inv, not \(info.event)")
        }
        guard inv.fromMember.memberRole == .owner else { throw ChannelError(.notAuthorized, "only an owner invites a relay") }
        if rejectedLinks.contains(inv.groupLink) {
            return .reject(info: ChannelMessage.relayReject(.rejoinRejected).envelope(msgId: newMessageId()))
        }
        let state = ChannelRelayState(invitation: inv, ownProfile: ownMemberProfile)
        return .serve(state, [.saveStatus(.invited), .fetchChannelLinkData(inv.groupLink)])
    }

    /// The operator left `channelLink`: refuse it from now on.
    public mutating func rememberRejected(_ channelLink: String) { rejectedLinks.insert(channelLink) }

    /// `/_relay allow #g`: serve `channelLink` again when invited; false when it was not refused.
    @discardableResult
    public mutating func allow(_ channelLink: String) -> Bool { rejectedLinks.remove(channelLink) != nil }
}

/// A subscriber as the relay records it.
public struct RelaySubscriber: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable {
        case accepted, connected, left, removed
    }

    public var memberId: MemberId
    public var key: MemberKey
    public var profile: MemberProfile
    public var status: Status

    public init(memberId: MemberId, key: MemberKey, profile: MemberProfile, status: Status) {
        self.memberId = memberId
        self.key = key
        self.profile = profile
        self.status = status
    }
}

public enum ChannelRelayInput: Sendable, Hashable {
    /// The channel link's data, fetched after the invitation.
    case channelLinkData(ChannelLinkData)
    /// The relay's own per-channel link was created (answer to `createRelayLink`).
    case relayLinkCreated(String)
    /// A contact request on the relay's per-channel link, with its connection info (`x.member`).
    case joinRequest(info: GroupEnvelope)
    /// A connection is up: the owner's or a subscriber's.
    case connected(MemberId)
    /// A message on the connection of `from`, with its server's receive time (seconds).
    case received(from: MemberId, BatchItem, brokerTs: Int64)
    /// The operator leaves the channel (`/_leave #g`).
    case leave
    /// The engine's clean-up: a subscriber whose join was accepted but never connected, or who
    /// left or was removed, is forgotten — its connection (if any) and rows go. A connected
    /// subscriber is not dropped this way.
    case dropSubscriber(MemberId)
}

public enum ChannelRelayEffect: Sendable, Hashable {
    case saveStatus(RelayStatus)
    /// Fetch the channel link's data; answer `channelLinkData`.
    case fetchChannelLinkData(String)
    /// Create the relay's own link for this channel (a group link, `/g#`) whose link entity id is
    /// the relay's member id and whose data is `RelayShortLinkData {relayProfile}`; answer
    /// `relayLinkCreated`.
    case createRelayLink(entityId: MemberId)
    /// Accept the owner's contact request with this connection info (`x.grp.relay.acpt`).
    case acceptOwner(MemberId, info: GroupEnvelope)
    /// Accept a subscriber's contact request with this connection info (`x.grp.link.inv`).
    case acceptSubscriber(MemberId, info: GroupEnvelope)
    /// Send one item over one member's connection.
    case send(BatchItem, to: MemberId)
    /// A delivery job: this forward to each of these subscribers (the engine persists it before
    /// sending, batches, and resumes it after a restart).
    case deliver(ForwardedElement, to: [MemberId])
    case saveSubscriber(RelaySubscriber)
    /// A subscriber is forgotten (``ChannelRelayInput/dropSubscriber(_:)``): delete its rows.
    case forgetSubscriber(MemberId)
    case deleteConnection(MemberId)
    case deleteAllConnections
    /// The operator left: refuse this channel link until `/_relay allow` (``RelayDirectory``).
    case rememberRejected(String)
    case emit(ChannelEvent)
}

/// One channel as a chat relay serves it, and the relay's pure state machine: check the
/// channel's link data, create its own link, accept the owner; accept subscribers (`x.member`),
/// introduce them to the owners and the owners to them, send history; forward every owner event
/// to every connected subscriber verbatim (signature bytes included), as the channel when the
/// owner posts `asGroup`; never author a message; stop when removed or when its operator leaves.
public struct ChannelRelayState: Sendable {
    public let channelLink: String
    public let ownMemberId: MemberId
    public let ownProfile: MemberProfile
    /// The inviting owner.
    public let inviter: MemberId
    public private(set) var status: RelayStatus = .invited
    public private(set) var publicGroupId: [UInt8]?
    public private(set) var profile: GroupProfile?
    public private(set) var owners: [MemberId: OwnerKey] = [:]
    public private(set) var relayLink: String?
    public private(set) var subscribers: [MemberId: RelaySubscriber] = [:]
    /// The latest forwarded posts, served to new subscribers (SimpleX `sendHistory`), each
    /// followed by the owner's updates of it (`x.msg.update`, which cannot replace the post: the
    /// signature covers the original); a post deleted (`x.msg.del`) leaves it with its updates.
    public private(set) var history: [ForwardedElement] = []
    /// The shared msg ids of `history` and the post each concerns, in its order: a message that
    /// comes again (the owner's message redelivered after a restart, before its acknowledgement)
    /// is not forwarded twice.
    private var historyKeys: [HistoryKey] = []
    /// Counts the times entries left `history` other than by age (a post deleted): the engine
    /// rewrites its stored history then, and only appends otherwise.
    public private(set) var historyRevision = 0

    private struct HistoryKey: Sendable {
        var msgId: String?
        var post: String?

        init(_ env: GroupEnvelope?) {
            msgId = env?.msgId
            post = env?.event == "x.msg.update" ? env?.params["msgId"]?.stringValue : env?.msgId
        }
    }
    public let historyLimit: Int
    /// Posts and events forwarded (for the host's counters).
    public private(set) var forwardedCount = 0
    private var ownerConnected = false

    init(invitation inv: GroupRelayInvitation, ownProfile: MemberProfile, historyLimit: Int = 100) {
        channelLink = inv.groupLink
        ownMemberId = inv.relayMemberId
        self.ownProfile = ownProfile
        inviter = inv.fromMember.memberId
        self.historyLimit = historyLimit
    }

    /// A channel as stored (the engine restores the machine from its database).
    public init(channelLink: String, ownMemberId: MemberId, ownProfile: MemberProfile, inviter: MemberId, status: RelayStatus,
                publicGroupId: [UInt8]?, profile: GroupProfile?, owners: [OwnerKey], relayLink: String?, subscribers: [RelaySubscriber],
                history: [ForwardedElement], ownerConnected: Bool, forwardedCount: Int = 0, historyLimit: Int = 100) {
        self.channelLink = channelLink
        self.ownMemberId = ownMemberId
        self.ownProfile = ownProfile
        self.inviter = inviter
        self.status = status
        self.publicGroupId = publicGroupId
        self.profile = profile
        for o in owners { self.owners[o.memberId] = o }
        self.relayLink = relayLink
        for sub in subscribers { self.subscribers[sub.memberId] = sub }
        self.historyLimit = historyLimit
        self.history = Array(history.suffix(historyLimit))
        historyKeys = self.history.map { HistoryKey(try? $0.element.envelope()) }
        self.ownerConnected = ownerConnected
        self.forwardedCount = forwardedCount
    }

    public var isServing: Bool { status == .accepted || status == .active }
    /// Whether the owner's connection is up (persisted with the state).
    public var isOwnerConnected: Bool { ownerConnected }
    public var connectedSubscribers: [MemberId] { subscribers.values.filter { $0.status == .connected }.map(\.memberId).sorted() }

    public mutating func handle(_ input: ChannelRelayInput, newMessageId: () -> String) throws(ChannelError) -> [ChannelRelayEffect] {
        var next = self
        let effects = try withoutActuallyEscaping(newMessageId) { (ids) throws(ChannelError) -> [ChannelRelayEffect] in
            var run = ChannelRun<ChannelRelayEffect>(newMessageId: ids)
            try next.apply(input, &run)
            return run.effects
        }
        self = next
        return effects
    }

    private mutating func setStatus(_ s: RelayStatus, _ run: inout ChannelRun<ChannelRelayEffect>) {
        status = s
        run.effects.append(.saveStatus(s))
    }

    mutating func apply(_ input: ChannelRelayInput, _ run: inout ChannelRun<ChannelRelayEffect>) throws(ChannelError) {
        switch input {
        case let .channelLinkData(data):
            guard status == .invited, publicGroupId == nil else { throw ChannelError(.invalidState, "link data after the channel was checked") }
            // SimpleX `getLinkDataCreateRelayLink`: the link's entity id must be the profile's
            // `publicGroupId`; Swiftplex also requires the inviter to be one of its owners and the
            // profile to be a channel's whose link is the one invited to.
            guard ChannelProfiles.isChannel(data.profile), ChannelProfiles.publicGroupId(of: data.profile) == data.publicGroupId else {
                throw ChannelError(.linkDataMismatch, "the link's entity id is not the channel's publicGroupId")
            }
            guard data.profile.json["publicGroup"]?["groupLink"]?.stringValue == channelLink else {
                throw ChannelError(.linkDataMismatch, "the channel's profile names another link")
            }
            guard data.owners.contains(where: { $0.memberId == inviter }) else {
                throw ChannelError(.linkDataMismatch, "the inviting member is not an owner of the channel")
            }
            publicGroupId = data.publicGroupId
            profile = data.profile
            for o in data.owners { owners[o.memberId] = o }
            run.effects.append(.createRelayLink(entityId: ownMemberId))
        case let .relayLinkCreated(link):
            guard status == .invited, publicGroupId != nil, relayLink == nil else { throw ChannelError(.invalidState, "no relay link was asked for") }
            guard SimplexLink.recognize(link)?.type == .group else { throw ChannelError(.invalidLink, "a relay's channel link is a group link (/g#)") }
            relayLink = link
            run.effects.append(.acceptOwner(inviter, info: run.envelope(.relayAccept(relayLink: link, relayCap: nil))))
            setStatus(.accepted, &run)
        case let .joinRequest(info):
            try joinRequest(info, &run)
        case let .connected(id):
            if id == inviter {
                guard status == .accepted, !ownerConnected else { throw ChannelError(.invalidState, "owner connected in status \(status.rawValue)") }
                ownerConnected = true
                // The relay serves once the owner's connection is up (SimpleX's own link check is a
                // TODO there: this is Swiftplex's rule, docs/channels.md).
                setStatus(.active, &run)
                run.effects.append(.emit(.userJoinedGroup(host: id)))
            } else {
                guard var s = subscribers[id], s.status == .accepted else { throw ChannelError(.unknownMember, "no subscriber \(id) is joining") }
                guard isServing else { throw ChannelError(.rejected, "the relay does not serve this channel") }
                s.status = .connected
                subscribers[id] = s
                run.effects.append(.saveSubscriber(s))
                run.effects.append(.emit(.joinedGroupMember(id)))
                introduce(s, &run)
            }
        case let .received(from, item, brokerTs):
            try received(from, item, brokerTs, &run)
        case .leave:
            guard status != .rejected else { throw ChannelError(.invalidState, "the relay left the channel already") }
            // Plain `x.grp.leave` to the owner and to every subscriber, then nothing more.
            let item: BatchItem
            do { item = .element(try .plain(run.envelope(.leave))) } catch { throw ChannelError.malformed(error) }
            if ownerConnected { run.effects.append(.send(item, to: inviter)) }
            for id in connectedSubscribers { run.effects.append(.send(item, to: id)) }
            stopServing(.rejected, &run)
            run.effects.append(.rememberRejected(channelLink))
            run.effects.append(.emit(.leftMemberUser))
        case let .dropSubscriber(id):
            guard let s = subscribers[id] else { throw ChannelError(.unknownMember, "no subscriber \(id)") }
            guard s.status != .connected else { throw ChannelError(.invalidState, "subscriber \(id) is connected: it leaves or is removed, it is not dropped") }
            subscribers[id] = nil
            if s.status == .accepted { run.effects.append(.deleteConnection(id)) }
            run.effects.append(.forgetSubscriber(id))
        }
    }

    private mutating func stopServing(_ s: RelayStatus, _ run: inout ChannelRun<ChannelRelayEffect>) {
        setStatus(s, &run)
        ownerConnected = false
        run.effects.append(.deleteAllConnections)
    }

    /// SimpleX `memberJoinRequestViaRelay`: a subscriber joins with the channel's subscriber role
    /// (`observer`), answered with `x.grp.link.inv`.
    private mutating func joinRequest(_ info: GroupEnvelope, _ run: inout ChannelRun<ChannelRelayEffect>) throws(ChannelError) {
        guard isServing, let profile else { throw ChannelError(.rejected, "the relay does not serve this channel") }
        let message: ChannelMessage?
        do { message = try info.channelMessage() } catch { throw ChannelError.malformed(error) }
        guard case let .member(join)? = message else { throw ChannelError(.unexpectedSender, "a join through the relay link is x.member, not \(info.event)") }
        if let via = join.viaRelay, via != ownMemberId { throw ChannelError(.linkDataMismatch, "x.member names another relay") }
        let id = join.newMemberId
        guard id != ownMemberId, owners[id] == nil, subscribers[id] == nil else { throw ChannelError(.duplicateMember, "member id \(id) is taken") }
        let s = RelaySubscriber(memberId: id, key: join.newMemberKey, profile: join.profile, status: .accepted)
        subscribers[id] = s
        run.effects.append(.saveSubscriber(s))
        let inv = GroupLinkInvitation(fromMember: MemberIdRole(ownMemberId, .relay), fromMemberName: ownProfile.displayName,
                                      invitedMember: MemberIdRole(id, .observer), groupProfile: profile)
        run.effects.append(.acceptSubscriber(id, info: run.envelope(.linkInvitation(inv))))
    }

    /// SimpleX `introduceInChannel`: the new subscriber to the owners (`x.grp.mem.new`), the owners
    /// to it (`x.grp.mem.intro` with their keys), then history.
    private mutating func introduce(_ s: RelaySubscriber, _ run: inout ChannelRun<ChannelRelayEffect>) {
        do {
            if ownerConnected {
                let info = MemberInfo(memberId: s.memberId, memberRole: .observer, profile: s.profile, memberKey: s.key.text)
                run.effects.append(.send(.element(try .plain(run.envelope(.memberNew(info, scope: nil)))), to: inviter))
            }
            for o in owners.values.sorted(by: { $0.memberId < $1.memberId }) {
                let info = MemberInfo(memberId: o.memberId, memberRole: .owner, profile: o.profile, memberKey: o.key.text)
                run.effects.append(.send(.element(try .plain(run.envelope(.memberIntro(info, restrictions: nil)))), to: s.memberId))
            }
        } catch {
            // Profiles were checked on the way in; an oversized one is not introduced.
        }
        for h in history { run.effects.append(.deliver(h, to: [s.memberId])) }
    }

    private mutating func received(_ from: MemberId, _ item: BatchItem, _ brokerTs: Int64, _ run: inout ChannelRun<ChannelRelayEffect>) throws(ChannelError) {
        guard isServing else { throw ChannelError(.rejected, "the relay does not serve this channel (\(status.rawValue))") }
        guard case let .element(element) = item else { throw ChannelError(.unexpectedSender, "nobody forwards to a relay") }
        let env = try decodeElement(element)
        if let owner = owners[from] {
            try fromOwner(owner, element, env, brokerTs, &run)
        } else if var s = subscribers[from], s.status == .connected {
            // A subscriber (observer) may only leave, signed with its own key.
            guard env.event == "x.grp.leave" else { throw ChannelError(.notAuthorized, "a subscriber may not send \(env.event)") }
            guard let pg = publicGroupId, ChannelSigning.verify(element, publicGroupId: pg, author: from, key: s.key) else {
                throw ChannelError(.badSignature, "x.grp.leave from \(from) is not signed with its key")
            }
            s.status = .left
            subscribers[from] = s
            run.effects.append(.saveSubscriber(s))
            run.effects.append(.deleteConnection(from))
            if ownerConnected { run.effects.append(.send(.forward(ForwardedElement(sender: .member(from, name: s.profile.displayName), brokerTs: brokerTs, element: element)), to: inviter)) }
            run.effects.append(.emit(.leftMember(from)))
        } else {
            throw ChannelError(.unknownMember, "message from unknown member \(from)")
        }
    }

    private mutating func keep(_ fwd: ForwardedElement, _ env: GroupEnvelope) {
        history.append(fwd)
        historyKeys.append(HistoryKey(env))
        if history.count > historyLimit {
            history.removeFirst(history.count - historyLimit)
            historyKeys.removeFirst(historyKeys.count - historyLimit)
        }
    }

    private mutating func fromOwner(_ owner: OwnerKey, _ element: ChannelElement, _ env: GroupEnvelope, _ brokerTs: Int64,
                                    _ run: inout ChannelRun<ChannelRelayEffect>) throws(ChannelError) {
        guard let pg = publicGroupId else { throw ChannelError(.invalidState, "the channel is not checked yet") }
        // SimpleX `withVerifiedMsg`: a signature present must verify; the required events must be signed.
        if element.isSigned {
            guard ChannelSigning.verify(element, publicGroupId: pg, author: owner.memberId, key: owner.key) else {
                throw ChannelError(.badSignature, "\(env.event) from owner \(owner.memberId) does not verify")
            }
        } else if ChannelSignaturePolicy.requiredEvents.contains(env.event) {
            throw ChannelError(.badSignature, "\(env.event) must be signed")
        }
        let asChannel = env.isAsGroup
        if asChannel, case let .signed(binding, _, _) = element, binding != .channel {
            throw ChannelError(.badSignature, "a post as the channel is signed with the channel binding")
        }
        let message: GroupMessage?
        do { message = try env.groupMessage() } catch { throw ChannelError.malformed(error) }
        let fwd = ForwardedElement(sender: asChannel ? .channel : .member(owner.memberId, name: owner.profile.displayName), brokerTs: brokerTs, element: element)
        let targets = connectedSubscribers
        switch message {
        case nil:
            guard ChannelSignaturePolicy.isForwarded(env) else { throw ChannelError(.invalidState, "\(env.event) is not forwarded in channels") }
            if let id = env.msgId, historyKeys.contains(where: { $0.msgId == id }) { return } // a repeat: forwarded already
            switch env.event {
            case "x.msg.new":
                keep(fwd, env)
            case "x.msg.update":
                // Kept after its post, for late joiners; an update of a post no longer kept is not.
                if let post = env.params["msgId"]?.stringValue, historyKeys.contains(where: { $0.post == post }) { keep(fwd, env) }
            case "x.msg.del":
                if let post = env.params["msgId"]?.stringValue, historyKeys.contains(where: { $0.post == post }) {
                    let kept = zip(history, historyKeys).filter { $0.1.post != post }
                    history = kept.map(\.0)
                    historyKeys = kept.map(\.1)
                    historyRevision += 1
                }
            default:
                break // reactions are not kept for late joiners
            }
        case let .info(p)?:
            guard ChannelProfiles.publicGroupId(of: p) == pg else { throw ChannelError(.linkDataMismatch, "x.grp.info changes the channel's publicGroupId") }
            let old = profile
            profile = p
            if let old, old != p { run.effects.append(.emit(.groupUpdated(from: old, to: p))) }
        case let .memberDelete(id, _)?:
            if id == ownMemberId {
                // Forward the removal to the subscribers first (SimpleX `xGrpMemDel`, `DJRelayRemoved`).
                if !targets.isEmpty { run.effects.append(.deliver(fwd, to: targets)) }
                forwardedCount += 1
                stopServing(.inactive, &run)
                run.effects.append(.emit(.deletedMemberUser(by: owner.memberId)))
                return
            }
            if var s = subscribers[id] {
                s.status = .removed
                subscribers[id] = s
                run.effects.append(.saveSubscriber(s))
                run.effects.append(.deleteConnection(id))
            }
        case .delete?:
            if !targets.isEmpty { run.effects.append(.deliver(fwd, to: targets)) }
            forwardedCount += 1
            stopServing(.inactive, &run)
            run.effects.append(.emit(.groupDeleted(by: owner.memberId)))
            return
        case .leave?:
            // An owner left (signed `x.grp.leave`): forwarded to the subscribers, its connection goes.
            if !targets.isEmpty { run.effects.append(.deliver(fwd, to: targets)) }
            forwardedCount += 1
            if owner.memberId == inviter { ownerConnected = false }
            run.effects.append(.deleteConnection(owner.memberId))
            run.effects.append(.emit(.leftMember(owner.memberId)))
            return
        default:
            guard ChannelSignaturePolicy.isForwarded(env) else { throw ChannelError(.invalidState, "\(env.event) is not forwarded in channels") }
        }
        if !targets.isEmpty { run.effects.append(.deliver(fwd, to: targets)) }
        forwardedCount += 1
    }
}
