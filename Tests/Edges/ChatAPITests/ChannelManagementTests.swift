import Agent
import ChannelProtocol
import ChatTestSupport
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// Managing a channel's relays on the engine (docs/channels.md §9): the owner adding and removing
/// relays, a relay's operator leaving (then refusing the channel until `/_relay allow`), the
/// owner leaving; subscribers' per-relay counters and signature checks; what survives a restart
/// (the relay's history, the counters, refused channels). Engines on a live relay server (TLS on
/// loopback, SQLite files).
@Suite(.timeLimit(.minutes(3))) struct ChannelManagementTests: LiveRelaySuite {
    /// The owner's relays (`/_get relays`) by relay name.
    func ownerRelays(_ o: ChatAPI, _ groupId: Int) async throws -> [String: JSONValue] {
        let listed = await o.execute("/_get relays #\(groupId)")
        guard case let .array(relays)? = listed["groupRelays"] else { throw TestFailure("\(listed)") }
        var byName: [String: JSONValue] = [:]
        for r in relays {
            if let name = r["userChatRelay"]?["relayProfile"]?["displayName"]?.stringValue { byName[name] = r }
        }
        return byName
    }

    /// A subscriber's relays (`/_get relays`) by the relay's own profile name.
    func subscriberRelays(_ s: ChatAPI, _ groupId: Int) async -> [String: JSONValue] {
        let listed = await s.execute("/_get relays #\(groupId)")
        guard case let .array(relays)? = listed["groupRelays"] else { return [:] }
        var byName: [String: JSONValue] = [:]
        for r in relays {
            if let name = r["userChatRelay"]?["relayProfile"]?["displayName"]?.stringValue { byName[name] = r }
        }
        return byName
    }

    /// The relay user's channel group on a relays engine.
    func relayGroup(_ r: ChatAPI, user: Int) async throws -> Int64 {
        let ids = try await r.controller.dbRead { db in
            try Int64.fetchAll(db, sql: "SELECT c.group_id FROM channel c JOIN chat_group g ON g.id = c.group_id WHERE g.user_id = ? ORDER BY c.group_id", arguments: [user])
        }
        guard let id = ids.last else { throw TestFailure("relay user \(user) has no channel") }
        return id
    }

    /// The owner adds a third relay: it goes invited → accepted → active, the subscriber learns it
    /// through `x.grp.relay.new` and joins through it. The owner removes the first two: they learn
    /// it (`deletedMemberUser`), the subscriber drops them, and the next post comes through the
    /// third relay alone, verified.
    @Test func anAddedRelayServesSubscribersAndRemovedOnesStop() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, rIn in
                var addresses = try await makeRelayUsers(r)
                _ = await r.execute(relayUserCommand("relay3"))
                let third = try #require(await r.execute("/_address 3")["connLinkContact"]?["connShortLink"]?.stringValue)
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    let (groupId, link) = try await makeActiveChannel(o, oIn, addresses)
                    addresses.append(third)
                    let set = await o.execute("/relays name=one \(addresses[0]) name=two \(addresses[1]) name=three \(addresses[2])")
                    guard case let .array(registered)? = set["chatRelays"], registered.count == 3 else { throw TestFailure("\(set)") }
                    let threeId = try #require(registered.first { $0["address"]?.stringValue == third }?["chatRelayId"]?.intValue)
                    try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                        await startUser(s, "sub1")
                        let started = await s.execute("/_connect 1 \(link)")
                        let subGroup = try #require(started["groupInfo"]?["groupId"]?.intValue, "\(started)")
                        for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup") }
                        _ = try await oIn.next("joinedGroupMemberConnecting")

                        // Refusals first: an unknown relay, a relay the channel has already.
                        let unknown = await o.execute("/_add relays #\(groupId) 99")
                        #expect(unknown["chatError"]?["storeError"]?["type"]?.stringValue == "userChatRelayNotFound", "\(unknown)")
                        let twice = await o.execute("/_add relays #\(groupId) 1")
                        #expect(twice["chatError"]?["errorType"]?["code"]?.stringValue == "duplicateMember", "\(twice)")

                        let added = await o.execute("/_add relays #\(groupId) \(threeId)")
                        #expect(added["type"]?.stringValue == "groupRelaysAdded", "\(added)")
                        guard case let .array(newRelays)? = added["groupRelays"] else { throw TestFailure("\(added)") }
                        #expect(newRelays.map { $0["relayStatus"]?.stringValue } == ["invited"], "\(newRelays)")
                        #expect(added["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue == link)
                        for status in ["accepted", "active"] {
                            _ = try await oIn.next("groupRelayUpdated", where: {
                                $0["groupRelay"]?["userChatRelay"]?["chatRelayId"]?.intValue == threeId && $0["groupRelay"]?["relayStatus"]?.stringValue == status
                            })
                        }
                        // The subscriber hears of it from the other relays and joins through it.
                        let joined = try await sIn.next("userJoinedGroup", timeout: .seconds(30))
                        #expect(joined["hostMember"]?["memberProfile"]?["displayName"]?.stringValue == "relay3", "\(joined)")
                        #expect(await subscriberRelays(s, subGroup)["relay3"]?["relayStatus"]?.stringValue == "active")

                        // The first two are removed.
                        let before = try await ownerRelays(o, groupId)
                        let firstTwo = try ["one", "two"].map { try #require(before[$0]?["groupMemberId"]?.intValue) }
                        let removed = await o.execute("/_remove #\(groupId) \(firstTwo[0]),\(firstTwo[1])")
                        #expect(removed["type"]?.stringValue == "userDeletedMembers", "\(removed)")
                        #expect(removed["members"]?.arrayCount == 2, "\(removed)")
                        for _ in 0..<2 {
                            let told = try await rIn.next("deletedMemberUser")
                            #expect(told["groupInfo"]?["relayOwnStatus"]?.stringValue == "inactive", "\(told)")
                        }
                        let after = try await ownerRelays(o, groupId)
                        #expect(after["one"]?["relayStatus"]?.stringValue == "inactive" && after["two"]?["relayStatus"]?.stringValue == "inactive", "\(after)")
                        #expect(after["three"]?["relayStatus"]?.stringValue == "active", "\(after)")
                        // The channel link's data names the third relay only.
                        let data = try #require(try await s.controller.agent.resolveWithData(try ShortLink(parsing: link)).data)
                        #expect(data.relays.map(\.description) == [after["three"]?["relayLink"]?.stringValue], "\(data.relays)")
                        try await waitUntil("the subscriber to drop the removed relays") {
                            let mine = await subscriberRelays(s, subGroup)
                            return mine["relay1"]?["relayStatus"]?.stringValue == "inactive" && mine["relay2"]?["relayStatus"]?.stringValue == "inactive"
                        }
                        // A removed relay takes no more posts or subscribers.
                        for user in [1, 2] {
                            let g = try await relayGroup(r, user: user)
                            let (conns, record) = try await r.controller.dbRead { db in
                                (try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == g && ChannelMemberRecord.Columns.agentConnId != nil).fetchCount(db),
                                 try ChannelRecord.fetchOne(db, key: g))
                            }
                            #expect(conns == 0 && record?.agentAddressId == nil && record?.relayStatus == "inactive", "relay \(user): \(conns), \(String(describing: record))")
                        }

                        _ = await postToChannel(o, groupId, "via three")
                        let got = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "via three" })
                        let item = try #require(got["chatItems"]?.arrayFirst?["chatItem"])
                        #expect(item["chatDir"]?["type"]?.stringValue == "channelRcv")
                        #expect(item["meta"]?["msgVerified"]?["type"]?.stringValue == "signed", "\(item)")
                        #expect(item["meta"]?["msgVerified"]?["sigStatus"]?.stringValue == "verified", "\(item)")
                        let stats = await subscriberRelays(s, subGroup)["relay3"]?["relayStats"]
                        // (Its counters count every verified owner message it brought first: the removals too.)
                        #expect((stats?["received"]?.intValue ?? 0) >= 1 && stats?["rejected"]?.intValue == 0, "\(String(describing: stats))")
                        // Subscribers' relay lists are theirs: the relays' own is refused.
                        let relaySide = await r.execute("/_get relays #\(try await relayGroup(r, user: 3))")
                        #expect(relaySide["type"]?.stringValue == "chatCmdError", "\(relaySide)")
                    }
                }
            }
        }
    }

    /// A relay's operator leaves: its subscribers and the owner are told, it stops, and the
    /// channel is refused — across a restart — when the owner invites it again (`rejected` at the
    /// owner), until `/_relay allow`; then it serves again. Finally the owner leaves: the relays
    /// and the subscriber hear it.
    @Test func aRelayThatLeftRefusesTheChannelUntilAllowed() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    let (groupId, relayChannel) = try await withEngine(dir, "relays", relays: [relay.address]) { r, rIn in
                        let addresses = try await makeRelayUsers(r)
                        let (groupId, link) = try await makeActiveChannel(o, oIn, addresses)
                        await startUser(s, "sub1")
                        let started = await s.execute("/_connect 1 \(link)")
                        let subGroup = try #require(started["groupInfo"]?["groupId"]?.intValue, "\(started)")
                        for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup") }
                        _ = try await oIn.next("joinedGroupMemberConnecting")

                        // relay1 leaves.
                        let relayChannel = try await relayGroup(r, user: 1)
                        let left = await r.execute("/_leave #\(relayChannel)")
                        #expect(left["type"]?.stringValue == "leftMemberUser", "\(left)")
                        #expect(left["groupInfo"]?["relayOwnStatus"]?.stringValue == "rejected", "\(left)")
                        #expect(left["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "left", "\(left)")
                        let ownerHeard = try await oIn.next("leftMember")
                        #expect(ownerHeard["member"]?["memberRole"]?.stringValue == "relay", "\(ownerHeard)")
                        #expect(try await ownerRelays(o, groupId)["one"]?["relayStatus"]?.stringValue == "inactive")
                        try await waitUntil("the subscriber to drop the relay that left") {
                            await subscriberRelays(s, subGroup)["relay1"]?["relayStatus"]?.stringValue == "inactive"
                        }
                        _ = await postToChannel(o, groupId, "after leave")
                        _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "after leave" })
                        // It keeps no connection of the channel.
                        let conns = try await r.controller.dbRead { db in
                            try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == relayChannel && ChannelMemberRecord.Columns.agentConnId != nil).fetchCount(db)
                        }
                        #expect(conns == 0)
                        #expect(rIn.contains("leftMember") == false)
                        return (groupId, relayChannel)
                    }
                    try await withEngine(dir, "relays", relays: [relay.address]) { r, rIn in
                        _ = await r.execute("/_start")
                        // Invited again after a restart: refused.
                        let again = await o.execute("/_add relays #\(groupId) 1")
                        #expect(again["type"]?.stringValue == "groupRelaysAdded", "\(again)")
                        let rejected = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == "rejected" }, timeout: .seconds(30))
                        #expect(rejected["groupRelay"]?["userChatRelay"]?["chatRelayId"]?.intValue == 1, "\(rejected)")
                        #expect(rejected["member"]?["memberStatus"]?.stringValue == "left", "\(rejected)")

                        // Allowed, invited again: it serves.
                        let notRefused = await r.execute("/_relay allow #\(try await relayGroup(r, user: 2))")
                        #expect(notRefused["chatError"]?["errorType"]?["code"]?.stringValue == "invalidState", "\(notRefused)")
                        let allowed = await r.execute("/_relay allow #\(relayChannel)")
                        #expect(allowed["type"]?.stringValue == "relayGroupAllowed", "\(allowed)")
                        #expect(allowed["groupInfo"]?["groupId"]?.intValue == Int(relayChannel), "\(allowed)")
                        let once = await o.execute("/_add relays #\(groupId) 1")
                        #expect(once["type"]?.stringValue == "groupRelaysAdded", "\(once)")
                        _ = try await oIn.next("groupRelayUpdated", where: {
                            $0["groupRelay"]?["userChatRelay"]?["chatRelayId"]?.intValue == 1 && $0["groupRelay"]?["relayStatus"]?.stringValue == "active"
                        }, timeout: .seconds(30))
                        _ = try await sIn.next("userJoinedGroup", where: { $0["hostMember"]?["memberProfile"]?["displayName"]?.stringValue == "relay1" }, timeout: .seconds(30))

                        // The owner leaves: each relay forwards it, the subscriber hears it once.
                        let ownerLeft = await o.execute("/_leave #\(groupId)")
                        #expect(ownerLeft["type"]?.stringValue == "leftMemberUser", "\(ownerLeft)")
                        #expect(ownerLeft["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "left", "\(ownerLeft)")
                        for _ in 0..<2 { _ = try await rIn.next("leftMember", where: { $0["member"]?["memberRole"]?.stringValue == "owner" }) }
                        let heard = try await sIn.next("leftMember")
                        #expect(heard["member"]?["memberRole"]?.stringValue == "owner", "\(heard)")
                        let posted = await postToChannel(o, groupId, "gone")
                        #expect(posted["type"]?.stringValue == "chatCmdError", "\(posted)")
                        let readd = await o.execute("/_add relays #\(groupId) 2")
                        #expect(readd["type"]?.stringValue == "chatCmdError", "\(readd)")
                    }
                }
            }
            // Restarted, the owner that left still neither posts nor adds relays.
            try await withEngine(dir, "owner", relays: [relay.address]) { o, _ in
                _ = await o.execute("/_start")
                let chats = await o.execute("/_get chats 1 count=10")
                let groupId = try #require(chats["chats"]?.arrayFirst?["chatInfo"]?["groupInfo"]?["groupId"]?.intValue, "\(chats)")
                #expect(await postToChannel(o, groupId, "still gone")["chatError"]?["errorType"]?["code"]?.stringValue == "invalidState")
                let add = await o.execute("/_add relays #\(groupId) 2")
                #expect(add["chatError"]?["errorType"]?["code"]?.stringValue == "invalidState", "\(add)")
            }
        }
    }

    /// A relay alters a post (a crafted forward with another text under the owner's signature):
    /// the subscriber refuses it — not shown, counted against that relay — and shows the honest
    /// relay's copy of the same message, verified. The subscriber's per-relay counters survive a
    /// restart.
    @Test func anAlteredPostIsRefusedAndCountersSurviveARestart() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                let addresses = try await makeRelayUsers(r)
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    let (groupId, link) = try await makeActiveChannel(o, oIn, addresses)
                    // The owner's signature over "honest"; relay1 forwards it with "forged".
                    let c = try #require(try await o.controller.dbRead { db in try ChannelRecord.fetchOne(db, key: Int64(groupId)) })
                    let key = try ChatController.privateKey(c.memberKey)
                    let owner = try #require(MemberId(c.memberId))
                    let publicGroupId = try #require(c.publicGroupId.flatMap(Base64URL.decode))
                    func post(_ text: String) -> GroupEnvelope {
                        GroupEnvelope(msgId: "honest-post-id", event: "x.msg.new",
                                      params: .object([("content", .object([("type", "text"), ("text", .string(text))])), ("asGroup", .bool(true))]))
                    }
                    let honest = try ChannelElement.sign(post("honest"), binding: .channel, publicGroupId: publicGroupId, author: owner, key: key)
                    guard case let .signed(binding, signatures, _) = honest else { throw TestFailure("not signed") }
                    let forged = ChannelElement.signed(binding: binding, signatures: signatures, body: try GroupMessage.encode(post("forged")))
                    func forward(_ e: ChannelElement, relayUser: Int) async throws {
                        let g = try await relayGroup(r, user: relayUser)
                        let found = try await r.controller.dbRead { db in
                            try ChannelMemberRecord.filter(ChannelMemberRecord.Columns.groupId == g && Column("kind") == "subscriber").fetchOne(db)?.agentConnId
                        }
                        let conn = try #require(found)
                        let fwd = ForwardedElement(sender: .channel, brokerTs: Int64(Date().timeIntervalSince1970), element: e)
                        _ = try await r.controller.agent.send(conn, try ChannelBatch.encode([.forward(fwd)]))
                    }
                    let subGroup = try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                        await startUser(s, "sub1")
                        let started = await s.execute("/_connect 1 \(link)")
                        let subGroup = try #require(started["groupInfo"]?["groupId"]?.intValue, "\(started)")
                        for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup") }
                        _ = await postToChannel(o, groupId, "one")
                        let first = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "one" })
                        #expect(first["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["msgVerified"]?["sigStatus"]?.stringValue == "verified", "\(first)")
                        try await waitUntil("both relays to have brought the first post") {
                            let mine = await subscriberRelays(s, subGroup)
                            let brought = ["relay1", "relay2"].map { (mine[$0]?["relayStats"]?["received"]?.intValue ?? 0) + (mine[$0]?["relayStats"]?["duplicates"]?.intValue ?? 0) }
                            return brought == [1, 1]
                        }

                        try await forward(forged, relayUser: 1)
                        try await waitUntil("the subscriber to refuse the altered post") {
                            await subscriberRelays(s, subGroup)["relay1"]?["relayStats"]?["rejected"]?.intValue == 1
                        }
                        try await forward(honest, relayUser: 2)
                        let shown = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "honest" })
                        #expect(shown["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["msgVerified"]?["sigStatus"]?.stringValue == "verified", "\(shown)")
                        let forgedShown = sIn.contains("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "forged" })
                        #expect(!forgedShown)
                        let chat = await s.execute("/_get chat #\(subGroup) count=20")
                        guard case let .array(items)? = chat["chat"]?["chatItems"] else { throw TestFailure("\(chat)") }
                        #expect(items.compactMap { $0["content"]?["msgContent"]?["text"]?.stringValue } == ["one", "honest"])

                        let mine = await subscriberRelays(s, subGroup)
                        let one = try #require(mine["relay1"]?["relayStats"]), two = try #require(mine["relay2"]?["relayStats"])
                        #expect(one["rejected"]?.intValue == 1 && two["rejected"]?.intValue == 0, "\(mine)")
                        // The honest post came through relay2 only: relay1 missed it.
                        #expect(one["missed"]?.intValue == 1 && two["missed"]?.intValue == 0, "\(mine)")
                        #expect((one["received"]?.intValue ?? 0) + (two["received"]?.intValue ?? 0) == 2, "\(mine)")
                        return subGroup
                    }
                    // Restarted, the subscriber shows the same counters.
                    try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                        _ = await s.execute("/_start")
                        let mine = await subscriberRelays(s, subGroup)
                        #expect(mine["relay1"]?["relayStats"]?["rejected"]?.intValue == 1, "\(mine)")
                        #expect(mine["relay1"]?["relayStats"]?["missed"]?.intValue == 1, "\(mine)")
                        #expect(mine["relay2"]?["relayStats"]?["missed"]?.intValue == 0, "\(mine)")
                        let received = ["relay1", "relay2"].compactMap { mine[$0]?["relayStats"]?["received"]?.intValue }.reduce(0, +)
                        #expect(received == 2, "\(mine)")
                        // relay1's late copy of the honest post: a duplicate (not a new post), nothing missed any more.
                        let duplicatesBefore = mine["relay1"]?["relayStats"]?["duplicates"]?.intValue ?? 0
                        try await forward(honest, relayUser: 1)
                        try await waitUntil("relay1's late copy to be counted") {
                            await subscriberRelays(s, subGroup)["relay1"]?["relayStats"]?["duplicates"]?.intValue == duplicatesBefore + 1
                        }
                        let later = await subscriberRelays(s, subGroup)
                        #expect(later["relay1"]?["relayStats"]?["missed"]?.intValue == 0 && later["relay2"]?["relayStats"]?["missed"]?.intValue == 0, "\(later)")
                        #expect(later["relay1"]?["relayStats"]?["received"]?.intValue == mine["relay1"]?["relayStats"]?["received"]?.intValue, "\(later)")
                        let again = sIn.contains("newChatItems")
                        #expect(!again)
                    }
                }
            }
        }
    }

    /// The relays keep their history for late joiners in the database: after a restart, a new
    /// subscriber gets the posts made before it.
    @Test func aRelaysHistorySurvivesARestart() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    let (groupId, link) = try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                        let addresses = try await makeRelayUsers(r)
                        let made = try await makeActiveChannel(o, oIn, addresses)
                        for t in ["h1", "h2"] { _ = await postToChannel(o, made.groupId, t) }
                        let relays = r.controller
                        try await waitUntil("both relays to keep both posts") {
                            (try? await relays.dbRead { db in try ChannelHistoryRecord.fetchCount(db) }) == 4
                        }
                        return made
                    }
                    try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                        _ = await r.execute("/_start")
                        await startUser(s, "late")
                        #expect(await s.execute("/_connect 1 \(link)")["type"]?.stringValue == "startedConnectionToGroup")
                        for t in ["h1", "h2"] {
                            let got = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == t }, timeout: .seconds(30))
                            #expect(got["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["msgVerified"]?["sigStatus"]?.stringValue == "verified")
                        }
                        _ = await postToChannel(o, groupId, "h3")
                        _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "h3" })
                        let chat = await s.execute("/_get chat #1 count=20")
                        guard case let .array(items)? = chat["chat"]?["chatItems"] else { throw TestFailure("\(chat)") }
                        #expect(items.compactMap { $0["content"]?["msgContent"]?["text"]?.stringValue } == ["h1", "h2", "h3"])
                        // At most the history limit is kept per channel.
                        let kept = try await r.controller.dbRead { db in
                            try Int.fetchAll(db, sql: "SELECT COUNT(*) FROM channel_history GROUP BY group_id")
                        }
                        #expect(kept == [3, 3], "\(kept)")
                    }
                }
            }
        }
    }

    /// Steps cut short are made again at start: the relays' engine stops right after each
    /// invitation is committed (its steps held in `channel_action`, as a crash would leave them),
    /// restarted it checks the channel, makes its link and accepts — both relays `active`; a
    /// subscriber's engine stops right after `/_connect`, restarted it joins through both relays
    /// and gets posts.
    @Test func aRelayAndASubscriberStoppedBetweenStepsCarryOnAtStart() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                await startUser(o, "owner")
                let groupId = try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                    let addresses = try await makeRelayUsers(r)
                    await r.controller.holdChannelSteps(true)
                    let set = await o.execute("/relays name=one \(addresses[0]) name=two \(addresses[1])")
                    #expect(set["chatRelays"]?.arrayCount == 2, "\(set)")
                    let created = await o.execute(#"/_public group 1 1,2 {"displayName": "news", "fullName": ""}"#)
                    let groupId = try #require(created["groupInfo"]?["groupId"]?.intValue, "\(created)")
                    let relays = r.controller
                    try await waitUntil("both invitations to be committed with their steps") {
                        (try? await relays.dbRead { db in try ChannelActionRecord.fetchCount(db) }) == 2
                    }
                    return groupId
                }
                #expect(!oIn.contains("groupRelayUpdated"))
                try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                    _ = await r.execute("/_start")
                    for _ in 0..<2 { _ = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == "active" }, timeout: .seconds(30)) }
                    let relays = r.controller
                    try await waitUntil("the relays' steps to be done") {
                        (try? await relays.dbRead { db in try ChannelActionRecord.fetchCount(db) }) == 0
                    }
                    let link = try #require(await o.execute("/_get relays #\(groupId)")["groupInfo"]?["groupProfile"]?["publicGroup"]?["groupLink"]?.stringValue)

                    try await withEngine(dir, "subs", relays: [relay.address]) { s, _ in
                        await startUser(s, "sub1")
                        await s.controller.holdChannelSteps(true)
                        #expect(await s.execute("/_connect 1 \(link)")["type"]?.stringValue == "startedConnectionToGroup")
                        let held = try await s.controller.dbRead { db in try ChannelActionRecord.fetchCount(db) }
                        #expect(held == 2)
                    }
                    try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                        _ = await s.execute("/_start")
                        for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup", timeout: .seconds(30)) }
                        _ = await postToChannel(o, groupId, "after the restarts")
                        _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "after the restarts" })
                        // Every step carried on to its end (the start's own link-data read, a step too, included).
                        let subs = s.controller
                        do {
                            try await waitUntil("the subscriber's steps to be done") {
                                (try? await subs.dbRead { db in try ChannelActionRecord.fetchCount(db) }) == 0
                            }
                        } catch {
                            let left = try await subs.dbRead { db in try ChannelActionRecord.fetchAll(db).map(\.action) }
                            Issue.record("steps left: \(left)")
                            throw error
                        }
                    }
                }
            }
        }
    }

    /// The owner's engine stops right after the relays' acceptances are committed (checking
    /// their links held); restarted, it checks them, allows, publishes: both relays `active`.
    @Test func anOwnerStoppedBetweenStepsCarriesOnAtStart() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                let addresses = try await makeRelayUsers(r)
                let groupId = try await withEngine(dir, "owner", relays: [relay.address]) { o, _ in
                    await startUser(o, "owner")
                    await o.controller.holdChannelSteps(true, except: ["ownerJoinRelayAddress"])
                    _ = await o.execute("/relays name=one \(addresses[0]) name=two \(addresses[1])")
                    let created = await o.execute(#"/_public group 1 1,2 {"displayName": "news", "fullName": ""}"#)
                    let groupId = try #require(created["groupInfo"]?["groupId"]?.intValue, "\(created)")
                    let owner = o.controller
                    try await waitUntil("both acceptances to be committed with their steps") {
                        (try? await owner.dbRead { db in try ChannelActionRecord.fetchCount(db) }) == 2
                    }
                    let relays = try await ownerRelays(o, groupId)
                    #expect(relays.values.map { $0["relayStatus"]?.stringValue } == ["invited", "invited"], "\(relays)")
                    return groupId
                }
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    _ = await o.execute("/_start")
                    for _ in 0..<2 { _ = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == "active" }, timeout: .seconds(30)) }
                    let relays = try await ownerRelays(o, groupId)
                    #expect(relays.values.map { $0["relayStatus"]?.stringValue } == ["active", "active"], "\(relays)")
                }
            }
        }
    }

    /// The relays' engine stops right after a subscriber's `x.member` is committed (its
    /// acceptance held); restarted, each relay accepts it: the subscriber joins through both.
    @Test func aRelayStoppedBeforeAcceptingASubscriberAcceptsAtStart() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    let groupId = try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                        let addresses = try await makeRelayUsers(r)
                        let (groupId, link) = try await makeActiveChannel(o, oIn, addresses)
                        await r.controller.holdChannelSteps(true)
                        await startUser(s, "sub1")
                        #expect(await s.execute("/_connect 1 \(link)")["type"]?.stringValue == "startedConnectionToGroup")
                        let relays = r.controller
                        try await waitUntil("both relays to commit the join with its acceptance") {
                            (try? await relays.dbRead { db in try ChannelActionRecord.fetchCount(db) }) == 2
                        }
                        return groupId
                    }
                    #expect(!sIn.contains("userJoinedGroup"))
                    try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                        _ = await r.execute("/_start")
                        for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup", timeout: .seconds(30)) }
                        _ = await postToChannel(o, groupId, "accepted after the restart")
                        _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "accepted after the restart" })
                        let relays = r.controller
                        try await waitUntil("the relays' steps to be done") {
                            (try? await relays.dbRead { db in try ChannelActionRecord.fetchCount(db) }) == 0
                        }
                    }
                }
            }
        }
    }
}
