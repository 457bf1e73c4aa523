import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// The channel link's data kept current by the owner (`publicMemberCount`) and read again by
/// `/_get group link data #g` (docs/channels.md §9). Engines on a live relay server (TLS on
/// loopback, SQLite files).
@Suite(.timeLimit(.minutes(3))) struct ChannelLinkDataTests: LiveRelaySuite {
    @Test func theMemberCountIsRepublishedAndReadAgain() async throws {
        try await withLiveRelay { dir, relay in
            try await withActiveChannel(dir, relay: relay.address) { _, _, o, oIn, groupId, link in
                try await withEngine(dir, "subs", relays: [relay.address]) { s, sIn in
                    await startUser(s, "sub1")
                    let started = await s.execute("/_connect 1 \(link)")
                    let subGroup = try #require(started["groupInfo"]?["groupId"]?.intValue, "\(started)")
                    #expect(started["groupInfo"]?["groupSummary"]?["publicMemberCount"]?.intValue == 1, "\(started)")
                    for _ in 0..<2 { _ = try await sIn.next("userJoinedGroup", timeout: .seconds(30)) }
                    // The owner hears of the subscriber and publishes the count (owner + 1).
                    _ = try await oIn.next("joinedGroupMemberConnecting", timeout: .seconds(30))
                    _ = try await oIn.next("groupLinkDataUpdated", where: { $0["relaysChanged"]?.boolValue == false }, timeout: .seconds(30))
                    let owner = await o.execute("/_get group link data #\(groupId)")
                    #expect(owner["type"]?.stringValue == "groupInfo", "\(owner)")
                    #expect(owner["groupInfo"]?["groupSummary"]?["publicMemberCount"]?.intValue == 2, "\(owner)")
                    // A subscriber reads it again: the count, its relays unchanged.
                    let read = await s.execute("/_get group link data #\(subGroup)")
                    #expect(read["type"]?.stringValue == "groupInfo", "\(read)")
                    #expect(read["groupInfo"]?["groupSummary"]?["publicMemberCount"]?.intValue == 2, "\(read)")
                    #expect(read["groupInfo"]?["useRelays"]?.boolValue == true)
                    let relays = await s.execute("/_get relays #\(subGroup)")
                    guard case let .array(list)? = relays["groupRelays"] else { throw TestFailure("\(relays)") }
                    #expect(list.count == 2 && list.allSatisfy { $0["relayStatus"]?.stringValue == "active" }, "\(list)")
                    _ = await postToChannel(o, groupId, "still here")
                    _ = try await sIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "still here" }, timeout: .seconds(30))
                    // Not a channel: refused.
                    let plain = await s.execute(#"/_group 1 {"displayName": "plain", "fullName": ""}"#)
                    let plainId = try #require(plain["groupInfo"]?["groupId"]?.intValue, "\(plain)")
                    let refused = await s.execute("/_get group link data #\(plainId)")
                    #expect(refused["type"]?.stringValue == "chatCmdError", "\(refused)")
                }
                // A newcomer's plan shows the count; it joins (the owner publishes 3).
                try await withEngine(dir, "late", relays: [relay.address]) { l, lIn in
                    await startUser(l, "late")
                    let plan = await l.execute("/_connect plan 1 \(link)")
                    #expect(plan["connectionPlan"]?["groupLinkPlan"]?["groupSLinkData_"]?["publicGroupData"]?["publicMemberCount"]?.intValue == 2, "\(plan)")
                    _ = await l.execute("/_connect 1 \(link)")
                    for _ in 0..<2 { _ = try await lIn.next("userJoinedGroup", timeout: .seconds(30)) }
                    _ = try await oIn.next("joinedGroupMemberConnecting", timeout: .seconds(30))
                    _ = try await oIn.next("groupLinkDataUpdated", where: { $0["relaysChanged"]?.boolValue == false }, timeout: .seconds(30))
                }
                // The first subscriber, started again, reads the link data by itself (the count is
                // a stored value with no event: polled).
                try await withEngine(dir, "subs", relays: [relay.address]) { s, _ in
                    _ = await s.execute("/_start")
                    let groups = await s.execute("/_groups 1")["groups"]?.arrayValue ?? []
                    let groupId = try #require(groups.first { $0["useRelays"]?.boolValue == true }?["groupId"]?.intValue, "\(groups)")
                    try await eventually(timeout: .seconds(30), "the restarted subscriber's count") {
                        await s.execute("/_get relays #\(groupId)")["groupInfo"]?["groupSummary"]?["publicMemberCount"]?.intValue == 3
                    }
                }
            }
        }
    }
}
