import Foundation
import GRDB
import QRCode
import TestSupport
import Testing

/// Two-process end-to-end tests: a real `swiftplex-relay` process and `swiftplex-chat`
/// processes driven over pipes, as a person would type.
@Suite(.timeLimit(.minutes(5))) struct ChatClientTests {
    /// A fresh temporary directory (0700); the test removes it.
    func tempDir() -> URL { TemporaryDirectory(prefix: "swiftplex-client").url }

    /// Connects two clients with `/c` and `/c <link>`; returns once both say connected.
    func connectByInvitation(_ a: ChatProcess, _ b: ChatProcess) async throws -> String {
        let from = a.lines.count
        a.send("/c")
        let (i, link) = try await a.process.waitFor(from: from, "an invitation link") { $0.hasPrefix("simplex:/invitation#/?v=") }
        let fromB = b.lines.count
        b.send("/c \(link)")
        try await b.waitFor(from: fromB, line: "connection request sent; you are connected when the other side's client answers")
        try await a.waitFor(from: i, line: "\(b.name) connected")
        try await b.waitFor(from: fromB, line: "\(a.name) connected")
        return link
    }

    /// The QR code printed after a link, as lines (stdout is a pipe, so without colours).
    func printedQR(_ lines: [String], after index: Int) -> [String] {
        Array(lines[(index + 1)...].prefix { !$0.isEmpty && $0.allSatisfy { " ▀▄█".contains($0) } })
    }

    @Test func twoClientsConnectByInvitationAndTalkBothWays() async throws {
        let scene = try await ClientScene.start("alice", "bob")
        let (alice, bob) = (scene.clients[0], scene.clients[1])

        let link = try await connectByInvitation(alice, bob)
        // The link is followed by its QR code, which encodes exactly the link.
        let linkLine = try #require(alice.lines.firstIndex(of: link))
        let expected = try QRCode.encode(link, ecc: .low).terminalString(quietZone: 2, ansiColors: false)
        #expect(printedQR(alice.lines, after: linkLine) == expected.split(separator: "\n").map(String.init))

        alice.send("@bob hello bob")
        try await alice.waitFor(line: "sent to @bob: hello bob")
        try await bob.waitFor(line: "@alice: hello bob")
        bob.send("@alice hi alice, how are you?")
        try await alice.waitFor(line: "@bob: hi alice, how are you?")
        bob.send("@nobody hi")
        try await bob.waitFor(line: "no contact called nobody (/contacts lists them)")

        let before = alice.lines.count
        alice.send("/contacts")
        try await alice.waitFor(from: before, line: "bob")
        // Any other /command goes to the Chat API as typed; its JSON answer is printed.
        alice.send("/_contacts 1")
        let (_, json) = try await alice.process.waitFor(from: before, "a JSON answer") { $0.hasPrefix("{") }
        let parsed = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        #expect(parsed?["type"] as? String == "contactsList")
        alice.send("/_nonsense")
        let (_, error) = try await alice.process.waitFor(from: before, "an error answer") { $0.contains("chatCmdError") }
        #expect(error.hasPrefix("{"))

        // The data directory is private, the databases too.
        let attributes = try FileManager.default.attributesOfItem(atPath: alice.dataDirectory.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        for file in ["chat_chat.db", "chat_agent.db"] {
            let a = try FileManager.default.attributesOfItem(atPath: alice.dataDirectory.appendingPathComponent(file).path)
            #expect((a[.posixPermissions] as? Int) == 0o600, "\(file)")
        }

        try await scene.finish()
    }

    @Test func threeClientsMakeAGroupTalkChangeARoleLeaveAndDeleteIt() async throws {
        let scene = try await ClientScene.start("alice", "bob", "carol")
        let (alice, bob, carol) = (scene.clients[0], scene.clients[1], scene.clients[2])
        _ = try await connectByInvitation(alice, bob)
        _ = try await connectByInvitation(alice, carol)

        alice.send("/g team")
        try await alice.waitFor(line: "group #team created; /a team <name> invites a contact")
        alice.send("/a team nobody")
        try await alice.waitFor(line: "no contact called nobody (/contacts lists them)")
        alice.send("/a nogroup bob")
        try await alice.waitFor(line: "no group called nogroup")
        for member in [bob, carol] {
            alice.send("/a team \(member.name)")
            try await alice.waitFor(line: "invited \(member.name) to #team")
            try await member.waitFor(line: "#team: alice invites you to join the group (/j team to join)")
            member.send("/j team")
            try await member.waitFor(line: "joining #team; you are in when the host's client answers")
            try await member.waitFor(line: "#team: you joined the group")
            try await alice.waitFor(line: "#team: \(member.name) joined the group")
        }
        // Carol came second: the host introduces her to bob, and each says so.
        try await bob.waitFor(line: "#team: connected to carol")
        try await carol.waitFor(line: "#team: connected to bob")

        // A peer's text cannot pass for the client's own output: the escape is shown, not obeyed.
        alice.send("#team hello\u{1B}[2J all")
        try await alice.waitFor(line: "sent to #team: hello^[[2J all")
        try await bob.waitFor(line: "#team alice> hello^[[2J all")
        try await carol.waitFor(line: "#team alice> hello^[[2J all")
        bob.send("#team hi from bob")
        try await alice.waitFor(line: "#team bob> hi from bob")
        try await carol.waitFor(line: "#team bob> hi from bob")
        carol.send("#nogroup hi")
        try await carol.waitFor(line: "no group called nogroup")

        var from = alice.lines.count
        alice.send("/ms team")
        try await alice.waitFor(from: from, line: "#team: you (owner), 2 other members")
        try await alice.waitFor(from: from, line: "bob (member, connected)")
        try await alice.waitFor(from: from, line: "carol (member, connected)")

        // A role change through the Chat API (the typed-in /_ command) shows as a line at the members.
        from = alice.lines.count
        alice.send("/_members #1")
        let (_, json) = try await alice.process.waitFor(from: from, "the members' JSON") { $0.hasPrefix("{") }
        let members = ((try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?["group"] as? [String: Any])?["members"] as? [[String: Any]]
        let carolId = try #require(members?.first { ($0["localDisplayName"] as? String) == "carol" }?["groupMemberId"] as? Int)
        alice.send("/_member role #1 \(carolId) admin")
        try await bob.waitFor(line: "#team: alice changed the role of carol from member to admin")

        // Member contacts and profiles as lines: bob opens a direct chat with carol through the
        // group, she accepts; then bob's new profile reaches the group.
        from = bob.lines.count
        bob.send("/_members #1")
        let (_, bobsJSON) = try await bob.process.waitFor(from: from, "bob's members' JSON") { $0.hasPrefix("{") }
        let bobsMembers = ((try JSONSerialization.jsonObject(with: Data(bobsJSON.utf8)) as? [String: Any])?["group"] as? [String: Any])?["members"] as? [[String: Any]]
        let carolInBob = try #require(bobsMembers?.first { ($0["localDisplayName"] as? String) == "carol" }?["groupMemberId"] as? Int)
        from = bob.lines.count
        bob.send("/_create member contact #1 \(carolInBob)")
        let (_, created) = try await bob.process.waitFor(from: from, "the member contact") { $0.contains("newMemberContact") }
        let contactId = try #require(((try JSONSerialization.jsonObject(with: Data(created.utf8)) as? [String: Any])?["contact"] as? [String: Any])?["contactId"] as? Int)
        bob.send("/_invite member contact @\(contactId) text hi carol")
        let (_, invited) = try await carol.process.waitFor("the invitation") { $0.hasPrefix("#team: bob invites you to a direct chat (/_accept member contact @") }
        let accept = try #require(invited.split(separator: "(").last.map { $0.replacingOccurrences(of: " to accept)", with: "") })
        try await carol.waitFor(line: "@bob: hi carol")
        carol.send(accept)
        try await carol.waitFor(line: "bob connected")
        try await bob.waitFor(line: "carol connected")
        bob.send(#"/_profile 1 {"displayName": "bob", "fullName": "Bob B"}"#)
        try await carol.waitFor(line: "#team: bob updated the profile")

        carol.send("/l team")
        try await carol.waitFor(line: "you left #team")
        try await alice.waitFor(line: "#team: carol left the group")
        try await bob.waitFor(line: "#team: carol left the group")
        carol.send("#team still here?")
        let (_, refused) = try await carol.process.waitFor("the refusal") { $0.hasPrefix("not sent to #team: ") }
        #expect(refused.contains("not"), "\(refused)")

        alice.send("/_delete #1 full")
        try await bob.waitFor(line: "#team: alice deleted the group")

        try await scene.finish()
    }

    @Test func aClientJoinsAGroupByItsLink() async throws {
        let scene = try await ClientScene.start("alice", "dave")
        let (alice, dave) = (scene.clients[0], scene.clients[1])

        alice.send("/g club")
        try await alice.waitFor(line: "group #club created; /a club <name> invites a contact")
        alice.send("/create link #nogroup")
        try await alice.waitFor(line: "no group called nogroup")
        let from = alice.lines.count
        alice.send("/create link #club")
        try await alice.waitFor(from: from, line: "#club link (anyone can join with /c <link>):")
        let (_, link) = try await alice.process.waitFor(from: from, "the link") { $0.hasPrefix("https://") }
        #expect(link.contains("/g?"), "\(link)")
        // Asking again shows the same link.
        let again = alice.lines.count
        alice.send("/create link #club")
        try await alice.waitFor(from: again, line: link)

        dave.send("/c \(link)")
        try await dave.waitFor(line: "request to join the group sent; you are in when the host's client answers")
        try await dave.waitFor(line: "#club: joining the group through its link (host alice)")
        try await dave.waitFor(line: "#club: you joined the group")
        try await alice.waitFor(line: "#club: dave joined the group")
        dave.send("#club hi all")
        try await alice.waitFor(line: "#club dave> hi all")

        try await scene.finish()
    }

    @Test func twoClientsConnectByAddressWithManualAcceptAndReject() async throws {
        let scene = try await ClientScene.start("alice", "bob", "carol")
        let (alice, bob, carol) = (scene.clients[0], scene.clients[1], scene.clients[2])

        alice.send("/ad")
        let (i, address) = try await alice.process.waitFor("the address") { $0.hasPrefix("simplex:/contact#/?v=") }
        let expected = try QRCode.encode(address, ecc: .low).terminalString(quietZone: 2, ansiColors: false)
        let expectedLines = expected.split(separator: "\n").map(String.init)
        // The QR code's lines follow the link line: wait for the last of them.
        try await alice.process.waitFor(from: i + expectedLines.count, "the QR code's \(expectedLines.count) lines") { _ in true }
        #expect(printedQR(alice.lines, after: i) == expectedLines)
        // The second /ad shows the same address.
        alice.send("/ad")
        _ = try await alice.process.waitFor(from: i + 1, "the same address again") { $0 == address }

        bob.send("/c \(address)")
        try await bob.waitFor(line: "contact request sent; you are connected when it is accepted")
        try await alice.waitFor(line: "contact request from bob (/ac bob to accept, /rc bob to reject)")
        carol.send("/c \(address)")
        try await alice.waitFor(line: "contact request from carol (/ac carol to accept, /rc carol to reject)")

        alice.send("/ac nobody")
        try await alice.waitFor(line: "no contact request from nobody")
        alice.send("/rc carol")
        try await alice.waitFor(line: "contact request from carol rejected")
        alice.send("/ac bob")
        try await alice.waitFor(line: "accepting bob; you are connected when their client answers")
        try await alice.waitFor(line: "bob connected")
        try await bob.waitFor(line: "alice connected")

        bob.send("@alice hello via your address")
        try await alice.waitFor(line: "@bob: hello via your address")
        alice.send("@bob welcome, bob")
        try await bob.waitFor(line: "@alice: welcome, bob")

        // Carol was rejected: she never gets connected, and alice has one contact.
        let before = alice.lines.count
        alice.send("/contacts")
        try await alice.waitFor(from: before, line: "bob")
        // Bob's whole handshake and two messages happened after carol's rejection: a connection
        // accepted by mistake at `/rc carol` would have completed by now too.
        #expect(!carol.lines.contains("alice connected"))
        #expect(alice.lines[before...].filter { !$0.hasPrefix("connected to relay") } == ["bob"])

        try await scene.finish()
    }

    /// The texts a client's database holds for messages it received, in order.
    func receivedTexts(_ client: URL) throws -> [String] {
        let db = try DatabaseQueue(path: client.appendingPathComponent("chat_chat.db").path)
        defer { try? db.close() }
        return try db.read { db in
            try String.fetchAll(db, sql: "SELECT content FROM chat_item WHERE sent = 0 ORDER BY id").map {
                guard let data = $0.data(using: .utf8),
                      let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { return "?" }
                return object["text"] as? String ?? "?"
            }
        }
    }

    /// The received messages a client printed, e.g. `n7` for `@alice: n7`.
    func printed(_ lines: [String], from sender: String) -> [String] {
        lines.compactMap { $0.hasPrefix("@\(sender): ") ? String($0.dropFirst(sender.count + 3)) : nil }
    }

    /// Sends n<first>…n<last>, each after the previous one was accepted by the engine.
    func sendSeries(_ client: ChatProcess, to: String, _ range: ClosedRange<Int>) async throws {
        for n in range {
            let from = client.lines.count
            client.send("@\(to) n\(n)")
            try await client.waitFor(from: from, line: "sent to @\(to): n\(n)")
        }
    }

    @Test(arguments: ["receiver", "sender"])
    func kill9MidConversationLosesAndDuplicatesNothing(victim: String) async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let relay = try await RelayProcess.start(dataDirectory: dir.appendingPathComponent("relay"))
        let aliceDir = dir.appendingPathComponent("alice")
        let bobDir = dir.appendingPathComponent("bob")
        var alice = try await ChatProcess.start("alice", dataDirectory: aliceDir, relay: relay)
        var bob = try await ChatProcess.start("bob", dataDirectory: bobDir, relay: relay)
        _ = try await connectByInvitation(alice, bob)
        var bobOutputs: [[String]] = []
        let total = 60

        // Alice sends n1…n60; at n20 and at n40 one side is killed with SIGKILL right after
        // the engine accepted the message — while earlier ones are still on their way —
        // and started again on the same data directory.
        try await sendSeries(alice, to: "bob", 1...20)
        for (killAt, resumeAt) in [(20, 21), (40, 41)] {
            if victim == "receiver" {
                await bob.process.kill9()
                bobOutputs.append(bob.lines)
                try await sendSeries(alice, to: "bob", resumeAt...(resumeAt + 9))
                bob = try await ChatProcess.start("bob", dataDirectory: bobDir, relay: nil)
                try await sendSeries(alice, to: "bob", (resumeAt + 10)...(killAt + 20))
            } else {
                await alice.process.kill9()
                alice = try await ChatProcess.start("alice", dataDirectory: aliceDir, relay: nil)
                try await sendSeries(alice, to: "bob", resumeAt...(killAt + 20))
            }
        }
        try await bob.waitFor(timeout: .seconds(60), line: "@alice: n\(total)")
        // Replies still work after the restarts.
        bob.send("@alice got them all")
        try await alice.waitFor(line: "@bob: got them all")
        try await alice.quit()
        try await bob.quit()
        bobOutputs.append(bob.lines)

        let expected = (1...total).map { "n\($0)" }
        let stored = try receivedTexts(bobDir)
        #expect(stored == expected, "stored: \(stored)")
        // What bob printed: each message at most once and in order (one killed with SIGKILL
        // may have stored a message it had no time to print).
        let shown = bobOutputs.flatMap { printed($0, from: "alice") }
        #expect(Set(shown).count == shown.count)
        #expect(shown == expected.filter { shown.contains($0) })
        if victim == "sender" { #expect(shown == expected) }
        await relay.stop()
    }

    /// The texts a client's database holds for group messages it received, in order.
    func receivedGroupTexts(_ client: URL) throws -> [String] {
        let db = try DatabaseQueue(path: client.appendingPathComponent("chat_chat.db").path)
        defer { try? db.close() }
        return try db.read { db in
            try String.fetchAll(db, sql: "SELECT content FROM group_item WHERE member_row_id IS NOT NULL ORDER BY id").map {
                guard let data = $0.data(using: .utf8),
                      let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else { return "?" }
                return object["text"] as? String ?? "?"
            }
        }
    }

    /// `host` makes `#group` and invites each member, who joins; returns when every member is
    /// connected to every other.
    func makeGroup(_ name: String, host: ChatProcess, members: [ChatProcess]) async throws {
        host.send("/g \(name)")
        try await host.waitFor(line: "group #\(name) created; /a \(name) <name> invites a contact")
        for (i, member) in members.enumerated() {
            host.send("/a \(name) \(member.name)")
            try await member.waitFor(line: "#\(name): \(host.name) invites you to join the group (/j \(name) to join)")
            member.send("/j \(name)")
            try await member.waitFor(line: "#\(name): you joined the group")
            try await host.waitFor(line: "#\(name): \(member.name) joined the group")
            for earlier in members[..<i] {
                try await earlier.waitFor(line: "#\(name): connected to \(member.name)")
                try await member.waitFor(line: "#\(name): connected to \(earlier.name)")
            }
        }
    }

    /// Sends g<first>…g<last> to `#group`, each after the previous one was accepted by the engine.
    func sendGroupSeries(_ client: ChatProcess, group: String, _ range: ClosedRange<Int>) async throws {
        for n in range {
            let from = client.lines.count
            client.send("#\(group) g\(n)")
            try await client.waitFor(from: from, line: "sent to #\(group): g\(n)")
        }
    }

    /// A group of three (alice hosts it; bob and carol joined and are connected to each other).
    /// Alice sends g1…g45; at g15 and at g30 one of the four processes is killed with SIGKILL
    /// and started again on the same data directory — a member (bob), the sender and host
    /// (alice), or the relay everyone uses — while earlier messages are still on their way. Every
    /// member stores every message exactly once and in order, and the group still works after.
    @Test(arguments: ["member", "host", "relay"])
    func kill9MidGroupConversationLosesAndDuplicatesNothing(victim: String) async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let relayDir = dir.appendingPathComponent("relay")
        var relay = try await RelayProcess.start(dataDirectory: relayDir)
        let aliceDir = dir.appendingPathComponent("alice")
        let bobDir = dir.appendingPathComponent("bob")
        let carolDir = dir.appendingPathComponent("carol")
        var alice = try await ChatProcess.start("alice", dataDirectory: aliceDir, relay: relay)
        var bob = try await ChatProcess.start("bob", dataDirectory: bobDir, relay: relay)
        let carol = try await ChatProcess.start("carol", dataDirectory: carolDir, relay: relay)
        _ = try await connectByInvitation(alice, bob)
        _ = try await connectByInvitation(alice, carol)
        try await makeGroup("team", host: alice, members: [bob, carol])
        var bobOutputs: [[String]] = []
        let total = 45

        try await sendGroupSeries(alice, group: "team", 1...15)
        for resumeAt in [16, 31] {
            switch victim {
            case "member":
                await bob.process.kill9()
                bobOutputs.append(bob.lines)
                try await sendGroupSeries(alice, group: "team", resumeAt...(resumeAt + 6))
                bob = try await ChatProcess.start("bob", dataDirectory: bobDir, relay: nil)
                try await sendGroupSeries(alice, group: "team", (resumeAt + 7)...(resumeAt + 14))
            case "host":
                await alice.process.kill9()
                alice = try await ChatProcess.start("alice", dataDirectory: aliceDir, relay: nil)
                try await sendGroupSeries(alice, group: "team", resumeAt...(resumeAt + 14))
            default:
                relay = try await relay.restartAfterKill9(dataDirectory: relayDir)
                try await sendGroupSeries(alice, group: "team", resumeAt...(resumeAt + 14))
            }
        }
        try await bob.waitFor(timeout: .seconds(90), line: "#team alice> g\(total)")
        try await carol.waitFor(timeout: .seconds(90), line: "#team alice> g\(total)")
        // The group still works every way after the restarts: bob to both, carol to both.
        bob.send("#team bob after")
        try await alice.waitFor(timeout: .seconds(60), line: "#team bob> bob after")
        try await carol.waitFor(timeout: .seconds(60), line: "#team bob> bob after")
        carol.send("#team carol after")
        try await alice.waitFor(timeout: .seconds(60), line: "#team carol> carol after")
        try await bob.waitFor(timeout: .seconds(60), line: "#team carol> carol after")
        try await alice.quit()
        try await bob.quit()
        try await carol.quit()
        bobOutputs.append(bob.lines)

        let expected = (1...total).map { "g\($0)" }
        for (name, data) in [("bob", bobDir), ("carol", carolDir)] {
            let stored = try receivedGroupTexts(data).filter { $0.hasPrefix("g") }
            #expect(stored == expected, "\(name) stored: \(stored)")
        }
        // What bob printed: each message at most once and in order (a process killed with SIGKILL
        // may have stored a message it had no time to print).
        let shown = bobOutputs.flatMap { $0.compactMap { $0.hasPrefix("#team alice> ") ? String($0.dropFirst(13)) : nil } }
        #expect(Set(shown).count == shown.count)
        #expect(shown == expected.filter { shown.contains($0) })
        if victim != "member" { #expect(shown == expected) }
        await relay.stop()
    }

    @Test func badArgumentsGiveClearErrors() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let chat = Binaries.url("swiftplex-chat")

        let badServer = try LineProcess(chat, ["--data-dir", dir.appendingPathComponent("x").path, "--server", "smp://not-a-relay"])
        #expect(await badServer.waitForExit() == 64)
        #expect(badServer.errorLines.joined(separator: "\n").contains("invalid --server 'smp://not-a-relay'"))
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("x").path))

        let twoPlaces = try LineProcess(chat, ["--name", "x", "-d", dir.appendingPathComponent("p").path, "--data-dir", dir.appendingPathComponent("q").path])
        #expect(await twoPlaces.waitForExit() == 64)
        #expect(twoPlaces.errorLines.joined(separator: "\n").contains("--data-dir"))

        // No --name and the input ends at the prompt: nothing is created but the directory.
        let noName = try LineProcess(chat, ["--data-dir", dir.appendingPathComponent("y").path])
        noName.closeInput()
        #expect(await noName.waitForExit() == 1)
        #expect(noName.errorLines.joined(separator: "\n").contains("no display name given"))

        // A name typed at the prompt; no relay anywhere: /c explains how to set one.
        let typed = try LineProcess(chat, ["--data-dir", dir.appendingPathComponent("z").path])
        typed.send("  zed  ")
        try await typed.waitFor(line: "zed is ready; type /help for commands")
        typed.send("/c")
        let (_, why) = try await typed.waitFor("the missing relay") { $0.hasPrefix("cannot create an invitation:") }
        #expect(why.contains("SWIFTPLEX_SERVERS") && why.contains("/_relays"))
        typed.send("@")
        try await typed.waitFor(line: "usage: @name text")
        typed.send("hello")
        try await typed.waitFor(line: "to send a message write @name text; /help lists the commands")
        typed.send("/c simplex:/invitation#/?v=1")
        _ = try await typed.waitFor("a bad link refused") { $0.hasPrefix("cannot connect:") }
        // A chat relay's address is refused before anything is tried (no relay is even configured).
        typed.send("/c https://relay.example/r#bGluaw/a2V5")
        try await typed.waitFor(line: "cannot connect: This is a chat relay address, it cannot be used to connect.")
        // SIGTERM stops the engine cleanly.
        typed.signal(SIGTERM)
        #expect(await typed.waitForExit() == 0)

        // Restarted without --name, the stored profile is used.
        let again = try LineProcess(chat, ["--data-dir", dir.appendingPathComponent("z").path])
        try await again.waitFor(line: "zed is ready; type /help for commands")
        again.signal(SIGINT)
        #expect(await again.waitForExit() == 0)
    }
}
