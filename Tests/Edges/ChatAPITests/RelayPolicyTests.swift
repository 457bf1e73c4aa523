import ChatTestSupport
import Foundation
import RelayServer
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// A chat relay's operator policy (`/_relay policy`, what the host's channel-relay plugin sets):
/// the allow-list refuses an owner's invitation with `x.grp.relay.reject` and keeps nothing; the
/// subscriber cap refuses joins past it. Engines on a live relay server (TLS on loopback, SQLite
/// files), driven by command strings.
@Suite(.timeLimit(.minutes(3))) struct RelayPolicyTests: LiveRelaySuite {
    /// The owner registers both relay users' addresses and creates a channel with them, then waits
    /// until the owner sees both relays reach `status` (`rejected`: both answered `x.grp.relay.reject`);
    /// returns the relays' ids as `/_public group` takes them.
    @discardableResult
    func createChannelWithBothRelays(_ o: ChatAPI, _ oIn: ChatInbox, _ addresses: [String], until status: String) async throws -> String {
        let relays = await o.execute("/relays name=one \(addresses[0]) name=two \(addresses[1])")
        guard case let .array(list)? = relays["chatRelays"], list.count == 2 else { throw TestFailure("\(relays)") }
        let ids = list.compactMap { $0["chatRelayId"]?.intValue }.map(String.init).joined(separator: ",")
        let created = await o.execute(#"/_public group 1 \#(ids) {"displayName": "news", "fullName": ""}"#)
        #expect(created["type"]?.stringValue == "publicGroupCreated", "\(created)")
        for _ in 0..<2 {
            _ = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == status })
        }
        return ids
    }

    func createChannelBothRelaysRefuse(_ o: ChatAPI, _ oIn: ChatInbox, _ addresses: [String]) async throws {
        try await createChannelWithBothRelays(o, oIn, addresses, until: "rejected")
    }

    func errorMessage(_ r: JSONValue) -> String? {
        r["type"]?.stringValue == "chatCmdError" ? r["chatError"]?["errorType"]?["message"]?.stringValue : nil
    }

    /// The policy's JSON is checked: unknown keys, numbers below 1 and wrong types are refused.
    @Test func aMalformedPolicyIsRefusedAndAGoodOneTaken() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                _ = try await makeRelayUsers(r)
                #expect(errorMessage(await r.execute(#"/_relay policy {"maxChannels": 0}"#))?.contains("maxChannels") == true)
                #expect(errorMessage(await r.execute(#"/_relay policy {"allow": "x"}"#))?.contains("allow") == true)
                #expect(errorMessage(await r.execute(#"/_relay policy {"maxChanels": 3}"#))?.contains("unknown key maxChanels") == true)
                #expect(await r.controller.currentRelayPolicy == ChannelRelayPolicy())
                let ok = await r.execute(#"/_relay policy {"maxChannels": 3, "joinsPerMinute": 10}"#)
                #expect(ok["type"]?.stringValue == "cmdOk", "\(ok)")
                #expect(await r.controller.currentRelayPolicy == ChannelRelayPolicy(maxChannels: 3, joinsPerMinute: 10))
            }
        }
    }

    /// The policy is kept in the chat database: a restarted engine refuses an invitation off the
    /// allow-list before anyone sets the policy again (the host's start-up gap); `{}` clears it
    /// for good.
    @Test func aStoredPolicyHoldsFromTheEnginesStart() async throws {
        try await withLiveRelay { dir, relay in
            let addresses = try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                let addresses = try await makeRelayUsers(r)
                let set = await r.execute(#"/_relay policy {"allow": ["https://elsewhere.example/c#not-this-one"], "maxChannels": 5}"#)
                #expect(set["type"]?.stringValue == "cmdOk", "\(set)")
                return addresses
            }
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                _ = await r.execute("/_start")
                #expect(await r.controller.currentRelayPolicy == ChannelRelayPolicy(allow: ["https://elsewhere.example/c#not-this-one"], maxChannels: 5))
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    await startUser(o, "owner")
                    try await createChannelBothRelaysRefuse(o, oIn, addresses)
                    #expect(await r.controller.relayPolicyRefusals.channels == 2)
                }
                let cleared = await r.execute("/_relay policy {}")
                #expect(cleared["type"]?.stringValue == "cmdOk", "\(cleared)")
            }
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                #expect(await r.controller.currentRelayPolicy == ChannelRelayPolicy())
            }
        }
    }

    /// A channel not on the allow-list: both relays answer `x.grp.relay.reject`, the owner sees
    /// them `rejected`, and the relays keep no channel.
    @Test func aChannelOffTheAllowListIsRefused() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                let addresses = try await makeRelayUsers(r)
                let set = await r.execute(#"/_relay policy {"allow": ["https://elsewhere.example/c#not-this-one"]}"#)
                #expect(set["type"]?.stringValue == "cmdOk", "\(set)")
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    await startUser(o, "owner")
                    try await createChannelBothRelaysRefuse(o, oIn, addresses)
                    #expect(await r.controller.relayPolicyRefusals.channels == 2)
                    #expect(try await r.controller.relayChannelCounters().isEmpty)
                }
            }
        }
    }

    /// An owner on the allow-list by its contact link (the `contactLink` of its profile, as a bot
    /// host publishes it) is served: both relays become active; its second channel is past
    /// `maxChannels: 1` and refused.
    @Test func anOwnerOnTheAllowListIsServed() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, rIn in
                let addresses = try await makeRelayUsers(r)
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    await startUser(o, "owner")
                    let own = await o.execute("/_address 1")
                    let ownerLink = try #require(own["connLinkContact"]?["connFullLink"]?.stringValue, "\(own)")
                    let profile = await o.execute(#"/_profile 1 {"displayName": "owner", "fullName": "", "contactLink": "\#(ownerLink)"}"#)
                    #expect(profile["type"]?.stringValue == "userProfileUpdated", "\(profile)")
                    let set = await r.execute(#"/_relay policy {"allow": ["https://elsewhere.example/c#x", "\#(ownerLink)"], "maxChannels": 1}"#)
                    #expect(set["type"]?.stringValue == "cmdOk", "\(set)")
                    let ids = try await createChannelWithBothRelays(o, oIn, addresses, until: "active")
                    for _ in 0..<2 { _ = try await rIn.next("userJoinedGroup") }
                    #expect(await r.controller.relayPolicyRefusals.channels == 0)
                    // Each relay user serves one channel: the cap (maxChannels 1, per relay user)
                    // refuses a second channel at both.
                    #expect(try await r.controller.relayChannelCounters().count == 2)
                    let second = await o.execute(#"/_public group 1 \#(ids) {"displayName": "more", "fullName": ""}"#)
                    #expect(second["type"]?.stringValue == "publicGroupCreated", "\(second)")
                    for _ in 0..<2 {
                        _ = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == "rejected" })
                    }
                    #expect(await r.controller.relayPolicyRefusals.channels == 2)
                    #expect(try await r.controller.relayChannelCounters().count == 2)
                }
            }
        }
    }

    /// The owner makes a channel with both relay users; sub1 joins through both relays, sub2's
    /// joins are refused by both (a refused join sends nothing back: the request is rejected
    /// unseen, so the relay engine's refusal counter is awaited).
    func secondSubscriberIsRefused(_ dir: URL, relay: RelayServer, owner o: ChatAPI, _ oIn: ChatInbox, _ addresses: [String],
                                   relayController: ChatController) async throws {
        let (_, link) = try await makeActiveChannel(o, oIn, addresses)
        try await withEngine(dir, "sub1", relays: [relay.address]) { s, sIn in
            await startUser(s, "sub1")
            #expect(await s.execute("/_connect 1 \(link)")["type"]?.stringValue == "startedConnectionToGroup")
            for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup") }
        }
        try await withEngine(dir, "sub2", relays: [relay.address]) { s, _ in
            await startUser(s, "sub2")
            #expect(await s.execute("/_connect 1 \(link)")["type"]?.stringValue == "startedConnectionToGroup")
            try await eventually(timeout: .seconds(30), "both relays refuse sub2") { await relayController.relayPolicyRefusals.joins == 2 }
        }
    }

    /// `maxSubscribersPerChannel: 1`: the first subscriber joins through both relays, the second
    /// is refused by both; the counters show one subscriber per relay.
    @Test func joinsPastTheSubscriberCapAreRefused() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                let addresses = try await makeRelayUsers(r)
                #expect(await r.execute(#"/_relay policy {"maxSubscribersPerChannel": 1}"#)["type"]?.stringValue == "cmdOk")
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    try await secondSubscriberIsRefused(dir, relay: relay, owner: o, oIn, addresses, relayController: r.controller)
                    let counters = try await r.controller.relayChannelCounters()
                    #expect(counters.count == 2 && counters.allSatisfy { $0.subscribers == 1 && $0.relayStatus == "active" }, "\(counters)")
                }
            }
        }
    }

    /// Without any `/_relay policy`, the engine's defaults bound the relay: here a default of one
    /// subscriber per channel refuses the second join at both relays.
    @Test func aRelayWithoutAPolicyKeepsTheEnginesDefaultBounds() async throws {
        try await withLiveRelay { dir, relay in
            let limits = ChatLimits(relayPolicyDefaults: ChannelRelayPolicy(maxSubscribersPerChannel: 1))
            try await withLimitedEngine(dir, "relays", relays: [relay.address], limits: limits) { controller, r, _ in
                let addresses = try await makeRelayUsers(r)
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    try await secondSubscriberIsRefused(dir, relay: relay, owner: o, oIn, addresses, relayController: controller)
                }
            }
        }
    }

    /// A subscriber who left is forgotten by the relay's clean-up: its rows go (and a relay's
    /// storage does not keep everyone who ever passed through).
    @Test func aSubscriberWhoLeftIsForgottenByTheRelaysCleanUp() async throws {
        try await withLiveRelay { dir, relay in
            try await withLimitedEngine(dir, "relays", relays: [relay.address], limits: ChatLimits()) { controller, r, rIn in
                let addresses = try await makeRelayUsers(r)
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    let (_, link) = try await makeActiveChannel(o, oIn, addresses)
                    try await withEngine(dir, "sub1", relays: [relay.address]) { s, sIn in
                        await startUser(s, "sub1")
                        #expect(await s.execute("/_connect 1 \(link)")["type"]?.stringValue == "startedConnectionToGroup")
                        let joined = try await sIn.next("userJoinedGroup")
                        _ = try await sIn.next("userJoinedGroup")
                        let g = try #require(joined["groupInfo"]?["groupId"]?.intValue)
                        #expect(await s.execute("/_leave #\(g)")["type"]?.stringValue == "leftMemberUser")
                        for _ in 0..<2 { _ = try await rIn.next("leftMember") }
                    }
                    func subscriberRows() async throws -> Int {
                        try await controller.dbRead { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM channel_member WHERE kind = 'subscriber'") ?? -1 }
                    }
                    #expect(try await subscriberRows() == 2)
                    // Not yet: they left just now.
                    #expect(await controller.forgetStaleRelaySubscribers(olderThan: .seconds(3600)) == 0)
                    #expect(await controller.forgetStaleRelaySubscribers(olderThan: .zero, now: Date().addingTimeInterval(1)) == 2)
                    #expect(try await subscriberRows() == 0)
                    let counters = try await controller.relayChannelCounters()
                    #expect(counters.count == 2 && counters.allSatisfy { $0.subscribers == 0 && $0.relayStatus == "active" }, "\(counters)")
                }
            }
        }
    }
}
