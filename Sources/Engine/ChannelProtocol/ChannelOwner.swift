import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

/// A relay as the channel's owner records it (SimpleX `GroupRelay` with its relay member).
public struct OwnerRelay: Sendable, Hashable {
    public var memberId: MemberId
    /// The owner's `UserChatRelay.chatRelayId` it was added with.
    public var chatRelayId: Int64
    /// The relay's address (`/r#`).
    public var address: String
    public var status: RelayStatus
    /// The relay's per-channel link (from `x.grp.relay.acpt`), once known.
    public var relayLink: String?
    /// Whether the owner ↔ relay connection is up.
    public var connected: Bool

    public init(memberId: MemberId, chatRelayId: Int64, address: String, status: RelayStatus = .new, relayLink: String? = nil, connected: Bool = false) {
        self.memberId = memberId
        self.chatRelayId = chatRelayId
        self.address = address
        self.status = status
        self.relayLink = relayLink
        self.connected = connected
    }
}

public enum ChannelOwnerInput: Sendable, Hashable {
    /// `/_public group …` or `/_add relays #g …`: invite this relay (a new random member id).
    case addRelay(memberId: MemberId, chatRelayId: Int64, address: String)
    /// The contact request with `x.grp.relay.inv` went out.
    case invitationSent(MemberId)
    /// The relay's confirmation on that request, with its connection info (`x.grp.relay.acpt` or
    /// `x.grp.relay.reject`).
    case relayConfirmation(from: MemberId, info: GroupEnvelope)
    /// The relay's link data, fetched after `x.grp.relay.acpt` (`CFGetRelayDataAccept`).
    case relayLinkData(relay: MemberId, linkEntityId: MemberId)
    /// The connection with the relay is up (agent `CON`).
    case connected(MemberId)
    /// The channel's link data was published with these relay links (agent `LINK`).
    case linkDataPublished(relays: [String])
    /// A post (`x.msg.new` with this `content`), as the channel (`asGroup`) or as the owner.
    case post(content: JSONValue, asGroup: Bool)
    /// `/_update item #g <id>` of a post: `x.msg.update {msgId, content, asGroup?}`.
    case updatePost(msgId: String, content: JSONValue, asGroup: Bool)
    /// `/_delete item #g <ids> broadcast` of a post: `x.msg.del {msgId, asGroup?}`.
    case deletePost(msgId: String, asGroup: Bool)
    /// `/_reaction #g <id> on|off <reaction>` on a post: `x.msg.react {msgId, reaction, add, asGroup?}`.
    case reactToPost(msgId: String, reaction: JSONValue, add: Bool, asGroup: Bool)
    /// `/_group_profile #g <json>`.
    case updateProfile(GroupProfile)
    /// `/_remove #g <relay member>`.
    case removeRelay(MemberId)
    /// `/_delete #g`.
    case deleteChannel
    /// `/_leave #g` of the owner (SimpleX `leaveGroupSendMsg`: a signed `x.grp.leave` to the
    /// members — the relays, which forward it — then its connections go).
    case leave
    /// A message on a relay's connection.
    case received(from: MemberId, BatchItem)
}

public enum ChannelOwnerEffect: Sendable, Hashable {
    /// Send a contact request to the relay's address with this connection info; answer `invitationSent`.
    case joinRelayAddress(relay: MemberId, address: String, info: GroupEnvelope)
    /// Fetch the relay link's data; answer `relayLinkData`.
    case fetchRelayLinkData(relay: MemberId, link: String)
    /// Accept the relay's confirmation (`x.ok`).
    case allowConnection(relay: MemberId)
    /// Update the channel link's data (owners, relay links, count); answer `linkDataPublished`.
    case publishLinkData(ChannelLinkData)
    /// Send over the relay's connection.
    case send(BatchItem, to: MemberId)
    case deleteConnection(MemberId)
    case saveRelay(OwnerRelay)
    case saveProfile(GroupProfile)
    case emit(ChannelEvent)
}

/// A channel as its owner sees it, and the owner's pure state machine: invite relays (new →
/// invited), check their acceptance (→ accepted), publish their links (→ active), post to every
/// active relay — every message signed with the owner's member key (a post `asGroup` with the
/// channel binding) — add and remove relays. No I/O, no clock: ids come from `newMessageId`.
public struct ChannelOwnerState: Sendable {
    public let publicGroupId: [UInt8]
    public let channelLink: String
    public let memberId: MemberId
    public let ownProfile: MemberProfile
    public private(set) var profile: GroupProfile
    public private(set) var relays: [MemberId: OwnerRelay] = [:]
    /// Subscribers the relays announced (`x.grp.mem.new`), with their signing keys.
    public private(set) var subscribers: [MemberId: MemberKey] = [:]
    /// Subscribers who left (each relay forwards the leave: the later copies find it here).
    public private(set) var formerSubscribers: [MemberId: MemberKey] = [:]
    public private(set) var deleted = false
    /// The owner left the channel (`/_leave`): it neither posts nor manages relays.
    public private(set) var left = false
    private let key: Ed25519.PrivateKey

    public init(publicGroupId: [UInt8], channelLink: String, memberId: MemberId, ownProfile: MemberProfile, key: Ed25519.PrivateKey,
                profile: GroupProfile, relays: [OwnerRelay] = [], subscribers: [MemberId: MemberKey] = [:], left: Bool = false, deleted: Bool = false) {
        self.left = left
        self.deleted = deleted
        self.publicGroupId = publicGroupId
        self.channelLink = channelLink
        self.memberId = memberId
        self.ownProfile = ownProfile
        self.key = key
        self.profile = profile
        for r in relays { self.relays[r.memberId] = r }
        self.subscribers = subscribers
    }

    public var ownerKey: OwnerKey { OwnerKey(memberId: memberId, key: MemberKey(key.publicKey), profile: ownProfile) }

    /// The link data to publish: the relays that are accepted (or active) and whose link is known.
    public var linkData: ChannelLinkData {
        let links = relays.values.filter { ($0.status == .accepted || $0.status == .acknowledgedRoster || $0.status == .active) && $0.connected }
            .sorted { $0.memberId < $1.memberId }.compactMap(\.relayLink)
        return ChannelLinkData(publicGroupId: publicGroupId, profile: profile, owners: [ownerKey], relays: links, publicMemberCount: publicMemberCount)
    }

    /// The channel's members as its link data counts them (SimpleX `publicMemberCount`): the
    /// owner and the subscribers (relays not counted).
    public var publicMemberCount: Int { 1 + subscribers.count }

    public var activeRelays: [MemberId] { relays.values.filter { $0.status == .active && $0.connected }.map(\.memberId).sorted() }

    public mutating func handle(_ input: ChannelOwnerInput, newMessageId: () -> String) throws(ChannelError) -> [ChannelOwnerEffect] {
        var next = self
        let effects = try withoutActuallyEscaping(newMessageId) { (ids) throws(ChannelError) -> [ChannelOwnerEffect] in
            var run = ChannelRun<ChannelOwnerEffect>(newMessageId: ids)
            try next.apply(input, &run)
            return run.effects
        }
        self = next
        return effects
    }

    private func relay(_ id: MemberId) throws(ChannelError) -> OwnerRelay {
        guard let r = relays[id] else { throw ChannelError(.unknownMember, "unknown relay \(id)") }
        return r
    }

    private mutating func save(_ r: OwnerRelay, _ run: inout ChannelRun<ChannelOwnerEffect>) {
        relays[r.memberId] = r
        run.effects.append(.saveRelay(r))
    }

    private mutating func move(_ id: MemberId, _ event: RelayStatusEvent, _ run: inout ChannelRun<ChannelOwnerEffect>) throws(ChannelError) {
        var r = try relay(id)
        guard let s = r.status.next(on: event) else { throw ChannelError(.invalidState, "relay \(id) is \(r.status.rawValue): \(event) does not apply") }
        r.status = s
        save(r, &run)
        run.effects.append(.emit(.groupRelayUpdated(relay: id, status: s)))
    }

    private func signed(_ env: GroupEnvelope, asChannel: Bool = false) throws(ChannelError) -> BatchItem {
        do {
            return .element(try ChannelElement.sign(env, binding: asChannel ? .channel : .group, publicGroupId: publicGroupId, author: memberId, key: key))
        } catch { throw ChannelError.malformed(error) }
    }

    private func requireLive() throws(ChannelError) {
        guard !deleted else { throw ChannelError(.invalidState, "the channel is deleted") }
        guard !left else { throw ChannelError(.invalidState, "the owner left the channel") }
    }

    mutating func apply(_ input: ChannelOwnerInput, _ run: inout ChannelRun<ChannelOwnerEffect>) throws(ChannelError) {
        switch input {
        case let .addRelay(id, chatRelayId, address):
            try requireLive()
            guard SimplexLink.recognize(address)?.type == .relay else { throw ChannelError(.invalidLink, "a chat relay's address is a /r# link") }
            guard id != memberId, relays[id] == nil else { throw ChannelError(.duplicateMember, "member id \(id) is taken") }
            guard !relays.values.contains(where: { $0.chatRelayId == chatRelayId && $0.status.isCurrent }) else {
                throw ChannelError(.duplicateMember, "relay \(chatRelayId) serves the channel already")
            }
            save(OwnerRelay(memberId: id, chatRelayId: chatRelayId, address: address), &run)
            let inv = GroupRelayInvitation(fromMember: MemberIdRole(memberId, .owner), fromMemberProfile: ownProfile, relayMemberId: id, groupLink: channelLink)
            run.effects.append(.joinRelayAddress(relay: id, address: address, info: run.envelope(.relayInvitation(inv))))
        case let .invitationSent(id):
            try move(id, .invitationSent, &run)
        case let .relayConfirmation(id, info):
            let r = try relay(id)
            let message: ChannelMessage?
            do { message = try info.channelMessage() } catch { throw ChannelError.malformed(error) }
            switch message {
            case let .relayAccept(link, _)?:
                guard r.status == .invited else { throw ChannelError(.invalidState, "x.grp.relay.acpt from relay \(id) in status \(r.status.rawValue)") }
                var r = r
                r.relayLink = link
                save(r, &run)
                run.effects.append(.fetchRelayLinkData(relay: id, link: link))
            case let .relayReject(reason)?:
                try move(id, .rejectedByRelay, &run)
                run.effects.append(.allowConnection(relay: id))
                run.effects.append(.emit(.relayRejected(relay: id, reason: reason)))
            default:
                throw ChannelError(.unexpectedSender, "a relay's confirmation must be x.grp.relay.acpt or x.grp.relay.reject, not \(info.event)")
            }
        case let .relayLinkData(id, entityId):
            // SimpleX `CFGetRelayDataAccept`: the relay link's entity id must be the relay's member id.
            let r = try relay(id)
            guard r.relayLink != nil, r.status == .invited else { throw ChannelError(.invalidState, "no relay link to check for \(id)") }
            guard entityId == id else { throw ChannelError(.linkDataMismatch, "relay \(id)'s link names another member") }
            try move(id, .acceptedAndVerified, &run)
            run.effects.append(.allowConnection(relay: id))
        case let .connected(id):
            var r = try relay(id)
            // A rejecting relay's handshake completes too (SimpleX allows it with `x.ok`): nothing to do.
            if r.status == .rejected { return }
            guard r.status == .accepted else { throw ChannelError(.invalidState, "relay \(id) connected in status \(r.status.rawValue)") }
            r.connected = true
            save(r, &run)
            // No roster yet (Swiftplex): publish the link data on connect, as SimpleX does for
            // relays below `groupRosterVersion`.
            if r.status == .accepted { run.effects.append(.publishLinkData(linkData)) }
        case let .linkDataPublished(links):
            let published = Set(links)
            var changed = false
            var newlyActive: [OwnerRelay] = []
            for id in relays.keys.sorted() {
                let r = relays[id]!
                guard let link = r.relayLink, let s = r.status.next(on: .linkDataPublished(containsRelay: published.contains(link))) else { continue }
                try move(id, .linkDataPublished(containsRelay: published.contains(link)), &run)
                changed = true
                if s == .active { newlyActive.append(r) }
            }
            run.effects.append(.emit(.groupLinkDataUpdated(relays: links, relaysChanged: changed)))
            // SimpleX sends `x.grp.relay.new` only when the channel has subscribers.
            if !subscribers.isEmpty {
                for r in newlyActive {
                    let item = try signed(run.envelope(.relayNew(relayLink: r.relayLink!)))
                    for other in activeRelays where other != r.memberId { run.effects.append(.send(item, to: other)) }
                }
            }
        case let .post(content, asGroup):
            try sendContent("x.msg.new", [("content", content)], asGroup: asGroup, &run)
        case let .updatePost(msgId, content, asGroup):
            try sendContent("x.msg.update", [("msgId", .string(msgId)), ("content", content)], asGroup: asGroup, &run)
        case let .deletePost(msgId, asGroup):
            try sendContent("x.msg.del", [("msgId", .string(msgId))], asGroup: asGroup, &run)
        case let .reactToPost(msgId, reaction, add, asGroup):
            try sendContent("x.msg.react", [("msgId", .string(msgId)), ("reaction", reaction), ("add", .bool(add))], asGroup: asGroup, &run)
        case let .updateProfile(p):
            try requireLive()
            guard ChannelProfiles.publicGroupId(of: p) == publicGroupId else {
                throw ChannelError(.linkDataMismatch, "a channel's profile keeps its publicGroupId")
            }
            guard p != profile else { return }
            let item = try signed(run.envelope(.info(p)))
            for t in activeRelays { run.effects.append(.send(item, to: t)) }
            profile = p
            run.effects.append(.saveProfile(p))
            run.effects.append(.publishLinkData(linkData))
        case let .removeRelay(id):
            try requireLive()
            let r = try relay(id)
            guard r.status.isCurrent else { throw ChannelError(.invalidState, "relay \(id) is \(r.status.rawValue)") }
            // Signed `x.grp.mem.del` to every relay — the removed one forwards it to its
            // subscribers before it stops, the others so their subscribers drop it.
            let item = try signed(run.envelope(.memberDelete(memberId: id, messages: false)))
            for t in relays.values.filter({ $0.connected && $0.status.isCurrent }).map(\.memberId).sorted() { run.effects.append(.send(item, to: t)) }
            try move(id, .removed, &run)
            var gone = relays[id]!
            gone.connected = false
            save(gone, &run)
            run.effects.append(.deleteConnection(id))
            run.effects.append(.publishLinkData(linkData))
        case .deleteChannel:
            try requireLive()
            let item = try signed(run.envelope(.delete))
            for t in activeRelays { run.effects.append(.send(item, to: t)) }
            deleted = true
            for id in relays.keys.sorted() where relays[id]!.connected { run.effects.append(.deleteConnection(id)) }
        case .leave:
            try requireLive()
            let item = try signed(run.envelope(.leave))
            let targets = relays.values.filter { $0.connected && $0.status.isCurrent }.map(\.memberId).sorted()
            for t in targets { run.effects.append(.send(item, to: t)) }
            left = true
            for id in relays.keys.sorted() where relays[id]!.connected || relays[id]!.status.isCurrent {
                var r = relays[id]!
                r.connected = false
                save(r, &run)
                run.effects.append(.deleteConnection(id))
            }
            run.effects.append(.emit(.leftMemberUser))
        case let .received(from, item):
            try received(from, item, &run)
        }
    }

    /// Content (a post, or an owner's event on a post: its update, deletion, a reaction) to every
    /// active relay, signed — with the channel binding when the owner acts as the channel
    /// (`asGroup`), so that relays forward it as the channel's.
    private func sendContent(_ event: String, _ params: [(String, JSONValue)], asGroup: Bool,
                             _ run: inout ChannelRun<ChannelOwnerEffect>) throws(ChannelError) {
        try requireLive()
        let targets = activeRelays
        guard !targets.isEmpty else { throw ChannelError(.invalidState, "the channel has no active relay") }
        if let msgId = params.first(where: { $0.0 == "msgId" })?.1.stringValue, msgId.isEmpty || msgId.utf8.count > 256 {
            throw ChannelError(.malformedMessage, "\(event): the post's msgId is empty or too long")
        }
        var p = ParamsWriter()
        for (k, v) in params { p.set(k, v) }
        if asGroup { p.set("asGroup", .bool(true)) }
        let item = try signed(GroupEnvelope(msgId: run.newMessageId(), event: event, params: p.json), asChannel: asGroup)
        for t in targets { run.effects.append(.send(item, to: t)) }
    }

    /// A relay sends the owner only its own protocol messages: `x.grp.mem.new` about a subscriber,
    /// and `x.grp.leave` when its operator leaves. A relay never authors content.
    private mutating func received(_ from: MemberId, _ item: BatchItem, _ run: inout ChannelRun<ChannelOwnerEffect>) throws(ChannelError) {
        let r = try relay(from)
        guard r.status.isCurrent else { throw ChannelError(.invalidState, "relay \(from) is \(r.status.rawValue)") }
        switch item {
        case let .forward(f):
            // Subscribers are observers: what reaches the owner from them is their leaving, signed
            // with the key the relay announced.
            guard case let .member(id, _) = f.sender, let key = subscribers[id] ?? formerSubscribers[id] else {
                throw ChannelError(.unexpectedSender, "relay \(from) forwarded a message of no subscriber")
            }
            let env = try decodeElement(f.element)
            guard env.event == "x.grp.leave" else { throw ChannelError(.notAuthorized, "a subscriber may not send \(env.event)") }
            guard ChannelSigning.verify(f.element, publicGroupId: publicGroupId, author: id, key: key) else {
                throw ChannelError(.badSignature, "x.grp.leave of \(id) does not verify")
            }
            guard subscribers[id] != nil else { return }
            formerSubscribers[id] = subscribers.removeValue(forKey: id)
            run.effects.append(.emit(.leftMember(id)))
            run.effects.append(.publishLinkData(linkData))
        case let .element(e):
            let env = try decodeElement(e)
            let message: GroupMessage?
            do { message = try env.groupMessage() } catch { throw ChannelError.malformed(error) }
            switch message {
            case let .memberNew(info, _)?:
                guard info.memberRole <= .observer, info.memberRole != .relay else {
                    throw ChannelError(.notAuthorized, "a relay announces subscribers only (role \(info.memberRole.name))")
                }
                guard info.memberId != memberId, relays[info.memberId] == nil else { throw ChannelError(.duplicateMember, "x.grp.mem.new: \(info.memberId) exists") }
                guard let keyText = info.memberKey, let key = MemberKey(text: keyText) else {
                    throw ChannelError(.malformedMessage, "x.grp.mem.new: a subscriber's memberKey is missing or invalid")
                }
                // Each relay announces the subscriber: the first announcement counts, the same
                // key again is a repeat, another key is refused.
                if let known = subscribers[info.memberId] {
                    guard known == key else { throw ChannelError(.linkDataMismatch, "x.grp.mem.new: \(info.memberId) announced with another key") }
                    return
                }
                subscribers[info.memberId] = key
                run.effects.append(.emit(.joinedGroupMemberConnecting(relay: from, member: info.memberId)))
                // The count in the link data follows (the engine coalesces publishes).
                run.effects.append(.publishLinkData(linkData))
            case .leave?:
                try move(from, .removed, &run)
                var gone = relays[from]!
                gone.connected = false
                save(gone, &run)
                run.effects.append(.deleteConnection(from))
                run.effects.append(.emit(.leftMember(from)))
                run.effects.append(.publishLinkData(linkData))
            default:
                throw ChannelError(.unexpectedSender, "relay \(from) may not send \(env.event): relays never author messages")
            }
        }
    }
}
