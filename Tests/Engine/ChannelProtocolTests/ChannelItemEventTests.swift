import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto
import Testing
@testable import ChannelProtocol

/// The owner's events on posts — updates, deletions, reactions — through the relays
/// (docs/channels.md §5, §6 and §7: every owner event forwarded, signed, taken once).
@Suite struct ChannelItemEventTests {
    func channel(subscribers: [String] = ["sam", "sue"]) -> ChannelNet {
        var net = ChannelNet(relays: ["rela", "relb"])
        net.addRelays(["rela", "relb"])
        for s in subscribers { net.join(s) }
        return net
    }

    /// The events `name` applied, as (event, the post's msgId they concern, sender).
    func applied(_ net: ChannelNet, _ name: String) -> [(String, String?, ContentSender)] {
        (net.applied[name] ?? []).map { a in
            (a.envelope.event, a.envelope.event == "x.msg.new" ? a.envelope.msgId : a.envelope.params["msgId"]?.stringValue, a.sender)
        }
    }

    @Test func ownerEventsOnAPostReachEverySubscriberOnceAsTheChannel() throws {
        var net = channel()
        net.post("one")
        let postId = try #require(net.applied["sam"]?.first?.envelope.msgId)
        #expect(net.ownerInput(.updatePost(msgId: postId, content: ["type": "text", "text": "one, edited"], asGroup: true)) == nil)
        net.run()
        #expect(net.ownerInput(.reactToPost(msgId: postId, reaction: ["type": "emoji", "emoji": "👍"], add: true, asGroup: true)) == nil)
        net.run()
        #expect(net.ownerInput(.deletePost(msgId: postId, asGroup: true)) == nil)
        net.run()
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        for s in ["sam", "sue"] {
            let a = applied(net, s)
            #expect(a.map(\.0) == ["x.msg.new", "x.msg.update", "x.msg.react", "x.msg.del"], "\(a)")
            #expect(a.allSatisfy { $0.1 == postId && $0.2 == .channel })
            #expect(net.applied[s]!.allSatisfy { $0.verification == .verified })
            #expect(net.applied[s]![1].envelope.params["content"]?["text"]?.stringValue == "one, edited")
            #expect(net.applied[s]![2].envelope.params["add"]?.boolValue == true)
            // Both relays brought all four; each was taken once.
            for r in ["rela", "relb"] { #expect(net.subscribers[s]!.relays[net.id(r)]?.delivered == 4) }
            #expect(net.subscribers[s]!.uniqueMessages == 4)
        }
        // As the channel: the relays did not name the owner.
        var senders: [ForwardSender] = []
        net.tamper["rela"] = { f in
            senders.append(f.sender)
            return f
        }
        net.post("two")
        let second = try #require(net.applied["sam"]?.last?.envelope.msgId)
        net.ownerInput(.updatePost(msgId: second, content: ["type": "text", "text": "two, edited"], asGroup: true))
        net.ownerInput(.deletePost(msgId: second, asGroup: true))
        net.run()
        #expect(senders == [.channel, .channel, .channel])
    }

    /// A relay that names the owner on a deletion made as the channel (revealing who acted), or
    /// alters an update, is refused; the other relay's copy is taken.
    @Test func aRelayRevealingOrAlteringAnOwnerEventIsRefused() throws {
        var net = channel(subscribers: ["sam"])
        net.post("real")
        let postId = try #require(net.applied["sam"]?.first?.envelope.msgId)
        let owner = net.id("owner")
        net.tamper["rela"] = { f in
            var f = f
            guard let env = try? f.element.envelope() else { return f }
            if env.event == "x.msg.del" { f.sender = .member(owner, name: "owner") }
            if env.event == "x.msg.update", case let .signed(binding, sigs, body) = f.element {
                let text = String(decoding: body, as: UTF8.self).replacingOccurrences(of: "fixed", with: "forged")
                f.element = .signed(binding: binding, signatures: sigs, body: Array(text.utf8))
            }
            return f
        }
        net.ownerInput(.updatePost(msgId: postId, content: ["type": "text", "text": "fixed"], asGroup: true))
        net.run()
        net.ownerInput(.deletePost(msgId: postId, asGroup: true))
        net.run()
        let a = applied(net, "sam")
        #expect(a.map(\.0) == ["x.msg.new", "x.msg.update", "x.msg.del"], "\(a)")
        #expect(net.applied["sam"]![1].envelope.params["content"]?["text"]?.stringValue == "fixed")
        #expect(net.applied["sam"]!.allSatisfy { $0.relay == net.id("relb") || $0.envelope.event == "x.msg.new" })
        #expect(net.subscribers["sam"]!.relays[net.id("rela")]?.rejected == 2)
    }

    /// A late joiner gets a post with its updates, and not a deleted post; a relay restored from
    /// its stored history does not forward an update again.
    @Test func historyKeepsUpdatesAndDropsDeletedPosts() throws {
        var net = channel(subscribers: ["sam"])
        net.post("kept")
        net.post("gone")
        let ids = (net.applied["sam"] ?? []).compactMap(\.envelope.msgId)
        try #require(ids.count == 2)
        net.ownerInput(.updatePost(msgId: ids[0], content: ["type": "text", "text": "kept, edited"], asGroup: true))
        net.run()
        net.ownerInput(.updatePost(msgId: ids[1], content: ["type": "text", "text": "gone, edited"], asGroup: true))
        net.run()
        net.ownerInput(.reactToPost(msgId: ids[0], reaction: ["type": "emoji", "emoji": "❤️"], add: true, asGroup: true))
        net.run()
        net.ownerInput(.deletePost(msgId: ids[1], asGroup: true))
        net.run()
        let stored = net.relayStates["rela"]!
        #expect(stored.history.count == 2)
        #expect(stored.historyRevision == 1)
        net.join("zoe")
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        #expect(applied(net, "zoe").map(\.0) == ["x.msg.new", "x.msg.update"])
        #expect(net.texts(at: "zoe") == ["kept", "kept, edited"])

        let update = try #require(stored.history.last?.element)
        var restored = ChannelRelayState(
            channelLink: stored.channelLink, ownMemberId: stored.ownMemberId, ownProfile: stored.ownProfile, inviter: stored.inviter, status: stored.status,
            publicGroupId: stored.publicGroupId, profile: stored.profile, owners: Array(stored.owners.values), relayLink: stored.relayLink,
            subscribers: Array(stored.subscribers.values), history: stored.history, ownerConnected: stored.isOwnerConnected)
        let effects = try restored.handle(.received(from: net.id("owner"), .element(update), brokerTs: net.brokerTs), newMessageId: { "repeat" })
        #expect(effects.isEmpty, "\(effects)")
    }

    /// Owner events need a live channel with an active relay, and a msgId.
    @Test func ownerEventsAreRefusedWithoutARelayOrAPostId() {
        var net = ChannelNet(relays: ["rela"])
        let noRelay = net.ownerInput(.deletePost(msgId: "abc", asGroup: true))
        #expect(noRelay?.code == .invalidState)
        net.addRelays(["rela"])
        let empty = net.ownerInput(.updatePost(msgId: "", content: ["type": "text", "text": "x"], asGroup: true))
        #expect(empty?.code == .malformedMessage)
    }
}
