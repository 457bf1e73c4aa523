import Foundation
import TestSupport
import Testing

/// Channels from the terminal, with real processes: a `swiftplex-relay`, an owner, a process
/// holding two chat relay users (made through the Chat API as typed) and a subscriber, each a
/// `swiftplex-chat` driven over pipes.
@Suite(.timeLimit(.minutes(5))) struct ChannelClientTests {
    /// The first JSON answer (a line starting with `{`) from `from` on whose `type` is `type`.
    func answer(_ client: ChatProcess, from: Int, _ type: String) async throws -> [String: Any] {
        let (_, line) = try await client.process.waitFor(from: from, "a \(type) answer") { line in
            guard line.hasPrefix("{"), let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return false }
            return object["type"] as? String == type
        }
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    /// A chat relay user named `name` in `client`'s engine, on `relay`; returns its relay address.
    func relayUser(_ client: ChatProcess, _ name: String, relay: String) async throws -> String {
        var from = client.lines.count
        client.send(#"/_create user {"profile": {"displayName": "\#(name)", "fullName": ""}, "pastTimestamp": false, "userChatRelay": true, "clientService": false}"#)
        let user = try #require(try await answer(client, from: from, "activeUser")["user"] as? [String: Any])
        let id = try #require(user["userId"] as? Int)
        from = client.lines.count
        client.send("/_relays \(id) \(relay)")
        _ = try await answer(client, from: from, "userRelays")
        from = client.lines.count
        client.send("/_address \(id)")
        let (_, line) = try await client.process.waitFor(from: from, "\(name)'s relay address") { $0.hasPrefix("{") && $0.contains("connShortLink") }
        let created = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        return try #require((created["connLinkContact"] as? [String: Any])?["connShortLink"] as? String, "\(line)")
    }

    @Test func anOwnerMakesAChannelWithTwoRelaysAndASubscriberReadsItsPostsAsTheChannel() async throws {
        let scene = try await ClientScene.start("owner", "relayhost", "sub")
        let (owner, relays, sub) = (scene.clients[0], scene.clients[1], scene.clients[2])
        let a1 = try await relayUser(relays, "relay1", relay: scene.relay.address)
        let a2 = try await relayUser(relays, "relay2", relay: scene.relay.address)
        #expect(a1.contains("/r?") || a1.contains("/r#"), "\(a1)")

        // /relays: none, then two set and listed with their ids; a bad address changes nothing.
        owner.send("/relays")
        try await owner.waitFor(line: "no chat relays (/relays name=<name> <address> sets them)")
        var from = owner.lines.count
        owner.send("/relays name=one \(a1) name=two \(a2)")
        try await owner.waitFor(from: from, line: "your chat relays (/public group relays=<id>,… #<channel> uses them):")
        try await owner.waitFor(from: from, line: "  1 one: \(a1)")
        try await owner.waitFor(from: from, line: "  2 two: \(a2)")
        from = owner.lines.count
        owner.send("/relays name=three not-a-link")
        let (_, refused) = try await owner.process.waitFor(from: from, "the refusal") { $0.hasPrefix("cannot set the chat relays: ") }
        #expect(refused.count > "cannot set the chat relays: ".count)
        from = owner.lines.count
        owner.send("/relays")
        try await owner.waitFor(from: from, line: "  2 two: \(a2)")
        #expect(!owner.lines[from...].contains { $0.contains("three") })

        // /public group: usage, an unknown relay id, then the channel.
        owner.send("/public group #news")
        try await owner.waitFor(line: "usage: /public group relays=<id>[,<id>…] #<channel> (/relays lists the ids)")
        from = owner.lines.count
        owner.send("/public group relays=9 #news")
        _ = try await owner.process.waitFor(from: from, "an unknown relay refused") { $0.hasPrefix("cannot create channel #news: ") }
        from = owner.lines.count
        owner.send("/public group relays=1,2 #news")
        try await owner.waitFor(from: from, line: "group #news is created")
        try await owner.waitFor(from: from, line: "wait for selected relay(s) to join, then you can invite members via group link")
        try await owner.waitFor(from: from, line: "  - relay id 1 (one): invited")
        try await owner.waitFor(from: from, line: "  - relay id 2 (two): invited")
        let linkLine = try await owner.waitFor(from: from, line: "#news link (subscribers join with /c <link>):")
        let (_, link) = try await owner.process.waitFor(from: linkLine, "the channel link") { $0.hasPrefix("https://") }
        #expect(link.contains("/c?") || link.contains("/c#"), "\(link)")

        // Each relay joins; the owner sees each relay's status change, and the link's relays.
        let (i, _) = try await relays.process.waitFor("the first relay joined") { $0 == "#news: you joined the group as relay" }
        _ = try await relays.process.waitFor(from: i + 1, "the second relay joined") { $0 == "#news: you joined the group as relay" }
        try await owner.waitFor(timeout: .seconds(45), line: "#news: relay one is active")
        try await owner.waitFor(timeout: .seconds(45), line: "#news: relay two is active")
        try await owner.waitFor(from: from, line: "#news: group link relays updated, current relays:")
        try await owner.waitFor(from: from, line: "group link:")

        // The subscriber joins with /c and the channel link, through both relays.
        sub.send("/c \(link)")
        try await sub.waitFor(line: "joining channel #news through its relays; you are subscribed when a relay answers")
        try await sub.waitFor(timeout: .seconds(45), line: "#news: subscribed through relay relay1")
        try await sub.waitFor(timeout: .seconds(45), line: "#news: subscribed through relay relay2")

        // Posts show as the channel, not as the relay that brought them.
        owner.send("#news hello subscribers")
        try await owner.waitFor(line: "sent to #news: hello subscribers")
        try await sub.waitFor(timeout: .seconds(45), line: "#news> hello subscribers")
        owner.send("#news second post")
        try await sub.waitFor(timeout: .seconds(45), line: "#news> second post")
        #expect(!sub.lines.contains { $0.hasPrefix("#news relay") }, "\(sub.lines)")
        // Brought by both relays, each shown once (the engine takes the first copy).
        #expect(sub.lines.filter { $0 == "#news> hello subscribers" }.count == 1, "\(sub.lines)")
        // A subscriber cannot post.
        from = sub.lines.count
        sub.send("#news may I?")
        _ = try await sub.process.waitFor(from: from, "the subscriber's post refused") { $0.hasPrefix("not sent to #news: ") }

        try await scene.finish()
    }
}
