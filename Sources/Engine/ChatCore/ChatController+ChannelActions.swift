import Agent
import ChannelProtocol
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

// Channels on the engine, continued: the channel steps that must not be lost (docs/channels.md
// §9 "Durability"). An effect that is an agent call moving a channel on — fetching link data,
// creating the relay's link, accepting the owner, joining or allowing a relay, publishing the
// channel link's data — is written to `channel_action` in the transaction of the input that asked
// for it and removed once made (or refused). Steps a crash or a shutdown cut short are made again
// at start, each only if the channel still waits for it.

/// A channel step as `channel_action` keeps it.
enum ChannelStep: Sendable, Hashable {
    // Owner.
    /// The contact request with `x.grp.relay.inv` to a relay's address (`/_public group`, `/_add relays`).
    case ownerJoinRelayAddress(relay: MemberId, address: String, info: GroupEnvelope)
    case ownerFetchRelayLinkData(relay: MemberId, link: String)
    case ownerAllow(relay: MemberId)
    case ownerPublish
    /// `/_delete #g` of the owner: the signed `x.grp.del` to these relays, every connection of
    /// the channel and its link deleted, then the group (+ChannelManagement).
    case ownerDeleteChannel(item: BatchItem, relays: [MemberId])
    // Relay.
    case relayFetchChannelLinkData(link: String)
    case relayCreateLink(entityId: MemberId)
    case relayAcceptOwner(owner: MemberId, info: GroupEnvelope)
    /// A subscriber's `x.member` on the relay's link, accepted with `x.grp.link.inv` (the agent's request id).
    case relayAcceptSubscriber(member: MemberId, request: Int64, info: GroupEnvelope)
    /// The relay stops serving (removed, left, channel deleted): its last forwards out, every
    /// connection of the channel and its per-channel link deleted.
    case relayStopServing
    // Subscriber.
    case subscriberFetchRelayLinkData(link: String)
    case subscriberJoin(relay: MemberId, link: String, info: GroupEnvelope)
    case subscriberAllow(relay: MemberId, info: GroupEnvelope)
    /// The subscriber left, was removed or the channel was deleted: every connection goes.
    case subscriberDropConnections

    init?(_ e: ChannelOwnerEffect) {
        switch e {
        case let .joinRelayAddress(relay, address, info): self = .ownerJoinRelayAddress(relay: relay, address: address, info: info)
        case let .fetchRelayLinkData(relay, link): self = .ownerFetchRelayLinkData(relay: relay, link: link)
        case let .allowConnection(relay): self = .ownerAllow(relay: relay)
        case .publishLinkData: self = .ownerPublish // made with the owner's state when it runs
        default: return nil
        }
    }

    init?(_ e: ChannelRelayEffect) {
        switch e {
        case let .fetchChannelLinkData(link): self = .relayFetchChannelLinkData(link: link)
        case let .createRelayLink(entityId): self = .relayCreateLink(entityId: entityId)
        case let .acceptOwner(owner, info): self = .relayAcceptOwner(owner: owner, info: info)
        case .deleteAllConnections: self = .relayStopServing
        default: return nil
        }
    }

    init?(_ e: ChannelSubscriberEffect) {
        switch e {
        case let .fetchRelayLinkData(link): self = .subscriberFetchRelayLinkData(link: link)
        case let .joinRelay(relay, link, info): self = .subscriberJoin(relay: relay, link: link, info: info)
        case let .allowConnection(relay, info): self = .subscriberAllow(relay: relay, info: info)
        case .deleteAllConnections: self = .subscriberDropConnections
        default: return nil
        }
    }

    var json: JSONValue {
        var fields: [(String, JSONValue)] = []
        func put(_ step: String, member: MemberId? = nil, link: String? = nil, info: GroupEnvelope? = nil, request: Int64? = nil,
                 item: BatchItem? = nil, members: [MemberId]? = nil) {
            fields.append(("step", .string(step)))
            if let item, let body = try? ChannelBatch.encode([item]) { fields.append(("body", .string(Base64URL.encode(body)))) }
            if let members { fields.append(("members", .array(members.map { .string($0.text) }))) }
            if let member { fields.append(("member", .string(member.text))) }
            if let request { fields.append(("request", .int(request))) }
            if let link { fields.append(("link", .string(link))) }
            if let info { fields.append(("info", info.json)) }
        }
        switch self {
        case let .ownerJoinRelayAddress(relay, address, info): put("ownerJoinRelayAddress", member: relay, link: address, info: info)
        case let .ownerFetchRelayLinkData(relay, link): put("ownerFetchRelayLinkData", member: relay, link: link)
        case let .ownerAllow(relay): put("ownerAllow", member: relay)
        case .ownerPublish: put("ownerPublish")
        case let .ownerDeleteChannel(item, relays): put("ownerDeleteChannel", item: item, members: relays)
        case .relayStopServing: put("relayStopServing")
        case .subscriberDropConnections: put("subscriberDropConnections")
        case let .relayFetchChannelLinkData(link): put("relayFetchChannelLinkData", link: link)
        case let .relayCreateLink(entityId): put("relayCreateLink", member: entityId)
        case let .relayAcceptOwner(owner, info): put("relayAcceptOwner", member: owner, info: info)
        case let .relayAcceptSubscriber(member, request, info): put("relayAcceptSubscriber", member: member, info: info, request: request)
        case let .subscriberFetchRelayLinkData(link): put("subscriberFetchRelayLinkData", link: link)
        case let .subscriberJoin(relay, link, info): put("subscriberJoin", member: relay, link: link, info: info)
        case let .subscriberAllow(relay, info): put("subscriberAllow", member: relay, info: info)
        }
        return .object(fields)
    }

    init?(json: JSONValue) {
        let member = json["member"]?.stringValue.flatMap(MemberId.init)
        let link = json["link"]?.stringValue
        let info = json["info"].flatMap { try? GroupEnvelope(json: $0) }
        switch json["step"]?.stringValue {
        case "ownerJoinRelayAddress"?:
            guard let member, let link, let info else { return nil }
            self = .ownerJoinRelayAddress(relay: member, address: link, info: info)
        case "ownerFetchRelayLinkData"?: guard let member, let link else { return nil }; self = .ownerFetchRelayLinkData(relay: member, link: link)
        case "ownerAllow"?: guard let member else { return nil }; self = .ownerAllow(relay: member)
        case "ownerPublish"?: self = .ownerPublish
        case "ownerDeleteChannel"?:
            guard let text = json["body"]?.stringValue, let body = Base64URL.decode(text), let items = try? ChannelBatch.decode(body), items.count == 1,
                  case let .array(list)? = json["members"] else { return nil }
            self = .ownerDeleteChannel(item: items[0], relays: list.compactMap { $0.stringValue.flatMap(MemberId.init) })
        case "relayStopServing"?: self = .relayStopServing
        case "subscriberDropConnections"?: self = .subscriberDropConnections
        case "relayFetchChannelLinkData"?: guard let link else { return nil }; self = .relayFetchChannelLinkData(link: link)
        case "relayCreateLink"?: guard let member else { return nil }; self = .relayCreateLink(entityId: member)
        case "relayAcceptOwner"?: guard let member, let info else { return nil }; self = .relayAcceptOwner(owner: member, info: info)
        case "relayAcceptSubscriber"?:
            guard let member, let info, let request = json["request"]?.int64Value else { return nil }
            self = .relayAcceptSubscriber(member: member, request: request, info: info)
        case "subscriberFetchRelayLinkData"?: guard let link else { return nil }; self = .subscriberFetchRelayLinkData(link: link)
        case "subscriberJoin"?: guard let member, let link, let info else { return nil }; self = .subscriberJoin(relay: member, link: link, info: info)
        case "subscriberAllow"?: guard let member, let info else { return nil }; self = .subscriberAllow(relay: member, info: info)
        default: return nil
        }
    }

    var text: String { json.description }
}

extension ChatController {
    /// Writes the steps of an input's effects with the input (in its transaction).
    nonisolated static func queueChannelSteps(_ db: Database, groupId: Int64, _ steps: [ChannelStep]) throws {
        for step in steps {
            var r = ChannelActionRecord(groupId: groupId, action: step.text)
            try r.insert(db)
        }
    }

    /// Whether a step is left undone on purpose: tests stop an engine between steps
    /// (``holdChannelSteps(_:)``), as a crash after the input's commit would.
    func channelStepHeld(_ step: ChannelStep?) -> Bool {
        guard let step, channelRuntime.holdSteps else { return false }
        return !channelRuntime.unheldSteps.contains(step.json["step"]?.stringValue ?? "")
    }

    /// Tests: leave the channel steps in `channel_action` instead of making them (a crash right
    /// after each input's commit).
    /// `except`: the kinds of step (`ownerJoinRelayAddress`, …) still made.
    func holdChannelSteps(_ on: Bool, except: Set<String> = []) {
        channelRuntime.holdSteps = on
        channelRuntime.unheldSteps = except
    }

    /// A step was made (or refused): its row goes — unless the engine is closing, when the call
    /// may have been cut short: then it is made again at the next start.
    func channelStepDone(_ groupId: Int64, _ step: ChannelStep?) async {
        guard let step, !closing else { return }
        let text = step.text
        channelRuntime.retries["\(groupId):\(text)"] = nil
        _ = try? await dbWrite { db in
            try db.execute(sql: """
                DELETE FROM channel_action WHERE id = (SELECT id FROM channel_action WHERE group_id = ? AND action = ? ORDER BY id LIMIT 1)
                """, arguments: [groupId, text])
        }
    }

    /// Steps left by a crash or a shutdown (`run()` starts it): per channel, in order.
    func resumeChannelActions() async {
        guard let rows = try? await dbRead({ db in try ChannelActionRecord.order(ChannelActionRecord.Columns.id).fetchAll(db) }), !rows.isEmpty else { return }
        var order: [Int64] = []
        var byGroup: [Int64: [ChannelActionRecord]] = [:]
        for r in rows {
            if byGroup[r.groupId] == nil { order.append(r.groupId) }
            byGroup[r.groupId, default: []].append(r)
        }
        for id in order {
            let steps = byGroup[id] ?? []
            inBackground { await self.resumeChannelSteps(id, steps) }
        }
    }

    private func resumeChannelSteps(_ groupId: Int64, _ rows: [ChannelActionRecord]) async {
        func drop(_ r: ChannelActionRecord) async {
            _ = try? await dbWrite { db in _ = try ChannelActionRecord.deleteOne(db, key: r.id) }
        }
        for row in rows {
            if closing { return }
            guard let json = Stored.json(row.action), let step = ChannelStep(json: json) else {
                logger.warning("an unreadable channel step was dropped", metadata: ["group": "\(groupId)"])
                await drop(row)
                continue
            }
            do {
                guard try await stillToMake(groupId, step) else {
                    await drop(row)
                    continue
                }
                logger.info("a channel step is made again after a restart", metadata: ["group": "\(groupId)", "step": "\(step.json["step"]?.stringValue ?? "")"])
                switch step {
                case let .ownerJoinRelayAddress(relay, address, info): await performOwnerEffects(groupId, [.joinRelayAddress(relay: relay, address: address, info: info)])
                case let .ownerFetchRelayLinkData(relay, link): await performOwnerEffects(groupId, [.fetchRelayLinkData(relay: relay, link: link)])
                case let .ownerAllow(relay): await performOwnerEffects(groupId, [.allowConnection(relay: relay)])
                case .ownerPublish: await performOwnerEffects(groupId, [.publishLinkData(try await ownerState(groupId).linkData)])
                case let .ownerDeleteChannel(item, relays): await finishChannelDeletion(groupId, item: item, relays: relays) // (+ChannelManagement)
                case .relayStopServing: await performRelayEffects(groupId, [.deleteAllConnections])
                case .subscriberDropConnections: await performSubscriberEffects(groupId, [.deleteAllConnections])
                case let .relayFetchChannelLinkData(link): await performRelayEffects(groupId, [.fetchChannelLinkData(link)])
                case let .relayCreateLink(entityId): await performRelayEffects(groupId, [.createRelayLink(entityId: entityId)])
                case let .relayAcceptOwner(owner, info): await performRelayEffects(groupId, [.acceptOwner(owner, info: info)])
                case let .relayAcceptSubscriber(member, request, info):
                    do { try await acceptChannelSubscriber(groupId, member, request: request, info: info) } catch { reportChannelRefusal(groupId, error) }
                    await channelStepDone(groupId, step)
                case let .subscriberFetchRelayLinkData(link): await performSubscriberEffects(groupId, [.fetchRelayLinkData(link)])
                case let .subscriberJoin(relay, link, info): await performSubscriberEffects(groupId, [.joinRelay(relay, link: link, info: info)])
                case let .subscriberAllow(relay, info): await performSubscriberEffects(groupId, [.allowConnection(relay, info: info)])
                }
            } catch {
                reportChannelRefusal(groupId, error)
                await drop(row)
            }
        }
    }

    // MARK: - Retrying join steps

    /// Whether a failure may pass: the relay's server unreachable, timing out, or refusing for a
    /// while (`QUOTA` on the relay link's queue while the relay is down). A link that is gone
    /// (`linkNotFound`: the relay deleted it), bad or refused by policy, and a channel-level
    /// refusal are final.
    nonisolated static func isPassingFailure(_ error: any Error) -> Bool {
        let code: AgentError.Code?
        if let e = error as? AgentError {
            code = e.code
        } else if let f = error as? ChatFailure, case let .errorAgent(t, _) = f.error.kind {
            code = AgentError.Code(rawValue: t.code.rawValue)
        } else {
            code = nil
        }
        switch code {
        case .relay?, .timeout?, .relayUnreachable?: return true
        default: return false
        }
    }

    /// A join step — the owner's contact request to a relay's address, a subscriber's fetching a
    /// relay link's data or joining it — that failed in a way
    /// that may pass stays in `channel_action` and is made again after 1, 2, 4 … s (at most a
    /// minute apart) until it succeeds, fails for good, or the channel no longer waits for it (the
    /// relay gone, the subscriber left, the channel deleted). Returns whether it will be retried.
    func retryChannelStepLater(_ groupId: Int64, _ step: ChannelStep?, _ error: any Error) -> Bool {
        guard let step, !closing, Self.isPassingFailure(error) else { return false }
        switch step {
        case .subscriberFetchRelayLinkData, .subscriberJoin, .ownerJoinRelayAddress: break
        default: return false
        }
        let key = "\(groupId):\(step.text)"
        let attempt = (channelRuntime.retries[key] ?? 0) + 1
        channelRuntime.retries[key] = attempt
        let delay = Duration.milliseconds(min(60_000, 1000 << min(attempt - 1, 6)))
        logger.info("a channel join step failed and is retried", metadata: ["group": "\(groupId)", "attempt": "\(attempt)",
                                                                            "reason": "\(Self.chatError(error))"])
        inBackground {
            try? await Task.sleep(for: delay)
            await self.retryChannelStep(groupId, step)
        }
        return true
    }

    private func retryChannelStep(_ groupId: Int64, _ step: ChannelStep) async {
        guard !closing else { return } // the row stays: made again at the next start
        guard (try? await stillToMake(groupId, step)) == true else {
            await channelStepDone(groupId, step)
            return
        }
        switch step {
        case let .ownerJoinRelayAddress(relay, address, info): await performOwnerEffects(groupId, [.joinRelayAddress(relay: relay, address: address, info: info)])
        case let .subscriberFetchRelayLinkData(link): await performSubscriberEffects(groupId, [.fetchRelayLinkData(link)])
        case let .subscriberJoin(relay, link, info): await performSubscriberEffects(groupId, [.joinRelay(relay, link: link, info: info)])
        default: break
        }
    }

    /// Whether the channel still waits for this step (its answer did not come before the stop).
    private func stillToMake(_ groupId: Int64, _ step: ChannelStep) async throws -> Bool {
        guard let c = try await channelRecord(groupId) else { return false }
        switch step {
        case let .ownerJoinRelayAddress(relay, _, _):
            guard let r = try await ownerState(groupId).relays[relay], r.status == .new else { return false }
            // Sent before the stop but not recorded: only its answer is left.
            if try await channelMemberConn(groupId, relay) != nil {
                await feedOwner(groupId, .invitationSent(relay))
                return false
            }
            return true
        case let .ownerFetchRelayLinkData(relay, _):
            guard let r = try await ownerState(groupId).relays[relay] else { return false }
            return r.status == .invited && r.relayLink != nil
        case let .ownerAllow(relay):
            guard let r = try await ownerState(groupId).relays[relay] else { return false }
            return (r.status == .accepted || r.status == .rejected) && !r.connected
        case .ownerPublish:
            let s = try await ownerState(groupId)
            return !s.left && !s.deleted
        case .ownerDeleteChannel, .relayStopServing, .subscriberDropConnections:
            // Written with the input that decided it: final, made until done.
            return true
        case .relayFetchChannelLinkData:
            let s = try await relayState(groupId)
            return s.status == .invited && s.publicGroupId == nil
        case .relayCreateLink:
            let s = try await relayState(groupId)
            guard s.status == .invited, s.publicGroupId != nil, s.relayLink == nil else { return false }
            // A link made before the stop whose answer was lost: made anew.
            if let address = c.agentAddressId {
                try? await agent.deleteAddress(address)
                try await dbWrite { db in _ = try ChannelRecord.filter(key: groupId).updateAll(db, Column("agent_address_id").set(to: nil as Int64?)) }
            }
            return true
        case .relayAcceptOwner:
            return c.ownerRequest != nil
        case let .relayAcceptSubscriber(member, _, _):
            let s = try await relayState(groupId)
            guard s.isServing, s.subscribers[member]?.status == .accepted else { return false }
            return try await channelMemberConn(groupId, member) == nil
        case let .subscriberFetchRelayLinkData(link):
            let s = try await subscriberState(groupId)
            return !s.left && !s.deleted && !s.relays.values.contains { $0.link == link && $0.status != .gone }
        case let .subscriberJoin(relay, _, _):
            let s = try await subscriberState(groupId)
            guard !s.left, s.relays[relay]?.status == .joining else { return false }
            return try await channelMemberConn(groupId, relay) == nil
        case let .subscriberAllow(relay, _):
            let s = try await subscriberState(groupId)
            return !s.left && s.relays[relay]?.status == .accepted
        }
    }
}
