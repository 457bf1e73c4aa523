import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

/// A relay as a subscriber sees it, with the counters that show a relay dropping posts.
public struct SubscriberRelay: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable {
        /// `x.member` sent, waiting for `x.grp.link.inv`.
        case joining
        /// `x.grp.link.inv` accepted, connection not up yet.
        case accepted
        case connected
        /// Removed by the owner or left: nothing more is taken from it.
        case gone
    }

    public var memberId: MemberId
    public var link: String
    public var profile: MemberProfile
    public var status: Status
    /// Verified owner messages received through this relay (first copies and duplicates).
    public var delivered = 0
    /// Of those, the ones that arrived here first.
    public var firstCopies = 0
    /// Messages refused (bad or missing signature, authored by the relay).
    public var rejected = 0
    /// Distinct owner messages the subscriber had when this relay connected.
    public var baseline = 0

    public init(memberId: MemberId, link: String, profile: MemberProfile, status: Status) {
        self.memberId = memberId
        self.link = link
        self.profile = profile
        self.status = status
    }
}

public enum ChannelSubscriberInput: Sendable, Hashable {
    /// A relay link's data (fetched for each relay of the channel's link data, or announced by
    /// `x.grp.relay.new`): its entity id is the relay's member id.
    case relayLinkData(link: String, linkEntityId: MemberId, relayProfile: MemberProfile)
    /// The relay's confirmation with its connection info (`x.grp.link.inv`).
    case confirmation(from: MemberId, info: GroupEnvelope)
    /// The connection with a relay is up.
    case connected(MemberId)
    /// A message on a relay's connection.
    case received(from: MemberId, BatchItem)
    /// `/_leave #g`.
    case leave
    /// The channel link's data read again (SimpleX `APIGetUpdatedGroupLinkData` →
    /// `syncSubscriberRelays`): join the relays it lists that this side does not know, drop
    /// those it no longer lists; take its profile and owners.
    case linkDataRefreshed(ChannelLinkData)
}

public enum ChannelSubscriberEffect: Sendable, Hashable {
    /// Fetch a relay link's data; answer `relayLinkData`.
    case fetchRelayLinkData(String)
    /// Join the relay link with this connection info (`x.member`).
    case joinRelay(MemberId, link: String, info: GroupEnvelope)
    /// Accept the relay's confirmation with this connection info (`x.info`).
    case allowConnection(MemberId, info: GroupEnvelope)
    case send(BatchItem, to: MemberId)
    case deleteConnection(MemberId)
    case deleteAllConnections
    case saveRelay(SubscriberRelay)
    case saveProfile(GroupProfile)
    /// An owner's control event (anything but content) was applied: keep its (author, message
    /// id) for good, so that a relay cannot replay it later (``ChannelSubscriberState/appliedControl``).
    case recordControl(ForwardDedup.Key)
    /// Show content from the channel or an owner, received (first) through `relay`.
    case applyContent(GroupEnvelope, sender: ContentSender, relay: MemberId, verification: MessageVerification)
    case emit(ChannelEvent)
}

/// A channel as a subscriber sees it, and the subscriber's pure state machine: join through
/// every relay of the link data, take each owner message once — whichever relay brings it first
/// — after checking its owner's signature, count per relay what it brought, keep working while
/// any relay is up.
public struct ChannelSubscriberState: Sendable {
    public let publicGroupId: [UInt8]
    public let channelLink: String
    public let memberId: MemberId
    public let ownProfile: MemberProfile
    public private(set) var profile: GroupProfile
    public private(set) var owners: [MemberId: OwnerKey]
    public private(set) var relays: [MemberId: SubscriberRelay] = [:]
    /// Distinct owner messages taken.
    public private(set) var uniqueMessages = 0
    public private(set) var dedup: ForwardDedup
    /// Every owner control event applied (profile changes, removals, deletion, relays, leaves),
    /// by author and message id — never evicted, unlike ``dedup``, which forgets a pair after
    /// enough later posts or a restart: an owner's signature binds a message to the channel and
    /// the owner but not to a moment, so without this a relay could replay an old `x.grp.info`
    /// and turn the profile back. Stored by the engine (``ChannelSubscriberEffect/recordControl(_:)``).
    public private(set) var appliedControl: Set<ForwardDedup.Key> = []
    public private(set) var left = false
    public private(set) var deleted = false
    /// Swiftplex's rule: every owner message — content too — must be signed and verify. Off, an
    /// unsigned content message is taken as `sigMissing` (SimpleX owners sign only control events).
    public let requireSignedContent: Bool
    private let key: Ed25519.PrivateKey

    /// Joining a channel from its link's data: fetch each relay link's data.
    public static func joining(_ data: ChannelLinkData, channelLink: String, memberId: MemberId, ownProfile: MemberProfile, key: Ed25519.PrivateKey,
                               requireSignedContent: Bool = true) throws(ChannelError) -> (ChannelSubscriberState, [ChannelSubscriberEffect]) {
        guard ChannelProfiles.isChannel(data.profile), ChannelProfiles.publicGroupId(of: data.profile) == data.publicGroupId else {
            throw ChannelError(.linkDataMismatch, "the link's entity id is not the channel's publicGroupId")
        }
        // SimpleX `getShortLinkConnReq`: a channel link without relays cannot be joined.
        guard !data.relays.isEmpty else { throw ChannelError(.invalidState, "the channel has no relays") }
        guard !data.owners.contains(where: { $0.memberId == memberId }) else { throw ChannelError(.duplicateMember, "member id \(memberId) is an owner's") }
        let s = ChannelSubscriberState(publicGroupId: data.publicGroupId, channelLink: channelLink, memberId: memberId, ownProfile: ownProfile,
                                       profile: data.profile, owners: data.owners, key: key, requireSignedContent: requireSignedContent,
                                       dedup: ForwardDedup())
        return (s, [.saveProfile(data.profile)] + data.relays.map { .fetchRelayLinkData($0) })
    }

    /// A channel as stored (the engine restores the machine from its database; `dedup` refilled
    /// from recent items if it wants dedup across restarts — the store's unique index stays the
    /// last word).
    public init(publicGroupId: [UInt8], channelLink: String, memberId: MemberId, ownProfile: MemberProfile, profile: GroupProfile, owners: [OwnerKey],
                key: Ed25519.PrivateKey, requireSignedContent: Bool, relays: [SubscriberRelay] = [], uniqueMessages: Int = 0,
                left: Bool = false, deleted: Bool = false, dedup: ForwardDedup = ForwardDedup(), appliedControl: [ForwardDedup.Key] = []) {
        self.init(publicGroupId: publicGroupId, channelLink: channelLink, memberId: memberId, ownProfile: ownProfile, profile: profile, owners: owners,
                  key: key, requireSignedContent: requireSignedContent, dedup: dedup)
        self.appliedControl = Set(appliedControl)
        for r in relays { self.relays[r.memberId] = r }
        self.uniqueMessages = uniqueMessages
        self.left = left
        self.deleted = deleted
    }

    init(publicGroupId: [UInt8], channelLink: String, memberId: MemberId, ownProfile: MemberProfile, profile: GroupProfile, owners: [OwnerKey],
         key: Ed25519.PrivateKey, requireSignedContent: Bool, dedup: ForwardDedup) {
        self.publicGroupId = publicGroupId
        self.channelLink = channelLink
        self.memberId = memberId
        self.ownProfile = ownProfile
        self.profile = profile
        self.owners = Dictionary(owners.map { ($0.memberId, $0) }, uniquingKeysWith: { a, _ in a })
        self.key = key
        self.requireSignedContent = requireSignedContent
        self.dedup = dedup
    }

    public var connectedRelays: [MemberId] { relays.values.filter { $0.status == .connected }.map(\.memberId).sorted() }

    /// Owner messages this relay has not brought since it connected while others did: a relay
    /// that drops shows here.
    public func missing(through relay: MemberId) -> Int {
        guard let r = relays[relay] else { return 0 }
        return max(0, uniqueMessages - r.baseline - r.delivered)
    }

    public mutating func handle(_ input: ChannelSubscriberInput, newMessageId: () -> String) throws(ChannelError) -> [ChannelSubscriberEffect] {
        var next = self
        let effects = try withoutActuallyEscaping(newMessageId) { (ids) throws(ChannelError) -> [ChannelSubscriberEffect] in
            var run = ChannelRun<ChannelSubscriberEffect>(newMessageId: ids)
            try next.apply(input, &run)
            return run.effects
        }
        self = next
        return effects
    }

    private mutating func save(_ r: SubscriberRelay, _ run: inout ChannelRun<ChannelSubscriberEffect>) {
        relays[r.memberId] = r
        run.effects.append(.saveRelay(r))
    }

    private func relay(_ id: MemberId) throws(ChannelError) -> SubscriberRelay {
        guard let r = relays[id] else { throw ChannelError(.unknownMember, "unknown relay \(id)") }
        return r
    }

    mutating func apply(_ input: ChannelSubscriberInput, _ run: inout ChannelRun<ChannelSubscriberEffect>) throws(ChannelError) {
        guard !left, !deleted else { throw ChannelError(.invalidState, "the subscriber left or the channel is deleted") }
        switch input {
        case let .relayLinkData(link, entityId, relayProfile):
            guard SimplexLink.recognize(link)?.type == .group else { throw ChannelError(.invalidLink, "a relay's channel link is a group link (/g#)") }
            guard entityId != memberId, owners[entityId] == nil else { throw ChannelError(.duplicateMember, "relay member id \(entityId) is taken") }
            if let existing = relays[entityId], existing.status != .gone { return }
            guard !relays.values.contains(where: { $0.link == link && $0.status != .gone }) else { return }
            save(SubscriberRelay(memberId: entityId, link: link, profile: relayProfile, status: .joining), &run)
            // SimpleX `CFGetRelayDataJoin`: the same profile for every relay.
            let join = MemberJoin(profile: ownProfile, newMemberId: memberId, newMemberKey: MemberKey(key.publicKey), viaRelay: entityId)
            run.effects.append(.joinRelay(entityId, link: link, info: run.envelope(.member(join))))
        case let .confirmation(id, info):
            var r = try relay(id)
            guard r.status == .joining else { throw ChannelError(.invalidState, "confirmation from relay \(id) in status \(r.status.rawValue)") }
            let message: GroupMessage?
            do { message = try info.groupMessage() } catch { throw ChannelError.malformed(error) }
            guard case let .linkInvitation(inv)? = message else { throw ChannelError(.unexpectedSender, "a relay confirms with x.grp.link.inv, not \(info.event)") }
            // SimpleX: `useRelays` and `publicGroupId` must match the link's.
            guard ChannelProfiles.publicGroupId(of: inv.groupProfile) == publicGroupId else {
                throw ChannelError(.linkDataMismatch, "x.grp.link.inv: publicGroupId mismatch")
            }
            guard inv.fromMember.memberId == id, inv.invitedMember.memberId == memberId else {
                throw ChannelError(.linkDataMismatch, "x.grp.link.inv: member ids do not match the join")
            }
            r.status = .accepted
            save(r, &run)
            run.effects.append(.allowConnection(id, info: run.envelope(.memberInfo(memberId: memberId, profile: ownProfile))))
            run.effects.append(.emit(.groupLinkConnecting(relay: id)))
        case let .connected(id):
            var r = try relay(id)
            guard r.status == .accepted else { throw ChannelError(.invalidState, "relay \(id) connected in status \(r.status.rawValue)") }
            r.status = .connected
            r.baseline = uniqueMessages
            save(r, &run)
            run.effects.append(.emit(.userJoinedGroup(host: id)))
        case let .received(from, item):
            try received(from, item, &run)
        case let .linkDataRefreshed(data):
            guard data.publicGroupId == publicGroupId, ChannelProfiles.isChannel(data.profile),
                  ChannelProfiles.publicGroupId(of: data.profile) == publicGroupId else {
                throw ChannelError(.linkDataMismatch, "the link's data is another channel's")
            }
            guard !data.owners.contains(where: { $0.memberId == memberId }) else { throw ChannelError(.duplicateMember, "member id \(memberId) is an owner's") }
            if data.profile != profile {
                let old = profile
                profile = data.profile
                run.effects.append(.saveProfile(data.profile))
                run.effects.append(.emit(.groupUpdated(from: old, to: data.profile)))
            }
            // The link data's owners (signed by the root key) are the channel's; a known owner
            // keeps the profile it was introduced with.
            var fresh: [MemberId: OwnerKey] = [:]
            for var o in data.owners {
                if let known = owners[o.memberId], known.key == o.key { o.profile = known.profile }
                fresh[o.memberId] = o
            }
            owners = fresh
            let listed = Set(data.relays)
            for id in relays.keys.sorted() where relays[id]!.status != .gone && !listed.contains(relays[id]!.link) { relayGone(id, &run) }
            for link in data.relays where !relays.values.contains(where: { $0.link == link && $0.status != .gone }) {
                run.effects.append(.fetchRelayLinkData(link))
            }
        case .leave:
            let item: BatchItem
            do {
                item = .element(try ChannelElement.sign(run.envelope(.leave), binding: .group, publicGroupId: publicGroupId, author: memberId, key: key))
            } catch { throw ChannelError.malformed(error) }
            for id in connectedRelays { run.effects.append(.send(item, to: id)) }
            left = true
            run.effects.append(.deleteAllConnections)
            run.effects.append(.emit(.leftMemberUser))
        }
    }

    private mutating func reject(_ relayId: MemberId, _ error: ChannelError, _ run: inout ChannelRun<ChannelSubscriberEffect>) {
        var r = relays[relayId]!
        r.rejected += 1
        save(r, &run)
        run.effects.append(.emit(.messageRejected(relay: relayId, reason: error)))
    }

    private mutating func received(_ from: MemberId, _ item: BatchItem, _ run: inout ChannelRun<ChannelSubscriberEffect>) throws(ChannelError) {
        let r = try relay(from)
        guard r.status == .connected else { throw ChannelError(.invalidState, "relay \(from) is \(r.status.rawValue)") }
        switch item {
        case let .element(e):
            // The relay's own messages: introductions of owners and its leaving. It authors nothing else.
            let env = try decodeElement(e)
            let message: GroupMessage?
            do { message = try env.groupMessage() } catch { throw ChannelError.malformed(error) }
            switch message {
            case let .memberIntro(info, _)?:
                // Owners are known from the link data; an introduction must agree with it.
                if info.memberRole == .owner, owners[info.memberId]?.key.text != info.memberKey {
                    reject(from, ChannelError(.linkDataMismatch, "relay \(from) introduced an owner the link data does not list"), &run)
                }
            case .leave?:
                relayGone(from, &run)
            default:
                reject(from, ChannelError(.unexpectedSender, "relay \(from) sent \(env.event) as its own: relays never author messages"), &run)
            }
        case let .forward(f):
            try forwarded(f, from, &run)
        }
    }

    private mutating func relayGone(_ id: MemberId, _ run: inout ChannelRun<ChannelSubscriberEffect>) {
        guard var r = relays[id], r.status != .gone else { return }
        r.status = .gone
        save(r, &run)
        run.effects.append(.deleteConnection(id))
        run.effects.append(.emit(.relayGone(id)))
    }

    private mutating func forwarded(_ f: ForwardedElement, _ relayId: MemberId, _ run: inout ChannelRun<ChannelSubscriberEffect>) throws(ChannelError) {
        let env: GroupEnvelope
        do { env = try f.element.envelope() } catch {
            reject(relayId, ChannelError.malformed(error), &run)
            return
        }
        // Who signed it: for a post as the channel, any owner (channel binding); otherwise the
        // named owner (group binding). Subscribers see no other members' messages.
        var author: OwnerKey?
        var verification = MessageVerification.verified
        switch f.sender {
        case .channel:
            guard env.isAsGroup else {
                reject(relayId, ChannelError(.badSignature, "\(env.event) is not a post as the channel"), &run)
                return
            }
            let sorted = owners.values.sorted { $0.memberId < $1.memberId }
            if case .signed(.channel, _, _) = f.element {
                author = sorted.first { ChannelSigning.verify(f.element, publicGroupId: publicGroupId, author: $0.memberId, key: $0.key) }
            } else if !f.element.isSigned, !requireSignedContent {
                // An unsigned post as the channel (a SimpleX owner's): from the channel, unverified;
                // deduplicated under the first owner.
                author = sorted.first
                verification = .sigMissing
            }
        case let .member(id, _):
            guard let owner = owners[id] else {
                // Another subscriber's leave or profile (forwarded to owners only in SimpleX): not ours to show.
                if env.event == "x.grp.leave" || env.event == "x.info" { return }
                reject(relayId, ChannelError(.unexpectedSender, "\(env.event) from \(id), who is not an owner"), &run)
                return
            }
            guard !env.isAsGroup else {
                reject(relayId, ChannelError(.badSignature, "a post as the channel was forwarded as an owner's: the relay revealed or altered it"), &run)
                return
            }
            if case .signed(.group, _, _) = f.element {
                author = ChannelSigning.verify(f.element, publicGroupId: publicGroupId, author: id, key: owner.key) ? owner : nil
            } else if !f.element.isSigned, !requireSignedContent, !ChannelSignaturePolicy.requiredEvents.contains(env.event), env.event.hasPrefix("x.msg.") {
                author = owner
                verification = .sigMissing
            }
        }
        guard let author else {
            reject(relayId, ChannelError(.badSignature, "\(env.event) through relay \(relayId) is not signed by an owner"), &run)
            return
        }
        var r = relays[relayId]!
        r.delivered += 1
        // A control event is taken once for good: checked against every one ever applied, and it
        // must have a message id to be checked by (SimpleX's owners send one with every message).
        let isContent = env.event.hasPrefix("x.msg.") || env.event == "x.file.cancel"
        var control: ForwardDedup.Key?
        if !isContent {
            guard let msgId = env.msgId else {
                reject(relayId, ChannelError(.malformedMessage, "\(env.event) without a msgId: a control event must carry one, to be taken only once"), &run)
                return
            }
            let key = ForwardDedup.Key(author: author.memberId, msgId: msgId)
            if appliedControl.contains(key) {
                save(r, &run)
                return
            }
            control = key
        }
        switch dedup.record(author: author.memberId, msgId: env.msgId, forwardedBy: relayId) {
        case .duplicate:
            save(r, &run)
            return
        case .new:
            r.firstCopies += 1
            uniqueMessages += 1
            save(r, &run)
        }
        if let control {
            appliedControl.insert(control)
            run.effects.append(.recordControl(control))
        }
        let message: GroupMessage?
        do { message = try env.groupMessage() } catch {
            reject(relayId, ChannelError.malformed(error), &run)
            return
        }
        let sender: ContentSender = f.sender == .channel ? .channel : .member(author.memberId)
        switch message {
        case nil:
            if env.event == "x.grp.relay.new" {
                if case let .relayNew(link)? = (try? env.channelMessage()) ?? nil, !relays.values.contains(where: { $0.link == link }) {
                    run.effects.append(.fetchRelayLinkData(link))
                }
            } else if env.event.hasPrefix("x.msg.") || env.event == "x.file.cancel" {
                run.effects.append(.applyContent(env, sender: sender, relay: relayId, verification: verification))
            }
        case let .info(p)?:
            guard ChannelProfiles.publicGroupId(of: p) == publicGroupId else {
                reject(relayId, ChannelError(.linkDataMismatch, "x.grp.info changes the channel's publicGroupId"), &run)
                return
            }
            // Taken already (from the link data, `linkDataRefreshed`): no second event.
            guard p != profile else { return }
            let old = profile
            profile = p
            run.effects.append(.saveProfile(p))
            run.effects.append(.emit(.groupUpdated(from: old, to: p)))
        case let .memberDelete(id, _)?:
            if id == memberId {
                left = true
                run.effects.append(.deleteAllConnections)
                run.effects.append(.emit(.deletedMemberUser(by: author.memberId)))
            } else if relays[id] != nil {
                relayGone(id, &run)
            }
        case .delete?:
            deleted = true
            run.effects.append(.deleteAllConnections)
            run.effects.append(.emit(.groupDeleted(by: author.memberId)))
        case .leave?:
            // An owner left the channel.
            run.effects.append(.emit(.leftMember(author.memberId)))
        default:
            break
        }
    }
}
