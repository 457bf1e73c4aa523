import Agent
import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// Groups end to end: three engines on a live relay (TLS on loopback, SQLite files), driven by the
/// bot API's command strings, waiting for the events they expect.
@Suite(.timeLimit(.minutes(4))) struct GroupTests: LiveRelaySuite {
    static let doc = try! BotAPIDoc.load()

    /// Connects two started engines through a one-time invitation; returns each one's contact id of the other.
    func connect(_ a: ChatAPI, _ aInbox: ChatInbox, _ aName: String, _ b: ChatAPI, _ bInbox: ChatInbox, _ bName: String) async throws -> (Int, Int) {
        let link = try #require(await a.execute("/_connect 1")["connLinkInvitation"]?["connFullLink"]?.stringValue)
        _ = await b.execute("/_connect 1 \(link)")
        let inA = try #require(try await aInbox.next("contactConnected", where: { $0["contact"]?["profile"]?["displayName"]?.stringValue == bName })["contact"]?["contactId"]?.intValue)
        let inB = try #require(try await bInbox.next("contactConnected", where: { $0["contact"]?["profile"]?["displayName"]?.stringValue == aName })["contact"]?["contactId"]?.intValue)
        return (inA, inB)
    }

    /// The shape problems of a response or event against docs/simplex-bot-api.md, with its GroupInfo and members.
    func shapeProblems(_ json: JSONValue) -> [String] {
        let type = json["type"]?.stringValue ?? "?"
        var out = BotAPIDoc.problems(json, Self.doc.messages[type], type)
        for key in ["groupInfo", "fromGroup", "toGroup"] {
            if let g = json[key] {
                out += BotAPIDoc.problems(g, Self.doc.records["GroupInfo"], "\(type).\(key)")
                out += BotAPIDoc.problems(g["membership"], Self.doc.records["GroupMember"], "\(type).\(key).membership")
            }
        }
        for key in ["member", "hostMember", "byMember", "deletedMember"] {
            if let m = json[key] { out += BotAPIDoc.problems(m, Self.doc.records["GroupMember"], "\(type).\(key)") }
        }
        return out
    }

    func expectShape(_ json: JSONValue, _ type: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(json["type"]?.stringValue == type, "\(json)", sourceLocation: sourceLocation)
        let problems = shapeProblems(json)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))", sourceLocation: sourceLocation)
    }

    /// A member's `groupMemberId` in an engine, by display name.
    /// `/_group` by `owner` (user 1); the new group's id.
    func createGroup(_ owner: ChatAPI, _ name: String) async throws -> Int {
        try #require(await owner.execute("/_group 1 {\"displayName\": \"\(name)\"}")["groupInfo"]?["groupId"]?.intValue)
    }

    /// The host adds its contact `contactId` to group `g` as a member; the invitee joins. Returns
    /// the group's id on the invitee's side once it has joined (`userJoinedGroup`).
    func addAndJoin(_ host: ChatAPI, group g: Int, contact contactId: Int, _ invitee: ChatAPI, _ inviteeIn: ChatInbox) async throws -> Int {
        _ = await host.execute("/_add #\(g) \(contactId) member")
        let joined = try #require(try await inviteeIn.next("receivedGroupInvitation")["groupInfo"]?["groupId"]?.intValue)
        _ = await invitee.execute("/_join #\(joined)")
        _ = try await inviteeIn.next("userJoinedGroup")
        return joined
    }

    /// "club": anna (owner) with ben and cara (members), invited and joined, ben and cara connected
    /// to each other (users started by the caller); the group's id at anna, ben and cara.
    func clubOfThree(_ anna: ChatAPI, _ annaIn: ChatInbox, _ ben: ChatAPI, _ benIn: ChatInbox, _ cara: ChatAPI, _ caraIn: ChatInbox)
        async throws -> (anna: Int, ben: Int, cara: Int) {
        let (benInAnna, _) = try await connect(anna, annaIn, "anna", ben, benIn, "ben")
        let (caraInAnna, _) = try await connect(anna, annaIn, "anna", cara, caraIn, "cara")
        let g = try await createGroup(anna, "club")
        let bg = try await addAndJoin(anna, group: g, contact: benInAnna, ben, benIn)
        _ = try await annaIn.next("joinedGroupMember")
        let cg = try await addAndJoin(anna, group: g, contact: caraInAnna, cara, caraIn)
        _ = try await benIn.next("connectedToGroupMember", where: { $0["member"]?["memberProfile"]?["displayName"]?.stringValue == "cara" })
        _ = try await caraIn.next("connectedToGroupMember", where: { $0["member"]?["memberProfile"]?["displayName"]?.stringValue == "ben" })
        return (g, bg, cg)
    }

    func memberId(_ api: ChatAPI, group: Int, _ name: String) async throws -> Int {
        let members = await api.execute("/_members #\(group)")
        guard case let .array(list)? = members["group"]?["members"] else { throw TestFailure("no members: \(members)") }
        return try #require(list.first { $0["memberProfile"]?["displayName"]?.stringValue == name }?["groupMemberId"]?.intValue)
    }

    func send(_ api: ChatAPI, group: Int, _ text: String) async -> JSONValue {
        await api.execute(#"/_send #\#(group) json [{"msgContent": {"type": "text", "text": "\#(text)"}, "mentions": {}}]"#)
    }

    /// Waits for the group message `text` from `from`, checking it came as `groupRcv` from that member.
    @discardableResult
    func received(_ inbox: ChatInbox, _ text: String, from: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> JSONValue {
        let event = try await inbox.next("newChatItems", where: { ChatTestSupport.text($0["chatItems"]?.arrayFirst) == text })
        let item = try #require(event["chatItems"]?.arrayFirst, sourceLocation: sourceLocation)
        #expect(item["chatInfo"]?["type"]?.stringValue == "group", sourceLocation: sourceLocation)
        #expect(item["chatItem"]?["chatDir"]?["type"]?.stringValue == "groupRcv", sourceLocation: sourceLocation)
        #expect(item["chatItem"]?["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue == from, sourceLocation: sourceLocation)
        return event
    }

    /// How many items of a group's chat in `api` have this text.
    func count(_ api: ChatAPI, group: Int, _ text: String) async -> Int {
        let chat = await api.execute("/_get chat #\(group) count=200")
        guard case let .array(items)? = chat["chat"]?["chatItems"] else { return -1 }
        return items.filter { $0["content"]?["msgContent"]?["text"]?.stringValue == text }.count
    }

    @Test func threeMembersCreateInviteJoinTalkChangeRolesRemoveLeaveAcrossARestart() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                    await startUser(anna, "anna")
                    await startUser(cara, "cara")
                    // Phase 1: ben's engine the first time.
                    let (g, bg, cg, benInAnna) = try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                        await startUser(ben, "ben")
                        let (benInAnna, _) = try await connect(anna, annaIn, "anna", ben, benIn, "ben")
                        let (caraInAnna, _) = try await connect(anna, annaIn, "anna", cara, caraIn, "cara")

                        let created = await anna.execute(#"/_group 1 {"displayName": "team", "fullName": "The team"}"#)
                        expectShape(created, "groupCreated")
                        #expect(created["groupInfo"]?["membership"]?["memberRole"]?.stringValue == "owner")
                        #expect(created["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "creator")
                        let g = try #require(created["groupInfo"]?["groupId"]?.intValue)

                        // Ben, as admin.
                        let added = await anna.execute("/_add #\(g) \(benInAnna) admin")
                        expectShape(added, "sentGroupInvitation")
                        #expect(added["member"]?["memberStatus"]?.stringValue == "invited")
                        #expect(added["member"]?["memberProfile"]?["displayName"]?.stringValue == "ben")
                        let invited = try await benIn.next("receivedGroupInvitation")
                        expectShape(invited, "receivedGroupInvitation")
                        #expect(invited["memberRole"]?.stringValue == "admin" && invited["fromMemberRole"]?.stringValue == "owner")
                        #expect(invited["groupInfo"]?["groupProfile"]?["displayName"]?.stringValue == "team")
                        let bg = try #require(invited["groupInfo"]?["groupId"]?.intValue)
                        let joined = await ben.execute("/_join #\(bg)")
                        expectShape(joined, "userAcceptedGroupSent")
                        #expect(joined["hostContact"]?["profile"]?["displayName"]?.stringValue == "anna")
                        let benJoined = try await benIn.next("userJoinedGroup")
                        expectShape(benJoined, "userJoinedGroup")
                        #expect(benJoined["hostMember"]?["memberProfile"]?["displayName"]?.stringValue == "anna")
                        expectShape(try await annaIn.next("joinedGroupMember"), "joinedGroupMember")

                        // Cara, as member: introduced to ben, the mesh closes.
                        _ = await anna.execute("/_add #\(g) \(caraInAnna) member")
                        let caraInvited = try await caraIn.next("receivedGroupInvitation")
                        let cg = try #require(caraInvited["groupInfo"]?["groupId"]?.intValue)
                        #expect(await cara.execute("/_join #\(cg)")["type"]?.stringValue == "userAcceptedGroupSent")
                        _ = try await caraIn.next("userJoinedGroup")
                        _ = try await annaIn.next("joinedGroupMember", where: { $0["member"]?["memberProfile"]?["displayName"]?.stringValue == "cara" })
                        let connecting = try await benIn.next("joinedGroupMemberConnecting")
                        expectShape(connecting, "joinedGroupMemberConnecting")
                        let benSeesCara = try await benIn.next("connectedToGroupMember")
                        expectShape(benSeesCara, "connectedToGroupMember")
                        #expect(benSeesCara["member"]?["memberProfile"]?["displayName"]?.stringValue == "cara")
                        let caraSeesBen = try await caraIn.next("connectedToGroupMember")
                        #expect(caraSeesBen["member"]?["memberProfile"]?["displayName"]?.stringValue == "ben")

                        let members = await cara.execute("/_members #\(cg)")
                        expectShape(members, "groupMembers")
                        #expect(members["group"]?["members"]?.arrayCount == 2)
                        let groups = await ben.execute("/_groups 1")
                        expectShape(groups, "groupsList")
                        #expect(groups["groups"]?.arrayCount == 1)

                        // Each one's message reaches the other two.
                        let sent = await send(anna, group: g, "from anna")
                        expectShape(sent, "newChatItems")
                        #expect(sent["chatItems"]?.arrayFirst?["chatItem"]?["chatDir"]?["type"]?.stringValue == "groupSnd")
                        #expect(sent["chatItems"]?.arrayFirst?["chatInfo"]?["type"]?.stringValue == "group")
                        _ = await send(ben, group: bg, "from ben")
                        _ = await send(cara, group: cg, "from cara")
                        expectShape(try await received(benIn, "from anna", from: "anna"), "newChatItems")
                        try await received(caraIn, "from anna", from: "anna")
                        try await received(annaIn, "from ben", from: "ben")
                        try await received(caraIn, "from ben", from: "ben")
                        try await received(annaIn, "from cara", from: "cara")
                        try await received(benIn, "from cara", from: "cara")

                        // A member may not remove anyone: refused before anything is sent.
                        let benInCara = try await memberId(cara, group: cg, "ben")
                        let refused = await cara.execute("/_remove #\(cg) \(benInCara)")
                        #expect(refused["type"]?.stringValue == "chatCmdError")
                        #expect(refused["chatError"]?["errorType"]?["type"]?.stringValue == "groupUserRole")
                        #expect(refused["chatError"]?["errorType"]?["requiredRole"]?.stringValue == "admin")
                        #expect(refused["chatError"]?["errorType"]?["groupInfo"]?["groupId"]?.intValue == cg)
                        return (g, bg, cg, benInAnna)
                    }

                    // While ben's engine is closed, anna and cara talk on.
                    _ = await send(anna, group: g, "while ben is away")
                    try await received(caraIn, "while ben is away", from: "anna")
                    _ = await send(cara, group: cg, "cara too")
                    try await received(annaIn, "cara too", from: "cara")

                    // Phase 2: ben's engine reopened on the same files gets what was sent meanwhile.
                    try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                        #expect(await ben.execute("/_start")["type"]?.stringValue == "chatStarted")
                        try await received(benIn, "while ben is away", from: "anna")
                        try await received(benIn, "cara too", from: "cara")
                        _ = await send(anna, group: g, "after restart")
                        try await received(benIn, "after restart", from: "anna")
                        try await received(caraIn, "after restart", from: "anna")
                        _ = await send(ben, group: bg, "ben is back")
                        try await received(annaIn, "ben is back", from: "ben")
                        try await received(caraIn, "ben is back", from: "ben")

                        // Crash windows, replayed into the reopened engine as the agent would replay them.
                        let core = ben.controller
                        let (conn, lastSeq) = try await core.dbRead { db -> (Int64, Int64) in
                            let conn = try Int64.fetchOne(db, sql: "SELECT agent_conn_id FROM group_member WHERE group_id = ? AND category = 'host'", arguments: [bg])
                            let seq = try Int64.fetchOne(db, sql: "SELECT max(seq) FROM group_input WHERE agent_conn_id = ?", arguments: [conn])
                            return (conn ?? 0, seq ?? 0)
                        }
                        #expect(conn > 0 && lastSeq > 0)
                        func body(_ msgId: String, _ text: String) -> [UInt8] {
                            Array(#"{"v":"1","msgId":"\#(msgId)","event":"x.msg.new","params":{"content":{"type":"text","text":"\#(text)"}}}"#.utf8)
                        }
                        // A message handled before a crash that came before the agent's acknowledgement: dropped.
                        try await core.handle(.message(connection: conn, seq: UInt64(lastSeq), body: body("cmVwbGF5ZWQx", "replayed"), integrity: .ok))
                        // A copy of a message applied before the restart (as a forward would bring it): the store's dedup drops it.
                        let annaItem = try #require(await ben.execute("/_get chat #\(bg) count=200")["chat"]?["chatItems"].flatMap { items -> JSONValue? in
                            guard case let .array(list) = items else { return nil }
                            return list.first { $0["content"]?["msgContent"]?["text"]?.stringValue == "from anna" }
                        })
                        let annaMsgId = try #require(annaItem["meta"]?["itemSharedMsgId"]?.stringValue)
                        try await core.handle(.message(connection: conn, seq: UInt64(lastSeq + 1000), body: body(annaMsgId, "from anna"), integrity: .ok))
                        // And a new one on the same path is applied (the path works).
                        try await core.handle(.message(connection: conn, seq: UInt64(lastSeq + 1001), body: body("ZnJlc2gx", "fresh"), integrity: .ok))
                        try await received(benIn, "fresh", from: "anna")
                        #expect(await count(ben, group: bg, "replayed") == 0)

                        // A member's control message its role does not allow is refused, reported, never applied.
                        let benMembers = await ben.execute("/_members #\(bg)")
                        guard case let .array(benList)? = benMembers["group"]?["members"] else { throw TestFailure("no members") }
                        let annaMemberId = try #require(benList.first { $0["memberProfile"]?["displayName"]?.stringValue == "anna" }?["memberId"]?.stringValue)
                        let caraMemberId = try #require(benList.first { $0["memberProfile"]?["displayName"]?.stringValue == "cara" }?["memberId"]?.stringValue)
                        let caraConn = try await core.dbRead { db in
                            try Int64.fetchOne(db, sql: "SELECT agent_conn_id FROM group_member WHERE group_id = ? AND member_id = ?", arguments: [bg, caraMemberId]) ?? 0
                        }
                        #expect(caraConn > 0)
                        let forged = #"{"v":"1","msgId":"Zm9yZ2VkMQ","event":"x.grp.mem.del","params":{"memberId":"\#(annaMemberId)"}}"#
                        try await core.handle(.message(connection: caraConn, seq: 1_000_000, body: Array(forged.utf8), integrity: .ok))
                        let reported = try await benIn.next("chatError")
                        #expect(reported["chatError"]?["errorType"]?["type"]?.stringValue == "groupInternal")
                        #expect(reported["chatError"]?["errorType"]?["message"]?.stringValue?.contains("notAuthorized") == true)
                        let stillThere = await ben.execute("/_members #\(bg)")
                        guard case let .array(after)? = stillThere["group"]?["members"] else { throw TestFailure("no members") }
                        #expect(after.first { $0["memberId"]?.stringValue == annaMemberId }?["memberStatus"]?.stringValue == "connected")
                        #expect(!benIn.contains("deletedMember"))

                        // Exactly once: every message once in each chat.
                        for (api, gid) in [(anna, g), (ben, bg), (cara, cg)] {
                            for text in ["from anna", "from ben", "from cara", "while ben is away", "cara too", "after restart", "ben is back"] {
                                #expect(await count(api, group: gid, text) == 1, "\(text) in group \(gid)")
                            }
                        }
                        #expect(!annaIn.contains("newChatItems") && !benIn.contains("newChatItems") && !caraIn.contains("newChatItems"))

                        // Role change: cara becomes an observer, and may no longer send.
                        let caraInAnna = try await memberId(anna, group: g, "cara")
                        let role = await anna.execute("/_member role #\(g) \(caraInAnna) observer")
                        expectShape(role, "membersRoleUser")
                        #expect(role["members"]?.arrayFirst?["memberRole"]?.stringValue == "observer")
                        let benSees = try await benIn.next("memberRole")
                        expectShape(benSees, "memberRole")
                        #expect(benSees["toRole"]?.stringValue == "observer" && benSees["member"]?["memberProfile"]?["displayName"]?.stringValue == "cara")
                        let caraSees = try await caraIn.next("memberRole")
                        #expect(caraSees["member"]?["memberCategory"]?.stringValue == "user" && caraSees["toRole"]?.stringValue == "observer")
                        let muted = await send(cara, group: cg, "may I?")
                        #expect(muted["chatError"]?["errorType"]?["type"]?.stringValue == "groupUserRole")
                        #expect(muted["chatError"]?["errorType"]?["requiredRole"]?.stringValue == "author")

                        // Profile: only the owner changes it; members see groupUpdated.
                        let notOwner = await ben.execute(#"/_group_profile #\#(bg) {"displayName": "ours", "fullName": ""}"#)
                        #expect(notOwner["chatError"]?["errorType"]?["type"]?.stringValue == "groupUserRole")
                        #expect(notOwner["chatError"]?["errorType"]?["requiredRole"]?.stringValue == "owner")
                        let renamed = await anna.execute(#"/_group_profile #\#(g) {"displayName": "team2", "fullName": "The team"}"#)
                        expectShape(renamed, "groupUpdated")
                        #expect(renamed["toGroup"]?["groupProfile"]?["displayName"]?.stringValue == "team2")
                        let benUpdated = try await benIn.next("groupUpdated")
                        #expect(benUpdated["fromGroup"]?["groupProfile"]?["displayName"]?.stringValue == "team")
                        #expect(benUpdated["toGroup"]?["groupProfile"]?["displayName"]?.stringValue == "team2")
                        #expect(benUpdated["member_"]?["memberProfile"]?["displayName"]?.stringValue == "anna")
                        _ = try await caraIn.next("groupUpdated")

                        // Ben (admin) blocks cara for all; anna is told who did.
                        let caraInBen = try await memberId(ben, group: bg, "cara")
                        let blocked = await ben.execute("/_block #\(bg) \(caraInBen) blocked=on")
                        expectShape(blocked, "membersBlockedForAllUser")
                        #expect(blocked["members"]?.arrayFirst?["blockedByAdmin"]?.boolValue == true)
                        let annaSeesBlock = try await annaIn.next("memberBlockedForAll")
                        expectShape(annaSeesBlock, "memberBlockedForAll")
                        #expect(annaSeesBlock["byMember"]?["memberProfile"]?["displayName"]?.stringValue == "ben")
                        #expect(annaSeesBlock["member"]?["blockedByAdmin"]?.boolValue == true)

                        // The chat list has the group.
                        let chats = await ben.execute("/_get chats 1 count=20")
                        guard case let .array(list)? = chats["chats"] else { throw TestFailure("no chats") }
                        #expect(list.contains { $0["chatInfo"]?["type"]?.stringValue == "group" })

                        // Remove cara; then ben leaves.
                        let removed = await anna.execute("/_remove #\(g) \(caraInAnna)")
                        expectShape(removed, "userDeletedMembers")
                        expectShape(try await caraIn.next("deletedMemberUser"), "deletedMemberUser")
                        let benSeesRemoval = try await benIn.next("deletedMember")
                        expectShape(benSeesRemoval, "deletedMember")
                        #expect(benSeesRemoval["deletedMember"]?["memberStatus"]?.stringValue == "removed")
                        let left = await ben.execute("/_leave #\(bg)")
                        expectShape(left, "leftMemberUser")
                        #expect(left["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "left")
                        let annaSeesLeave = try await annaIn.next("leftMember")
                        expectShape(annaSeesLeave, "leftMember")
                        #expect(annaSeesLeave["member"]?["memberProfile"]?["displayName"]?.stringValue == "ben")
                        let notJoined = await send(ben, group: bg, "still here?")
                        #expect(notJoined["chatError"]?["errorType"]?["type"]?.stringValue == "groupNotJoined")

                        let deleted = await anna.execute("/_delete #\(g) full")
                        expectShape(deleted, "groupDeletedUser")
                        #expect(await anna.execute("/_members #\(g)")["chatError"]?["storeError"]?["type"]?.stringValue == "groupNotFound")
                        _ = benInAnna
                    }
                }
            }
        }
    }
}

extension GroupTests {
    /// Members who are contacts go by the contact's name, which stays taken when the contact is
    /// deleted while the member still goes by it. A reply in a group (`quotedItemId`, as
    /// the Python library's `msg.reply` sends it) carries
    /// SimpleX's `quote`: both sides show `quotedItem` with the quoted item's own direction and id,
    /// also when the chat is read back; an unknown item is `chatItemNotFound`, and nothing is sent.
    @Test func aReplyInAGroupQuotesTheMessageOnBothSides() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                    await startUser(anna, "anna")
                    await startUser(ben, "ben")
                    let (benInAnna, _) = try await connect(anna, annaIn, "anna", ben, benIn, "ben")
                    let g = try await createGroup(anna, "club")
                    let bg = try await addAndJoin(anna, group: g, contact: benInAnna, ben, benIn)
                    // Anna sends to connected members only: she must have seen ben connect too.
                    _ = try await annaIn.next("joinedGroupMember")
                    // A member who is a contact goes by the contact's local name, on both sides.
                    let annasMembers = await anna.execute("/_members #\(g)")["group"]?["members"]?.arrayFirst
                    #expect(annasMembers?["localDisplayName"]?.stringValue == "ben" && annasMembers?["memberContactId"]?.intValue == benInAnna, "\(String(describing: annasMembers))")
                    let bensMembers = await ben.execute("/_members #\(bg)")["group"]?["members"]?.arrayFirst
                    #expect(bensMembers?["localDisplayName"]?.stringValue == "anna", "\(String(describing: bensMembers))")
                    let asked = await send(anna, group: g, "question")
                    let askedId = try #require(asked["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue)
                    let got = try await received(benIn, "question", from: "anna")
                    let gotId = try #require(got["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue)

                    let unknown = await ben.execute(#"/_send #\#(bg) json [{"msgContent": {"type": "text", "text": "lost"}, "quotedItemId": 999, "mentions": {}}]"#)
                    #expect(unknown["chatError"]?["storeError"]?["type"]?.stringValue == "chatItemNotFound", "\(unknown)")

                    let reply = await ben.execute(#"/_send #\#(bg) json [{"msgContent": {"type": "text", "text": "answer"}, "quotedItemId": \#(gotId), "mentions": {}}]"#)
                    expectShape(reply, "newChatItems")
                    let mine = try #require(reply["chatItems"]?.arrayFirst?["chatItem"]?["quotedItem"], "\(reply)")
                    #expect(mine["content"]?["text"]?.stringValue == "question")
                    #expect(mine["chatDir"]?["type"]?.stringValue == "groupRcv")
                    #expect(mine["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue == "anna")
                    #expect(mine["itemId"]?.intValue == gotId)

                    let event = try await received(annaIn, "answer", from: "ben")
                    let theirs = try #require(event["chatItems"]?.arrayFirst?["chatItem"]?["quotedItem"], "\(event)")
                    #expect(theirs["content"]?["text"]?.stringValue == "question")
                    #expect(theirs["chatDir"]?["type"]?.stringValue == "groupSnd")
                    #expect(theirs["itemId"]?.intValue == askedId)
                    #expect(!annaIn.contains("newChatItems"), "the unknown quote sent nothing")

                    let chat = await anna.execute("/_get chat #\(g) count=10")
                    guard case let .array(items)? = chat["chat"]?["chatItems"] else { throw TestFailure("no items: \(chat)") }
                    #expect(items.map { $0["quotedItem"]?["itemId"]?.intValue } == [nil, askedId])

                    // Deleting the contact leaves its name with the member who shares it: still taken.
                    #expect(await anna.execute("/_delete @\(benInAnna) full")["type"]?.stringValue == "contactDeleted")
                    let member = await anna.execute("/_members #\(g)")["group"]?["members"]?.arrayFirst
                    #expect(member?["localDisplayName"]?.stringValue == "ben", "\(String(describing: member))")
                    let named = await anna.execute(#"/_group 1 {"displayName": "ben"}"#)
                    #expect(named["groupInfo"]?["localDisplayName"]?.stringValue == "ben_1", "\(named)")
                }
            }
        }
    }

    /// A newcomer's first message, sent before it is connected to the other member, reaches that
    /// member through the host (`x.grp.msg.forward`) — once, even when the pair connects meanwhile.
    @Test func theHostForwardsANewcomersMessagesUntilThePairIsConnected() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        await startUser(anna, "anna")
                        await startUser(ben, "ben")
                        await startUser(cara, "cara")
                        let (benInAnna, _) = try await connect(anna, annaIn, "anna", ben, benIn, "ben")
                        let (caraInAnna, _) = try await connect(anna, annaIn, "anna", cara, caraIn, "cara")
                        let g = try await createGroup(anna, "club")
                        let bg = try await addAndJoin(anna, group: g, contact: benInAnna, ben, benIn)
                        _ = try await annaIn.next("joinedGroupMember")
                        _ = await anna.execute("/_add #\(g) \(caraInAnna) member")
                        let cg = try #require(try await caraIn.next("receivedGroupInvitation")["groupInfo"]?["groupId"]?.intValue)
                        _ = await cara.execute("/_join #\(cg)")
                        _ = try await caraIn.next("userJoinedGroup")
                        // Cara is connected to anna only: her messages go to anna, who passes them on.
                        #expect(!caraIn.contains("connectedToGroupMember"))
                        for i in 1...3 { _ = await send(cara, group: cg, "early \(i)") }
                        for i in 1...3 {
                            try await received(annaIn, "early \(i)", from: "cara")
                            try await received(benIn, "early \(i)", from: "cara")
                        }
                        _ = try await benIn.next("connectedToGroupMember")
                        _ = try await caraIn.next("connectedToGroupMember")
                        _ = await send(cara, group: cg, "direct")
                        try await received(benIn, "direct", from: "cara")
                        try await received(annaIn, "direct", from: "cara")
                        for i in 1...3 { #expect(await count(ben, group: bg, "early \(i)") == 1) }
                        #expect(await count(ben, group: bg, "direct") == 1)
                        #expect(!benIn.contains("newChatItems"))
                    }
                }
            }
        }
    }
}

extension GroupTests {
    /// A member's message still in flight when the user was removed reaches the user's engine after
    /// the removal: it is dropped quietly (acknowledged, marked handled, no API event), as in
    /// SimpleX, while a malformed message on the same connection is still reported. Ben's relay is
    /// reached through a proxy that is frozen, so his member connections, whose deletion waits on
    /// the relay, stay in place while the late message comes in (as the agent would deliver it).
    @Test func aMessageInFlightToARemovedMemberIsDroppedWithoutAnError() async throws {
        try await withLiveRelay { dir, relay in
            let proxy = try FreezableProxy(to: relay.address.port)
            defer { proxy.close() }
            var bensRelay = relay.address
            bensRelay.port = proxy.port
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [bensRelay]) { ben, benIn in
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        await startUser(anna, "anna")
                        await startUser(ben, "ben")
                        await startUser(cara, "cara")
                        let (benInAnna, _) = try await connect(anna, annaIn, "anna", ben, benIn, "ben")
                        let (caraInAnna, _) = try await connect(anna, annaIn, "anna", cara, caraIn, "cara")
                        let g = try await createGroup(anna, "club")
                        let bg = try await addAndJoin(anna, group: g, contact: benInAnna, ben, benIn)
                        _ = try await annaIn.next("joinedGroupMember")
                        _ = await anna.execute("/_add #\(g) \(caraInAnna) member")
                        let cg = try #require(try await caraIn.next("receivedGroupInvitation")["groupInfo"]?["groupId"]?.intValue)
                        _ = await cara.execute("/_join #\(cg)")
                        _ = try await benIn.next("connectedToGroupMember")
                        _ = try await caraIn.next("connectedToGroupMember")

                        let core = ben.controller
                        let (benId, annaConn, caraConn) = try await core.dbRead { db -> (String, Int64, Int64) in
                            let me = try String.fetchOne(db, sql: "SELECT member_id FROM group_member WHERE group_id = ? AND category = 'user'", arguments: [bg])
                            let host = try Int64.fetchOne(db, sql: "SELECT agent_conn_id FROM group_member WHERE group_id = ? AND category = 'host'", arguments: [bg])
                            let other = try Int64.fetchOne(db, sql: """
                                SELECT agent_conn_id FROM group_member WHERE group_id = ? AND category NOT IN ('user', 'host') AND agent_conn_id IS NOT NULL
                                """, arguments: [bg])
                            return (me ?? "", host ?? 0, other ?? 0)
                        }
                        #expect(!benId.isEmpty && annaConn > 0 && caraConn > 0)

                        // Ben's relay goes silent; anna's removal of ben comes in, then cara's message sent before she knew.
                        proxy.freeze()
                        let removal = #"{"v":"1","msgId":"cmVtb3ZlZDE","event":"x.grp.mem.del","params":{"memberId":"\#(benId)"}}"#
                        try await core.handle(.message(connection: annaConn, seq: 1_000_000, body: Array(removal.utf8), integrity: .ok))
                        expectShape(try await benIn.next("deletedMemberUser"), "deletedMemberUser")
                        let late = #"{"v":"1","msgId":"bGF0ZTE","event":"x.msg.new","params":{"content":{"type":"text","text":"late"}}}"#
                        try await core.handle(.message(connection: caraConn, seq: 1_000_000, body: Array(late.utf8), integrity: .ok))
                        // Garbage on the same connection is still reported: the first chatError is this one.
                        try await core.handle(.message(connection: caraConn, seq: 1_000_001, body: Array("not a message".utf8), integrity: .ok))
                        let reported = try await benIn.next("chatError")
                        #expect(reported["chatError"]?["errorType"]?["message"]?.stringValue?.contains("malformed") == true, "\(reported)")
                        #expect(!benIn.contains("chatError"))
                        // The late message went through the group's path: handled (acknowledged), not applied.
                        let handled = try await core.dbRead { db in
                            try Int64.fetchOne(db, sql: "SELECT count(*) FROM group_input WHERE agent_conn_id = ? AND seq = 1000000", arguments: [caraConn]) ?? 0
                        }
                        #expect(handled == 1)
                        #expect(await count(ben, group: bg, "late") == 0)
                        #expect(!benIn.contains("newChatItems"))
                        proxy.thaw()
                    }
                }
            }
        }
    }
}
