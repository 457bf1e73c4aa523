import ChatModel
import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// Group items beyond plain sends (edits, deletions, moderation, reactions, history for a late
/// joiner, blocked members' items, `messages=on` removal): three engines on a live relay, driven
/// by the bot API's command strings, waiting for the events they expect.
extension GroupTests {
    func itemId(_ json: JSONValue) -> Int? { json["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue }

    func itemText(_ json: JSONValue?) -> String? { json?["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue }

    /// The shape problems of an item-carrying message (its chat item's chatInfo GroupInfo too).
    func expectItemShape(_ json: JSONValue, _ type: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(json["type"]?.stringValue == type, "\(json)", sourceLocation: sourceLocation)
        let problems = BotAPIDoc.problems(json, Self.doc.messages[type], type)
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))", sourceLocation: sourceLocation)
    }

    /// The content type of item `id` in a group's chat as `api` reads it back.
    func contentType(_ api: ChatAPI, group: Int, item id: Int) async -> String? {
        let chat = await api.execute("/_get chat #\(group) count=200")
        guard case let .array(items)? = chat["chat"]?["chatItems"] else { return nil }
        return items.first { $0["meta"]?["itemId"]?.intValue == id }?["content"]?["type"]?.stringValue
    }

    /// Edits and deletions by the author reach every member; only the author may edit; a
    /// moderator deletes a member's message for everyone; a plain member's moderation is refused
    /// (its command, and a forged `x.msg.del` with a `memberId`, never applied); reactions come and
    /// go with the emoji set and caps of direct chats.
    @Test func editsDeletionsModerationAndReactionsReachEveryMember() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        for (api, name) in [(anna, "anna"), (ben, "ben"), (cara, "cara")] { await startUser(api, name) }
                        let (g, bg, cg) = try await clubOfThree(anna, annaIn, ben, benIn, cara, caraIn)
                        // Ben becomes a moderator.
                        let benInAnna = try await memberId(anna, group: g, "ben")
                        #expect(await anna.execute("/_member role #\(g) \(benInAnna) moderator")["type"]?.stringValue == "membersRoleUser")
                        _ = try await benIn.next("memberRole")
                        _ = try await caraIn.next("memberRole")

                        // Cara writes and edits.
                        let sent = await send(cara, group: cg, "hello")
                        let caraItem = try #require(itemId(sent))
                        let benItem = try #require(itemId(try await received(benIn, "hello", from: "cara")))
                        let annaItem = try #require(itemId(try await received(annaIn, "hello", from: "cara")))
                        let edit = #"json {"msgContent": {"type": "text", "text": "hello!"}, "mentions": {}}"#
                        let updated = await cara.execute("/_update item #\(cg) \(caraItem) \(edit)")
                        expectItemShape(updated, "chatItemUpdated")
                        #expect(itemText(updated["chatItem"]) == "hello!" && updated["chatItem"]?["chatItem"]?["meta"]?["itemEdited"]?.boolValue == true, "\(updated)")
                        #expect(await cara.execute("/_update item #\(cg) \(caraItem) \(edit)")["type"]?.stringValue == "chatItemNotChanged")
                        for inbox in [annaIn, benIn] {
                            let event = try await inbox.next("chatItemUpdated")
                            expectItemShape(event, "chatItemUpdated")
                            #expect(itemText(event["chatItem"]) == "hello!", "\(event)")
                            #expect(event["chatItem"]?["chatItem"]?["meta"]?["itemEdited"]?.boolValue == true)
                            #expect(event["chatItem"]?["chatItem"]?["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue == "cara")
                        }
                        #expect(await count(ben, group: bg, "hello!") == 1)
                        #expect(await count(ben, group: bg, "hello") == 0)
                        // Only the author edits: ben's copy is a received item.
                        let notMine = await ben.execute("/_update item #\(bg) \(benItem) \(edit)")
                        #expect(notMine["chatError"]?["errorType"]?["type"]?.stringValue == "invalidChatItemUpdate", "\(notMine)")
                        #expect(await ben.execute("/_update item #\(bg) 99999 \(edit)")["chatError"]?["storeError"]?["type"]?.stringValue == "chatItemNotFound")
                        // A forged x.msg.update from ben naming cara's message (reaching anna's engine): cara's item
                        // stays; the update is ben's own (an unknown message of his, made edited, as SimpleX does).
                        let caraMsgId = try #require(sent["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemSharedMsgId"]?.stringValue)
                        let benConnInAnna = try await anna.controller.dbRead { db in
                            try Int64.fetchOne(db, sql: "SELECT agent_conn_id FROM group_member WHERE group_id = ? AND local_display_name = 'ben'", arguments: [g]) ?? 0
                        }
                        let forgedEdit = #"{"v":"1","msgId":"Zm9yZ2VkMg","event":"x.msg.update","params":{"msgId":"\#(caraMsgId)","content":{"type":"text","text":"forged"}}}"#
                        try await anna.controller.handle(.message(connection: benConnInAnna, seq: 2_000_001, body: Array(forgedEdit.utf8), integrity: .ok))
                        let madeByBen = try await annaIn.next("chatItemUpdated")
                        #expect(madeByBen["chatItem"]?["chatItem"]?["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue == "ben", "\(madeByBen)")
                        #expect(madeByBen["chatItem"]?["chatItem"]?["meta"]?["itemId"]?.intValue != annaItem)
                        #expect(await count(anna, group: g, "hello!") == 1)

                        // Reactions: ben adds one, cara and anna see it; a reaction outside the set is refused.
                        let react = await ben.execute(#"/_reaction #\#(bg) \#(benItem) on {"type": "emoji", "emoji": "👍"}"#)
                        expectItemShape(react, "chatItemReaction")
                        #expect(react["added"]?.boolValue == true)
                        #expect(react["reaction"]?["chatReaction"]?["chatItem"]?["reactions"]?.arrayFirst?["userReacted"]?.boolValue == true, "\(react)")
                        for inbox in [annaIn, caraIn] {
                            let event = try await inbox.next("chatItemReaction")
                            expectItemShape(event, "chatItemReaction")
                            #expect(event["added"]?.boolValue == true)
                            #expect(event["reaction"]?["chatReaction"]?["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue == "ben")
                            let counts = event["reaction"]?["chatReaction"]?["chatItem"]?["reactions"]?.arrayFirst
                            #expect(counts?["reaction"]?["emoji"]?.stringValue == "👍" && counts?["totalReacted"]?.intValue == 1, "\(event)")
                        }
                        let odd = await ben.execute(#"/_reaction #\#(bg) \#(benItem) on {"type": "emoji", "emoji": "🦄"}"#)
                        #expect(odd["chatError"]?["errorType"]?["type"]?.stringValue == "commandError", "\(odd)")
                        for emoji in ["😀", "😂"] { _ = await ben.execute(#"/_reaction #\#(bg) \#(benItem) on {"type": "emoji", "emoji": "\#(emoji)"}"#) }
                        let capped = await ben.execute(#"/_reaction #\#(bg) \#(benItem) on {"type": "emoji", "emoji": "🚀"}"#)
                        #expect(capped["chatError"]?["errorType"]?["type"]?.stringValue == "commandError", "a fourth reaction of one member: \(capped)")
                        let off = await ben.execute(#"/_reaction #\#(bg) \#(benItem) off {"type": "emoji", "emoji": "👍"}"#)
                        #expect(off["added"]?.boolValue == false)
                        for inbox in [annaIn, caraIn] {
                            _ = try await inbox.next("chatItemReaction", where: { $0["reaction"]?["chatReaction"]?["reaction"]?["emoji"]?.stringValue == "😂" })
                            _ = try await inbox.next("chatItemReaction", where: { $0["added"]?.boolValue == false })
                        }

                        // A plain member may not moderate: refused with the role it needs, nothing sent.
                        let annaSent = await send(anna, group: g, "from the owner")
                        let annasOwn = try #require(itemId(annaSent))
                        let annaInCara = try #require(itemId(try await received(caraIn, "from the owner", from: "anna")))
                        let annaInBen = try #require(itemId(try await received(benIn, "from the owner", from: "anna")))
                        // Delivery statuses (a group of three: receipts are on): received by both members is sndRcvd, complete.
                        #expect(annaSent["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemStatus"]?["type"]?.stringValue == "sndNew")
                        // Each change is reported once, and only forward (sent to some, to all, received
                        // by some, by all): never "complete" before every member's copy is there.
                        let order = ["sndSent partial", "sndSent complete", "sndRcvd partial", "sndRcvd complete"]
                        var seen: [String] = []
                        var delivered: JSONValue = .null
                        while seen.last != "sndRcvd complete" {
                            delivered = try await annaIn.next("chatItemsStatusesUpdated", where: { e in
                                e["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue == annasOwn
                            })
                            let status = delivered["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemStatus"]
                            seen.append("\(status?["type"]?.stringValue ?? "?") \(status?["sndProgress"]?.stringValue ?? "?")")
                        }
                        let ranks = seen.map { order.firstIndex(of: $0) ?? -1 }
                        #expect(!ranks.contains(-1) && ranks == ranks.sorted() && Set(ranks).count == ranks.count, "\(seen)")
                        expectItemShape(delivered, "chatItemsStatusesUpdated")
                        let annasChat = await anna.execute("/_get chat #\(g) count=200")
                        let stored = annasChat["chat"]?["chatItems"]?.arrayValue?.first { $0["meta"]?["itemId"]?.intValue == annasOwn }
                        #expect(stored?["meta"]?["itemStatus"]?["type"]?.stringValue == "sndRcvd", "\(String(describing: stored))")
                        let refused = await cara.execute("/_delete member item #\(cg) \(annaInCara)")
                        #expect(refused["chatError"]?["errorType"]?["type"]?.stringValue == "groupUserRole", "\(refused)")
                        // A moderator may not delete the owner's message either.
                        let above = await ben.execute("/_delete member item #\(bg) \(annaInBen)")
                        #expect(above["chatError"]?["errorType"]?["type"]?.stringValue == "groupUserRole", "\(above)")
                        _ = await send(cara, group: cg, "after the refusal")
                        try await received(annaIn, "after the refusal", from: "cara")
                        try await received(benIn, "after the refusal", from: "cara")
                        #expect(!annaIn.contains("chatItemsDeleted") && !benIn.contains("chatItemsDeleted"), "nothing came before cara's next message")
                        #expect(await contentType(anna, group: g, item: annasOwn) == "sndMsgContent")

                        // A forged moderation (cara's x.msg.del naming ben as the author of anna's… own
                        // message to ben) reaching anna's engine: refused by the machine, reported, not applied.
                        let benSent = await send(ben, group: bg, "ben's words")
                        let benOwn = try #require(itemId(benSent))
                        let benInAnnaItem = try #require(itemId(try await received(annaIn, "ben's words", from: "ben")))
                        _ = try await received(caraIn, "ben's words", from: "ben")
                        let benMemberId = try #require(await anna.execute("/_members #\(g)")["group"]?["members"]?.arrayValue?
                            .first { $0["memberProfile"]?["displayName"]?.stringValue == "ben" }?["memberId"]?.stringValue)
                        let benMsgId = try #require(benSent["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemSharedMsgId"]?.stringValue)
                        let caraConn = try await anna.controller.dbRead { db in
                            try Int64.fetchOne(db, sql: "SELECT agent_conn_id FROM group_member WHERE group_id = ? AND local_display_name = 'cara'", arguments: [g]) ?? 0
                        }
                        let forged = #"{"v":"1","msgId":"Zm9yZ2VkMQ","event":"x.msg.del","params":{"msgId":"\#(benMsgId)","memberId":"\#(benMemberId)"}}"#
                        try await anna.controller.handle(.message(connection: caraConn, seq: 2_000_000, body: Array(forged.utf8), integrity: .ok))
                        let report = try await annaIn.next("chatError")
                        #expect(report["chatError"]?["errorType"]?["type"]?.stringValue == "groupInternal", "\(report)")
                        #expect(!annaIn.contains("chatItemsDeleted"))
                        #expect(await contentType(anna, group: g, item: benInAnnaItem) == "rcvMsgContent")

                        // The moderator deletes cara's message for everyone.
                        let moderated = await ben.execute("/_delete member item #\(bg) \(benItem)")
                        expectItemShape(moderated, "chatItemsDeleted")
                        let mine = moderated["chatItemDeletions"]?.arrayFirst
                        #expect(mine?["toChatItem"]?["chatItem"]?["content"]?["type"]?.stringValue == "rcvModerated", "\(moderated)")
                        let atAnna = try await annaIn.next("chatItemsDeleted")
                        expectItemShape(atAnna, "chatItemsDeleted")
                        #expect(atAnna["byUser"]?.boolValue == false)
                        #expect(atAnna["chatItemDeletions"]?.arrayFirst?["toChatItem"]?["chatItem"]?["content"]?["type"]?.stringValue == "rcvModerated")
                        #expect(atAnna["chatItemDeletions"]?.arrayFirst?["deletedChatItem"]?["chatItem"]?["meta"]?["itemId"]?.intValue == annaItem)
                        let annasDeleted = atAnna["chatItemDeletions"]?.arrayFirst?["toChatItem"]?["chatItem"]?["meta"]?["itemDeleted"]
                        #expect(annasDeleted?["type"]?.stringValue == "moderated", "\(atAnna)")
                        #expect(annasDeleted?["byGroupMember"]?["memberProfile"]?["displayName"]?.stringValue == "ben")
                        #expect(mine?["toChatItem"]?["chatItem"]?["meta"]?["itemDeleted"]?["byGroupMember"]?["memberProfile"]?["displayName"]?.stringValue == "ben",
                                "moderated by the user: the membership")
                        let atCara = try await caraIn.next("chatItemsDeleted")
                        #expect(atCara["chatItemDeletions"]?.arrayFirst?["toChatItem"]?["chatItem"]?["content"]?["type"]?.stringValue == "sndModerated", "\(atCara)")
                        #expect(await contentType(cara, group: cg, item: caraItem) == "sndModerated")
                        #expect(await contentType(anna, group: g, item: annaItem) == "rcvModerated")
                        // A moderation that overtakes the message it names is kept, and applied when the message comes.
                        let caraMemberId = try #require(await anna.execute("/_members #\(g)")["group"]?["members"]?.arrayValue?
                            .first { $0["memberProfile"]?["displayName"]?.stringValue == "cara" }?["memberId"]?.stringValue)
                        let early = #"{"v":"1","msgId":"cGVuZDE","event":"x.msg.del","params":{"msgId":"bGF0ZXI","memberId":"\#(caraMemberId)"}}"#
                        try await anna.controller.handle(.message(connection: benConnInAnna, seq: 2_000_002, body: Array(early.utf8), integrity: .ok))
                        let overtaken = #"{"v":"1","msgId":"bGF0ZXI","event":"x.msg.new","params":{"content":{"type":"text","text":"overtaken"}}}"#
                        try await anna.controller.handle(.message(connection: caraConn, seq: 2_000_003, body: Array(overtaken.utf8), integrity: .ok))
                        let late = try await annaIn.next("newChatItems", where: {
                            $0["chatItems"]?.arrayFirst?["chatItem"]?["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue == "cara"
                        })
                        #expect(late["chatItems"]?.arrayFirst?["chatItem"]?["content"]?["type"]?.stringValue == "rcvModerated", "\(late)")
                        #expect(!annaIn.contains("chatError"))

                        // The author deletes its own message for everyone.
                        let gone = await ben.execute("/_delete item #\(bg) \(benOwn) broadcast")
                        expectItemShape(gone, "chatItemsDeleted")
                        #expect(gone["chatItemDeletions"]?.arrayFirst?["toChatItem"]?["chatItem"]?["content"]?["type"]?.stringValue == "sndDeleted")
                        for inbox in [annaIn, caraIn] {
                            let event = try await inbox.next("chatItemsDeleted")
                            #expect(event["chatItemDeletions"]?.arrayFirst?["toChatItem"]?["chatItem"]?["content"]?["type"]?.stringValue == "rcvDeleted", "\(event)")
                        }
                        // Deleting someone else's message "for everyone" is not the author's delete.
                        let wrong = await anna.execute("/_delete item #\(g) \(benInAnnaItem) broadcast")
                        #expect(wrong["chatError"]?["errorType"]?["type"]?.stringValue == "invalidChatItemDelete", "\(wrong)")
                        // Locally, any item goes.
                        let local = await anna.execute("/_delete item #\(g) \(benInAnnaItem) internal")
                        #expect(local["type"]?.stringValue == "chatItemsDeleted" && local["chatItemDeletions"]?.arrayFirst?["toChatItem"] == nil, "\(local)")
                        #expect(await contentType(anna, group: g, item: benInAnnaItem) == nil)

                        // x.grp.prefs: only the owner's is applied (groupUpdated); with reactions off, reacting is refused.
                        let (hostConn, benConn) = try await cara.controller.dbRead { db -> (Int64, Int64) in
                            let host = try Int64.fetchOne(db, sql: "SELECT agent_conn_id FROM group_member WHERE group_id = ? AND category = 'host'", arguments: [cg])
                            let other = try Int64.fetchOne(db, sql: "SELECT agent_conn_id FROM group_member WHERE group_id = ? AND local_display_name = 'ben'", arguments: [cg])
                            return (host ?? 0, other ?? 0)
                        }
                        let prefsOff = #"{"v":"1","msgId":"cHJlZnMx","event":"x.grp.prefs","params":{"groupPreferences":{"reactions":{"enable":"off"}}}}"#
                        try await cara.controller.handle(.message(connection: benConn, seq: 3_000_000, body: Array(prefsOff.utf8), integrity: .ok))
                        let notOwner = try await caraIn.next("chatError")
                        #expect(notOwner["chatError"]?["errorType"]?["message"]?.stringValue?.contains("owner") == true, "\(notOwner)")
                        #expect(!caraIn.contains("groupUpdated"))
                        try await cara.controller.handle(.message(connection: hostConn, seq: 3_000_000, body: Array(prefsOff.utf8), integrity: .ok))
                        let prefs = try await caraIn.next("groupUpdated")
                        expectShape(prefs, "groupUpdated")
                        #expect(prefs["toGroup"]?["fullGroupPreferences"]?["reactions"]?["enable"]?.stringValue == "off", "\(prefs)")
                        #expect(prefs["member_"]?["memberProfile"]?["displayName"]?.stringValue == "anna")
                        let off2 = await cara.execute(#"/_reaction #\#(cg) \#(annaInCara) on {"type": "emoji", "emoji": "👍"}"#)
                        #expect(off2["chatError"]?["errorType"]?["type"]?.stringValue == "commandError", "\(off2)")

                        // A reply quoting ben; then every item of every engine shows the same
                        // through the view of only the members it names as through the whole group's.
                        let benSays = await send(ben, group: bg, "quote me")
                        let benSaysInCara = try #require(itemId(try await received(caraIn, "quote me", from: "ben")))
                        _ = benSays
                        let reply = await cara.execute(#"/_send #\#(cg) json [{"msgContent": {"type": "text", "text": "quoted"}, "quotedItemId": \#(benSaysInCara)}]"#)
                        #expect(reply["type"]?.stringValue == "newChatItems", "\(reply)")
                        let replyInBen = try await received(benIn, "quoted", from: "cara")["chatItems"]?.arrayFirst?["chatItem"]
                        #expect(replyInBen?["quotedItem"]?["chatDir"]?["type"]?.stringValue == "groupSnd", "\(replyInBen ?? .null)")
                        _ = try await received(annaIn, "quoted", from: "cara")
                        for (api, group) in [(anna, g), (ben, bg), (cara, cg)] { try await expectNarrowViewsAgree(api, group: group) }
                    }
                }
            }
        }
    }

    /// Each item, and the group's info, rendered through ``ChatController/readGroupView(_:_:rows:)``
    /// (the members the item names) equal those rendered through the whole group's view.
    func expectNarrowViewsAgree(_ api: ChatAPI, group: Int, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let core = api.controller
        let (records, full) = try await core.dbRead { db -> ([GroupItemRecord], GroupView?) in
            (try GroupItemRecord.fetchAll(db, sql: "SELECT * FROM group_item WHERE group_id = ? ORDER BY id", arguments: [group]), try ChatController.readGroupView(db, Int64(group)))
        }
        let whole = try #require(full, sourceLocation: sourceLocation)
        #expect(records.count >= 3, sourceLocation: sourceLocation)
        var narrowed = 0
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for record in records {
            let narrow = try await core.dbRead { db in try ChatController.readGroupView(db, Int64(group), rows: ChatController.memberRows(shownBy: [record])) }
            let view = try #require(narrow, sourceLocation: sourceLocation)
            #expect(Set(view.members.map(\.id)).isSubset(of: Set(whole.members.map(\.id))), sourceLocation: sourceLocation)
            if view.members.count < whole.members.count { narrowed += 1 }
            let a = String(decoding: try encoder.encode(await core.groupItemModel(record, view: whole)), as: UTF8.self)
            let b = String(decoding: try encoder.encode(await core.groupItemModel(record, view: view)), as: UTF8.self)
            #expect(a == b, "item \(record.id ?? 0)", sourceLocation: sourceLocation)
            let infoA = String(decoding: try encoder.encode(whole.info), as: UTF8.self)
            let infoB = String(decoding: try encoder.encode(view.info), as: UTF8.self)
            #expect(infoA == infoB, sourceLocation: sourceLocation)
        }
        #expect(narrowed > 0, "the user's own items need fewer members than the group has", sourceLocation: sourceLocation)
    }

    /// A member who joins late gets the group's recent messages from its host (history, as
    /// forwards: each once, with its author), but not a blocked member's; a blocked member's
    /// later messages show as `rcvBlocked`; a removal with `messages=on` marks the removed
    /// member's messages moderated.
    @Test func aLateJoinerGetsTheHistoryBlockedItemsAndRemovalWithMessages() async throws {
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
                        _ = await send(anna, group: g, "first from anna")
                        try await received(benIn, "first from anna", from: "anna")
                        _ = await send(ben, group: bg, "then ben")
                        try await received(annaIn, "then ben", from: "ben")
                        // A deleted message is not history.
                        let oopsSent = await send(anna, group: g, "deleted before cara")
                        let oops = try #require(itemId(oopsSent))
                        _ = await anna.execute("/_delete item #\(g) \(oops) broadcast")

                        let cg = try await addAndJoin(anna, group: g, contact: caraInAnna, cara, caraIn)
                        let first = try await received(caraIn, "first from anna", from: "anna")
                        let second = try await received(caraIn, "then ben", from: "ben")
                        let (firstId, secondId) = (try #require(itemId(first)), try #require(itemId(second)))
                        #expect(firstId < secondId)
                        #expect(second["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["forwardedByMember"] != nil, "\(second)")
                        _ = try await caraIn.next("connectedToGroupMember")
                        _ = try await benIn.next("connectedToGroupMember")
                        _ = await send(cara, group: cg, "cara is here")
                        try await received(benIn, "cara is here", from: "cara")
                        #expect(await count(cara, group: cg, "first from anna") == 1)
                        #expect(await count(cara, group: cg, "then ben") == 1)
                        #expect(await count(cara, group: cg, "deleted before cara") == 0)

                        // Ben is blocked: his later messages show as rcvBlocked.
                        let benRow = try await memberId(anna, group: g, "ben")
                        #expect(await anna.execute("/_block #\(g) \(benRow) blocked=on")["type"]?.stringValue == "membersBlockedForAllUser")
                        _ = try await caraIn.next("memberBlockedForAll")
                        _ = await send(ben, group: bg, "muted words")
                        for inbox in [annaIn, caraIn] {
                            let event = try await inbox.next("newChatItems", where: {
                                $0["chatItems"]?.arrayFirst?["chatItem"]?["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue == "ben"
                            })
                            expectItemShape(event, "newChatItems")
                            #expect(event["chatItems"]?.arrayFirst?["chatItem"]?["content"]?["type"]?.stringValue == "rcvBlocked", "\(event)")
                            #expect(event["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemDeleted"]?["type"]?.stringValue == "blockedByAdmin")
                        }

                        // Removed with messages=on: ben's messages are moderated at anna and cara.
                        let removed = await anna.execute("/_remove #\(g) \(benRow) messages=on")
                        #expect(removed["type"]?.stringValue == "userDeletedMembers" && removed["withMessages"]?.boolValue == true, "\(removed)")
                        let deleted = try await caraIn.next("deletedMember")
                        #expect(deleted["withMessages"]?.boolValue == true)
                        for (api, group) in [(anna, g), (cara, cg)] {
                            let chat = await api.execute("/_get chat #\(group) count=200")
                            let bens = (chat["chat"]?["chatItems"]?.arrayValue ?? []).filter {
                                $0["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue == "ben"
                            }
                            #expect(!bens.isEmpty)
                            #expect(bens.allSatisfy { $0["content"]?["type"]?.stringValue == "rcvModerated" }, "\(bens)")
                        }
                        #expect(await count(anna, group: g, "first from anna") == 1)
                    }
                }
            }
        }
    }

    /// A late joiner's history keeps the messages' original times (SimpleX: a forward's `msgTs` is
    /// the item's `itemTs`): earlier than its joining, while `createdAt` is when it received them;
    /// a message it then receives directly has its receive time as both.
    @Test func aLateJoinersHistoryKeepsItsOriginalTimes() async throws {
        func times(_ item: JSONValue?) throws -> (itemTs: ChatTimestamp, createdAt: ChatTimestamp) {
            let meta = item?["meta"]
            return (try #require(meta?["itemTs"]?.stringValue.flatMap(ChatTimestamp.init(parsing:)), "\(String(describing: item))"),
                    try #require(meta?["createdAt"]?.stringValue.flatMap(ChatTimestamp.init(parsing:)), "\(String(describing: item))"))
        }
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
                        let annaSent = try times(await send(anna, group: g, "old from anna")["chatItems"]?.arrayFirst?["chatItem"])
                        let benSent = try times(await send(ben, group: bg, "old from ben")["chatItems"]?.arrayFirst?["chatItem"])
                        let atAnna = try times(try await received(annaIn, "old from ben", from: "ben")["chatItems"]?.arrayFirst?["chatItem"])
                        #expect(atAnna.itemTs == atAnna.createdAt, "a message received directly has its receive time")
                        #expect(benSent.itemTs <= atAnna.createdAt)

                        let cg = try await addAndJoin(anna, group: g, contact: caraInAnna, cara, caraIn)
                        let joined = try #require(await cara.execute("/_groups 1")["groups"]?.arrayValue?
                            .compactMap { $0["groupInfo"] ?? $0 }.first { $0["groupId"]?.intValue == cg }?["membership"]?["createdAt"]?.stringValue
                            .flatMap(ChatTimestamp.init(parsing:)))
                        let fromAnna = try times(try await received(caraIn, "old from anna", from: "anna")["chatItems"]?.arrayFirst?["chatItem"])
                        let fromBen = try times(try await received(caraIn, "old from ben", from: "ben")["chatItems"]?.arrayFirst?["chatItem"])
                        // The host's own message: its time at the host; ben's: when the host received it
                        // (the forward's msgTs, to the millisecond as the host stored it).
                        #expect(fromAnna.itemTs == annaSent.itemTs)
                        #expect(fromBen.itemTs == atAnna.createdAt)
                        for history in [fromAnna, fromBen] {
                            #expect(history.itemTs < joined, "history is from before cara joined")
                            #expect(history.createdAt >= joined, "createdAt is when cara received it")
                        }
                        // The chat as read back says the same.
                        let chat = await cara.execute("/_get chat #\(cg) count=50")
                        let stored = (chat["chat"]?["chatItems"]?.arrayValue ?? []).first { $0["content"]?["msgContent"]?["text"]?.stringValue == "old from ben" }
                        #expect(try times(stored).itemTs == fromBen.itemTs, "\(chat)")

                        _ = try await caraIn.next("connectedToGroupMember")
                        _ = try await benIn.next("connectedToGroupMember")
                        _ = await send(ben, group: bg, "new from ben")
                        let fresh = try times(try await received(caraIn, "new from ben", from: "ben")["chatItems"]?.arrayFirst?["chatItem"])
                        #expect(fresh.itemTs == fresh.createdAt)
                        #expect(fresh.itemTs > joined)
                    }
                }
            }
        }
    }

    /// A forward's `msgTs` is the item's time only when it is before the receive time: a forged
    /// far-future one (or one in another form) leaves the receive time.
    @Test func aForwardsTimeIsClampedToTheReceiveTime() {
        let now = "2026-11-24T01:00:00.500Z"
        #expect(ChatController.itemTime(msgTs: "2026-11-23T23:59:59Z", now: now) == "2026-11-23T23:59:59.000Z")
        #expect(ChatController.itemTime(msgTs: "2026-11-24T01:00:00.250Z", now: now) == "2026-11-24T01:00:00.250Z")
        #expect(ChatController.itemTime(msgTs: "2999-01-01T00:00:00Z", now: now) == nil)
        #expect(ChatController.itemTime(msgTs: now, now: now) == nil)
        #expect(ChatController.itemTime(msgTs: "2026-11-23T10:00:00+01:00", now: now) == nil)
        #expect(ChatController.itemTime(msgTs: nil, now: now) == nil)
    }
}
