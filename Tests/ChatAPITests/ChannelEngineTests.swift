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

    /// Two relay users on one engine, each with its relay address (`/r`).
    func relayAddresses(_ r: ChatAPI) async throws -> [String] {
        var addresses: [String] = []
        for (i, name) in ["relay1", "relay2"].enumerated() {
            _ = await r.execute(ChannelTests.relayUser(name))
            if i == 0 { _ = await r.execute("/_start") }
            addresses.append(try #require(await r.execute("/_address \(i + 1)")["connLinkContact"]?["connShortLink"]?.stringValue))
        }
        return addresses
    }

    /// `/_public group` makes the channel and invites both relays (`invited`); each relay checks
    /// the channel's link data, makes its own `/g` link and accepts; the owner checks the relay
    /// link, the connections come up, the owner publishes the relays' links and the relays are
    /// `active` — `groupRelayUpdated`, `groupLinkDataUpdated`, `userJoinedGroup` on the way, and
    /// the channel link's data (read by a third party) lists both relay links.
    @Test func anOwnerCreatesAChannelAndItsRelaysBecomeActive() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relays", relays: [relay.address]) { r, rIn in
                let addresses = try await relayAddresses(r)
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
                let addresses = try await relayAddresses(r)
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
}
