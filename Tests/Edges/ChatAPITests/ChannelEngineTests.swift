import Agent
import ChannelProtocol
import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// Channels run by the engine: an owner creates a channel with chat relays, the relays check it
/// and accept, the owner publishes their links. Engines on a live relay server (TLS on loopback,
/// SQLite files), driven by the bot API's command strings (docs/channels.md §9).
@Suite(.timeLimit(.minutes(3))) struct ChannelEngineTests: LiveRelaySuite {
    func chatError(_ r: JSONValue) -> JSONValue? { r["type"]?.stringValue == "chatCmdError" ? r["chatError"]?["errorType"] : nil }

    /// `/_public group` makes the channel and invites both relays (`invited`); each relay checks
    /// the channel's link data, makes its own `/g` link and accepts; the owner checks the relay
    /// link, the connections come up, the owner publishes the relays' links and the relays are
    /// `active` — `groupRelayUpdated`, `groupLinkDataUpdated`, `userJoinedGroup` on the way, and
    /// the channel link's data (read by a third party) lists both relay links.
    @Test func anOwnerCreatesAChannelAndItsRelaysBecomeActive() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, rIn in
                let addresses = try await makeRelayUsers(r)
                try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                    await startUser(o, "owner")
                    let set = await o.execute("/relays name=one \(addresses[0]) name=two \(addresses[1])")
                    guard case let .array(relays)? = set["chatRelays"], relays.count == 2 else { throw TestFailure("\(set)") }
                    let ids = relays.compactMap { $0["chatRelayId"]?.intValue }.map(String.init).joined(separator: ",")

                    let created = await o.execute(#"/_public group 1 \#(ids) {"displayName": "news", "fullName": "The news"}"#)
                    #expect(created["type"]?.stringValue == "publicGroupCreated", "\(created)")
                    let info = try #require(created["groupInfo"])
                    let groupId = try #require(info["groupId"]?.intValue)
                    #expect(info["useRelays"]?.boolValue == true)
                    #expect(info["membership"]?["memberRole"]?.stringValue == "owner")
                    let publicGroup = try #require(info["groupProfile"]?["publicGroup"])
                    #expect(publicGroup["groupType"]?.stringValue == "channel")
                    let channelLink = try #require(created["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue)
                    #expect(publicGroup["groupLink"]?.stringValue == channelLink)
                    #expect(try ShortLink(parsing: channelLink).kind == .channel)
                    guard case let .array(groupRelays)? = created["groupRelays"] else { throw TestFailure("\(created)") }
                    #expect(groupRelays.map { $0["relayStatus"]?.stringValue } == ["invited", "invited"], "\(groupRelays)")
                    #expect(Set(groupRelays.compactMap { $0["userChatRelay"]?["address"]?.stringValue }) == Set(addresses))

                    // The relays accept, the owner checks and publishes: both `active`.
                    for status in ["accepted", "active"] {
                        for _ in 0..<2 {
                            let updated = try await oIn.next("groupRelayUpdated", where: { $0["groupRelay"]?["relayStatus"]?.stringValue == status })
                            #expect(updated["member"]?["memberRole"]?.stringValue == "relay", "\(updated)")
                            #expect(updated["groupInfo"]?["groupId"]?.intValue == groupId)
                        }
                    }
                    for _ in 0..<2 { _ = try await rIn.next("userJoinedGroup") }
                    let listed = await o.execute("/_get relays #\(groupId)")
                    #expect(listed["type"]?.stringValue == "groupRelays", "\(listed)")
                    guard case let .array(active)? = listed["groupRelays"] else { throw TestFailure("\(listed)") }
                    #expect(active.map { $0["relayStatus"]?.stringValue } == ["active", "active"], "\(active)")
                    let relayLinks = Set(active.compactMap { $0["relayLink"]?.stringValue })
                    #expect(relayLinks.count == 2 && relayLinks.allSatisfy { (try? ShortLink(parsing: $0).kind) == .group }, "\(relayLinks)")
                    let published = try await oIn.next("groupLinkDataUpdated", where: { $0["groupRelays"]?.arrayCount == 2 })
                    #expect(published["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue == channelLink, "\(published)")

                    // What a subscriber will read: the channel link's data names both relays'
                    // links, the profile and the owner.
                    let resolved = try await r.controller.agent.resolveWithData(try ShortLink(parsing: channelLink))
                    let data = try #require(resolved.data)
                    #expect(!data.direct && data.owners.count == 1)
                    #expect(Set(data.relays.map(\.description)) == relayLinks)
                    let group = try GroupShortLinkData(bytes: data.userData)
                    #expect(group.groupProfile.displayName == "news")
                    #expect(group.groupProfile.json["publicGroup"]?["groupLink"]?.stringValue == channelLink)

                    // The relay's view: a channel with its own status, the owner as host.
                    let relayChats = await r.execute("/_get chats 1 count=10")
                    #expect(relayChats["chats"]?.arrayCount == 1, "\(relayChats)")
                }
            }
        }
    }

    /// Refusals: an unknown relay id (`userChatRelayNotFound`), no relays, a relay whose address
    /// is gone (`publicGroupCreationFailed`, nothing kept), a relay user owning a channel.
    @Test func aChannelThatCannotBeMadeLeavesNothing() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                let addresses = try await makeRelayUsers(r)
                try await withEngine(dir, "owner", relays: [relay.address]) { o, _ in
                    await startUser(o, "owner")
                    let set = await o.execute("/relays name=one \(addresses[0]) name=two \(addresses[1])")
                    guard case let .array(relays)? = set["chatRelays"], relays.count == 2 else { throw TestFailure("\(set)") }
                    let ids = relays.compactMap { $0["chatRelayId"]?.intValue }

                    let unknown = await o.execute(#"/_public group 1 99 {"displayName": "news", "fullName": ""}"#)
                    #expect(unknown["chatError"]?["storeError"]?["type"]?.stringValue == "userChatRelayNotFound", "\(unknown)")
                    let none = await o.execute(#"/_public group 1 {"displayName": "news", "fullName": ""}"#)
                    #expect(none["type"]?.stringValue == "chatCmdError", "\(none)")

                    // The second relay's address is deleted: its short link no longer resolves.
                    #expect(await r.execute("/_delete_address 2")["type"]?.stringValue == "userContactLinkDeleted")
                    let failed = await o.execute(#"/_public group 1 \#(ids[0]),\#(ids[1]) {"displayName": "news", "fullName": ""}"#)
                    #expect(failed["type"]?.stringValue == "publicGroupCreationFailed", "\(failed)")
                    guard case let .array(results)? = failed["addRelayResults"] else { throw TestFailure("\(failed)") }
                    #expect(results.count == 2 && results[0]["relayError"] == nil && results[1]["relayError"] != nil, "\(results)")
                    let chats = await o.execute("/_get chats 1 count=10")
                    #expect(chats["chats"]?.arrayCount == 0, "\(chats)")
                    // The same name is free again.
                    let again = await o.execute(#"/_public group 1 \#(ids[0]) {"displayName": "news", "fullName": ""}"#)
                    #expect(again["groupInfo"]?["localDisplayName"]?.stringValue == "news", "\(again)")
                }
            }
        }
    }

    /// A subscriber plans and joins the channel link: the plan shows the relays; joining goes to
    /// both relays (`x.member`), each accepts and introduces it to the owner; the owner's posts
    /// (as the channel) reach the subscriber once each, `channelRcv`, whichever relay brings them
    /// first; a subscriber joining later gets the history from the relays.
    @Test func subscribersJoinThroughEveryRelayAndGetPostsOnce() async throws {
        try await withLiveRelay { dir, relay in
            try await withActiveChannel(dir, relay: relay.address) { r, rIn, o, oIn, groupId, link in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    await startUser(s, "sub1")
                    let plan = await s.execute("/_connect plan 1 \(link)")
                    #expect(plan["type"]?.stringValue == "connectionPlan", "\(plan)")
                    let groupPlan = try #require(plan["connectionPlan"]?["groupLinkPlan"], "\(plan)")
                    #expect(groupPlan["type"]?.stringValue == "ok")
                    #expect(groupPlan["groupSLinkInfo_"]?["direct"]?.boolValue == false)
                    #expect(groupPlan["groupSLinkInfo_"]?["groupRelays"]?.arrayCount == 2, "\(groupPlan)")
                    #expect(groupPlan["groupSLinkData_"]?["groupProfile"]?["displayName"]?.stringValue == "news")

                    let started = await s.execute("/_connect 1 \(link)")
                    #expect(started["type"]?.stringValue == "startedConnectionToGroup", "\(started)")
                    #expect(started["groupInfo"]?["useRelays"]?.boolValue == true)
                    let subGroup = try #require(started["groupInfo"]?["groupId"]?.intValue)
                    for _ in 0..<2 {
                        let joined = try await sIn.next("userJoinedGroup")
                        #expect(joined["hostMember"]?["memberRole"]?.stringValue == "relay", "\(joined)")
                    }
                    for _ in 0..<2 { _ = try await rIn.next("joinedGroupMember") }
                    let announced = try await oIn.next("joinedGroupMemberConnecting")
                    #expect(announced["member"]?["memberProfile"]?["displayName"]?.stringValue == "sub1", "\(announced)")
                    // Group commands that would go around the channel's machine are refused.
                    let renamed = await s.execute(#"/_group_profile #\#(subGroup) {"displayName": "mine", "fullName": ""}"#)
                    #expect(renamed["type"]?.stringValue == "chatCmdError", "\(renamed)")
                    let known = await s.execute("/_connect plan 1 \(link)")
                    #expect(known["connectionPlan"]?["groupLinkPlan"]?["type"]?.stringValue == "known", "\(known)")
                    // Member lists show the channel as a channel, at the subscriber and the owner.
                    for (api, group) in [(s, subGroup), (o, groupId)] {
                        let members = await api.execute("/_members #\(group)")
                        #expect(members["group"]?["groupInfo"]?["useRelays"]?.boolValue == true, "\(members)")
                    }

                    // Posts as the channel.
                    let sent = await postToChannel(o, groupId, "one")
                    #expect(sent["type"]?.stringValue == "newChatItems", "\(sent)")
                    #expect(sent["chatItems"]?.arrayFirst?["chatItem"]?["chatDir"]?["type"]?.stringValue == "groupSnd")
                    _ = await postToChannel(o, groupId, "two")
                    for expected in ["one", "two"] {
                        let got = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == expected })
                        let item = try #require(got["chatItems"]?.arrayFirst)
                        #expect(item["chatItem"]?["chatDir"]?["type"]?.stringValue == "channelRcv", "\(item)")
                        #expect(item["chatInfo"]?["groupInfo"]?["groupId"]?.intValue == subGroup)
                    }

                    // A second subscriber, later: the relays' history.
                    await startUser(s, "sub2")
                    let late = await s.execute("/_connect 2 \(link)")
                    #expect(late["type"]?.stringValue == "startedConnectionToGroup", "\(late)")
                    for expected in ["one", "two"] {
                        let got = try await sIn.next("newChatItems", where: { $0["user"]?["userId"]?.intValue == 2 && text($0["chatItems"]?.arrayFirst) == expected })
                        #expect(got["chatItems"]?.arrayFirst?["chatItem"]?["chatDir"]?["type"]?.stringValue == "channelRcv")
                    }
                    _ = await postToChannel(o, groupId, "three")
                    for user in [1, 2] {
                        _ = try await sIn.next("newChatItems", where: { $0["user"]?["userId"]?.intValue == user && text($0["chatItems"]?.arrayFirst) == "three" })
                    }
                    // Each post once per subscriber, though both relays brought it.
                    for user in [1, 2] {
                        let chat = await s.execute("/_get chat #\(user == 1 ? subGroup : subGroup + 1) count=20")
                        guard case let .array(items)? = chat["chat"]?["chatItems"] else { throw TestFailure("\(chat)") }
                        let texts = items.compactMap { $0["content"]?["msgContent"]?["text"]?.stringValue }
                        #expect(texts == ["one", "two", "three"], "user \(user): \(texts)")
                        #expect(items.allSatisfy { $0["chatDir"]?["type"]?.stringValue == "channelRcv" }, "\(items)")
                    }
                    let repeated = sIn.contains("newChatItems", where: { e in ["one", "two", "three"].contains(text(e["chatItems"]?.arrayFirst) ?? "") })
                    #expect(!repeated)

                    // The first subscriber leaves: both relays drop it, the owner hears once;
                    // later posts reach only the second.
                    let left = await s.execute("/_leave #\(subGroup)")
                    #expect(left["type"]?.stringValue == "leftMemberUser", "\(left)")
                    for _ in 0..<2 {
                        let gone = try await rIn.next("leftMember")
                        #expect(gone["member"]?["memberProfile"]?["displayName"]?.stringValue == "sub1", "\(gone)")
                    }
                    let ownerHeard = try await oIn.next("leftMember")
                    #expect(ownerHeard["member"]?["memberProfile"]?["displayName"]?.stringValue == "sub1", "\(ownerHeard)")
                    _ = await postToChannel(o, groupId, "four")
                    _ = try await sIn.next("newChatItems", where: { $0["user"]?["userId"]?.intValue == 2 && text($0["chatItems"]?.arrayFirst) == "four" })
                    let toLeaver = sIn.contains("newChatItems", where: { e in e["user"]?["userId"]?.intValue == 1 && text(e["chatItems"]?.arrayFirst) == "four" })
                    #expect(!toLeaver)
                    #expect(!oIn.contains("leftMember"))
                }
            }
        }
    }

    /// The relays' engine stops (its database closed) while the owner posts; restarted, it restores
    /// the channels from its database, takes the post waiting on its queue, commits a delivery job
    /// and sends it: the subscriber gets it once, and later posts too.
    @Test func aRestartedRelayDeliversWhatWasPostedWhileItWasDown() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    let groupId = try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                        let addresses = try await makeRelayUsers(r)
                        let (groupId, link) = try await makeActiveChannel(o, oIn, addresses)
                        await startUser(s, "sub1")
                        #expect(await s.execute("/_connect 1 \(link)")["type"]?.stringValue == "startedConnectionToGroup")
                        for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup") }
                        _ = await postToChannel(o, groupId, "before")
                        _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "before" })
                        return groupId
                    }
                    // Both relays down: the post waits on their queues.
                    let sent = await postToChannel(o, groupId, "while down")
                    #expect(sent["type"]?.stringValue == "newChatItems", "\(sent)")
                    try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                        _ = await r.execute("/_start")
                        let got = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "while down" }, timeout: .seconds(30))
                        #expect(got["chatItems"]?.arrayFirst?["chatItem"]?["chatDir"]?["type"]?.stringValue == "channelRcv")
                        _ = await postToChannel(o, groupId, "after")
                        _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "after" })
                        // Every delivery job done and removed.
                        try await waitUntil("the relay's delivery jobs to be done") {
                            (try? await r.controller.dbRead { db in try ChannelDeliveryRecord.fetchCount(db) }) == 0
                        }
                    }
                    let chat = await s.execute("/_get chat #1 count=20")
                    guard case let .array(items)? = chat["chat"]?["chatItems"] else { throw TestFailure("\(chat)") }
                    #expect(items.compactMap { $0["content"]?["msgContent"]?["text"]?.stringValue } == ["before", "while down", "after"])
                }
            }
        }
    }

    /// Two relays in two engines; one stops: posts still reach the subscriber through the other.
    /// Restarted, the stopped one delivers its late copies, which the subscriber drops: each post
    /// is one item.
    @Test func withOneRelayDownPostsArriveThroughTheOther() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "owner", relays: [relay.address]) { o, oIn in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    try await withEngine(dir, "relayA", relays: [relay.address]) { a, _ in
                        _ = await a.execute(relayUserCommand("relayA"))
                        _ = await a.execute("/_start")
                        let addressA = try #require(await a.execute("/_address 1")["connLinkContact"]?["connShortLink"]?.stringValue)
                        let (groupId, link) = try await withEngine(dir, "relayB", relays: [relay.address]) { b, _ in
                            _ = await b.execute(relayUserCommand("relayB"))
                            _ = await b.execute("/_start")
                            let addressB = try #require(await b.execute("/_address 1")["connLinkContact"]?["connShortLink"]?.stringValue)
                            let (groupId, link) = try await makeActiveChannel(o, oIn, [addressA, addressB])
                            await startUser(s, "sub1")
                            #expect(await s.execute("/_connect 1 \(link)")["type"]?.stringValue == "startedConnectionToGroup")
                            for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup") }
                            return (groupId, link)
                        }
                        _ = link
                        // relayB is down.
                        _ = await postToChannel(o, groupId, "through A")
                        let got = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "through A" })
                        #expect(got["chatItems"]?.arrayFirst?["chatItem"]?["chatDir"]?["type"]?.stringValue == "channelRcv")
                        // relayB back: it delivers its copy late; the subscriber keeps one item.
                        try await withEngine(dir, "relayB", relays: [relay.address]) { b, _ in
                            _ = await b.execute("/_start")
                            _ = await postToChannel(o, groupId, "both")
                            _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "both" })
                            // Both relays brought both posts (relayB's late copy of the first too).
                            let subscriber = s.controller
                            try await waitUntil("both relays to have brought both posts") {
                                let relays = await subscriber.channelRuntime.subscribers.values.first?.relays.values.map(\.delivered) ?? []
                                return relays.count == 2 && relays.allSatisfy { $0 == 2 }
                            }
                        }
                        let chat = await s.execute("/_get chat #1 count=20")
                        guard case let .array(items)? = chat["chat"]?["chatItems"] else { throw TestFailure("\(chat)") }
                        #expect(items.compactMap { $0["content"]?["msgContent"]?["text"]?.stringValue } == ["through A", "both"])
                        let again = sIn.contains("newChatItems", where: { e in text(e["chatItems"]?.arrayFirst) == "through A" })
                        #expect(!again)
                    }
                }
            }
        }
    }
}
