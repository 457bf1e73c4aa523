import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto
import Testing
@testable import ChannelProtocol

/// The channel link's data as the source of truth (docs/channels.md §5, §7): the owner keeps its
/// `publicMemberCount` current, and a subscriber that missed an owner's relay change catches up
/// by reading the link data again (`linkDataRefreshed`).
@Suite struct ChannelLinkSyncTests {
    /// Drops what `relay` forwards of `event`.
    func dropping(_ event: String) -> (ForwardedElement) -> ForwardedElement? {
        { f in (try? f.element.envelope())?.event == event ? nil : f }
    }

    @Test func theOwnerRepublishesTheMemberCount() {
        var net = ChannelNet(relays: ["rela", "relb"])
        net.addRelays(["rela", "relb"])
        #expect(net.linkData.publicMemberCount == 1, "the owner alone")
        for s in ["sam", "sue", "syd"] { net.join(s) }
        #expect(net.linkData.publicMemberCount == 4)
        #expect(net.linkData.relays.count == 2, "republishing keeps the relays")
        net.deliver("sue", .subscriber(.leave))
        net.run()
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        #expect(net.linkData.publicMemberCount == 3)
    }

    @Test func aSubscriberThatMissedAnAddedRelayJoinsItFromTheLinkData() {
        var net = ChannelNet(relays: ["rela", "relb", "relc"])
        net.addRelays(["rela", "relb"])
        net.join("sam")
        // The relays lose the owner's x.grp.relay.new: sam does not learn relc.
        net.tamper["rela"] = dropping("x.grp.relay.new")
        net.tamper["relb"] = dropping("x.grp.relay.new")
        net.addRelays(["relc"], startingId: 3)
        #expect(net.linkData.relays.count == 3)
        #expect(net.subscribers["sam"]?.relays[net.id("relc")] == nil)
        // Reading the link data again, sam joins relc; a second read changes nothing.
        net.deliver("sam", .subscriber(.linkDataRefreshed(net.linkData)))
        net.run()
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        #expect(net.subscribers["sam"]?.connectedRelays == ["rela", "relb", "relc"].map { net.id($0) }.sorted())
        let before = net.events["sam"]?.count
        net.deliver("sam", .subscriber(.linkDataRefreshed(net.linkData)))
        net.run()
        #expect(net.events["sam"]?.count == before)
        net.tamper = [:]
        net.post("through three")
        #expect(net.subscribers["sam"]!.relays[net.id("relc")]?.delivered == 1)
    }

    @Test func aSubscriberThatMissedARemovalDropsTheRelayFromTheLinkData() throws {
        var net = ChannelNet(relays: ["rela", "relb"])
        net.addRelays(["rela", "relb"])
        net.join("sam")
        // The removal's x.grp.mem.del never reaches sam.
        net.tamper["rela"] = dropping("x.grp.mem.del")
        net.tamper["relb"] = dropping("x.grp.mem.del")
        net.ownerInput(.removeRelay(net.id("rela")))
        net.run()
        #expect(net.subscribers["sam"]?.relays[net.id("rela")]?.status == .connected)
        net.deliver("sam", .subscriber(.linkDataRefreshed(net.linkData)))
        net.run()
        #expect(net.allErrors().isEmpty, "\(net.allErrors())")
        #expect(net.subscribers["sam"]?.relays[net.id("rela")]?.status == .gone)
        #expect((net.events["sam"] ?? []).contains(.relayGone(net.id("rela"))))
        #expect(net.subscribers["sam"]?.connectedRelays == [net.id("relb")])

        // Another channel's data is refused and changes nothing.
        var other = net.linkData
        other.publicGroupId = Array(repeating: 7, count: 32)
        let refused = net.deliver("sam", .subscriber(.linkDataRefreshed(other)))
        #expect(refused?.code == .linkDataMismatch)
        #expect(net.subscribers["sam"]?.connectedRelays == [net.id("relb")])
    }

    @Test func aChangedProfileFromTheLinkDataIsTaken() {
        var net = ChannelNet(relays: ["rela"])
        net.addRelays(["rela"])
        net.join("sam")
        var data = net.linkData
        var json = data.profile.json
        if case var .object(pairs) = json, let i = pairs.firstIndex(where: { $0.0 == "displayName" }) {
            pairs[i].1 = "renamed"
            json = .object(pairs)
        }
        data.profile = try! GroupProfile(json: json)
        net.deliver("sam", .subscriber(.linkDataRefreshed(data)))
        #expect(net.subscribers["sam"]?.profile.displayName == "renamed")
        #expect((net.events["sam"] ?? []).contains { if case .groupUpdated = $0 { true } else { false } })
    }
}
