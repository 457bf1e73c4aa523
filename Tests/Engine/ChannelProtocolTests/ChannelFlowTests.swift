import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto
import Testing
@testable import ChannelProtocol

/// One owner, two chat relays, three subscribers, through ``ChannelNet``.
@Suite struct ChannelFlowTests {
    static let subscribers = ["sam", "sue", "syd"]

    func channel(relays: [String] = ["rela", "relb"], subscribers: [String] = Self.subscribers) -> ChannelNet {
        var net = ChannelNet(relays: relays)
        net.addRelays(relays)
        for s in subscribers { net.join(s) }
        return net
    }

    @Test func relaysBecomeActiveAndSubscribersJoinThroughEach() {
        let net = channel()
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        for r in ["rela", "relb"] {
            #expect(net.owner.relays[net.id(r)]?.status == .active)
            #expect(net.relayStates[r]?.status == .active)
            #expect(net.relayStates[r]?.connectedSubscribers == Self.subscribers.map { net.id($0) }.sorted())
        }
        // new → invited → accepted → active, as the owner reported it.
        let updates = (net.events["owner"] ?? []).compactMap { e -> RelayStatus? in
            if case let .groupRelayUpdated(relay, status) = e, relay == net.id("rela") { return status }
            return nil
        }
        #expect(updates == [.invited, .accepted, .active])
        #expect(net.linkData.relays.count == 2)
        #expect(Set(net.owner.subscribers.keys) == Set(Self.subscribers.map { net.id($0) }))
        for s in Self.subscribers {
            #expect(net.subscribers[s]?.connectedRelays == [net.id("rela"), net.id("relb")].sorted())
            let joined = (net.events[s] ?? []).filter { if case .userJoinedGroup = $0 { true } else { false } }
            #expect(joined.count == 2, "\(s) joined through each relay")
        }
        // Both relays announced each subscriber (x.grp.mem.new); the owner counts each once.
        let announced = (net.events["owner"] ?? []).filter { if case .joinedGroupMemberConnecting = $0 { true } else { false } }
        #expect(announced.count == 3)
    }

    @Test func postsReachEverySubscriberExactlyOnce() {
        var net = channel()
        net.post("one")
        net.post("two", asGroup: false)
        net.post("three")
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        for s in Self.subscribers {
            #expect(net.texts(at: s) == ["one", "two", "three"])
            let a = net.applied[s]!
            #expect(a.map(\.sender) == [.channel, .member(net.id("owner")), .channel])
            #expect(a.allSatisfy { $0.verification == .verified })
            let sub = net.subscribers[s]!
            for r in ["rela", "relb"] {
                #expect(sub.relays[net.id(r)]?.delivered == 3)
                #expect(sub.missing(through: net.id(r)) == 0)
            }
            #expect(sub.relays.values.map(\.firstCopies).reduce(0, +) == 3)
        }
        // Relays forwarded, never authored: each delivered 3 posts × 3 subscribers.
        #expect(net.delivered["rela"] == 9 && net.delivered["relb"] == 9)
        #expect(net.relayStates["rela"]?.forwardedCount == 3)
    }

    @Test func postAsChannelDoesNotRevealTheOwner() {
        var net = channel(subscribers: ["sam"])
        var seen: [ForwardSender] = []
        net.tamper["rela"] = { f in
            seen.append(f.sender)
            return f
        }
        net.post("anonymous")
        net.post("signed by owner", asGroup: false)
        #expect(seen == [.channel, .member(net.id("owner"), name: "owner")])
        // The channel binding signs the first, the owner's group binding the second.
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
    }

    @Test func droppingRelayShowsInCounters() {
        var net = channel()
        net.tamper["relb"] = { _ in nil }
        for i in 1 ... 4 { net.post("p\(i)") }
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        for s in Self.subscribers {
            #expect(net.texts(at: s) == ["p1", "p2", "p3", "p4"])
            let sub = net.subscribers[s]!
            #expect(sub.missing(through: net.id("relb")) == 4)
            #expect(sub.missing(through: net.id("rela")) == 0)
        }
    }

    @Test func forgingRelayIsDetected() throws {
        var net = channel()
        // relb rewrites the post's text, keeping the owner's signature.
        net.tamper["relb"] = { f in
            var f = f
            let text = String(decoding: f.element.body, as: UTF8.self).replacingOccurrences(of: "real", with: "fake")
            if case let .signed(binding, sigs, _) = f.element { f.element = .signed(binding: binding, signatures: sigs, body: Array(text.utf8)) }
            return f
        }
        net.post("real news")
        for s in Self.subscribers {
            #expect(net.texts(at: s) == ["real news"])
            #expect(net.subscribers[s]!.relays[net.id("relb")]?.rejected == 1)
            #expect((net.events[s] ?? []).contains { if case let .messageRejected(r, e) = $0 { r == net.id("relb") && e.code == .badSignature } else { false } })
        }

        // relb re-signs the altered post with a key of its own: still refused.
        let relayKey = Ed25519.PrivateKey()
        net.tamper["relb"] = { f in
            var f = f
            let env = try! f.element.envelope()
            var p = env.params
            p = .object([("content", ["type": "text", "text": "fake"]), ("asGroup", true)])
            let forged = GroupEnvelope(msgId: env.msgId, event: env.event, params: p)
            f.element = try! ChannelElement.sign(forged, binding: .channel, publicGroupId: ChannelNet.publicGroupId, author: MemberId("relb")!, key: relayKey)
            return f
        }
        net.post("real again")
        for s in Self.subscribers {
            #expect(net.texts(at: s) == ["real news", "real again"])
            #expect(net.subscribers[s]!.relays[net.id("relb")]?.rejected == 2)
        }

        // relb attributes a post as the channel to the owner (reveals who posted): refused.
        net.tamper["relb"] = { f in
            var f = f
            f.sender = .member(MemberId("ownerA")!, name: "owner")
            return f
        }
        net.post("who posted?")
        for s in Self.subscribers {
            #expect(net.texts(at: s) == ["real news", "real again", "who posted?"])
            #expect(net.subscribers[s]!.relays[net.id("relb")]?.rejected == 3)
        }
    }

    @Test func relayAuthoredContentIsRefused() throws {
        var net = channel(subscribers: ["sam"])
        let env = GroupEnvelope(msgId: "relay-1", event: "x.msg.new", params: ["content": ["type": "text", "text": "spam"]])
        // As its own message, and as a forward with no owner's signature.
        net.enqueue("sam", .subscriber(.received(from: net.id("rela"), .element(try .plain(env)))))
        net.enqueue("sam", .subscriber(.received(from: net.id("rela"), .forward(ForwardedElement(sender: .channel, brokerTs: 1, element: try .plain(env))))))
        net.run()
        #expect(net.texts(at: "sam").isEmpty)
        #expect(net.subscribers["sam"]!.relays[net.id("rela")]?.rejected == 2)
        // The owner refuses it too.
        let err = net.ownerInput(.received(from: net.id("rela"), .element(try .plain(env))))
        #expect(err?.code == .unexpectedSender)
    }

    @Test func unsignedContentOnlyWhereAllowed() throws {
        var net = channel(subscribers: ["sam"])
        net.join("sue", requireSignedContent: false)
        // A SimpleX owner's unsigned posts, as the channel and as the owner, forwarded by rela.
        let post = GroupEnvelope(msgId: "u1", event: "x.msg.new", params: ["content": ["type": "text", "text": "unsigned"], "asGroup": true])
        let own = GroupEnvelope(msgId: "u2", event: "x.msg.new", params: ["content": ["type": "text", "text": "unsigned too"]])
        let del = GroupMessage.delete.envelope(msgId: "u3")
        for s in ["sam", "sue"] {
            for f in [ForwardedElement(sender: .channel, brokerTs: 1, element: try .plain(post)),
                      ForwardedElement(sender: .member(net.id("owner"), name: "owner"), brokerTs: 1, element: try .plain(own)),
                      ForwardedElement(sender: .member(net.id("owner"), name: "owner"), brokerTs: 1, element: try .plain(del))] {
                net.enqueue(s, .subscriber(.received(from: net.id("rela"), .forward(f))))
            }
        }
        net.run()
        #expect(net.texts(at: "sam").isEmpty)
        #expect(net.subscribers["sam"]!.relays[net.id("rela")]?.rejected == 3)
        #expect(net.texts(at: "sue") == ["unsigned", "unsigned too"])
        #expect(net.applied["sue"]!.map(\.verification) == [.sigMissing, .sigMissing])
        #expect(net.applied["sue"]!.map(\.sender) == [.channel, .member(net.id("owner"))])
        // A control event still must be signed.
        #expect(!net.subscribers["sue"]!.deleted)
        #expect(net.subscribers["sue"]!.relays[net.id("rela")]?.rejected == 1)
    }

    @Test func machinesRestoredFromTheirStoredState() {
        var net = channel()
        net.post("before restart")
        // rela and sam restart: their machines are rebuilt from what the engine stores.
        let r = net.relayStates["rela"]!
        net.relayStates["rela"] = ChannelRelayState(
            channelLink: r.channelLink, ownMemberId: r.ownMemberId, ownProfile: r.ownProfile, inviter: r.inviter, status: r.status,
            publicGroupId: r.publicGroupId, profile: r.profile, owners: Array(r.owners.values), relayLink: r.relayLink,
            subscribers: Array(r.subscribers.values), history: r.history, ownerConnected: r.isOwnerConnected, forwardedCount: r.forwardedCount)
        let s = net.subscribers["sam"]!
        net.subscribers["sam"] = ChannelSubscriberState(
            publicGroupId: s.publicGroupId, channelLink: s.channelLink, memberId: s.memberId, ownProfile: s.ownProfile, profile: s.profile,
            owners: Array(s.owners.values), key: net.subscriberKeys["sam"]!, requireSignedContent: s.requireSignedContent,
            relays: Array(s.relays.values), uniqueMessages: s.uniqueMessages, dedup: s.dedup)
        net.post("after restart")
        net.join("zoe")
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        #expect(net.texts(at: "sam") == ["before restart", "after restart"])
        #expect(net.texts(at: "zoe") == ["before restart", "after restart"])
        #expect(net.relayStates["rela"]?.forwardedCount == 2)
    }

    /// The owner's post coming again to a relay (redelivered after a restart, before it was
    /// acknowledged) is not forwarded or kept twice — also by a relay restored from its store.
    @Test func aRepeatedPostIsForwardedOnce() throws {
        var net = channel()
        net.post("once")
        let stored = net.relayStates["rela"]!
        let element = try #require(stored.history.last?.element)
        let restored = ChannelRelayState(
            channelLink: stored.channelLink, ownMemberId: stored.ownMemberId, ownProfile: stored.ownProfile, inviter: stored.inviter, status: stored.status,
            publicGroupId: stored.publicGroupId, profile: stored.profile, owners: Array(stored.owners.values), relayLink: stored.relayLink,
            subscribers: Array(stored.subscribers.values), history: stored.history, ownerConnected: stored.isOwnerConnected)
        for var r in [stored, restored] {
            let effects = try r.handle(.received(from: net.id("owner"), .element(element), brokerTs: net.brokerTs), newMessageId: { "repeat" })
            #expect(effects.isEmpty, "\(effects)")
            #expect(r.history.count == 1)
        }
        net.post("next")
        #expect(net.relayStates["rela"]?.history.count == 2)
    }

    @Test func newRelayIsAnnouncedToSubscribers() {
        var net = ChannelNet(relays: ["rela", "relb", "relc"])
        net.addRelays(["rela", "relb"])
        for s in Self.subscribers { net.join(s) }
        net.addRelays(["relc"], startingId: 3)
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        #expect(net.owner.relays[net.id("relc")]?.status == .active)
        #expect(net.linkData.relays.count == 3)
        // The signed x.grp.relay.new went through rela and relb; each subscriber joined relc once.
        for s in Self.subscribers {
            #expect(net.subscribers[s]?.connectedRelays == ["rela", "relb", "relc"].map { net.id($0) }.sorted())
        }
        #expect(net.relayStates["relc"]?.connectedSubscribers.count == 3)
        net.post("three relays")
        for s in Self.subscribers {
            #expect(net.texts(at: s) == ["three relays"])
            #expect(net.subscribers[s]!.relays[net.id("relc")]?.delivered == 1)
        }
    }

    @Test func oneRelayDownMidStream() {
        var net = channel()
        net.post("before")
        net.setDown("rela")
        net.post("during 1")
        net.post("during 2")
        for s in Self.subscribers { #expect(net.texts(at: s) == ["before", "during 1", "during 2"]) }
        // rela comes back: it forwards what waited in its queue; subscribers drop the duplicates.
        net.setUp("rela")
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        for s in Self.subscribers {
            #expect(net.texts(at: s) == ["before", "during 1", "during 2"])
            #expect(net.subscribers[s]!.relays[net.id("rela")]?.delivered == 3)
            #expect(net.subscribers[s]!.relays[net.id("relb")]?.firstCopies == 3 - (net.subscribers[s]!.relays[net.id("rela")]?.firstCopies ?? 0))
        }
    }

    @Test func lateJoinerGetsHistory() {
        var net = channel(subscribers: ["sam", "sue"])
        net.post("old 1")
        net.post("old 2")
        net.join("syd")
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        #expect(net.texts(at: "syd") == ["old 1", "old 2"])
        net.post("new")
        #expect(net.texts(at: "syd") == ["old 1", "old 2", "new"])
        #expect(net.texts(at: "sam") == ["old 1", "old 2", "new"])
    }

    @Test func relayLeftRefusesUntilAllowed() {
        var net = channel()
        net.deliver("relb", .relay(.leave))
        net.run()
        #expect(net.relayStates["relb"]?.status == .rejected)
        #expect(net.directories["relb"]?.rejectedLinks == [ChannelNet.channelLink])
        #expect(net.owner.relays[net.id("relb")]?.status == .inactive)
        #expect(net.linkData.relays.count == 1)
        for s in Self.subscribers {
            #expect(net.subscribers[s]!.relays[net.id("relb")]?.status == .gone)
        }
        net.post("after leave")
        for s in Self.subscribers { #expect(net.texts(at: s) == ["after leave"]) }

        // The owner invites it again (a new member id): refused with rejoin_rejected.
        net.person("relbx")
        net.names[net.id("relbx")] = "relb"
        net.ownerInput(.addRelay(memberId: net.id("relbx"), chatRelayId: 7, address: ChannelNet.address("relb")))
        net.run()
        #expect(net.owner.relays[net.id("relbx")]?.status == .rejected)
        #expect((net.events["owner"] ?? []).contains(.relayRejected(relay: net.id("relbx"), reason: .rejoinRejected)))

        // `/_relay allow`, then invited once more: it serves again.
        let allowed = net.directories["relb"]!.allow(ChannelNet.channelLink)
        #expect(allowed)
        net.person("relby")
        net.names[net.id("relby")] = "relb"
        net.ownerInput(.addRelay(memberId: net.id("relby"), chatRelayId: 8, address: ChannelNet.address("relb")))
        net.run()
        #expect(net.owner.relays[net.id("relby")]?.status == .active)
        #expect(net.relayStates["relb"]?.status == .active)
        #expect(net.linkData.relays.count == 2)
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
    }

    @Test func ownerRemovesRelay() {
        var net = channel()
        net.ownerInput(.removeRelay(net.id("rela")))
        net.run()
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        #expect(net.owner.relays[net.id("rela")]?.status == .inactive)
        #expect(net.relayStates["rela"]?.status == .inactive)
        #expect((net.events["rela"] ?? []).contains(.deletedMemberUser(by: net.id("owner"))))
        #expect(net.linkData.relays.count == 1)
        for s in Self.subscribers { #expect(net.subscribers[s]!.relays[net.id("rela")]?.status == .gone) }
        net.post("via relb only")
        for s in Self.subscribers { #expect(net.texts(at: s) == ["via relb only"]) }
        #expect(net.delivered["rela", default: 0] == 3, "rela forwarded only its removal, to each of 3 subscribers")
    }

    @Test func forgedControlMessagesAreRefused() throws {
        var net = channel()
        // relb invents an x.grp.del, unsigned and then signed with its own key, as the owner's.
        let del = GroupMessage.delete.envelope(msgId: "forged-1")
        let ownerId = net.id("owner")
        let unsigned = ForwardedElement(sender: .member(ownerId, name: "owner"), brokerTs: 1, element: try .plain(del))
        let wrongKey = ForwardedElement(sender: .member(ownerId, name: "owner"), brokerTs: 1,
                                        element: try .sign(del, binding: .group, publicGroupId: ChannelNet.publicGroupId, author: ownerId, key: Ed25519.PrivateKey()))
        // An x.grp.mem.del of the other relay, unsigned.
        let drop = ForwardedElement(sender: .member(ownerId, name: "owner"), brokerTs: 1,
                                    element: try .plain(GroupMessage.memberDelete(memberId: net.id("rela"), messages: false).envelope(msgId: "forged-2")))
        for s in Self.subscribers {
            for f in [unsigned, wrongKey, drop] { net.enqueue(s, .subscriber(.received(from: net.id("relb"), .forward(f)))) }
        }
        net.run()
        for s in Self.subscribers {
            let sub = net.subscribers[s]!
            #expect(!sub.deleted)
            #expect(sub.relays[net.id("rela")]?.status == .connected)
            #expect(sub.relays[net.id("relb")]?.rejected == 3)
        }
        // The relay refuses an owner's control message that is not signed, and one signed wrongly.
        let info = GroupMessage.info(net.owner.profile).envelope(msgId: "x")
        let e1 = net.deliver("rela", .relay(.received(from: ownerId, .element(try .plain(info)), brokerTs: 5)))
        #expect(e1?.code == .badSignature)
        let e2 = net.deliver("rela", .relay(.received(from: ownerId, .element(wrongKey.element), brokerTs: 5)))
        #expect(e2?.code == .badSignature)
        #expect(net.relayStates["rela"]?.status == .active)

        // The genuine deletion, signed by the owner, is taken.
        net.ownerInput(.deleteChannel)
        net.run()
        for s in Self.subscribers {
            #expect(net.subscribers[s]!.deleted)
            #expect((net.events[s] ?? []).filter { $0 == .groupDeleted(by: ownerId) }.count == 1)
        }
        // The relays forwarded it, report it and stop serving.
        for r in ["rela", "relb"] {
            #expect((net.events[r] ?? []).filter { $0 == .groupDeleted(by: ownerId) }.count == 1)
            #expect(net.relayStates[r]?.status == .inactive)
        }
    }

    @Test func profileUpdateKeepsTheChannelId() {
        var net = channel(subscribers: ["sam"])
        let p = ChannelProfiles.channelProfile(displayName: "news 2", channelLink: ChannelNet.channelLink, publicGroupId: ChannelNet.publicGroupId)
        net.ownerInput(.updateProfile(p))
        net.run()
        #expect(net.subscribers["sam"]?.profile.displayName == "news 2")
        #expect(net.relayStates["rela"]?.profile?.displayName == "news 2")
        // Subscribers and relays report the change (`groupUpdated`).
        #expect((net.events["sam"] ?? []).contains { if case let .groupUpdated(_, to) = $0 { to == p } else { false } })
        #expect((net.events["rela"] ?? []).contains { if case let .groupUpdated(_, to) = $0 { to == p } else { false } })
        let other = ChannelProfiles.channelProfile(displayName: "x", channelLink: ChannelNet.channelLink, publicGroupId: Array(repeating: 9, count: 32))
        #expect(net.ownerInput(.updateProfile(other))?.code == .linkDataMismatch)
        #expect(net.allErrors().count == 1)
    }

    /// A relay keeps an owner's signed `x.grp.info` and sends it again later — after many posts
    /// and the subscriber's restart, when the in-memory dedup has long forgotten it: the signature
    /// still verifies (it binds channel and owner, not a moment), but the subscriber has applied
    /// that control event before and does not turn the profile back.
    @Test func anOldSignedControlEventReplayedByARelayIsNotAppliedAgain() throws {
        var net = channel(subscribers: ["sam"])
        final class Kept: @unchecked Sendable { var info: ForwardedElement? }
        let kept = Kept()
        net.tamper["rela"] = { f in
            if kept.info == nil, (try? f.element.envelope())?.event == "x.grp.info" { kept.info = f }
            return f
        }
        let p2 = ChannelProfiles.channelProfile(displayName: "news 2", channelLink: ChannelNet.channelLink, publicGroupId: ChannelNet.publicGroupId)
        let p3 = ChannelProfiles.channelProfile(displayName: "news 3", channelLink: ChannelNet.channelLink, publicGroupId: ChannelNet.publicGroupId)
        net.ownerInput(.updateProfile(p2))
        net.run()
        net.ownerInput(.updateProfile(p3))
        net.run()
        let old = try #require(kept.info)
        #expect(net.subscribers["sam"]?.profile.displayName == "news 3")
        #expect(net.subscribers["sam"]?.appliedControl.count == 2)

        // Sam restarts with a dedup that no longer has the old event (as after enough posts).
        let s = net.subscribers["sam"]!
        net.subscribers["sam"] = ChannelSubscriberState(
            publicGroupId: s.publicGroupId, channelLink: s.channelLink, memberId: s.memberId, ownProfile: s.ownProfile, profile: s.profile,
            owners: Array(s.owners.values), key: net.subscriberKeys["sam"]!, requireSignedContent: s.requireSignedContent,
            relays: Array(s.relays.values), uniqueMessages: s.uniqueMessages, dedup: ForwardDedup(), appliedControl: Array(s.appliedControl))
        let updatesBefore = (net.events["sam"] ?? []).count
        net.enqueue("sam", .subscriber(.received(from: net.id("rela"), .forward(old))))
        net.run()
        #expect(net.subscribers["sam"]?.profile.displayName == "news 3")
        #expect((net.events["sam"] ?? []).count == updatesBefore, "\(net.events["sam"] ?? [])")
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")

        // A control event without a message id cannot be checked, and is refused.
        var bare = GroupMessage.info(p2).envelope(msgId: "x")
        bare.msgId = nil
        let noId = ForwardedElement(sender: .member(net.id("owner"), name: "owner"), brokerTs: 1,
                                        element: try .sign(bare, binding: .group, publicGroupId: ChannelNet.publicGroupId, author: net.id("owner"), key: net.ownerSigningKey))
        net.enqueue("sam", .subscriber(.received(from: net.id("rela"), .forward(noId))))
        net.run()
        #expect(net.subscribers["sam"]?.profile.displayName == "news 3")
        #expect(net.subscribers["sam"]?.relays[net.id("rela")]?.rejected == 1)
    }

    /// A relay forgets (when its engine sweeps) a join it accepted that never connected and a
    /// subscriber who left; a connected subscriber is not dropped this way.
    @Test func aRelayForgetsJoinsThatNeverConnectedAndSubscribersWhoLeft() throws {
        var net = channel()
        // zed asks rela to join, and never completes the connection.
        net.person("zed")
        var (zed, _) = try ChannelSubscriberState.joining(net.linkData, channelLink: ChannelNet.channelLink, memberId: net.id("zed"),
                                                          ownProfile: MemberProfile(displayName: "zed"), key: Ed25519.PrivateKey())
        let rela = try #require(net.relayLinks.first { $0.value.relay == "rela" })
        let asked = try zed.handle(.relayLinkData(link: rela.key, linkEntityId: rela.value.entity, relayProfile: MemberProfile(displayName: "rela")),
                                   newMessageId: { "zed-1" })
        let join = try #require(asked.compactMap { e -> GroupEnvelope? in if case let .joinRelay(_, _, info) = e { info } else { nil } }.first)
        #expect(net.deliver("rela", .relay(.joinRequest(info: join))) == nil)
        #expect(net.relayStates["rela"]?.subscribers[net.id("zed")]?.status == .accepted)
        // sam leaves.
        net.deliver("sam", .subscriber(.leave))
        net.run()
        #expect(net.relayStates["rela"]?.subscribers[net.id("sam")]?.status == .left)

        var relay = try #require(net.relayStates["rela"])
        let droppedJoin = try relay.handle(.dropSubscriber(net.id("zed")), newMessageId: { "d1" })
        #expect(droppedJoin == [.deleteConnection(net.id("zed")), .forgetSubscriber(net.id("zed"))])
        let droppedLeaver = try relay.handle(.dropSubscriber(net.id("sam")), newMessageId: { "d2" })
        #expect(droppedLeaver == [.forgetSubscriber(net.id("sam"))])
        #expect(relay.subscribers[net.id("zed")] == nil && relay.subscribers[net.id("sam")] == nil)
        #expect(throws: ChannelError(.invalidState, "")) { try relay.handle(.dropSubscriber(net.id("sue")), newMessageId: { "d3" }) }
        #expect(relay.subscribers[net.id("sue")]?.status == .connected)
    }

    @Test func subscriberLeavesSigned() {
        var net = channel()
        net.deliver("sam", .subscriber(.leave))
        net.run()
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        for r in ["rela", "relb"] {
            #expect(net.relayStates[r]?.subscribers[net.id("sam")]?.status == .left)
            #expect((net.events[r] ?? []).contains(.leftMember(net.id("sam"))))
        }
        // The owner learnt it through the first relay; the second relay's copy finds it gone.
        #expect(net.owner.subscribers[net.id("sam")] == nil)
        #expect((net.events["owner"] ?? []).filter { $0 == .leftMember(net.id("sam")) }.count == 1)
        net.post("after sam")
        #expect(net.texts(at: "sam").isEmpty)
        #expect(net.texts(at: "sue") == ["after sam"])
    }

    @Test func relayRefusesJoinsWhenNotServing() throws {
        var net = channel(subscribers: [])
        net.deliver("rela", .relay(.leave))
        net.run()
        let key = Ed25519.PrivateKey()
        let join = ChannelMessage.member(MemberJoin(profile: MemberProfile(displayName: "zed"), newMemberId: MemberId("zedA")!, newMemberKey: MemberKey(key.publicKey)))
        let e = net.deliver("rela", .relay(.joinRequest(info: join.envelope(msgId: "j"))))
        #expect(e?.code == .rejected)
    }

    @Test func relayChecksTheChannelsLinkData() throws {
        var net = ChannelNet(relays: ["rela"])
        // The link data names another publicGroupId than its profile: the relay does not accept.
        net.linkData.publicGroupId = Array(repeating: 7, count: 32)
        net.addRelays(["rela"])
        #expect(net.allErrors().map(\.1.code) == [.linkDataMismatch])
        #expect(net.owner.relays[net.id("rela")]?.status == .invited)
        #expect(net.relayStates["rela"]?.relayLink == nil)
    }

    @Test func ownerChecksTheRelaysLinkEntity() {
        var net = ChannelNet(relays: ["rela"])
        net.person("rela")
        net.ownerInput(.addRelay(memberId: net.id("rela"), chatRelayId: 1, address: ChannelNet.address("rela")))
        // Step until the relay made its link, then make the link's data name another member.
        while net.relayLinks.isEmpty, !net.queue.isEmpty {
            let next = net.queue.removeFirst()
            net.deliver(next.to, next.input)
        }
        for (link, v) in net.relayLinks { net.relayLinks[link] = (v.relay, MemberId("otherA")!) }
        net.run()
        #expect(net.errors["owner"]?.map(\.code) == [.linkDataMismatch])
        #expect(net.owner.relays[net.id("rela")]?.status == .invited)
        #expect(net.linkData.relays.isEmpty)
    }
}
