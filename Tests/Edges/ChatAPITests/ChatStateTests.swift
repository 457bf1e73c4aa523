import ChatCore
import ChatTestSupport
import Foundation
import NIOPosix
import RelayProtocol
import RelayServer
import SwiftplexBase
import Testing
@testable import ChatAPI

func storeErrorType(_ r: JSONValue) -> String? { r["chatError"]?["storeError"]?["type"]?.stringValue }
func agentErrorType(_ r: JSONValue) -> String? { r["chatError"]?["agentError"]?["type"]?.stringValue }
func itemId(_ item: JSONValue?) -> Int? { item?["chatItem"]?["meta"]?["itemId"]?.intValue }
func sendText(_ contact: Int, _ text: String, quoting: Int? = nil) -> String {
    let quote = quoting.map { #", "quotedItemId": \#($0)"# } ?? ""
    return #"/_send @\#(contact) json [{"msgContent": {"type": "text", "text": "\#(text)"}, "mentions": {}\#(quote)}]"#
}

/// Quotes, chat state, users, incognito, receipts and short links, through command strings on
/// real relays and real SQLite files.
@Suite(.timeLimit(.minutes(3))) struct ChatStateTests: LiveRelaySuite {
    /// `a` invites, `b` joins; returns (b's id at a, a's id at b).
    func connect(_ a: ChatAPI, _ aInbox: ChatInbox, _ b: ChatAPI, _ bInbox: ChatInbox, userA: Int = 1, userB: Int = 1) async throws -> (Int, Int) {
        let link = try #require(await a.execute("/_connect \(userA)")["connLinkInvitation"]?["connFullLink"]?.stringValue)
        #expect(await b.execute("/_connect \(userB) \(link)")["type"]?.stringValue == "sentConfirmation")
        let bAtA = try #require(try await aInbox.next("contactConnected")["contact"]?["contactId"]?.intValue)
        let aAtB = try #require(try await bInbox.next("contactConnected")["contact"]?["contactId"]?.intValue)
        return (bAtA, aAtB)
    }

    @Test func theAddressGoesIntoTheProfileAndOut() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "bot", relays: [relay.address]) { bot, _ in
                await startUser(bot, "bot")
                let missing = await bot.execute("/_profile_address 1 on")
                #expect(missing["chatError"]?["storeError"]?["type"]?.stringValue == "userContactLinkNotFound")
                let link = try #require(await bot.execute("/_address 1")["connLinkContact"]?["connFullLink"]?.stringValue)
                let on = await bot.execute("/_profile_address 1 on")
                #expect(on["type"]?.stringValue == "userProfileUpdated")
                #expect(await bot.execute("/user")["user"]?["profile"]?["contactLink"]?.stringValue == link)
                #expect(await bot.execute("/_profile_address 1 on")["type"]?.stringValue == "userProfileNoChange")
                #expect(await bot.execute("/_profile_address 1 off")["type"]?.stringValue == "userProfileUpdated")
                #expect(await bot.execute("/user")["user"]?["profile"]?["contactLink"] == nil)
                #expect(await bot.execute("/_profile_address 1 maybe")["chatError"]?["errorType"]?["type"]?.stringValue == "commandError")
            }
        }
    }

    @Test func quotesLinkTheQuotedItemOnBothSides() async throws {
        try await withAnnaAndBen { dir, relay, a, aInbox, b, bInbox in
            let (ben, anna) = try await connect(a, aInbox, b, bInbox)
            let question = try #require(itemId(await a.execute(sendText(ben, "what is 5 squared?"))["chatItems"]?.arrayFirst))
            let received = try await bInbox.next("newChatItems")
            let theirs = try #require(itemId(received["chatItems"]?.arrayFirst))

            // A quote of an item that does not exist is refused, and nothing is sent.
            let bad = await b.execute(sendText(anna, "lost", quoting: 9999))
            #expect(storeErrorType(bad) == "chatItemNotFound")
            #expect(bad["chatError"]?["storeError"]?["itemId"]?.intValue == 9999)
            #expect(await b.execute(#"/_send @\#(anna) json [{"msgContent": {"type": "text", "text": "x"}, "quotedItemId": "one"}]"#)["type"]?.stringValue == "chatCmdError")

            let answer = await b.execute(sendText(anna, "25", quoting: theirs))
            let quoteSent = try #require(answer["chatItems"]?.arrayFirst?["chatItem"]?["quotedItem"])
            #expect(quoteSent["itemId"]?.intValue == theirs)
            #expect(quoteSent["chatDir"]?["type"]?.stringValue == "directRcv")
            #expect(quoteSent["content"]?["text"]?.stringValue == "what is 5 squared?")

            let arrived = try await aInbox.next("newChatItems")
            #expect(text(arrived["chatItems"]?.arrayFirst) == "25")
            let quoteSeen = try #require(arrived["chatItems"]?.arrayFirst?["chatItem"]?["quotedItem"])
            #expect(quoteSeen["itemId"]?.intValue == question)
            #expect(quoteSeen["chatDir"]?["type"]?.stringValue == "directSnd")
            #expect(quoteSeen["content"]?["text"]?.stringValue == "what is 5 squared?")
            #expect(quoteSeen["sharedMsgId"] != nil)
            // The quote is stored: it comes back with the chat.
            let chat = await a.execute("/_get chat @\(ben) count=1")
            #expect(chat["chat"]?["chatItems"]?.arrayFirst?["quotedItem"]?["itemId"]?.intValue == question)
        }
    }

    @Test func chatListPagesUnreadStatsAndReading() async throws {
        try await withAnnaAndBen { dir, relay, a, aInbox, b, bInbox in
            let (ben, anna) = try await connect(a, aInbox, b, bInbox)
            for i in 1...5 { _ = await a.execute(sendText(ben, "m\(i)")) }
            var ids: [Int] = []
            for i in 1...5 {
                let item = try await bInbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "m\(i)" })
                ids.append(try #require(itemId(item["chatItems"]?.arrayFirst)))
            }

            let chats = await b.execute(#"/_get chats 1 count=10 {"type": "filters", "favorite": false, "unread": false}"#)
            #expect(chats["type"]?.stringValue == "apiChats")
            let chat = try #require(chats["chats"]?.arrayFirst)
            #expect(chat["chatInfo"]?["type"]?.stringValue == "direct")
            #expect(chat["chatInfo"]?["contact"]?["contactId"]?.intValue == anna)
            #expect(chat["chatStats"]?["unreadCount"]?.intValue == 5)
            #expect(chat["chatStats"]?["minUnreadItemId"]?.intValue == ids[0])
            #expect(chat["chatItems"]?.arrayFirst?["content"]?["msgContent"]?["text"]?.stringValue == "m5")
            func texts(_ r: JSONValue) -> [String] {
                guard case let .array(items)? = r["chat"]?["chatItems"] else { return [] }
                return items.compactMap { $0["content"]?["msgContent"]?["text"]?.stringValue }
            }
            #expect(texts(await b.execute("/_get chat @\(anna) count=2")) == ["m4", "m5"])
            #expect(texts(await b.execute("/_get chat @\(anna) last=1")) == ["m5"])
            #expect(texts(await b.execute("/_get chat @\(anna) before=\(ids[3]) count=2")) == ["m2", "m3"])
            #expect(texts(await b.execute("/_get chat @\(anna) after=\(ids[1]) count=2")) == ["m3", "m4"])
            #expect(texts(await b.execute("/_get chat @\(anna) after=\(ids[4]) count=2")) == [])
            #expect(await b.execute("/_get chat @\(anna) count=1")["chat"]?["chatStats"]?["unreadCount"]?.intValue == 5)

            let unreadOnly = #"/_get chats 1 count=10 {"type": "filters", "favorite": false, "unread": true}"#
            #expect(await b.execute(unreadOnly)["chats"]?.arrayCount == 1)
            #expect(await b.execute(#"/_get chats 1 count=10 {"type": "search", "search": "ANN"}"#)["chats"]?.arrayCount == 1)
            #expect(await b.execute(#"/_get chats 1 count=10 {"type": "search", "search": "zed"}"#)["chats"]?.arrayCount == 0)

            #expect(await b.execute("/_read chat @\(anna)")["type"]?.stringValue == "cmdOk")
            #expect(await b.execute("/_get chat @\(anna) count=1")["chat"]?["chatStats"]?["unreadCount"]?.intValue == 0)
            #expect(await b.execute(unreadOnly)["chats"]?.arrayCount == 0)
            #expect(await b.execute("/_get chat @\(anna) count=5")["chat"]?["chatItems"]?.arrayFirst?["meta"]?["itemStatus"]?["type"]?.stringValue == "rcvRead")

            // Pending connections appear only with pcc=on.
            _ = await b.execute("/_connect 1")
            #expect(await b.execute("/_get chats 1 count=10")["chats"]?.arrayCount == 1)
            let withPending = await b.execute("/_get chats 1 pcc=on count=10")
            #expect(withPending["chats"]?.arrayCount == 2)
            #expect(withPending["chats"]?.arrayFirst?["chatInfo"]?["type"]?.stringValue == "contactConnection")
            #expect(await b.execute("/_get chats 1 count=1")["chats"]?.arrayCount == 1)

            // Unknown ids and bad arguments are typed errors.
            #expect(storeErrorType(await b.execute("/_get chat @999 count=1")) == "contactNotFound")
            #expect(storeErrorType(await b.execute("/_get chat @\(anna) after=99999 count=1")) == "chatItemNotFound")
            #expect(storeErrorType(await b.execute("/_read chat @999")) == "contactNotFound")
            #expect(storeErrorType(await b.execute("/_get chats 9 count=1")) == "userNotFound")
            #expect(errorType(await b.execute("/_get chats 1 count=0")) == "commandError")
            #expect(errorType(await b.execute(#"/_get chats 1 count=1 {"type": "filters"}"#)) == "commandError")
            #expect(errorType(await b.execute("/_get chat @\(anna) sideways=1")) == "commandError")
        }
    }

    /// Numbers were held only as doubles: 2^53 + 1 came back from `/_contacts` as 2^53, and `1.0`
    /// as `1`. Integers within Int64 now come back exactly and doubles stay doubles.
    @Test func customDataNumbersComeBackExactly() async throws {
        try await withAnnaAndBen { dir, relay, a, aInbox, b, bInbox in
            let (ben, _) = try await connect(a, aInbox, b, bInbox)
            let set = #"{"n": 9007199254740993, "min": -9223372036854775808, "d": 1.0, "f": 2.5e-7, "z": -0.0, "e": 1e3, "big": 12345678901234567890}"#
            #expect(await a.execute("/_set custom @\(ben) \(set)")["type"]?.stringValue == "cmdOk")
            let contacts = await a.execute("/_contacts 1")
            let data = contacts["contacts"]?.arrayFirst?["customData"]
            #expect(data?["n"] == .int(9_007_199_254_740_993))
            #expect(data?.description == #"{"n":9007199254740993,"min":-9223372036854775808,"d":1.0,"f":2.5e-07,"z":-0.0,"e":1000.0,"big":1.2345678901234567e+19}"#)
            #expect(contacts.description.contains(#""customData":{"n":9007199254740993,"#))
        }
    }

    @Test func customDataPreferencesProfilesAndDeletion() async throws {
        try await withAnnaAndBen { dir, relay, a, aInbox, b, bInbox in
            let (ben, anna) = try await connect(a, aInbox, b, bInbox)

            #expect(await a.execute(#"/_set custom @\#(ben) {"plan": "pro", "n": 2}"#)["type"]?.stringValue == "cmdOk")
            #expect(await a.execute("/_contacts 1")["contacts"]?.arrayFirst?["customData"]?["plan"]?.stringValue == "pro")
            #expect(await a.execute("/_set custom @\(ben)")["type"]?.stringValue == "cmdOk")
            #expect(await a.execute("/_contacts 1")["contacts"]?.arrayFirst?["customData"] == nil)
            #expect(storeErrorType(await a.execute(#"/_set custom @999 {"a": 1}"#)) == "contactNotFound")
            #expect(errorType(await a.execute("/_set custom @\(ben) [1]")) == "commandError")

            // Preferences for one contact: stored, and sent to it as a profile update.
            let prefs = await a.execute(#"/_set prefs @\#(ben) {"files": {"allow": "no"}}"#)
            #expect(prefs["type"]?.stringValue == "contactPrefsUpdated")
            #expect(prefs["toContact"]?["userPreferences"]?["files"]?["allow"]?.stringValue == "no")
            #expect(prefs["fromContact"]?["userPreferences"]?["files"] == nil)
            #expect(prefs["toContact"]?["mergedPreferences"]?["files"]?["userPreference"]?["type"]?.stringValue == "contact")
            #expect(prefs["toContact"]?["mergedPreferences"]?["files"]?["enabled"]?["forUser"]?.boolValue == false)
            let seen = try await bInbox.next("contactUpdated")
            #expect(seen["toContact"]?["profile"]?["preferences"]?["files"]?["allow"]?.stringValue == "no")
            #expect(seen["toContact"]?["mergedPreferences"]?["files"]?["enabled"]?["forContact"]?.boolValue == false)
            #expect(errorType(await a.execute(#"/_set prefs @\#(ben) {"files": {"allow": "maybe"}}"#)) == "commandError")
            #expect(errorType(await a.execute(#"/_set prefs @\#(ben) {"teleport": {"allow": "yes"}}"#)) == "commandError")
            #expect(storeErrorType(await a.execute(#"/_set prefs @999 {}"#)) == "contactNotFound")

            // A new profile reaches every contact as contactUpdated.
            let updated = await a.execute(#"/_profile 1 {"displayName": "anna2", "fullName": "Anna"}"#)
            #expect(updated["type"]?.stringValue == "userProfileUpdated")
            #expect(updated["updateSummary"]?["updateSuccesses"]?.intValue == 1)
            let renamed = try await bInbox.next("contactUpdated")
            #expect(renamed["fromContact"]?["profile"]?["displayName"]?.stringValue == "anna")
            #expect(renamed["toContact"]?["profile"]?["displayName"]?.stringValue == "anna2")
            #expect(errorType(await a.execute(#"/_profile 1 {"displayName": "@x", "fullName": ""}"#)) == "invalidDisplayName")

            // Deleting a contact tells the peer and removes the chat.
            _ = await a.execute(sendText(ben, "bye"))
            _ = try await bInbox.next("newChatItems")
            let deleted = await a.execute("/_delete @\(ben) full")
            #expect(deleted["type"]?.stringValue == "contactDeleted")
            #expect(deleted["contact"]?["contactId"]?.intValue == ben)
            let gone = try await bInbox.next("contactDeletedByContact")
            #expect(gone["contact"]?["contactStatus"]?.stringValue == "deleted")
            #expect(await a.execute("/_contacts 1")["contacts"]?.arrayCount == 0)
            #expect(storeErrorType(await a.execute("/_get chat @\(ben) count=1")) == "contactNotFound")
            #expect(errorType(await b.execute(sendText(anna, "anyone?"))) == "contactNotActive")
            #expect(await b.execute("/_contacts 1")["contacts"]?.arrayFirst?["contactStatus"]?.stringValue == "deleted")
            #expect(storeErrorType(await a.execute("/_delete @\(ben)")) == "contactNotFound")
            // The peer's chat can still be cleared, keeping the contact.
            let cleared = await b.execute("/_delete @\(anna) messages")
            #expect(cleared["type"]?.stringValue == "chatCleared")
            #expect(await b.execute("/_get chat @\(anna) count=10")["chat"]?["chatItems"]?.arrayCount == 0)
            // A pending invitation is deleted as a connection.
            let pending = try #require(await a.execute("/_connect 1")["connection"]?["pccConnId"]?.intValue)
            #expect(await a.execute("/_delete @\(pending)")["type"]?.stringValue == "contactConnectionDeleted")
        }
    }

    @Test func usersSwitchAndDeleteWithTypedErrors() async throws {
        try await withAnnaAndBen { dir, relay, a, aInbox, b, bInbox in
            #expect(await a.execute(createUser("alt"))["user"]?["userId"]?.intValue == 2)
            // The second user (active) gets a contact and an address.
            let (_, altAtB) = try await connect(a, aInbox, b, bInbox, userA: 2)
            #expect(await a.execute("/_address 2")["type"]?.stringValue == "userContactLinkCreated")
            #expect(await a.execute("/_contacts 2")["contacts"]?.arrayCount == 1)

            #expect(errorType(await a.execute("/_delete user 2 del_smp=on")) == "cantDeleteActiveUser")
            let switched = await a.execute("/_user 1")
            #expect(switched["type"]?.stringValue == "activeUser" && switched["user"]?["userId"]?.intValue == 1)
            #expect(await a.execute("/user")["user"]?["userId"]?.intValue == 1)
            #expect(storeErrorType(await a.execute("/_user 7")) == "userNotFound")
            #expect(await a.execute("/_user 7")["chatError"]?["storeError"]?["userId"]?.intValue == 7)
            #expect(errorType(await a.execute("/_user x")) == "commandError")

            #expect(await a.execute("/_delete user 2 del_smp=on")["type"]?.stringValue == "cmdOk")
            let users = await a.execute("/users")
            #expect(users["users"]?.arrayCount == 1)
            #expect(storeErrorType(await a.execute("/_contacts 2")) == "userNotFound")
            #expect(storeErrorType(await a.execute("/_show_address 2")) == "userNotFound")
            #expect(storeErrorType(await a.execute("/_delete user 2 del_smp=off")) == "userNotFound")
            #expect(errorType(await a.execute("/_delete user 1 del_smp=on")) == "cantDeleteLastUser")
            #expect(errorType(await a.execute("/_delete user 1 del_smp=maybe")) == "commandError")
            #expect(errorType(await a.execute("/_delete user 1")) == "commandError")

            // A message to the deleted user reaches no one; the remaining user is unaffected.
            #expect(await a.execute("/_get chats 1 count=10")["chats"]?.arrayCount == 0)
            _ = await b.execute(sendText(altAtB, "still there?"))
            // Proof that it would have arrived by now: a later message from b, over a new
            // contact of the remaining user, arrives, and is the only item that user has.
            let (benAtAnna, annaAtB) = try await connect(a, aInbox, b, bInbox, userA: 1)
            _ = await b.execute(sendText(annaAtB, "probe"))
            _ = try await aInbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "probe" })
            #expect(await a.execute("/_get chats 1 count=10")["chats"]?.arrayCount == 1)
            guard case let .array(annaItems)? = await a.execute("/_get chat @\(benAtAnna) count=10")["chat"]?["chatItems"] else {
                Issue.record("no chat with ben"); return
            }
            #expect(annaItems.compactMap { $0["content"]?["msgContent"]?["text"]?.stringValue } == ["probe"])
            #expect(await a.execute("/user")["user"]?["profile"]?["displayName"]?.stringValue == "anna")
        }
    }

    @Test func incognitoConnectionsShowOnlyARandomProfile() async throws {
        try await withAnnaAndBen { dir, relay, a, aInbox, b, bInbox in
            // Inviter incognito.
            let inv = await a.execute("/_connect 1 incognito=on")
            #expect(inv["connection"]?["customUserProfileId"] != nil)
            let link = try #require(inv["connLinkInvitation"]?["connFullLink"]?.stringValue)
            _ = await b.execute("/_connect 1 \(link)")
            let aSide = try await aInbox.next("contactConnected")
            let custom = try #require(aSide["userCustomProfile"]?["displayName"]?.stringValue)
            #expect(custom != "anna")
            #expect(aSide["contact"]?["activeConn"]?["customUserProfileId"] != nil)
            let bSide = try await bInbox.next("contactConnected")
            #expect(bSide["contact"]?["profile"]?["displayName"]?.stringValue == custom)
            #expect(bSide["contact"]?["activeConn"]?["customUserProfileId"] == nil)

            // A profile change does not reach an incognito contact.
            let changed = await a.execute(#"/_profile 1 {"displayName": "anna", "fullName": "Anna A"}"#)
            #expect(changed["updateSummary"]?["updateSuccesses"]?.intValue == 0)

            // Joiner incognito, and a second incognito connection gets another profile.
            let link2 = try #require(await b.execute("/_connect 1")["connLinkInvitation"]?["connFullLink"]?.stringValue)
            let joined = await a.execute("/_connect 1 incognito=on \(link2)")
            #expect(joined["type"]?.stringValue == "sentConfirmation")
            let custom2 = try #require(joined["customUserProfile"]?["displayName"]?.stringValue)
            let seenByB = try await bInbox.next("contactConnected")
            #expect(seenByB["contact"]?["profile"]?["displayName"]?.stringValue == custom2)
            #expect(try await aInbox.next("contactConnected")["userCustomProfile"]?["displayName"]?.stringValue == custom2)

            // Address with acceptIncognito: the requester sees a random profile, not "ben".
            let address = try #require(await b.execute("/_address 1")["connLinkContact"]?["connFullLink"]?.stringValue)
            _ = await b.execute(#"/_address_settings 1 {"businessAddress": false, "autoAccept": {"acceptIncognito": true}}"#)
            #expect(errorType(await b.execute(#"/_address_settings 1 {"businessAddress": false, "autoAccept": {"acceptIncognito": 3}}"#)) == "commandError")
            _ = await a.execute("/_connect 1 \(address)")
            let viaAddress = try await aInbox.next("contactConnected")
            let shown = try #require(viaAddress["contact"]?["profile"]?["displayName"]?.stringValue)
            #expect(shown != "ben")
            let benSide = try await bInbox.next("contactConnected")
            #expect(benSide["userCustomProfile"]?["displayName"]?.stringValue == shown)
            #expect(benSide["contact"]?["profile"]?["displayName"]?.stringValue == "anna")

            // Manual accept incognito.
            _ = await b.execute(#"/_address_settings 1 {"businessAddress": false}"#)
            try await withEngine(dir, "c", relays: [relay.address]) { c, cInbox in
                await startUser(c, "carl")
                _ = await c.execute("/connect \(address)")
                let req = try await bInbox.next("receivedContactRequest")
                let reqId = try #require(req["contactRequest"]?["contactRequestId"]?.intValue)
                let accepted = await b.execute("/_accept incognito=on \(reqId)")
                #expect(accepted["contact"]?["activeConn"]?["customUserProfileId"] != nil)
                let carlSees = try await cInbox.next("contactConnected")
                #expect(carlSees["contact"]?["profile"]?["displayName"]?.stringValue != "ben")
            }
        }
    }

    @Test func deliveryReceiptsMarkItemsReceivedUnlessTurnedOff() async throws {
        try await withAnnaAndBen { dir, relay, a, aInbox, b, bInbox in
            let (ben, _) = try await connect(a, aInbox, b, bInbox)
            @Sendable func status(_ e: JSONValue) -> [String] {
                guard case let .array(items)? = e["chatItems"] else { return [] }
                return items.compactMap { $0["chatItem"]?["meta"]?["itemStatus"]?["type"]?.stringValue }
            }
            let three = #"/_send @\#(ben) json [{"msgContent": {"type": "text", "text": "1"}}, {"msgContent": {"type": "text", "text": "2"}}, {"msgContent": {"type": "text", "text": "3"}}]"#
            let sent = await a.execute(three)
            guard case let .array(items)? = sent["chatItems"] else { Issue.record("no items"); return }
            let ids = Set(items.compactMap { itemId($0) })
            #expect(ids.count == 3)
            var received: Set<Int> = []
            while received.count < 3 {
                let e = try await aInbox.next("chatItemsStatusesUpdated", where: { status($0).contains("sndRcvd") })
                guard case let .array(updated)? = e["chatItems"] else { continue }
                for item in updated where item["chatItem"]?["meta"]?["itemStatus"]?["type"]?.stringValue == "sndRcvd" {
                    #expect(item["chatItem"]?["meta"]?["itemStatus"]?["msgRcptStatus"]?.stringValue == "ok")
                    received.insert(try #require(itemId(item)))
                }
            }
            #expect(received == ids)
            guard case let .array(stored)? = await a.execute("/_get chat @\(ben) count=3")["chat"]?["chatItems"] else { Issue.record("no chat"); return }
            #expect(stored.allSatisfy { $0["meta"]?["itemStatus"]?["type"]?.stringValue == "sndRcvd" })

            // Receipts off on the receiving side: items stop at sndSent.
            let off = await b.execute("/_set receipts contacts 1 off")
            #expect(off["type"]?.stringValue == "cmdOk" && off["user_"]?["sendRcptsContacts"]?.boolValue == false)
            #expect(storeErrorType(await b.execute("/_set receipts contacts 9 off")) == "userNotFound")
            #expect(errorType(await b.execute("/_set receipts contacts 1 maybe")) == "commandError")
            let quiet = try #require(itemId(await a.execute(sendText(ben, "no receipt"))["chatItems"]?.arrayFirst))
            _ = try await bInbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "no receipt" })
            // Receipts back on, a later message's receipt arrives: b batches and sends receipts
            // in order on the same queue, so one for "no receipt" would have come by now.
            #expect(await b.execute("/_set receipts contacts 1 on")["user_"]?["sendRcptsContacts"]?.boolValue == true)
            let later = try #require(itemId(await a.execute(sendText(ben, "with receipt"))["chatItems"]?.arrayFirst))
            _ = try await aInbox.next("chatItemsStatusesUpdated", where: { e in
                guard case let .array(updated)? = e["chatItems"] else { return false }
                return updated.contains { itemId($0) == later && $0["chatItem"]?["meta"]?["itemStatus"]?["type"]?.stringValue == "sndRcvd" }
            })
            let last = await a.execute("/_get chat @\(ben) before=\(quiet + 1) count=1")
            #expect(last["chat"]?["chatItems"]?.arrayFirst?["meta"]?["itemStatus"]?["type"]?.stringValue == "sndSent")
        }
    }

    @Test func shortLinksAreStoredEncryptedOnTheRelayAndResolve() async throws {
        try await withAnnaAndBen { dir, relay, a, aInbox, b, bInbox in
            let inv = await a.execute("/_connect 1 short=on")
            let full = try #require(inv["connLinkInvitation"]?["connFullLink"]?.stringValue)
            let short = try #require(inv["connLinkInvitation"]?["connShortLink"]?.stringValue)
            #expect(short.hasPrefix("https://127.0.0.1:\(relay.address.port)/i?c="))
            #expect(errorType(await a.execute("/_connect 1 short=on \(full)")) == "commandError")

            // Neither the full link nor the key is on the relay in the clear.
            let key = try #require(short.split(separator: "/").last.map(String.init))
            let relayFiles = try FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("relay").path)
                .filter { $0.hasPrefix("relay.db") }
                .map { try Data(contentsOf: dir.appendingPathComponent("relay/\($0)")) }
                .reduce(Data(), +)
            #expect(relayFiles.range(of: Data("simplex:/invitation".utf8)) == nil)
            #expect(relayFiles.range(of: Data(key.utf8)) == nil)

            #expect(await a.execute("/_connect plan 1 \(short)")["connectionPlan"]?["invitationLinkPlan"]?["type"]?.stringValue == "ownLink")
            let plan = await b.execute("/_connect plan 1 \(short)")
            #expect(plan["connectionPlan"]?["invitationLinkPlan"]?["type"]?.stringValue == "ok")
            #expect(plan["connLink"]?["connFullLink"]?.stringValue == full)
            #expect(plan["connLink"]?["connShortLink"]?.stringValue == short)

            // Bad and unknown short links are typed errors.
            var wrongKey = Array(short)
            wrongKey[wrongKey.count - 2] = wrongKey[wrongKey.count - 2] == "A" ? "B" : "A"
            #expect(agentErrorType(await b.execute("/_connect plan 1 \(String(wrongKey))")) == "badLink")
            let unknown = short.replacingOccurrences(of: "#", with: "#AAAAAAAA")
            #expect(agentErrorType(await b.execute("/_connect 1 \(unknown)")) == "linkNotFound")
            #expect(errorType(await b.execute("/_connect plan 1 https://127.0.0.1/i#nothing")) == "invalidConnReq")
            #expect(errorType(await b.execute("/connect https://127.0.0.1/q?c=x#a/b")) == "invalidConnReq")

            #expect(await b.execute("/_connect 1 \(short)")["type"]?.stringValue == "sentConfirmation")
            _ = try await aInbox.next("contactConnected")
            #expect(try await bInbox.next("contactConnected")["contact"]?["profile"]?["displayName"]?.stringValue == "anna")

            // Address short links.
            let address = await a.execute("/_address 1 short=on")
            let shortAddress = try #require(address["connLinkContact"]?["connShortLink"]?.stringValue)
            #expect(shortAddress.contains("/a?c="))
            #expect(await a.execute("/_show_address 1")["contactLink"]?["connLinkContact"]?["connShortLink"]?.stringValue == shortAddress)
            #expect(await b.execute("/_connect plan 1 \(shortAddress)")["connectionPlan"]?["type"]?.stringValue == "contactAddress")
            _ = await a.execute(#"/_address_settings 1 {"businessAddress": false, "autoAccept": {"acceptIncognito": false}}"#)
            try await withEngine(dir, "c", relays: [relay.address]) { c, cInbox in
                await startUser(c, "carl")
                #expect(await c.execute("/connect \(shortAddress)")["type"]?.stringValue == "sentInvitation")
                let connected = try await cInbox.next("contactConnected")
                #expect(connected["contact"]?["profile"]?["displayName"]?.stringValue == "anna")
            }
            // Deleting the address deletes its queue and with it the link data.
            _ = await a.execute("/_delete_address 1")
            #expect(agentErrorType(await b.execute("/_connect plan 1 \(shortAddress)")) == "linkNotFound")
        }
    }
}
