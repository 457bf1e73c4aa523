import Agent
import ChatAPI
import ChatCore
import ChatTestSupport
import Foundation
import GRDB
import SwiftplexBase
import Testing
@testable import ChatModel

/// Everything the engine writes, as it writes it: each command's response and each event,
/// recorded in order, for the round trip through the typed model.
final class WireLog {
    private(set) var responses: [JSONValue] = []
    private(set) var events: [JSONValue] = []

    /// Runs a command and keeps its response.
    @discardableResult
    func run(_ api: ChatAPI, _ command: String) async -> JSONValue {
        let r = await api.execute(command)
        responses.append(r)
        return r
    }

    /// Takes an event (as `ChatInbox.next`) and keeps it.
    @discardableResult
    func event(_ inbox: ChatInbox, _ type: String, where predicate: @escaping @Sendable (JSONValue) -> Bool = { _ in true }) async throws -> JSONValue {
        let e = try await inbox.next(type, where: predicate)
        events.append(e)
        return e
    }

    /// Keeps the events that arrived and were not taken.
    func drain(_ inbox: ChatInbox) { events += inbox.events.pending }
}

/// The strong check of the model: real engines on a real relay, driven through every command
/// that produces a response or an event; every JSON object they write is decoded into
/// `ChatResponse` / `ChatEvent`, encoded again, and must equal what the engine wrote.
@Suite(.timeLimit(.minutes(3))) struct LiveRoundTripTests: LiveRelaySuite {
    static func send(_ contact: Int, _ text: String, quoting: Int? = nil) -> String {
        let quote = quoting.map { #", "quotedItemId": \#($0)"# } ?? ""
        return #"/_send @\#(contact) json [{"msgContent": {"type": "text", "text": "\#(text)"}, "mentions": {}\#(quote)}]"#
    }

    static func update(_ contact: Int, _ item: Int, _ text: String) -> String {
        #"/_update item @\#(contact) \#(item) json {"msgContent": {"type": "text", "text": "\#(text)"}, "mentions": {}}"#
    }

    static func firstItem(_ r: JSONValue) -> JSONValue? { r["chatItems"]?.arrayFirst?["chatItem"] }

    /// Drives three engines (anna, ben, carl) through the API; returns what they wrote.
    func drive() async throws -> WireLog {
        let w = WireLog()
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "a", relays: [relay.address]) { a, aIn in
                try await withEngine(dir, "b", relays: [relay.address]) { b, bIn in
                    try await withEngine(dir, "c", relays: [relay.address]) { c, cIn in
                        try await drive(w, a, aIn, b, bIn, c, cIn)
                        // The database archives, once stopped: export, import (then chatStoreChanged).
                        let archive = dir.appendingPathComponent("a-export.zip").path
                        await w.run(a, "/_db export {\"archivePath\": \"\(archive)\"}")
                        await w.run(a, "/_db import {\"archivePath\": \"\(archive)\"}")
                        await w.run(a, "/users")
                        w.drain(aIn)
                        w.drain(bIn)
                        w.drain(cIn)
                    }
                }
            }
        }
        return w
    }

    func drive(_ w: WireLog, _ a: ChatAPI, _ aIn: ChatInbox, _ b: ChatAPI, _ bIn: ChatInbox, _ c: ChatAPI, _ cIn: ChatInbox) async throws {
        // Users and the engine's lifecycle, with their errors.
        await w.run(a, "/user")
        await w.run(a, #"/_create user {"profile": {"displayName": "@x", "fullName": ""}, "pastTimestamp": false, "userChatRelay": false, "clientService": false}"#)
        await w.run(a, createUser("anna"))
        await w.run(a, createUser("anna"))
        await w.run(a, "/_connect 1")
        await w.run(a, "/_start")
        await w.run(a, "/_start")
        await w.run(a, "/users")
        await w.run(a, "/_relays 1")
        await w.run(a, "/_set receipts contacts 1 on")
        await w.run(a, "/nonsense")
        // The terminal's commands (name lookups that find nothing, the help section).
        await w.run(a, "/help groups")
        await w.run(a, "@nobody hi")
        await w.run(a, "#nowhere hi")
        await w.run(a, "/ac nobody")
        await w.run(a, "/_show_address 9")
        for (api, name) in [(b, "ben"), (c, "carl")] {
            await w.run(api, createUser(name))
            await w.run(api, "/_start")
        }
        await w.run(c, "/_delete user 1 del_smp=off")

        // A one-time invitation.
        let link = try #require(await w.run(a, "/_connect 1")["connLinkInvitation"]?["connFullLink"]?.stringValue)
        await w.run(a, "/_connect plan 1 \(link)")
        await w.run(b, "/_connect plan 1 \(link)")
        await w.run(b, "/_connect 1 not-a-link")
        await w.run(b, "/_connect 1 \(link)")
        let ben = try #require(try await w.event(aIn, "contactConnected")["contact"]?["contactId"]?.intValue)
        let anna = try #require(try await w.event(bIn, "contactConnected")["contact"]?["contactId"]?.intValue)
        await w.run(a, "/_contacts 1")

        // Messages: sent, received, delivered, replied to, edited, reacted to.
        let itemId = try #require(Self.firstItem(await w.run(a, Self.send(ben, "hello")))?["meta"]?["itemId"]?.intValue)
        let theirId = try #require(Self.firstItem(try await w.event(bIn, "newChatItems"))?["meta"]?["itemId"]?.intValue)
        try await w.event(aIn, "chatItemsStatusesUpdated", where: { Self.firstItem($0)?["meta"]?["itemStatus"]?["type"]?.stringValue == "sndRcvd" })
        await w.run(b, Self.send(anna, "hi anna", quoting: theirId))
        let reply = try #require(Self.firstItem(try await w.event(aIn, "newChatItems", where: { Self.firstItem($0)?["quotedItem"] != nil }))?["meta"]?["itemId"]?.intValue)
        await w.run(a, Self.update(ben, itemId, "hello!"))
        await w.run(a, Self.update(ben, itemId, "hello!"))
        try await w.event(bIn, "chatItemUpdated")
        await w.run(b, Self.update(anna, theirId, "mine now"))
        await w.run(b, "/_delete item @\(anna) \(theirId) broadcast")
        await w.run(b, #"/_reaction @\#(anna) \#(theirId) on {"type": "emoji", "emoji": "👍"}"#)
        try await w.event(aIn, "chatItemReaction")

        // Chats, reading, custom data.
        await w.run(a, "/_get chats 1 pcc=on count=10")
        await w.run(a, "/_get chat @\(ben) count=10")
        await w.run(a, "/_read chat @\(ben)")
        await w.run(a, #"/_set custom @\#(ben) {"n": 5, "s": "x", "l": [true, null, 1.5]}"#)
        await w.run(a, "/_contacts 1")

        // Deleting items, and what cannot be done with them.
        await w.run(a, "/_delete item @\(ben) \(itemId) broadcast")
        try await w.event(bIn, "chatItemsDeleted")
        await w.run(a, Self.send(ben, "again", quoting: itemId))
        await w.run(a, "/_delete item @\(ben) 999 broadcast")
        await w.run(a, Self.send(999, "nobody"))
        await w.run(a, "/_delete item @\(ben) \(reply) internal")

        // Preferences and profiles reach the contact.
        await w.run(a, #"/_set prefs @\#(ben) {"voice": {"allow": "no"}}"#)
        try await w.event(bIn, "contactUpdated")
        await w.run(a, #"/_profile 1 {"displayName": "anna", "fullName": "Anna A"}"#)
        try await w.event(bIn, "contactUpdated", where: { $0["toContact"]?["profile"]?["fullName"]?.stringValue == "Anna A" })
        await w.run(a, #"/_profile 1 {"displayName": "anna", "fullName": "Anna A"}"#)

        // The address: requests rejected, accepted by hand, accepted automatically with a welcome.
        let addr = try #require(await w.run(a, "/_address 1 short=on")["connLinkContact"]?["connFullLink"]?.stringValue)
        await w.run(a, "/_address 1")
        await w.run(a, "/_show_address 1")
        await w.run(a, "/_profile_address 1 on")
        try await w.event(bIn, "contactUpdated", where: { $0["toContact"]?["profile"]?["contactLink"] != nil })
        await w.run(c, "/_connect plan 1 \(addr)")
        await w.run(c, "/connect \(addr)")
        let request = try #require(try await w.event(aIn, "receivedContactRequest")["contactRequest"]?["contactRequestId"]?.intValue)
        let invitation = await w.run(a, "/_connect 1 short=on")
        let pending = try #require(invitation["connection"]?["pccConnId"]?.intValue)
        await w.run(a, "/_connect plan 1 \(try #require(invitation["connLinkInvitation"]?["connShortLink"]?.stringValue))")
        await w.run(a, "/_get chats 1 pcc=on count=20")
        await w.run(a, Self.send(pending, "too early"))
        await w.run(a, "/_delete @\(pending) full")
        await w.run(a, "/_reject \(request)")
        await w.run(a, "/_accept \(request)")
        await w.run(c, "/connect \(addr)")
        let second = try #require(try await w.event(aIn, "receivedContactRequest")["contactRequest"]?["contactRequestId"]?.intValue)
        await w.run(a, "/_accept \(second)")
        let carl = try #require(try await w.event(aIn, "contactConnected")["contact"]?["contactId"]?.intValue)
        let annaInC = try #require(try await w.event(cIn, "contactConnected")["contact"]?["contactId"]?.intValue)
        await w.run(a, #"/_address_settings 1 {"businessAddress": false, "autoAccept": {"acceptIncognito": false}, "autoReply": {"type": "text", "text": "welcome"}}"#)
        await w.run(b, "/connect incognito=on \(addr)")
        try await w.event(aIn, "acceptingContactRequest")
        try await w.event(aIn, "contactConnected")
        try await w.event(bIn, "contactConnected", where: { $0["userCustomProfile"] != nil })
        try await w.event(bIn, "newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "welcome" })

        // A contact that deletes us; clearing a chat.
        await w.run(c, "/_delete @\(annaInC) full")
        try await w.event(aIn, "contactDeletedByContact")
        await w.run(a, Self.send(carl, "still there?"))
        await w.run(a, "/_delete @\(ben) messages")

        // A second user; deleting users and the address; stopping.
        await w.run(a, createUser("second"))
        await w.run(a, "/_user 1")
        await w.run(a, "/_delete user 1 del_smp=off")
        await w.run(a, "/_delete user 2 del_smp=on")
        await w.run(a, "/_delete_address 1")
        await w.run(a, "/_stop")
    }

    /// The difference between what the engine wrote and the model's encoding of it, or the decoding error.
    static func check<T: Codable>(_ type: T.Type, _ written: JSONValue) -> String? {
        let text = written.description
        do {
            return try roundTripDifference(T.self, text)
        } catch {
            return "does not decode: \(error)"
        }
    }

    /// What went through the model unchanged and what did not, with the types and error codes seen.
    struct Verdict {
        var failures: [String] = []
        var responseTags: Set<String> = []
        var eventTags: Set<String> = []
        var errorCodes: Set<String> = []
    }

    static func verify(_ w: WireLog) -> Verdict {
        var v = Verdict()
        func noteError(_ e: JSONValue?) {
            guard let e else { return }
            v.errorCodes.insert(e["errorType"]?["type"]?.stringValue ?? e["storeError"]?["type"]?.stringValue ?? e["agentError"]?["type"]?.stringValue ?? "?")
        }
        for r in w.responses {
            let tag = r["type"]?.stringValue ?? "?"
            v.responseTags.insert(tag)
            noteError(r["chatError"])
            if let d = check(ChatResponse.self, r) { v.failures.append("response \(tag): \(d)") }
        }
        for e in w.events {
            let tag = e["type"]?.stringValue ?? "?"
            v.eventTags.insert(tag)
            noteError(e["chatError"])
            if let d = check(ChatEvent.self, e) { v.failures.append("event \(tag): \(d)") }
        }
        return v
    }

    @Test func everyResponseAndEventTheEngineWritesDecodesAndEncodesBackUnchanged() async throws {
        let w = try await drive()
        let v = Self.verify(w)
        #expect(v.failures.isEmpty, "\(v.failures.joined(separator: "\n"))")

        // The drive must keep reaching every response, and every event but those that need a
        // fault (chatError), a relay going away (hostDisconnected) or a restart (subscriptionStatus):
        // the next tests have those.
        #expect(v.responseTags == Set(ChatResponse.allTags), "responses not reached: \(Set(ChatResponse.allTags).subtracting(v.responseTags).sorted())")
        let events = Set(ChatEvent.allTags).subtracting(["chatError", "hostDisconnected", "subscriptionStatus"])
        #expect(v.eventTags.isSuperset(of: events), "events not reached: \(events.subtracting(v.eventTags).sorted())")
        let errors: Set<String> = ["noActiveUser", "invalidDisplayName", "userExists", "chatNotStarted", "commandError", "userNotFound", "cantDeleteLastUser",
                                   "invalidConnReq", "invalidChatItemUpdate", "invalidChatItemDelete", "invalidQuote", "chatItemNotFound", "contactNotFound",
                                   "userContactLinkExists", "contactNotReady", "contactRequestNotFound", "contactNotActive", "cantDeleteActiveUser",
                                   "contactNotFoundByName", "groupNotFoundByName", "contactRequestNotFoundByName"]
        #expect(v.errorCodes.isSuperset(of: errors), "errors not reached: \(errors.subtracting(v.errorCodes).sorted())")
        #expect(w.responses.contains { $0.description.contains("connShortLink") }, "no short link was made")
        print("live round trip: \(w.responses.count) responses (\(v.responseTags.sorted().joined(separator: " "))), \(w.events.count) events (\(v.eventTags.sorted().joined(separator: " "))), errors: \(v.errorCodes.sorted().joined(separator: " "))")
    }

    /// An engine started again on its files subscribes its contacts' queues and says so
    /// (`subscriptionStatus`, `active`, with the agent connection of each).
    @Test func aRestartedEngineReportsItsSubscriptions() async throws {
        let w = WireLog()
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "a", relays: [relay.address]) { a, aIn in
                try await withEngine(dir, "b", relays: [relay.address]) { b, bIn in
                    await w.run(a, createUser("anna"))
                    await w.run(a, "/_start")
                    await w.run(b, createUser("ben"))
                    await w.run(b, "/_start")
                    let link = try #require(await w.run(a, "/_connect 1")["connLinkInvitation"]?["connFullLink"]?.stringValue)
                    await w.run(b, "/_connect 1 \(link)")
                    try await w.event(aIn, "contactConnected")
                    try await w.event(bIn, "contactConnected")
                }
            }
            try await withEngine(dir, "b", relays: [relay.address]) { b, bIn in
                await w.run(b, "/_start")
                let status = try await w.event(bIn, "subscriptionStatus")
                #expect(status["subscriptionStatus"]?["type"]?.stringValue == "active")
                #expect(status["server"]?.stringValue == relay.address.description)
                #expect(status["connections"]?.arrayValue?.count == 1)
            }
        }
        let v = Self.verify(w)
        #expect(v.failures.isEmpty, "\(v.failures.joined(separator: "\n"))")
        #expect(v.eventTags.contains("subscriptionStatus"))
    }

    /// The events of faults and of a relay going away: a contact request the chat database
    /// refuses (`errorStore` / `dbError`, retried), its automatic accept refused by the agent's
    /// options (`errorAgent` with the `contactRequestId`), the requester's relay shut down
    /// (`hostDisconnected`).
    @Test func faultEventsAndALostRelayDecodeAndEncodeBackUnchanged() async throws {
        let w = WireLog()
        try await withLiveRelay { dir, botRelay in
            let clientRelay = try await relay(dir.appendingPathComponent("client-relay"))
            do {
                try await withEngine(dir, "client", relays: [clientRelay.address]) { client, clientIn in
                    await w.run(client, createUser("alice"))
                    await w.run(client, "/_start")
                    // The bot may not dial the client's relay, so accepting its request fails.
                    try await withEngine(dir, "bot", relays: [botRelay.address], agentOptions: AgentOptions(allowedHosts: ["relay.example.org"])) { bot, botIn in
                        await w.run(bot, createUser("bot"))
                        await w.run(bot, "/_start")
                        let link = try #require(await w.run(bot, "/_address 1")["connLinkContact"]?["connFullLink"]?.stringValue)
                        await w.run(bot, #"/_address_settings 1 {"businessAddress": false, "autoAccept": {"acceptIncognito": false}}"#)
                        let fault = try sideConnection(dir.appendingPathComponent("bot_chat.db").path)
                        try await fault.write { db in
                            try db.execute(sql: "CREATE TRIGGER fault BEFORE INSERT ON contact_request BEGIN SELECT RAISE(ABORT, 'injected fault'); END")
                        }
                        await w.run(client, "/_connect 1 \(link)")
                        try await w.event(botIn, "chatError", where: { $0["chatError"]?["storeError"]?["type"]?.stringValue == "dbError" })
                        try await fault.write { db in try db.execute(sql: "DROP TRIGGER fault") }
                        try fault.close()
                        try await w.event(botIn, "chatError", where: { $0["chatError"]?["contactRequestId"] != nil })
                        w.drain(botIn)
                    }
                    await clientRelay.shutdown()
                    try await w.event(clientIn, "hostDisconnected")
                    w.drain(clientIn)
                }
                await clientRelay.shutdown()
            } catch {
                await clientRelay.shutdown()
                throw error
            }
        }
        let v = Self.verify(w)
        #expect(v.failures.isEmpty, "\(v.failures.joined(separator: "\n"))")
        #expect(v.eventTags.isSuperset(of: ["chatError", "hostConnected", "hostDisconnected"]))
        #expect(v.errorCodes.isSuperset(of: ["dbError", "relayRefused"]), "\(v.errorCodes.sorted())")
        print("live fault round trip: \(w.events.count) events (\(v.eventTags.sorted().joined(separator: " "))), errors: \(v.errorCodes.sorted().joined(separator: " "))")
    }
}
