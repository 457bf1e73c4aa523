import Agent
import ChatCore
import ChatTestSupport
import Foundation
import Logging
import NIOPosix
import RelayProtocol
import RelayServer
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI

@Suite(.timeLimit(.minutes(2))) struct ChatEngineTests: LiveRelaySuite {
    @Test func botWithAutoAcceptAddressWelcomesAndReplies() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "bot", relays: [relay.address]) { bot, botInbox in
                try await withEngine(dir, "client", relays: [relay.address]) { client, clientInbox in
                    // The Python Bot's start-up sequence.
                    #expect(await bot.execute("/user")["chatError"]?["errorType"]?["type"]?.stringValue == "noActiveUser")
                    let created = await bot.execute(#"/_create user {"pastTimestamp": false, "userChatRelay": false, "clientService": false, "profile": {"displayName": "Squaring bot", "fullName": "", "preferences": {"commands": [{"type": "command", "keyword": "help", "label": "Show help"}]}, "peerType": "bot"}}"#)
                    #expect(created["type"]?.stringValue == "activeUser")
                    #expect(created["user"]?["profile"]?["peerType"]?.stringValue == "bot")
                    #expect(await bot.execute("/_start")["type"]?.stringValue == "chatStarted")
                    #expect(await bot.execute("/_start")["type"]?.stringValue == "chatRunning")
                    #expect(await bot.execute("/_show_address 1")["chatError"]?["storeError"]?["type"]?.stringValue == "userContactLinkNotFound")
                    let address = await bot.execute("/_address 1")
                    let link = try #require(address["connLinkContact"]?["connFullLink"]?.stringValue)
                    #expect(link.hasPrefix("simplex:/contact#/?v=1&smp="))
                    let settings = #"{"businessAddress": false, "autoAccept": {"acceptIncognito": false}, "autoReply": {"type": "text", "text": "Send me a number"}}"#
                    #expect(await bot.execute("/_address_settings 1 \(settings)")["type"]?.stringValue == "userContactLinkUpdated")
                    let shown = await bot.execute("/_show_address 1")
                    #expect(shown["contactLink"]?["addressSettings"] == (try JSONValue.parse(settings)))

                    await startUser(client, "alice")
                    #expect(await client.execute("/_connect plan 1 \(link)")["connectionPlan"]?["type"]?.stringValue == "contactAddress")
                    #expect(await client.execute("/connect \(link)")["type"]?.stringValue == "sentInvitation")

                    _ = try await botInbox.next("acceptingContactRequest")
                    let connected = try await clientInbox.next("contactConnected")
                    #expect(connected["contact"]?["profile"]?["displayName"]?.stringValue == "Squaring bot")
                    #expect(connected["contact"]?["mergedPreferences"]?["commands"] != nil)
                    let botSide = try await botInbox.next("contactConnected")
                    #expect(botSide["contact"]?["profile"]?["displayName"]?.stringValue == "alice")
                    let welcome = try await clientInbox.next("newChatItems")
                    #expect(text(welcome["chatItems"]?.arrayFirst) == "Send me a number")
                    #expect(welcome["chatItems"]?.arrayFirst?["chatItem"]?["content"]?["type"]?.stringValue == "rcvMsgContent")

                    let botId = try #require(connected["contact"]?["contactId"]?.intValue)
                    let sent = await client.execute(#"/_send @\#(botId) json [{"msgContent": {"type": "text", "text": "5"}, "mentions": {}}]"#)
                    #expect(sent["type"]?.stringValue == "newChatItems")
                    #expect(sent["chatItems"]?.arrayFirst?["chatItem"]?["content"]?["type"]?.stringValue == "sndMsgContent")
                    let asked = try await botInbox.next("newChatItems", where: { $0["chatItems"]?.arrayFirst?["chatItem"]?["content"]?["type"]?.stringValue == "rcvMsgContent" })
                    let question = try #require(asked["chatItems"]?.arrayFirst)
                    #expect(text(question) == "5")
                    let clientId = try #require(question["chatInfo"]?["contact"]?["contactId"]?.intValue)
                    _ = await bot.execute(#"/_send @\#(clientId) json [{"msgContent": {"type": "text", "text": "25"}, "mentions": {}}]"#)
                    let answer = try await clientInbox.next("newChatItems")
                    #expect(text(answer["chatItems"]?.arrayFirst) == "25")

                    #expect(await bot.execute("/_contacts 1")["contacts"]?.arrayCount == 1)
                }
            }
        }
    }

    @Test func oneTimeInvitationsAndManualAcceptAndReject() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "a", relays: [relay.address]) { a, aInbox in
                try await withEngine(dir, "b", relays: [relay.address]) { b, bInbox in
                    await startUser(a, "anna")
                    await startUser(b, "ben")
                    let inv = await a.execute("/_connect 1")
                    #expect(inv["type"]?.stringValue == "invitation")
                    let link = try #require(inv["connLinkInvitation"]?["connFullLink"]?.stringValue)
                    #expect(await a.execute("/_connect plan 1 \(link)")["connectionPlan"]?["invitationLinkPlan"]?["type"]?.stringValue == "ownLink")
                    #expect(await b.execute("/_connect 1 \(link)")["type"]?.stringValue == "sentConfirmation")
                    #expect(try await aInbox.next("contactConnected")["contact"]?["profile"]?["displayName"]?.stringValue == "ben")
                    #expect(try await bInbox.next("contactConnected")["contact"]?["profile"]?["displayName"]?.stringValue == "anna")

                    // An address without auto-accept: requests wait for /_accept or /_reject.
                    let addr = try #require(await a.execute("/_address 1")["connLinkContact"]?["connFullLink"]?.stringValue)
                    try await withEngine(dir, "c", relays: [relay.address]) { c, _ in
                        await startUser(c, "carl")
                        _ = await c.execute("/connect \(addr)")
                        let req = try await aInbox.next("receivedContactRequest")
                        #expect(req["contactRequest"]?["profile"]?["displayName"]?.stringValue == "carl")
                        let reqId = try #require(req["contactRequest"]?["contactRequestId"]?.intValue)
                        #expect(await a.execute("/_reject \(reqId)")["type"]?.stringValue == "contactRequestRejected")
                        #expect(await a.execute("/_accept \(reqId)")["chatError"]?["storeError"]?["type"]?.stringValue == "contactRequestNotFound")
                    }
                    _ = await b.execute("/connect \(addr)")
                    let req = try await aInbox.next("receivedContactRequest")
                    let reqId = try #require(req["contactRequest"]?["contactRequestId"]?.intValue)
                    #expect(await a.execute("/_accept \(reqId)")["type"]?.stringValue == "acceptingContactRequest")
                    _ = try await aInbox.next("contactConnected")
                }
            }
        }
    }

    @Test func updatesDeletionsAndReactionsReachThePeer() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "a", relays: [relay.address]) { a, aInbox in
                try await withEngine(dir, "b", relays: [relay.address]) { b, bInbox in
                    let (ben, anna) = try await connectPair(a, aInbox, b, bInbox)

                    let sent = await a.execute(#"/_send @\#(ben) json [{"msgContent": {"type": "text", "text": "helo"}, "mentions": {}}]"#)
                    let itemId = try #require(sent["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue)
                    let received = try await bInbox.next("newChatItems")
                    let theirId = try #require(received["chatItems"]?.arrayFirst?["chatItem"]?["meta"]?["itemId"]?.intValue)

                    let updated = await a.execute(#"/_update item @\#(ben) \#(itemId) json {"msgContent": {"type": "text", "text": "hello"}, "mentions": {}}"#)
                    #expect(updated["type"]?.stringValue == "chatItemUpdated")
                    let unchanged = await a.execute(#"/_update item @\#(ben) \#(itemId) json {"msgContent": {"type": "text", "text": "hello"}, "mentions": {}}"#)
                    #expect(unchanged["type"]?.stringValue == "chatItemNotChanged")
                    let seenUpdate = try await bInbox.next("chatItemUpdated")
                    #expect(text(seenUpdate["chatItem"]) == "hello")
                    #expect(seenUpdate["chatItem"]?["chatItem"]?["meta"]?["itemEdited"]?.boolValue == true)

                    let reacted = await b.execute(#"/_reaction @\#(anna) \#(theirId) on {"type": "emoji", "emoji": "👍"}"#)
                    #expect(reacted["type"]?.stringValue == "chatItemReaction" && reacted["added"]?.boolValue == true)
                    let seenReaction = try await aInbox.next("chatItemReaction")
                    #expect(seenReaction["reaction"]?["chatReaction"]?["reaction"]?["emoji"]?.stringValue == "👍")
                    #expect(seenReaction["reaction"]?["chatReaction"]?["chatItem"]?["reactions"]?.arrayFirst?["totalReacted"]?.intValue == 1)

                    // Only one's own messages can be edited or deleted for everyone.
                    #expect(await b.execute(#"/_update item @\#(anna) \#(theirId) json {"msgContent": {"type": "text", "text": "x"}, "mentions": {}}"#)["type"]?.stringValue == "chatCmdError")
                    #expect(await a.execute("/_delete item @\(ben) 999 broadcast")["chatError"]?["storeError"]?["type"]?.stringValue == "chatItemNotFound")
                    let deleted = await a.execute("/_delete item @\(ben) \(itemId) broadcast")
                    #expect(deleted["type"]?.stringValue == "chatItemsDeleted")
                    let seenDeletion = try await bInbox.next("chatItemsDeleted")
                    #expect(seenDeletion["chatItemDeletions"]?.arrayFirst?["toChatItem"]?["chatItem"]?["content"]?["type"]?.stringValue == "rcvDeleted")
                    #expect(seenDeletion["byUser"]?.boolValue == false)
                }
            }
        }
    }

    @Test func badCommandsAndLinksGiveTypedErrors() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withEngine(dir, "x", relays: []) { api, _ in
            #expect(await api.execute("/hello")["type"]?.stringValue == "chatCmdError")
            #expect(errorType(await api.execute("/hello")) == "commandError")
            #expect(errorType(await api.execute("/_start")) == "noActiveUser")
            for bad in ["", "  ", "@bot", "#group"] {
                let r = await api.execute(createUser(bad))
                #expect(errorType(r) == "invalidDisplayName", "\(bad)")
            }
            let ok = await api.execute(createUser("  x  "))
            #expect(ok["user"]?["profile"]?["displayName"]?.stringValue == "x")
            let dup = await api.execute(createUser("x"))
            #expect(errorType(dup) == "userExists")
            #expect(errorType(await api.execute("/_address 1")) == "chatNotStarted")
            _ = await api.execute("/_start")
            // No relays anywhere: the error names both ways to configure them.
            let noRelay = await api.execute("/_address 1")
            #expect(noRelay["chatError"]?["errorType"]?["message"]?.stringValue?.contains("SWIFTPLEX_SERVERS") == true)
            #expect(errorType(await api.execute("/connect https://example.org/nothing")) == "invalidConnReq")
            #expect(errorType(await api.execute("/connect simplex:/invitation#/?v=1")) == "invalidConnReq")
            #expect(errorType(await api.execute("/_relays 1 smp://bad")) == "commandError")
        }
    }
}
