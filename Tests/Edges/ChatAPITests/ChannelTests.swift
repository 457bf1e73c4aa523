import Agent
import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// Channels in the engine: chat relay users and their relay addresses, the chat relays an owner
/// registers. Engines on a live relay (TLS on loopback, SQLite files), driven by the bot API's
/// command strings (docs/channels.md).
@Suite(.timeLimit(.minutes(3))) struct ChannelTests: LiveRelaySuite {
    static let doc = try! BotAPIDoc.load()

    func chatError(_ r: JSONValue) -> JSONValue? { r["type"]?.stringValue == "chatCmdError" ? r["chatError"]?["errorType"] : nil }

    /// A relay user is `userChatRelay: true`; its address is a relay address (`/r`, always a short
    /// link) that resolves like a contact address; a plain user's stays `/a`.
    @Test func aRelayUserHasARelayAddressThatNobodyConnectsTo() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "relay", relays: [relay.address]) { r, _ in
                try await withEngine(dir, "owner", relays: [relay.address]) { o, _ in
                    let created = await r.execute(relayUserCommand("relay1"))
                    #expect(created["type"]?.stringValue == "activeUser")
                    #expect(created["user"]?["userChatRelay"]?.boolValue == true)
                    _ = await r.execute("/_start")
                    await startUser(o, "owner")
                    #expect(await o.execute("/user")["user"]?["userChatRelay"]?.boolValue == false)

                    let address = await r.execute("/_address 1")
                    #expect(address["type"]?.stringValue == "userContactLinkCreated", "\(address)")
                    let short = try #require(address["connLinkContact"]?["connShortLink"]?.stringValue)
                    #expect(short.contains("/r?c=") && short.contains("#"), "\(short)")
                    #expect(try ShortLink(parsing: short).kind == .relay)

                    // Its link data carries the relay's profile (SimpleX `RelayAddressLinkData`).
                    let resolved = try await o.controller.agent.resolveWithData(try ShortLink(parsing: short))
                    let linkData = try #require(resolved.data)
                    let userData = try JSONValue.parse(String(decoding: linkData.userData, as: UTF8.self))
                    #expect(userData["relayProfile"]?["displayName"]?.stringValue == "relay1", "\(userData)")
                    #expect(userData["relayProfile"]?["fullName"]?.stringValue == "")
                    #expect(linkData.direct && linkData.owners.isEmpty && linkData.relays.isEmpty)
                    guard case .contact = resolved.link else { Issue.record("a relay address resolves to a contact address"); return }

                    // Nobody connects to it: plan, connect, /connect are refused before anything is tried.
                    for command in ["/_connect plan 1 \(short)", "/_connect 1 \(short)", "/connect \(short)", "/c \(short)"] {
                        let refused = await o.execute(command)
                        let e = try #require(chatError(refused), "\(command): \(refused)")
                        #expect(e["type"]?.stringValue == "channelError" && e["code"]?.stringValue == "relayAddress", "\(command): \(refused)")
                        #expect(e["message"]?.stringValue == "This is a chat relay address, it cannot be used to connect.")
                    }
                    // A channel link (`/c`) is joined through the relays its data names, never as the
                    // contact address it resolves to: one whose data is no channel's is invalidConnReq.
                    let channelLink = short.replacingOccurrences(of: "/r?", with: "/c?")
                    #expect(try ShortLink(parsing: channelLink).kind == .channel)
                    for command in ["/_connect plan 1 \(channelLink)", "/_connect 1 \(channelLink)", "/connect \(channelLink)"] {
                        let refused = await o.execute(command)
                        #expect(chatError(refused)?["type"]?.stringValue == "invalidConnReq", "\(command): \(refused)")
                    }
                    // …while an owner's own plain address is an ordinary one.
                    let own = await o.execute("/_address 1 short=on")
                    let ownShort = try #require(own["connLinkContact"]?["connShortLink"]?.stringValue)
                    #expect(ownShort.contains("/a?c="))
                    let plan = await r.execute("/_connect plan 1 \(ownShort)")
                    #expect(plan["type"]?.stringValue == "connectionPlan", "\(plan)")

                    // A malformed userChatRelay is refused and makes no user.
                    let bad = await o.execute(#"/_create user {"profile": {"displayName": "x", "fullName": ""}, "userChatRelay": "yes"}"#)
                    #expect(chatError(bad)?["type"]?.stringValue == "commandError", "\(bad)")
                    #expect(await o.execute("/users")["users"]?.arrayCount == 1)
                }
            }
        }
    }

    /// A relay address serves channel owners only: a plain contact request sent to it through its
    /// full link (which the `/r` check does not see) is refused unseen, while the same engine's
    /// plain user still takes requests on its own address.
    @Test func aRelayAddressRefusesPlainContactRequests() async throws {
        try await withLiveRelay { dir, relay in
            try await withLimitedEngine(dir, "relay", relays: [relay.address], limits: ChatLimits()) { controller, r, rIn in
                _ = await r.execute(relayUserCommand("relay1"))
                _ = await r.execute("/_start")
                let relayFull = try #require(await r.execute("/_address 1")["connLinkContact"]?["connFullLink"]?.stringValue)
                await startUser(r, "plain")
                let plainFull = try #require(await r.execute("/_address 2")["connLinkContact"]?["connFullLink"]?.stringValue)
                try await withEngine(dir, "peer", relays: [relay.address]) { peer, _ in
                    await startUser(peer, "peer")
                    #expect(await peer.execute("/_connect 1 \(relayFull)")["type"]?.stringValue == "sentInvitation")
                    try await waitUntil("the request to the relay address to be refused") { await controller.refusedRelayAddressRequests == 1 }
                    #expect(await peer.execute("/_connect 1 \(plainFull)")["type"]?.stringValue == "sentInvitation")
                    let request = try await rIn.next("receivedContactRequest")
                    #expect(request["user"]?["userId"]?.intValue == 2, "\(request)")
                    #expect(!rIn.contains("receivedContactRequest"))
                    #expect(await controller.refusedRelayAddressRequests == 1)
                    let relayChats = await r.execute("/_get chats 1 count=100")
                    #expect(relayChats["chats"]?.arrayCount == 0, "\(relayChats)")
                }
            }
        }
    }

    /// `/relays name=<name> <address> …` replaces the owner's chat relays; `/relays` lists them,
    /// both as `userChatRelays` in the 7.0.2 shape. Bad input is refused with a typed error and
    /// changes nothing; the list survives a restart.
    @Test func anOwnerRegistersChatRelaysAndTheyPersist() async throws {
        try await withLiveRelay { dir, relay in
            let (one, two) = try await withEngine(dir, "relays", relays: [relay.address]) { r, _ in
                _ = await r.execute(relayUserCommand("relay1"))
                _ = await r.execute("/_start")
                let one = try #require(await r.execute("/_address 1")["connLinkContact"]?["connShortLink"]?.stringValue)
                _ = await r.execute(relayUserCommand("relay2"))
                let two = try #require(await r.execute("/_address 2")["connLinkContact"]?["connShortLink"]?.stringValue)
                return (one, two)
            }
            let (firstId, plainAddress) = try await withEngine(dir, "owner", relays: [relay.address]) { o, _ in
                await startUser(o, "owner")
                let empty = await o.execute("/relays")
                #expect(empty["type"]?.stringValue == "userChatRelays" && empty["chatRelays"]?.arrayCount == 0, "\(empty)")

                let set = await o.execute("/relays name=first \(one)")
                #expect(set["type"]?.stringValue == "userChatRelays", "\(set)")
                #expect(BotAPIDoc.problems(set["user"], Self.doc.records["User"], "user").isEmpty)
                let r1 = try #require(set["chatRelays"]?.arrayFirst)
                let problems = BotAPIDoc.problems(r1, Self.doc.records["UserChatRelay"], "UserChatRelay")
                #expect(problems.isEmpty, "\(problems)")
                #expect(r1["address"]?.stringValue == one && r1["relayProfile"]?["displayName"]?.stringValue == "first")
                #expect(r1["enabled"]?.boolValue == true && r1["deleted"]?.boolValue == false && r1["preset"]?.boolValue == false)
                let firstId = try #require(r1["chatRelayId"]?.intValue)

                // Both: the first keeps its id (renamed), the second is new.
                let both = await o.execute("/relays name=alpha \(one) name=beta \(two)")
                guard case let .array(list)? = both["chatRelays"] else { throw TestFailure("\(both)") }
                #expect(list.map { $0["relayProfile"]?["displayName"]?.stringValue } == ["alpha", "beta"])
                #expect(list.first?["chatRelayId"]?.intValue == firstId)

                // Typed refusals, and nothing changed by them.
                let plainAddress = try #require(await o.execute("/_address 1 short=on")["connLinkContact"]?["connShortLink"]?.stringValue)
                let cases: [(String, String, String?)] = [
                    ("/relays name=x \(plainAddress)", "channelError", "notRelayAddress"),
                    ("/relays name=x not-a-link", "channelError", "invalidLink"),
                    ("/relays name=x \(one) name=y \(one)", "chatRelayExists", nil),
                    ("/relays name=x \(one) name=x \(two)", "chatRelayExists", nil),
                ]
                for (command, type, code) in cases {
                    let refused = await o.execute(command)
                    let e = try #require(chatError(refused), "\(command): \(refused)")
                    #expect(e["type"]?.stringValue == type && e["code"]?.stringValue == code, "\(command): \(refused)")
                }
                for malformed in ["/relays \(one)", "/relays name=x"] {
                    #expect(chatError(await o.execute(malformed))?["type"]?.stringValue == "commandError", "\(malformed)")
                }
                #expect(await o.execute("/relays")["chatRelays"]?.arrayCount == 2)

                // Only the second: the first is dropped from the list.
                let second = await o.execute("/relays name=beta \(two)")
                #expect(second["chatRelays"]?.arrayCount == 1 && second["chatRelays"]?.arrayFirst?["address"]?.stringValue == two)
                return (firstId, plainAddress)
            }
            _ = plainAddress
            // After a restart: the list is the same; the dropped relay comes back with its id.
            try await withEngine(dir, "owner", relays: [relay.address]) { o, _ in
                _ = await o.execute("/_start")
                let listed = await o.execute("/relays")
                #expect(listed["chatRelays"]?.arrayCount == 1 && listed["chatRelays"]?.arrayFirst?["address"]?.stringValue == two, "\(listed)")
                let back = await o.execute("/relays name=beta \(two) name=again \(one)")
                guard case let .array(list)? = back["chatRelays"] else { throw TestFailure("\(back)") }
                #expect(list.first(where: { $0["address"]?.stringValue == one })?["chatRelayId"]?.intValue == firstId)
                #expect(list.first(where: { $0["address"]?.stringValue == one })?["relayProfile"]?["displayName"]?.stringValue == "again")
            }
        }
    }
}
