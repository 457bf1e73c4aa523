@testable import BotHost
import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing

/// Channels in the admin API: a real host (embedded relay) whose bot owns a channel served by
/// chat relays on engines of their own — two running (`one`, `two`: `makeRelayUsers`) and one
/// whose engine is stopped when the channel is made (`three`, so it stays `invited` until its
/// engine starts again) — over HTTP on loopback.
@Suite(.timeLimit(.minutes(4))) struct AdminChannelTests {
    /// The host bot's events, as JSON, taken by type.
    final class HostEvents: Sendable {
        let inbox = AsyncInbox<JSONValue>(describe: { $0["type"]?.stringValue ?? "?" })
        private let feeder: Task<Void, Never>

        init(_ host: BotHost) {
            let subscription = host.events.subscribe()
            feeder = Task { [inbox] in
                for await e in subscription.events { if let json = try? JSONValue.parse(e.json) { inbox.yield(json) } }
            }
        }

        deinit { feeder.cancel() }

        /// The next `groupRelayUpdated` of the relay named `name` with status `status`.
        func relayUpdated(_ name: String, _ status: String) async throws {
            _ = try await inbox.first(where: { e in
                e["type"]?.stringValue == "groupRelayUpdated" && e["groupRelay"]?["relayStatus"]?.stringValue == status
                    && e["groupRelay"]?["userChatRelay"]?["relayProfile"]?["displayName"]?.stringValue == name
            }, "relay \(name) \(status)", timeout: .seconds(45))
        }
    }

    func json(_ a: HTTPProbe.Answer) -> JSONValue { (try? JSONValue.parse(a.body)) ?? .null }

    /// Each relay's name and status in a list of `GroupRelay`s.
    func statuses(_ relays: JSONValue?) -> [String: String] {
        var out: [String: String] = [:]
        for r in relays?.arrayValue ?? [] {
            if let name = r["userChatRelay"]?["relayProfile"]?["displayName"]?.stringValue { out[name] = r["relayStatus"]?.stringValue ?? "?" }
        }
        return out
    }

    @Test func channelsAreListedApartFromGroupsWithEachRelaysStatus() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let admin = AdminAPITests()
        try await admin.withHost(admin.options(dir)) { host, http, token in
            let relay = try #require(host.relayAddress)
            let events = HostEvents(host)
            try await withEngine(dir, "relays", relays: [relay]) { relays, _ in
                let addresses = try await makeRelayUsers(relays)
                // The third relay's engine makes its address and stops.
                let late = try await withEngine(dir, "late", relays: [relay]) { l, _ -> String in
                    _ = await l.execute(relayUserCommand("relay3"))
                    _ = await l.execute("/_start")
                    return try #require(await l.execute("/_address 1")["connLinkContact"]?["connShortLink"]?.stringValue)
                }

                func command(_ cmd: String) async throws -> JSONValue {
                    let body = JSONValue.object([("cmd", .string(cmd))]).description
                    let a = try await http.post("/api/command", token: token, body: body)
                    #expect(a.status == 200, "\(cmd): \(a.body)")
                    return json(a)
                }
                let set = try await command("/relays name=one \(addresses[0]) name=two \(addresses[1]) name=three \(late)")
                let ids = (set["chatRelays"]?.arrayValue ?? []).compactMap { $0["chatRelayId"]?.intValue }
                #expect(ids.count == 3, "\(set)")
                let created = try await command(#"/_public group \#(host.userId) \#(ids.map(String.init).joined(separator: ",")) {"displayName": "news", "fullName": ""}"#)
                let channelId = try #require(created["groupInfo"]?["groupId"]?.intValue, "\(created)")
                let group = try await command(#"/_group \#(host.userId) {"displayName": "ops", "fullName": ""}"#)
                let groupId = try #require(group["groupInfo"]?["groupId"]?.intValue, "\(group)")
                try await events.relayUpdated("one", "active")
                try await events.relayUpdated("two", "active")

                // /api/groups lists both, the channel with useRelays; /api/channels only the channel.
                let groups = json(try await http.get("/api/groups", token: token))
                let byId = Dictionary(uniqueKeysWithValues: (groups["groups"]?.arrayValue ?? []).compactMap { g in g["groupId"]?.intValue.map { ($0, g) } })
                #expect(byId[channelId]?["useRelays"]?.boolValue == true, "\(groups)")
                #expect(byId[groupId]?["useRelays"]?.boolValue == false, "\(groups)")
                let channels = json(try await http.get("/api/channels", token: token))
                #expect(channels["total"]?.intValue == 1 && channels["bot"]?.stringValue == "bot", "\(channels)")
                let channel = try #require(channels["channels"]?.arrayFirst)
                #expect(channel["groupInfo"]?["groupId"]?.intValue == channelId && channel["role"]?.stringValue == "owner")
                #expect(statuses(channel["relays"]) == ["one": "active", "two": "active", "three": "invited"], "\(channel)")

                // One channel's relays, each with its status and its registered address.
                let answer = try await http.get("/api/groups/\(channelId)/relays", token: token)
                #expect(answer.status == 200, "\(answer.body)")
                let list = json(answer)
                #expect(list["groupInfo"]?["groupProfile"]?["displayName"]?.stringValue == "news")
                #expect(statuses(list["relays"]) == ["one": "active", "two": "active", "three": "invited"], "\(list)")
                let addressed = (list["relays"]?.arrayValue ?? []).compactMap { $0["userChatRelay"]?["address"]?.stringValue }
                #expect(Set(addressed) == Set(addresses + [late]))
                // A group is no channel, an unknown id is none, an unknown bot is refused.
                let notChannel = try await http.get("/api/groups/\(groupId)/relays", token: token)
                #expect(notChannel.status == 422 && json(notChannel)["error"]?["type"]?.stringValue == "chatError", "\(notChannel.body)")
                #expect(try await http.get("/api/groups/999/relays", token: token).status == 422)
                #expect(try await http.get("/api/groups/abc/relays", token: token).status == 400)
                #expect(try await http.get("/api/channels?bot=nosuch", token: token).status == 404)
                #expect(try await http.get("/api/groups/\(channelId)/relays?bot=nosuch", token: token).status == 404)
                #expect(try await http.get("/api/channels?offset=1", token: token).body.contains(#""channels":[]"#))
                #expect(try await http.get("/api/channels").status == 401)

                // The third relay's engine starts again: it takes the invitation waiting on its
                // address, and the owner's view follows (accepted, then active).
                try await withEngine(dir, "late", relays: [relay]) { l, _ in
                    _ = await l.execute("/_start")
                    try await events.relayUpdated("three", "active")
                    let after = json(try await http.get("/api/groups/\(channelId)/relays", token: token))
                    #expect(statuses(after["relays"]) == ["one": "active", "two": "active", "three": "active"], "\(after)")
                    let listed = json(try await http.get("/api/channels?limit=1", token: token))
                    #expect(statuses(listed["channels"]?.arrayFirst?["relays"]) == ["one": "active", "two": "active", "three": "active"], "\(listed)")
                }
            }
        }
    }

    /// The bot subscribes to another owner's channel (two relays on an engine of their own): the
    /// channel is listed with the role `subscriber` and no relays (only an owner lists them).
    @Test func aChannelTheBotSubscribesToIsListedAsSubscriber() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let admin = AdminAPITests()
        try await admin.withHost(admin.options(dir)) { host, http, token in
            let relay = try #require(host.relayAddress)
            let events = HostEvents(host)
            try await withEngine(dir, "relays", relays: [relay]) { relays, _ in
                let addresses = try await makeRelayUsers(relays)
                try await withEngine(dir, "owner", relays: [relay]) { o, oIn in
                    let (_, link) = try await makeActiveChannel(o, oIn, addresses)
                    let body = JSONValue.object([("cmd", .string("/_connect \(host.userId) \(link)"))]).description
                    let joined = json(try await http.post("/api/command", token: token, body: body))
                    #expect(joined["type"]?.stringValue == "startedConnectionToGroup", "\(joined)")
                    let channelId = try #require(joined["groupInfo"]?["groupId"]?.intValue)
                    _ = try await events.inbox.first(where: { $0["type"]?.stringValue == "userJoinedGroup" }, "userJoinedGroup", timeout: .seconds(45))

                    let channels = json(try await http.get("/api/channels", token: token))
                    let channel = try #require(channels["channels"]?.arrayFirst, "\(channels)")
                    #expect(channel["groupInfo"]?["groupId"]?.intValue == channelId && channel["groupInfo"]?["useRelays"]?.boolValue == true)
                    #expect(channel["role"]?.stringValue == "subscriber" && channel["relays"] == nil && channel["relaysError"] == nil, "\(channel)")
                    // A subscriber's relays come with its per-relay counters (docs/channels.md §9).
                    let relaysAnswer = try await http.get("/api/groups/\(channelId)/relays", token: token)
                    #expect(relaysAnswer.status == 200)
                    let subscribed = json(relaysAnswer)
                    #expect(subscribed["relays"]?.arrayCount == 2 && subscribed["relays"]?.arrayFirst?["relayStats"]?["rejected"]?.intValue == 0, "\(subscribed)")
                }
            }
        }
    }
}
