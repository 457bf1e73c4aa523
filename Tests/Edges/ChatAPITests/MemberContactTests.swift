import Agent
import ChatTestSupport
import Foundation
import GroupProtocol
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// Member contacts end to end: a direct chat between two group members who are not contacts,
/// negotiated over their member connection (`x.grp.direct.inv`). Engines on a live relay (TLS on
/// loopback, SQLite files), driven by the bot API's command strings, waiting for the events they expect.
@Suite(.timeLimit(.minutes(4))) struct MemberContactTests: LiveRelaySuite {
    let g = GroupTests()

    func errorMessage(_ r: JSONValue) -> String? { r["chatError"]?["errorType"]?["message"]?.stringValue }

    func member(_ api: ChatAPI, group: Int, _ name: String) async -> JSONValue? {
        let members = await api.execute("/_members #\(group)")
        guard case let .array(list)? = members["group"]?["members"] else { return nil }
        return list.first { $0["memberProfile"]?["displayName"]?.stringValue == name }
    }

    func directText(_ event: JSONValue) -> String? { ChatTestSupport.text(event["chatItems"]?.arrayFirst) }

    @Test func twoMembersOpenADirectChatThroughTheirGroup() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        for (api, name) in [(anna, "anna"), (ben, "ben"), (cara, "cara")] { await startUser(api, name) }
                        let (_, bg, cg) = try await g.clubOfThree(anna, annaIn, ben, benIn, cara, caraIn)
                        let caraRow = try #require(await member(ben, group: bg, "cara")?["groupMemberId"]?.intValue)

                        // Typed errors first: unknown member, a member that is a contact already (the host).
                        #expect(errorType(await ben.execute("/_create member contact #\(bg) 999")) == "groupMemberNotFound")
                        let annaRow = try #require(await member(ben, group: bg, "anna")?["groupMemberId"]?.intValue)
                        let hostContact = await ben.execute("/_create member contact #\(bg) \(annaRow)")
                        #expect(errorType(hostContact) == "commandError" && errorMessage(hostContact) == "member contact already exists", "\(hostContact)")

                        // Ben makes a contact for cara: an invitation, linked to the member both ways.
                        let created = await ben.execute("/_create member contact #\(bg) \(caraRow)")
                        g.expectShape(created, "newMemberContact")
                        let ct = try #require(created["contact"]?["contactId"]?.intValue, "\(created)")
                        #expect(created["contact"]?["contactGroupMemberId"]?.intValue == caraRow)
                        #expect(created["contact"]?["contactGrpInvSent"] == .bool(false))
                        #expect(created["contact"]?["localDisplayName"]?.stringValue == "cara")
                        #expect(created["member"]?["memberContactId"]?.intValue == ct)
                        #expect(await member(ben, group: bg, "cara")?["memberContactId"]?.intValue == ct)
                        let again = await ben.execute("/_create member contact #\(bg) \(caraRow)")
                        #expect(errorMessage(again) == "member contact already exists", "\(again)")

                        // The invitation with a message, sent once.
                        let sent = await ben.execute("/_invite member contact @\(ct) text hello cara, just us")
                        g.expectShape(sent, "newMemberContactSentInv")
                        #expect(sent["contact"]?["contactGrpInvSent"] == .bool(true))
                        let ownItem = try await benIn.next("newChatItems", where: { directText($0) == "hello cara, just us" })
                        #expect(ownItem["chatItems"]?.arrayFirst?["chatInfo"]?["type"]?.stringValue == "direct")
                        #expect(ownItem["chatItems"]?.arrayFirst?["chatItem"]?["chatDir"]?["type"]?.stringValue == "directSnd")
                        let twice = await ben.execute("/_invite member contact @\(ct) text again")
                        #expect(errorMessage(twice) == "x.grp.direct.inv already sent", "\(twice)")
                        #expect(errorType(await ben.execute("/_invite member contact @999")) == "contactNotFound")

                        // Cara gets the invitation as a contact made from it, with the message.
                        let inv = try await caraIn.next("newMemberContactReceivedInv")
                        g.expectShape(inv, "newMemberContactReceivedInv")
                        let ctInCara = try #require(inv["contact"]?["contactId"]?.intValue)
                        #expect(inv["member"]?["memberProfile"]?["displayName"]?.stringValue == "ben")
                        #expect(inv["member"]?["memberContactId"]?.intValue == ctInCara)
                        #expect(inv["contact"]?["contactGroupMemberId"]?.intValue == inv["member"]?["groupMemberId"]?.intValue)
                        #expect(inv["contact"]?["groupDirectInv"]?["groupDirectInvStartedConnection"] == .bool(false))
                        #expect(inv["contact"]?["groupDirectInv"]?["fromGroupId_"]?.intValue == cg)
                        #expect(inv["contact"]?["activeConn"]?["connStatus"]?["type"]?.stringValue == "prepared")
                        let theirItem = try await caraIn.next("newChatItems", where: { directText($0) == "hello cara, just us" })
                        #expect(theirItem["chatItems"]?.arrayFirst?["chatItem"]?["chatDir"]?["type"]?.stringValue == "directRcv")
                        #expect(theirItem["chatItems"]?.arrayFirst?["chatInfo"]?["contact"]?["contactId"]?.intValue == ctInCara)

                        // Before she accepts, the contact is a direct chat with the invitation's message in it.
                        let chats = await cara.execute("/_get chats 1 pcc=on count=20")
                        guard case let .array(list)? = chats["chats"] else { throw TestFailure("\(chats)") }
                        let direct = list.first { $0["chatInfo"]?["contact"]?["contactId"]?.intValue == ctInCara }
                        #expect(direct?["chatInfo"]?["type"]?.stringValue == "direct", "\(chats)")
                        #expect(direct?["chatItems"]?.arrayFirst?["content"]?["msgContent"]?["text"]?.stringValue == "hello cara, just us")
                        #expect(!list.contains { $0["chatInfo"]?["type"]?.stringValue == "contactConnection" })

                        // She accepts: the contacts connect, and talk directly.
                        let accepted = await cara.execute("/_accept member contact @\(ctInCara)")
                        #expect(accepted["type"]?.stringValue == "memberContactAccepted", "\(accepted)")
                        #expect(accepted["contact"]?["groupDirectInv"]?["groupDirectInvStartedConnection"] == .bool(true))
                        #expect(errorType(await cara.execute("/_accept member contact @\(ctInCara)")) == "commandError")
                        let caraConnected = try await caraIn.next("contactConnected")
                        #expect(caraConnected["contact"]?["contactId"]?.intValue == ctInCara)
                        #expect(caraConnected["contact"]?["localDisplayName"]?.stringValue == "ben")
                        let benConnected = try await benIn.next("contactConnected")
                        #expect(benConnected["contact"]?["contactId"]?.intValue == ct)
                        #expect(benConnected["contact"]?["localDisplayName"]?.stringValue == "cara")
                        _ = await cara.execute(#"/_send @\#(ctInCara) json [{"msgContent": {"type": "text", "text": "hi ben"}}]"#)
                        let reply = try await benIn.next("newChatItems", where: { directText($0) == "hi ben" })
                        #expect(reply["chatItems"]?.arrayFirst?["chatInfo"]?["contact"]?["contactId"]?.intValue == ct)
                        // Both list each other as contacts, still linked to the member.
                        let contacts = await cara.execute("/_contacts 1")
                        guard case let .array(list)? = contacts["contacts"] else { throw TestFailure("\(contacts)") }
                        #expect(list.contains { $0["contactId"]?.intValue == ctInCara && $0["contactGroupMemberId"] != nil })

                        // Deleted, the member has no contact any more: a new one can be made.
                        #expect(await ben.execute("/_delete @\(ct) full notify=off")["type"]?.stringValue == "contactDeleted")
                        #expect(await member(ben, group: bg, "cara")?["memberContactId"] == nil)
                        let second = try #require(await ben.execute("/_create member contact #\(bg) \(caraRow)")["contact"]?["contactId"]?.intValue)
                        // Not connected yet, it is still a contact: deleting it answers contactDeleted.
                        #expect(await ben.execute("/_delete @\(second) full notify=off")["type"]?.stringValue == "contactDeleted")
                        #expect(await member(ben, group: bg, "cara")?["memberContactId"] == nil)
                    }
                }
            }
        }
    }

    /// The group's `directMessages` preference gates both ends; with auto-accept on, the member's
    /// side joins at once.
    @Test func directMessagesOffRefusesBothEndsAndAutoAcceptJoinsAtOnce() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        for (api, name) in [(anna, "anna"), (ben, "ben"), (cara, "cara")] { await startUser(api, name) }
                        let (gid, bg, cg) = try await g.clubOfThree(anna, annaIn, ben, benIn, cara, caraIn)
                        let caraRow = try #require(await member(ben, group: bg, "cara")?["groupMemberId"]?.intValue)

                        // The owner turns direct messages off; both members learn it.
                        let off = await anna.execute(#"/_group_profile #\#(gid) {"displayName": "club", "groupPreferences": {"directMessages": {"enable": "off"}}}"#)
                        #expect(off["type"]?.stringValue == "groupUpdated", "\(off)")
                        _ = try await benIn.next("groupUpdated")
                        _ = try await caraIn.next("groupUpdated")
                        let refused = await ben.execute("/_create member contact #\(bg) \(caraRow)")
                        #expect(errorType(refused) == "commandError" && errorMessage(refused) == "direct messages not allowed", "\(refused)")

                        // A forged invitation on ben's member connection is not applied by cara: the
                        // group message after it arrives, and no contact was made.
                        let inviteLink = try #require(await ben.execute("/_connect 1")["connLinkInvitation"]?["connFullLink"]?.stringValue)
                        let conn = try #require(try await ben.controller.dbRead { db in
                            try Int64.fetchOne(db, sql: "SELECT agent_conn_id FROM group_member WHERE id = ?", arguments: [caraRow])
                        })
                        let forged = GroupEnvelope(msgId: ChatMessage.newMessageId(), event: "x.grp.direct.inv", params: .object([("connReq", .string(inviteLink))]))
                        _ = try await ben.controller.agent.send(conn, try GroupMessage.encode(forged))
                        _ = await g.send(ben, group: bg, "after the forged one")
                        try await g.received(caraIn, "after the forged one", from: "ben")
                        #expect(!caraIn.contains("newMemberContactReceivedInv"))
                        #expect(await member(cara, group: cg, "ben")?["memberContactId"] == nil)

                        // On again, for members and above; cara accepts member contacts automatically.
                        let on = await anna.execute(#"/_group_profile #\#(gid) {"displayName": "club", "groupPreferences": {"directMessages": {"enable": "on", "role": "member"}}}"#)
                        #expect(on["type"]?.stringValue == "groupUpdated", "\(on)")
                        _ = try await benIn.next("groupUpdated")
                        _ = try await caraIn.next("groupUpdated")
                        #expect(await cara.execute("/_set accept member contacts 1 on")["type"]?.stringValue == "cmdOk")
                        #expect(await cara.execute("/user")["user"]?["autoAcceptMemberContacts"] == .bool(true))
                        let created = await ben.execute("/_create member contact #\(bg) \(caraRow)")
                        let ct = try #require(created["contact"]?["contactId"]?.intValue, "\(created)")
                        #expect(await ben.execute("/_invite member contact @\(ct)")["type"]?.stringValue == "newMemberContactSentInv")
                        let inv = try await caraIn.next("newMemberContactReceivedInv")
                        #expect(inv["contact"]?["groupDirectInv"]?["groupDirectInvStartedConnection"] == .bool(true))
                        let ctInCara = try #require(inv["contact"]?["contactId"]?.intValue)
                        #expect(try await caraIn.next("contactConnected")["contact"]?["contactId"]?.intValue == ctInCara)
                        #expect(try await benIn.next("contactConnected")["contact"]?["contactId"]?.intValue == ct)
                        #expect(errorType(await cara.execute("/_accept member contact @\(ctInCara)")) == "commandError")
                    }
                }
            }
        }
    }

    /// A member's new profile reaches the group (`x.info` on the member connections, SimpleX
    /// `xInfoMember`): the others get `groupMemberUpdated` and the member goes by its new name.
    @Test func aMembersProfileChangeReachesTheGroup() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        for (api, name) in [(anna, "anna"), (ben, "ben"), (cara, "cara")] { await startUser(api, name) }
                        let (gid, bg, cg) = try await g.clubOfThree(anna, annaIn, ben, benIn, cara, caraIn)
                        let updated = await ben.execute(#"/_profile 1 {"displayName": "benjamin", "fullName": "Ben B"}"#)
                        #expect(updated["type"]?.stringValue == "userProfileUpdated", "\(updated)")
                        for (inbox, who) in [(annaIn, "anna"), (caraIn, "cara")] {
                            let e = try await inbox.next("groupMemberUpdated")
                            g.expectShape(e, "groupMemberUpdated")
                            #expect(e["fromMember"]?["memberProfile"]?["displayName"]?.stringValue == "ben", "\(who): \(e)")
                            #expect(e["toMember"]?["memberProfile"]?["displayName"]?.stringValue == "benjamin", "\(who)")
                            #expect(e["toMember"]?["memberProfile"]?["fullName"]?.stringValue == "Ben B", "\(who)")
                        }
                        #expect(await member(cara, group: cg, "benjamin")?["localDisplayName"]?.stringValue == "benjamin")
                        #expect(await member(anna, group: gid, "benjamin") != nil)
                        // The same profile again changes nothing; a malformed one is refused and not applied.
                        #expect(await ben.execute(#"/_profile 1 {"displayName": "benjamin", "fullName": "Ben B"}"#)["type"]?.stringValue == "userProfileNoChange")
                        let caraRow = try #require(await member(ben, group: bg, "cara")?["groupMemberId"]?.intValue)
                        let conn = try #require(try await ben.controller.dbRead { db in
                            try Int64.fetchOne(db, sql: "SELECT agent_conn_id FROM group_member WHERE id = ?", arguments: [caraRow])
                        })
                        let bad = GroupEnvelope(msgId: ChatMessage.newMessageId(), event: "x.info", params: .object([("profile", .object([("fullName", "no name")]))]))
                        _ = try await ben.controller.agent.send(conn, try GroupMessage.encode(bad))
                        let refusal = try await caraIn.next("chatError")
                        #expect(refusal["chatError"]?["errorType"]?["type"]?.stringValue == "groupInternal", "\(refusal)")
                        #expect(await member(cara, group: cg, "benjamin")?["memberProfile"]?["fullName"]?.stringValue == "Ben B")
                    }
                }
            }
        }
    }

    /// Joining by a group link incognito (`/_connect 1 incognito=on <link>`): a random profile for
    /// that group only — the members see it, the user's profile changes do not reach the group, and
    /// a member contact made there is shown the same random profile.
    @Test func anIncognitoJoinShowsTheGroupARandomProfileOnly() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        for (api, name) in [(anna, "anna"), (ben, "ben"), (cara, "cara")] { await startUser(api, name) }
                        let gid = try await g.createGroup(anna, "club")
                        let link = try #require(await anna.execute("/_create link #\(gid) member")["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue)
                        _ = await ben.execute("/_connect 1 \(link)")
                        let bg = try #require(try await benIn.next("userJoinedGroup")["groupInfo"]?["groupId"]?.intValue)

                        let sent = await cara.execute("/_connect 1 incognito=on \(link)")
                        #expect(sent["type"]?.stringValue == "sentInvitation", "\(sent)")
                        let alias = try #require(sent["customUserProfile"]?["displayName"]?.stringValue)
                        #expect(alias != "cara")
                        let joined = try await caraIn.next("userJoinedGroup")
                        #expect(joined["groupInfo"]?["membership"]?["memberProfile"]?["displayName"]?.stringValue == alias)
                        let cg = try #require(joined["groupInfo"]?["groupId"]?.intValue)
                        let hostSees = try await annaIn.next("joinedGroupMember", where: { $0["member"]?["memberProfile"]?["displayName"]?.stringValue != "ben" })
                        #expect(hostSees["member"]?["memberProfile"]?["displayName"]?.stringValue == alias, "\(hostSees)")
                        let benSees = try await benIn.next("connectedToGroupMember")
                        #expect(benSees["member"]?["memberProfile"]?["displayName"]?.stringValue == alias, "\(benSees)")
                        _ = try await caraIn.next("connectedToGroupMember")
                        _ = await g.send(cara, group: cg, "hi from nobody")
                        try await g.received(benIn, "hi from nobody", from: alias)

                        // Cara's own profile change stays out of this group.
                        #expect(await cara.execute(#"/_profile 1 {"displayName": "cara", "fullName": "Cara C"}"#)["type"]?.stringValue == "userProfileUpdated")
                        _ = await g.send(cara, group: cg, "still nobody")
                        try await g.received(benIn, "still nobody", from: alias)
                        #expect(!benIn.contains("groupMemberUpdated") && !annaIn.contains("groupMemberUpdated"))

                        // A member contact made in the group shows the same random profile.
                        #expect(await cara.execute("/_set accept member contacts 1 on")["type"]?.stringValue == "cmdOk")
                        let caraRow = try #require(await member(ben, group: bg, alias)?["groupMemberId"]?.intValue)
                        let ct = try #require(await ben.execute("/_create member contact #\(bg) \(caraRow)")["contact"]?["contactId"]?.intValue)
                        _ = await ben.execute("/_invite member contact @\(ct)")
                        let caraConnected = try await caraIn.next("contactConnected")
                        #expect(caraConnected["userCustomProfile"]?["displayName"]?.stringValue == alias, "\(caraConnected)")
                        let benConnected = try await benIn.next("contactConnected")
                        #expect(benConnected["contact"]?["profile"]?["displayName"]?.stringValue == alias, "\(benConnected)")
                        #expect(benConnected["contact"]?["profile"]?["fullName"]?.stringValue != "Cara C")
                    }
                }
            }
        }
    }

    /// Across restarts: the invitation waits on the relay while the member's engine is closed,
    /// is made a contact when it opens, and an acceptance followed at once by a close still connects
    /// after the next start (the join is a durable group action).
    @Test func anInvitationAndItsAcceptanceSurviveRestarts() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                    let (bg, caraRow): (Int, Int) = try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        for (api, name) in [(anna, "anna"), (ben, "ben"), (cara, "cara")] { await startUser(api, name) }
                        let (_, bg, _) = try await g.clubOfThree(anna, annaIn, ben, benIn, cara, caraIn)
                        return (bg, try #require(await member(ben, group: bg, "cara")?["groupMemberId"]?.intValue))
                    }
                    // Cara is offline: the invitation waits for her.
                    let ct = try #require(await ben.execute("/_create member contact #\(bg) \(caraRow)")["contact"]?["contactId"]?.intValue)
                    #expect(await ben.execute("/_invite member contact @\(ct) text while you were away")["type"]?.stringValue == "newMemberContactSentInv")
                    let ctInCara: Int = try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        _ = await cara.execute("/_start")
                        let inv = try await caraIn.next("newMemberContactReceivedInv", timeout: .seconds(30))
                        let id = try #require(inv["contact"]?["contactId"]?.intValue)
                        _ = try await caraIn.next("newChatItems", where: { directText($0) == "while you were away" })
                        #expect(await cara.execute("/_accept member contact @\(id)")["type"]?.stringValue == "memberContactAccepted")
                        return id
                    }
                    // Closed right after accepting: connected once she is back.
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        _ = await cara.execute("/_start")
                        do {
                            let connected = try await caraIn.next("contactConnected", timeout: .seconds(30))
                            #expect(connected["contact"]?["contactId"]?.intValue == ctInCara)
                            #expect(try await benIn.next("contactConnected", timeout: .seconds(30))["contact"]?["contactId"]?.intValue == ct)
                        } catch {
                            Issue.record("cara: \(caraIn.events.pending.map(\.description)); ben: \(benIn.events.pending.map(\.description))")
                            throw error
                        }
                        _ = await ben.execute(#"/_send @\#(ct) json [{"msgContent": {"type": "text", "text": "welcome back"}}]"#)
                        let got = try await caraIn.next("newChatItems", where: { directText($0) == "welcome back" }, timeout: .seconds(30))
                        #expect(got["chatItems"]?.arrayFirst?["chatInfo"]?["contact"]?["contactId"]?.intValue == ctInCara)
                        #expect(await cara.execute("/_contacts 1")["contacts"]?.arrayCount == 2) // anna and ben
                    }
                }
            }
        }
    }
}

