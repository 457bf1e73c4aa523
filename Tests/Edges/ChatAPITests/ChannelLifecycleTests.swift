import Agent
import ChannelProtocol
import ChatTestSupport
import Foundation
import GRDB
import NIOPosix
import RelayServer
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// A channel's life after creation on the engine (docs/channels.md §9): the owner changing the
/// channel's profile and deleting the channel — also when its engine stops part-way. Engines on a
/// live relay server (TLS on loopback, SQLite files).
@Suite(.timeLimit(.minutes(3))) struct ChannelLifecycleTests: LiveRelaySuite {
    /// A channel with both relays active and one subscriber joined through both.
    func subscribe(_ s: ChatAPI, _ sIn: ChatInbox, _ link: String) async throws -> Int {
        await startUser(s, "sub1")
        let started = await s.execute("/_connect 1 \(link)")
        let subGroup = try #require(started["groupInfo"]?["groupId"]?.intValue, "\(started)")
        for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup", timeout: .seconds(30)) }
        return subGroup
    }

    /// `/_group_profile` of the owner: the answer keeps the channel's link and id; each relay and
    /// the subscriber report `groupUpdated` with the new profile and store it; the channel link's
    /// data carries it, so a new subscriber's plan shows it. A subscriber may not change it.
    @Test func anOwnersProfileUpdateReachesRelaysSubscribersAndTheLink() async throws {
        try await withLiveRelay { dir, relay in
            try await withActiveChannel(dir, relay: relay.address) { r, rIn, o, oIn, groupId, link in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    let subGroup = try await subscribe(s, sIn, link)
                    let before = await o.execute("/_get relays #\(groupId)")["groupInfo"]?["groupProfile"]?["publicGroup"]
                    let updated = await o.execute(#"/_group_profile #\#(groupId) {"displayName": "news2", "fullName": "Daily news", "description": "what happened"}"#)
                    #expect(updated["type"]?.stringValue == "groupUpdated", "\(updated)")
                    #expect(updated["toGroup"]?["groupProfile"]?["displayName"]?.stringValue == "news2")
                    #expect(updated["toGroup"]?["groupProfile"]?["publicGroup"] == before, "\(updated)")
                    #expect(updated["fromGroup"]?["groupProfile"]?["displayName"]?.stringValue == "news")
                    #expect(updated["msgSigned"]?.boolValue == true)

                    let seen = try await sIn.next("groupUpdated", timeout: .seconds(30))
                    #expect(seen["fromGroup"]?["groupProfile"]?["displayName"]?.stringValue == "news", "\(seen)")
                    #expect(seen["toGroup"]?["groupProfile"]?["displayName"]?.stringValue == "news2")
                    #expect(seen["toGroup"]?["groupProfile"]?["description"]?.stringValue == "what happened")
                    #expect(seen["toGroup"]?["groupId"]?.intValue == subGroup)
                    for _ in 0..<2 {
                        let atRelay = try await rIn.next("groupUpdated", timeout: .seconds(30))
                        #expect(atRelay["toGroup"]?["groupProfile"]?["fullName"]?.stringValue == "Daily news", "\(atRelay)")
                    }
                    // Stored: the subscriber's group is listed with the new name.
                    let groups = await s.execute("/_groups 1")
                    #expect(groups["groups"]?.arrayFirst?["groupProfile"]?["displayName"]?.stringValue == "news2", "\(groups)")
                    // A subscriber may not change it.
                    let refused = await s.execute(#"/_group_profile #\#(subGroup) {"displayName": "mine", "fullName": ""}"#)
                    #expect(refused["type"]?.stringValue == "chatCmdError", "\(refused)")
                    // A channel's identity stays: a profile naming another link keeps the channel's.
                    let forged = await o.execute(#"/_group_profile #\#(groupId) {"displayName": "news3", "fullName": "", "publicGroup": {"groupType": "channel", "groupLink": "https://example.com/c#x", "publicGroupId": "AAAA"}}"#)
                    #expect(forged["toGroup"]?["groupProfile"]?["publicGroup"] == before, "\(forged)")
                    _ = try await sIn.next("groupUpdated", where: { $0["toGroup"]?["groupProfile"]?["displayName"]?.stringValue == "news3" }, timeout: .seconds(30))
                }
                // A new subscriber reads the new profile from the link's data.
                try await withEngine(dir, "late", relays: [relay.address]) { l, _ in
                    await startUser(l, "late")
                    let plan = await l.execute("/_connect plan 1 \(link)")
                    #expect(plan["connectionPlan"]?["groupLinkPlan"]?["groupSLinkData_"]?["groupProfile"]?["displayName"]?.stringValue == "news3", "\(plan)")
                }
            }
        }
    }

    /// `/_delete #g` of the owner: each relay forwards `x.grp.del`, reports `groupDeleted` and
    /// stops serving (its connections and its `/g` link go); the subscriber reports
    /// `groupDeleted` and drops its connections; the owner's group, connections and channel link go.
    @Test func anOwnerDeletesTheChannel() async throws {
        try await withLiveRelay { dir, relay in
            try await withActiveChannel(dir, relay: relay.address) { r, rIn, o, oIn, groupId, link in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    let subGroup = try await subscribe(s, sIn, link)
                    let relayLinks = try await r.controller.dbRead { db in try String.fetchAll(db, sql: "SELECT relay_link FROM channel WHERE relay_link IS NOT NULL") }
                    #expect(relayLinks.count == 2)

                    let deleted = await o.execute("/_delete #\(groupId)")
                    #expect(deleted["type"]?.stringValue == "groupDeletedUser", "\(deleted)")
                    let seen = try await sIn.next("groupDeleted", timeout: .seconds(30))
                    #expect(seen["groupInfo"]?["groupId"]?.intValue == subGroup, "\(seen)")
                    #expect(seen["member"]?["memberRole"]?.stringValue == "owner", "\(seen)")
                    #expect(seen["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "deleted", "\(seen)")
                    for _ in 0..<2 { _ = try await rIn.next("groupDeleted", timeout: .seconds(30)) }
                    #expect(!sIn.contains("groupDeleted"), "once, however many relays forward it")

                    // The relays stop serving: no connection left, their links gone.
                    let relays = r.controller
                    try await waitUntil("the relays to delete the channel's connections", timeout: .seconds(30)) {
                        (try? await relays.dbRead { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM channel_member WHERE agent_conn_id IS NOT NULL") }) == 0
                    }
                    let statuses = try await r.controller.dbRead { db in try String.fetchAll(db, sql: "SELECT relay_status FROM channel") }
                    #expect(statuses == ["inactive", "inactive"])
                    for l in relayLinks {
                        await #expect(throws: (any Error).self) { _ = try await s.controller.agent.resolveWithData(try ShortLink(parsing: l)) }
                    }
                    // The subscriber's connections go; the owner's group, link and steps go.
                    let subs = s.controller
                    try await waitUntil("the subscriber to drop its connections", timeout: .seconds(30)) {
                        (try? await subs.dbRead { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM channel_member WHERE agent_conn_id IS NOT NULL") }) == 0
                    }
                    #expect(await o.execute("/_groups 1")["groups"]?.arrayCount == 0)
                    let ownerRows = try await o.controller.dbRead { db in
                        (try Int.fetchOne(db, sql: "SELECT count(*) FROM channel") ?? -1, try Int.fetchOne(db, sql: "SELECT count(*) FROM channel_action") ?? -1)
                    }
                    #expect(ownerRows == (0, 0))
                    await #expect(throws: (any Error).self) { _ = try await s.controller.agent.resolveWithData(try ShortLink(parsing: link)) }
                    // The subscriber removes the deleted channel locally.
                    #expect(await s.execute("/_delete #\(subGroup)")["type"]?.stringValue == "groupDeletedUser")
                }
            }
        }
    }

    /// The chat relays' engine has its queues on a second relay server, which is down while a
    /// subscriber joins: reading each relay link's data fails, and the join steps stay in
    /// `channel_action` and are retried with backoff; once the server is back (same port, same
    /// data), the subscriber joins through both relays and gets posts.
    @Test func aJoinWhileTheRelaysServerIsDownIsRetriedUntilItIsBack() async throws {
        try await withLiveRelay { dir, relay in
            let r2Dir = dir.appendingPathComponent("relay2")
            var r2 = try await RelayServer.start(configuration: RelayConfiguration(dataDirectory: r2Dir, host: "127.0.0.1", port: 0),
                                                 group: MultiThreadedEventLoopGroup.singleton, logger: silent)
            let r2Address = r2.address
            do {
                try await withEngine(dir, "relays", relays: [r2Address]) { r, _ in
                    let addresses = try await makeRelayUsers(r)
                    try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                        let (groupId, link) = try await makeActiveChannel(o, oIn, addresses)
                        await r2.shutdown()
                        try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                            await startUser(s, "sub1")
                            #expect(await s.execute("/_connect 1 \(link)")["type"]?.stringValue == "startedConnectionToGroup")
                            let subs = s.controller
                            try await waitUntil("both relay links' reads to fail and be retried", timeout: .seconds(30)) {
                                await subs.channelRuntime.retries.count == 2
                            }
                            #expect(try await subs.dbRead { db in try ChannelActionRecord.fetchCount(db) } == 2)
                            #expect(!sIn.contains("userJoinedGroup"))
                            r2 = try await RelayServer.start(configuration: RelayConfiguration(dataDirectory: r2Dir, host: "127.0.0.1", port: r2Address.port),
                                                             group: MultiThreadedEventLoopGroup.singleton, logger: silent)
                            for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup", timeout: .seconds(90)) }
                            _ = await postToChannel(o, groupId, "after the outage")
                            _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "after the outage" }, timeout: .seconds(30))
                            try await waitUntil("the join steps to be done", timeout: .seconds(30)) {
                                (try? await subs.dbRead { db in try ChannelActionRecord.fetchCount(db) }) == 0
                            }
                            #expect(await subs.channelRuntime.retries.isEmpty)
                        }
                    }
                }
            } catch {
                await r2.shutdown()
                throw error
            }
            await r2.shutdown()
        }
    }

    /// The owner's engine stops right after `/_public group` committed each relay (`new`) with
    /// its contact request as a `channel_action` step, and again after `/_add relays`; restarted,
    /// it sends them — the relays go `invited` → `accepted` → `active`.
    @Test func anOwnerStoppedBeforeInvitingRelaysInvitesThemAtStart() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                var addresses = try await makeRelayUsers(r)
                _ = await r.execute(relayUserCommand("relay3"))
                addresses.append(try #require(await r.execute("/_address 3")["connLinkContact"]?["connShortLink"]?.stringValue))
                let groupId = try await withEngine(dir, "owner", relays: [relay.address]) { o, _ in
                    await startUser(o, "owner")
                    _ = await o.execute("/relays name=one \(addresses[0]) name=two \(addresses[1]) name=three \(addresses[2])")
                    await o.controller.holdChannelSteps(true)
                    let created = await o.execute(#"/_public group 1 1,2 {"displayName": "news", "fullName": ""}"#)
                    #expect(created["type"]?.stringValue == "publicGroupCreated", "\(created)")
                    #expect(created["groupRelays"]?.arrayValue?.map { $0["relayStatus"]?.stringValue } == ["new", "new"], "\(created)")
                    let held = try await o.controller.dbRead { db in try String.fetchAll(db, sql: "SELECT action FROM channel_action") }
                    #expect(held.count == 2 && held.allSatisfy { $0.contains("ownerJoinRelayAddress") }, "\(held)")
                    return try #require(created["groupInfo"]?["groupId"]?.intValue)
                }
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    _ = await o.execute("/_start")
                    for _ in 0..<2 { _ = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == "active" }, timeout: .seconds(30)) }
                    await o.controller.holdChannelSteps(true)
                    let added = await o.execute("/_add relays #\(groupId) 3")
                    #expect(added["type"]?.stringValue == "groupRelaysAdded", "\(added)")
                    #expect(added["groupRelays"]?.arrayValue?.map { $0["relayStatus"]?.stringValue } == ["new"], "\(added)")
                }
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    _ = await o.execute("/_start")
                    _ = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == "active" }, timeout: .seconds(30))
                    let listed = await o.execute("/_get relays #\(groupId)")
                    #expect(listed["groupRelays"]?.arrayValue?.map { $0["relayStatus"]?.stringValue } == ["active", "active", "active"], "\(listed)")
                    let owner = o.controller
                    try await waitUntil("the owner's steps to be done", timeout: .seconds(30)) {
                        (try? await owner.dbRead { db in try ChannelActionRecord.fetchCount(db) }) == 0
                    }
                }
            }
        }
    }

    /// An owner creates a channel incognito and a subscriber joins it incognito: each uses one
    /// random profile for this channel — the relays get the owner's with the invitation and the
    /// subscriber's with its `x.member` to each relay, the owner is announced the subscriber's;
    /// the user's own profiles go nowhere. The subscriber's engine stops right after `/_connect`
    /// (its join steps held): restarted, its machine is restored with the random profile, which
    /// is what the relays get.
    @Test func anOwnerAndASubscriberUseChannelsIncognito() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, rIn in
                let addresses = try await makeRelayUsers(r)
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    await startUser(o, "owner")
                    _ = await o.execute("/relays name=one \(addresses[0]) name=two \(addresses[1])")
                    let created = await o.execute(#"/_public group 1 incognito=on 1,2 {"displayName": "news", "fullName": ""}"#)
                    #expect(created["type"]?.stringValue == "publicGroupCreated", "\(created)")
                    let groupId = try #require(created["groupInfo"]?["groupId"]?.intValue)
                    let link = try #require(created["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue)
                    let ownerName = try #require(created["groupInfo"]?["membership"]?["memberProfile"]?["displayName"]?.stringValue, "\(created)")
                    #expect(ownerName != "owner")
                    for _ in 0..<2 { _ = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == "active" }, timeout: .seconds(30)) }
                    for _ in 0..<2 {
                        let joined = try await rIn.next("userJoinedGroup", timeout: .seconds(30))
                        #expect(joined["hostMember"]?["memberProfile"]?["displayName"]?.stringValue == ownerName, "\(joined)")
                    }
                    let subName = try await withEngine(dir, "subs", relays: [relay.address]) { s, _ in
                        await startUser(s, "sub1")
                        await s.controller.holdChannelSteps(true)
                        let started = await s.execute("/_connect 1 incognito=on \(link)")
                        #expect(started["type"]?.stringValue == "startedConnectionToGroup", "\(started)")
                        let name = try #require(started["groupInfo"]?["membership"]?["memberProfile"]?["displayName"]?.stringValue, "\(started)")
                        #expect(name != "sub1")
                        return name
                    }
                    try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                        _ = await s.execute("/_start")
                        for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup", timeout: .seconds(30)) }
                        for _ in 0..<2 {
                            let joined = try await rIn.next("joinedGroupMember", timeout: .seconds(30))
                            #expect(joined["member"]?["memberProfile"]?["displayName"]?.stringValue == subName, "\(joined)")
                        }
                        let announced = try await oIn.next("joinedGroupMemberConnecting", timeout: .seconds(30))
                        #expect(announced["member"]?["memberProfile"]?["displayName"]?.stringValue == subName, "\(announced)")
                        _ = await postToChannel(o, groupId, "incognito on both ends")
                        _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "incognito on both ends" }, timeout: .seconds(30))
                        // The users' own profiles went nowhere.
                        let atRelays = try await r.controller.dbRead { db in
                            try Int.fetchOne(db, sql: "SELECT count(*) FROM group_member WHERE profile LIKE '%sub1%' OR profile LIKE '%\"owner\"%'")
                        }
                        #expect(atRelays == 0)
                        let atOwner = try await o.controller.dbRead { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM group_member WHERE profile LIKE '%sub1%'") }
                        #expect(atOwner == 0)
                    }
                }
            }
        }
    }

    /// The owner's engine stops right after `/_delete` is committed (the deletion's step held, as
    /// a crash would leave it): nothing reached the relays; restarted, the engine finishes it —
    /// the subscriber gets `groupDeleted`, the owner's group goes.
    @Test func anOwnerStoppedMidDeletionFinishesItAtStart() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, rIn in
                let addresses = try await makeRelayUsers(r)
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    let groupId = try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                        let (groupId, link) = try await makeActiveChannel(o, oIn, addresses)
                        _ = try await subscribe(s, sIn, link)
                        await o.controller.holdChannelSteps(true)
                        #expect(await o.execute("/_delete #\(groupId)")["type"]?.stringValue == "groupDeletedUser")
                        let held = try await o.controller.dbRead { db in try String.fetchAll(db, sql: "SELECT action FROM channel_action") }
                        // (The count's republish of the subscriber's announcement may be held too.)
                        #expect(held.filter { $0.contains("ownerDeleteChannel") }.count == 1
                                && held.allSatisfy { $0.contains("ownerDeleteChannel") || $0.contains("ownerPublish") }, "\(held)")
                        #expect(await o.execute("/_groups 1")["groups"]?.arrayCount == 0, "hidden once deleted")
                        return groupId
                    }
                    #expect(!sIn.contains("groupDeleted"))
                    try await withEngine(dir, "owner", relays: [relay.address]) { o, _ in
                        _ = await o.execute("/_start")
                        _ = try await sIn.next("groupDeleted", timeout: .seconds(30))
                        for _ in 0..<2 { _ = try await rIn.next("groupDeleted", timeout: .seconds(30)) }
                        let owner = o.controller
                        try await waitUntil("the owner's group to go", timeout: .seconds(30)) {
                            (try? await owner.dbRead { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM chat_group WHERE id = ?", arguments: [groupId]) }) == 0
                        }
                    }
                }
            }
        }
    }
}
