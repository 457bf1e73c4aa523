import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto
import Testing
@testable import ChannelProtocol

/// A deterministic network of one channel's machines — an owner, chat relays, subscribers —
/// standing in for the agent and the engine, as GroupProtocolTests' `GroupNet` does for groups:
/// it performs each machine's effects (contact requests, link data fetched and published,
/// connections, messages, delivery jobs) by feeding the other machines' inputs in FIFO order.
/// A relay can be taken down (its inputs wait, as in its SMP queues, until it is up), or made to
/// drop, alter or misattribute what it forwards.
struct ChannelNet {
    enum Input {
        case owner(ChannelOwnerInput)
        case relay(ChannelRelayInput)
        case subscriber(ChannelSubscriberInput)
    }

    static let channelLink = "https://owner.example/c#channel"
    static let publicGroupId: [UInt8] = Array(0 ..< 32)

    var owner: ChannelOwnerState
    let ownerName = "owner"
    var directories: [String: RelayDirectory] = [:]
    var relayStates: [String: ChannelRelayState] = [:]
    var subscribers: [String: ChannelSubscriberState] = [:]
    var subscriberKeys: [String: Ed25519.PrivateKey] = [:]
    /// The channel link's current data (what the owner published last).
    var linkData: ChannelLinkData

    var ids: [String: MemberId] = [:]
    var names: [MemberId: String] = [:]
    /// Relay name ↔ its address and per-channel link (with the link's entity id).
    var relayLinks: [String: (relay: String, entity: MemberId)] = [:]

    var queue: [(to: String, input: Input)] = []
    var down: Set<String> = []
    var waiting: [String: [Input]] = [:]
    /// What a relay does to a forward before delivering it: nil drops it.
    var tamper: [String: (ForwardedElement) -> ForwardedElement?] = [:]
    var deleted: Set<[String]> = []

    // What happened.
    var events: [String: [ChannelEvent]] = [:]
    var applied: [String: [(envelope: GroupEnvelope, sender: ContentSender, relay: MemberId, verification: MessageVerification)]] = [:]
    var errors: [String: [ChannelError]] = [:]
    var delivered: [String: Int] = [:]
    private var counter = 0
    var brokerTs: Int64 = 1_795_000_000
    /// The owner's member key (tests sign with it as a relay that kept a message would resend it).
    let ownerSigningKey = Ed25519.PrivateKey()

    init(relays: [String]) {
        ids["owner"] = Self.memberId("owner")
        names[ids["owner"]!] = "owner"
        let profile = ChannelProfiles.channelProfile(displayName: "news", channelLink: Self.channelLink, publicGroupId: Self.publicGroupId)
        owner = ChannelOwnerState(publicGroupId: Self.publicGroupId, channelLink: Self.channelLink, memberId: ids["owner"]!,
                                  ownProfile: MemberProfile(displayName: "owner"), key: ownerSigningKey, profile: profile)
        linkData = owner.linkData
        for r in relays {
            directories[r] = RelayDirectory()
            person(r)
        }
    }

    static func memberId(_ name: String) -> MemberId {
        var s = name
        if s.count % 4 == 1 { s += "A" }
        return MemberId(s)!
    }

    static func address(_ relay: String) -> String { "https://relays.example/r#\(relay)" }

    mutating func person(_ name: String) {
        ids[name] = Self.memberId(name)
        names[Self.memberId(name)] = name
    }

    func id(_ name: String) -> MemberId { ids[name]! }

    mutating func nextId() -> String {
        counter += 1
        return "m\(counter)"
    }

    static func pair(_ a: String, _ b: String) -> [String] { [a, b].sorted() }

    // MARK: Driving

    mutating func enqueue(_ to: String, _ input: Input) { queue.append((to, input)) }

    mutating func run(limit: Int = 20_000) {
        var steps = 0
        while !queue.isEmpty {
            let (to, input) = queue.removeFirst()
            if down.contains(to) {
                waiting[to, default: []].append(input)
                continue
            }
            deliver(to, input)
            steps += 1
            if steps > limit {
                Issue.record("network did not settle")
                return
            }
        }
    }

    mutating func setDown(_ relay: String) { down.insert(relay) }

    mutating func setUp(_ relay: String) {
        down.remove(relay)
        for i in waiting.removeValue(forKey: relay) ?? [] { queue.append((relay, i)) }
        run()
    }

    @discardableResult
    mutating func ownerInput(_ input: ChannelOwnerInput) -> ChannelError? {
        deliver(ownerName, .owner(input))
    }

    @discardableResult
    mutating func deliver(_ to: String, _ input: Input) -> ChannelError? {
        counter += 1
        let prefix = "\(to)-\(counter)"
        var n = 0
        let ids: () -> String = {
            n += 1
            return "\(prefix)-\(n)"
        }
        do {
            switch input {
            case let .owner(i):
                let out = try owner.handle(i, newMessageId: ids)
                for e in out { performOwner(e) }
            case let .relay(i):
                guard var s = relayStates[to] else {
                    errors[to, default: []].append(ChannelError(.invalidState, "relay \(to) serves no channel"))
                    return nil
                }
                let out = try s.handle(i, newMessageId: ids)
                relayStates[to] = s
                for e in out { performRelay(to, e) }
            case let .subscriber(i):
                guard var s = subscribers[to] else { return nil }
                let out = try s.handle(i, newMessageId: ids)
                subscribers[to] = s
                for e in out { performSubscriber(to, e) }
            }
            return nil
        } catch {
            errors[to, default: []].append(error)
            return error
        }
    }

    // MARK: Owner's effects

    mutating func performOwner(_ effect: ChannelOwnerEffect) {
        let me = id(ownerName)
        switch effect {
        case let .joinRelayAddress(relayId, address, info):
            enqueue(ownerName, .owner(.invitationSent(relayId)))
            guard let relay = directories.keys.first(where: { Self.address($0) == address }) else {
                Issue.record("no relay at \(address)")
                return
            }
            do {
                switch try directories[relay]!.invitation(info, ownMemberProfile: MemberProfile(displayName: relay), newMessageId: { "\(relay)-inv" }) {
                case let .reject(rejection):
                    enqueue(ownerName, .owner(.relayConfirmation(from: relayId, info: rejection)))
                case let .serve(state, effects):
                    ids[relay] = relayId
                    names[relayId] = relay
                    relayStates[relay] = state
                    for e in effects { performRelay(relay, e) }
                }
            } catch {
                errors[relay, default: []].append(error)
            }
        case let .fetchRelayLinkData(relayId, link):
            guard let l = relayLinks[link] else { return }
            enqueue(ownerName, .owner(.relayLinkData(relay: relayId, linkEntityId: l.entity)))
        case let .allowConnection(relayId):
            guard let relay = names[relayId] else { return }
            deleted.remove(Self.pair(ownerName, relay))
            enqueue(ownerName, .owner(.connected(relayId)))
            if relayStates[relay]?.ownMemberId == relayId { enqueue(relay, .relay(.connected(me))) }
        case let .publishLinkData(data):
            linkData = data
            enqueue(ownerName, .owner(.linkDataPublished(relays: data.relays)))
        case let .send(item, relayId):
            guard let relay = names[relayId], !deleted.contains(Self.pair(ownerName, relay)) else { return }
            brokerTs += 1
            enqueue(relay, .relay(.received(from: me, item, brokerTs: brokerTs)))
        case let .deleteConnection(relayId):
            if let relay = names[relayId] { deleted.insert(Self.pair(ownerName, relay)) }
        case let .emit(e):
            events[ownerName, default: []].append(e)
        case .saveRelay, .saveProfile:
            break
        }
    }

    // MARK: Relays' effects

    mutating func performRelay(_ name: String, _ effect: ChannelRelayEffect) {
        let me = ids[name]!
        switch effect {
        case let .fetchChannelLinkData(link):
            #expect(link == Self.channelLink)
            enqueue(name, .relay(.channelLinkData(linkData)))
        case let .createRelayLink(entityId):
            let link = "https://relays.example/g#\(name)-\(entityId.text)"
            relayLinks[link] = (name, entityId)
            enqueue(name, .relay(.relayLinkCreated(link)))
        case let .acceptOwner(_, info):
            enqueue(ownerName, .owner(.relayConfirmation(from: me, info: info)))
        case let .acceptSubscriber(subId, info):
            guard let sub = names[subId] else { return }
            enqueue(sub, .subscriber(.confirmation(from: me, info: info)))
        case let .send(item, to):
            guard let other = names[to], !deleted.contains(Self.pair(name, other)) else { return }
            if other == ownerName {
                enqueue(ownerName, .owner(.received(from: me, item)))
            } else {
                enqueue(other, .subscriber(.received(from: me, item)))
            }
        case let .deliver(fwd, targets):
            guard let f = tamper[name].map({ $0(fwd) }) ?? fwd else { return }
            for t in targets {
                guard let sub = names[t], !deleted.contains(Self.pair(name, sub)) else { continue }
                delivered[name, default: 0] += 1
                enqueue(sub, .subscriber(.received(from: me, .forward(f))))
            }
        case let .deleteConnection(other):
            if let o = names[other] { deleted.insert(Self.pair(name, o)) }
        case .deleteAllConnections:
            for o in names.values where o != name { deleted.insert(Self.pair(name, o)) }
        case let .rememberRejected(link):
            directories[name]!.rememberRejected(link)
        case let .emit(e):
            events[name, default: []].append(e)
        case .saveStatus, .saveSubscriber, .forgetSubscriber:
            break
        }
    }

    // MARK: Subscribers' effects

    /// `name` joins the channel from the link's current data.
    mutating func join(_ name: String, requireSignedContent: Bool = true) {
        person(name)
        let key = Ed25519.PrivateKey()
        subscriberKeys[name] = key
        do {
            let (s, effects) = try ChannelSubscriberState.joining(linkData, channelLink: Self.channelLink, memberId: id(name),
                                                                   ownProfile: MemberProfile(displayName: name), key: key,
                                                                   requireSignedContent: requireSignedContent)
            subscribers[name] = s
            for e in effects { performSubscriber(name, e) }
        } catch {
            errors[name, default: []].append(error)
        }
        run()
    }

    mutating func performSubscriber(_ name: String, _ effect: ChannelSubscriberEffect) {
        let me = id(name)
        switch effect {
        case let .fetchRelayLinkData(link):
            guard let l = relayLinks[link] else { return }
            enqueue(name, .subscriber(.relayLinkData(link: link, linkEntityId: l.entity, relayProfile: MemberProfile(displayName: l.relay))))
        case let .joinRelay(relayId, _, info):
            guard let relay = names[relayId] else { return }
            enqueue(relay, .relay(.joinRequest(info: info)))
        case let .allowConnection(relayId, _):
            guard let relay = names[relayId] else { return }
            enqueue(name, .subscriber(.connected(relayId)))
            enqueue(relay, .relay(.connected(me)))
        case let .send(item, relayId):
            guard let relay = names[relayId], !deleted.contains(Self.pair(name, relay)) else { return }
            brokerTs += 1
            enqueue(relay, .relay(.received(from: me, item, brokerTs: brokerTs)))
        case let .deleteConnection(relayId):
            if let relay = names[relayId] { deleted.insert(Self.pair(name, relay)) }
        case .deleteAllConnections:
            for o in names.values where o != name { deleted.insert(Self.pair(name, o)) }
        case let .applyContent(env, sender, relay, verification):
            applied[name, default: []].append((env, sender, relay, verification))
        case let .emit(e):
            events[name, default: []].append(e)
        case .saveRelay, .saveProfile, .recordControl:
            break
        }
    }

    // MARK: Helpers

    /// The owner invites each relay; everything settles.
    mutating func addRelays(_ relays: [String], startingId: Int64 = 1) {
        for (i, r) in relays.enumerated() {
            person(r)
            ownerInput(.addRelay(memberId: id(r), chatRelayId: startingId + Int64(i), address: Self.address(r)))
            run()
        }
    }

    @discardableResult
    mutating func post(_ text: String, asGroup: Bool = true) -> ChannelError? {
        let e = ownerInput(.post(content: ["type": "text", "text": .string(text)], asGroup: asGroup))
        run()
        return e
    }

    func texts(at name: String) -> [String] {
        (applied[name] ?? []).compactMap { $0.envelope.params["content"]?["text"]?.stringValue }
    }

    func allErrors() -> [(String, ChannelError)] {
        errors.flatMap { name, list in list.map { (name, $0) } }.sorted { $0.0 < $1.0 }
    }
}
