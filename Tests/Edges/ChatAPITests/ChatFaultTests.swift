@testable import ChatCore
import ChatTestSupport
import Foundation
import GRDB
import NIOPosix
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexBase
import SwiftplexCrypto
import TestSupport
import Testing
@testable import Agent
@testable import ChatAPI

extension SilentListener {
    /// A relay address at the silent listener (any fingerprint: the handshake never gets that far).
    var address: RelayAddress { RelayAddress(fingerprint: Array(repeating: 7, count: 32), host: "127.0.0.1", port: port) }
}

func isText(_ t: String) -> @Sendable (JSONValue) -> Bool {
    { e in text(e["chatItems"]?.arrayFirst) == t }
}

func say(_ api: ChatAPI, to contact: Int, _ t: String) async -> JSONValue {
    await api.execute(#"/_send @\#(contact) json [{"msgContent": {"type": "text", "text": "\#(t)"}, "mentions": {}}]"#)
}

/// A contact request naming a relay that never answers holds up nothing else.
@Suite(.timeLimit(.minutes(3))) struct ChatSlowRelayTests: LiveRelaySuite {
    @Test func aContactRequestNamingASilentRelayDoesNotDelayAnotherContactsMessages() async throws {
        try await withLiveRelay { dir, relay in
            let hole = try SilentListener()
            defer { hole.close() }
            let bound = Duration.seconds(8)
            try await withEngine(dir, "bot", relays: [relay.address], agentOptions: AgentOptions(peerRelayTimeout: bound, connectTimeout: .seconds(60))) { bot, botInbox in
                try await withEngine(dir, "client", relays: [relay.address]) { client, clientInbox in
                    await startUser(bot, "bot")
                    let link = try #require(await bot.execute("/_address 1")["connLinkContact"]?["connFullLink"]?.stringValue)
                    _ = await bot.execute(#"/_address_settings 1 {"businessAddress": false, "autoAccept": {"acceptIncognito": false}}"#)
                    await startUser(client, "alice")
                    _ = await client.execute("/_connect 1 \(link)")
                    let botId = try #require(try await clientInbox.next("contactConnected")["contact"]?["contactId"]?.intValue)
                    let aliceId = try #require(try await botInbox.next("contactConnected")["contact"]?["contactId"]?.intValue)

                    // Mallory sends the bot a contact request whose invitation is on the silent relay.
                    let address = try ContactAddressLink(parsing: link)
                    let info = ChatMessage(event: "x.info", params: .object([("profile", .object([("displayName", .string("mallory")), ("fullName", .string(""))]))])).encoded
                    let request = try Envelope.seal(AgentMessage.contactRequest(invitation: InvitationLink(
                        queue: QueueURI(relay: hole.address, senderId: Array(repeating: 1, count: 24), recipientDhKey: X25519.PrivateKey().publicKey),
                        keys: X3DH.PrivateKeys().publicKeys), info: info).encoded(),
                        kind: .confirmation, own: X25519.PrivateKey(), peer: address.queue.recipientDhKey)
                    let mallory = try await RelayConnection.connect(to: relay.address)
                    try await mallory.sendMessage(senderId: address.queue.senderId, key: nil, body: request)
                    await mallory.close()

                    // The bot is now joining through the silent relay ...
                    try await hole.waitForConnections()
                    let joinStarted = ContinuousClock.now
                    // ... and still exchanges messages with Alice meanwhile.
                    _ = await say(client, to: botId, "ping")
                    _ = try await botInbox.next("newChatItems", where: isText("ping"))
                    _ = await say(bot, to: aliceId, "pong")
                    _ = try await clientInbox.next("newChatItems", where: isText("pong"))
                    #expect(ContinuousClock.now - joinStarted < bound, "the exchange waited for the bad join")
                    let failedEarly = botInbox.contains("chatError", where: { agentErrorType($0) == "timeout" })
                    #expect(!failedEarly, "the exchange waited for the bad join")

                    // The bad join fails with a typed error within its bound; the request stays.
                    let failed = try await botInbox.next("chatError", where: { agentErrorType($0) == "timeout" }, timeout: .seconds(20))
                    // Ended by the bound (the dial alone would wait 60 s), with slack for a loaded machine.
                    #expect(ContinuousClock.now - joinStarted < bound + .seconds(20))
                    let requestId = try #require(failed["chatError"]?["contactRequestId"]?.intValue)
                    let again = await bot.execute("/_accept \(requestId)")
                    #expect(agentErrorType(again) == "timeout", "\(again)")
                    #expect(await bot.execute("/_contacts 1")["contacts"]?.arrayCount == 1)
                }
            }
        }
    }
}

/// A request whose automatic acceptance failed is not forgotten: the next start accepts it.
@Suite(.timeLimit(.minutes(3))) struct ChatAutoAcceptResumeTests: LiveRelaySuite {
    @Test func anAutoAcceptThatFailedIsTriedAgainAtTheNextStart() async throws {
        try await withLiveRelay { dir, botRelay in
            try await withRelay(dir.appendingPathComponent("r2")) { aliceRelay in
                try await withEngine(dir, "client", relays: [aliceRelay.address]) { client, clientInbox in
                    await startUser(client, "alice")
                    // First run: the bot may not dial Alice's relay, so accepting her request fails.
                    let strict = AgentOptions(allowedHosts: ["relay.example.org"])
                    try await withEngine(dir, "bot", relays: [botRelay.address], agentOptions: strict) { bot, botInbox in
                        await startUser(bot, "bot")
                        let link = try #require(await bot.execute("/_address 1")["connLinkContact"]?["connFullLink"]?.stringValue)
                        _ = await bot.execute(#"/_address_settings 1 {"businessAddress": false, "autoAccept": {"acceptIncognito": false}}"#)
                        #expect(await client.execute("/_connect 1 \(link)")["type"]?.stringValue == "sentInvitation")
                        let failed = try await botInbox.next("chatError", where: { $0["chatError"]?["contactRequestId"] != nil })
                        #expect(agentErrorType(failed) == "relayRefused", "\(failed)")
                    }
                    // Next run, allowed: the start accepts the request that is still there.
                    try await withEngine(dir, "bot", relays: [botRelay.address]) { bot, botInbox in
                        #expect(await bot.execute("/_start")["type"]?.stringValue == "chatStarted")
                        _ = try await botInbox.next("acceptingContactRequest")
                        let seen = try await botInbox.next("contactConnected")
                        #expect(seen["contact"]?["profile"]?["displayName"]?.stringValue == "alice")
                        _ = try await clientInbox.next("contactConnected")
                        #expect(await bot.execute("/_contacts 1")["contacts"]?.arrayCount == 1)
                    }
                }
            }
        }
    }
}

/// What the chat database refuses is not marked processed: it is stored once the fault clears
/// (the engine's receive path under a database fault or a full disk).
@Suite(.timeLimit(.minutes(3)), .serialized) struct ChatStoreFaultTests: LiveRelaySuite {
    @Test func aMessageTheChatDatabaseRefusesIsStoredOnceWhenTheFaultClears() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "a", relays: [relay.address]) { a, aInbox in
                try await withEngine(dir, "b", relays: [relay.address]) { b, bInbox in
                    let (ben, _) = try await connectPair(a, aInbox, b, bInbox)
                    let fault = try sideConnection(dir.appendingPathComponent("b_chat.db").path)
                    try await fault.write { db in
                        try db.execute(sql: "CREATE TRIGGER fault BEFORE INSERT ON chat_item WHEN NEW.sent = 0 BEGIN SELECT RAISE(ABORT, 'injected fault'); END")
                    }
                    _ = await say(a, to: ben, "one")
                    let refused = try await bInbox.next("chatError", where: { $0["chatError"]?["type"]?.stringValue == "errorStore" })
                    #expect(refused["chatError"]?["storeError"]?["type"]?.stringValue == "dbError")
                    try await fault.write { db in try db.execute(sql: "DROP TRIGGER fault") }
                    _ = try await bInbox.next("newChatItems", where: isText("one"))
                    _ = await say(a, to: ben, "two")
                    _ = try await bInbox.next("newChatItems", where: isText("two"))
                    let twice = bInbox.contains("newChatItems", where: isText("one"))
                    #expect(!twice)
                    let stored = try await fault.read { db in
                        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM chat_item WHERE sent = 0 AND content LIKE '%\"one\"%'") ?? 0
                    }
                    #expect(stored == 1)
                    try fault.close()
                }
            }
        }
    }

    /// A real full disk: Ben's engine lives on a small tmpfs that is filled up.
    @Test(.enabled(if: getuid() == 0, "mounting a tmpfs needs root"))
    func aFullDiskDuringReceiveLosesNothingAndServiceResumesWhenSpaceReturns() async throws {
        try await withLiveRelay { dir, relay in
            let small = dir.appendingPathComponent("small")
            try FileManager.default.createDirectory(at: small, withIntermediateDirectories: true)
            guard run("/bin/mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", small.path]) == 0 else {
                Issue.record("could not mount a tmpfs at \(small.path)")
                return
            }
            defer { _ = run("/bin/umount", ["-l", small.path]) }
            try await withEngine(dir, "a", relays: [relay.address]) { a, aInbox in
                try await withEngine(small, "b", relays: [relay.address]) { b, bInbox in
                    let (ben, _) = try await connectPair(a, aInbox, b, bInbox)
                    let filler = small.appendingPathComponent("filler")
                    fill(filler)
                    _ = await say(a, to: ben, "one")
                    // The agent's or the chat's database reports the fault; nothing is lost.
                    let fault = try await bInbox.next("chatError", where: { e in
                        e["chatError"]?["type"]?.stringValue == "errorStore" || agentErrorType(e) == "store"
                    })
                    #expect(fault.description.contains("disk is full") || fault.description.contains("SQLITE_FULL"), "\(fault)")
                    let early = bInbox.contains("newChatItems", where: isText("one"))
                    #expect(!early)
                    try FileManager.default.removeItem(at: filler)
                    _ = try await bInbox.next("newChatItems", where: isText("one"), timeout: .seconds(30))
                    _ = await say(a, to: ben, "two")
                    _ = try await bInbox.next("newChatItems", where: isText("two"))
                    let twice = bInbox.contains("newChatItems", where: isText("one"))
                    #expect(!twice)
                }
            }
        }
    }

    func run(_ tool: String, _ arguments: [String]) -> Int32 {
        (try? runProgram(tool, arguments))?.status ?? -1
    }

    /// Writes zeros to `file` until the file system is full.
    func fill(_ file: URL) {
        let fd = open(file.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0, count: 4096)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        let one: [UInt8] = [0]
        while one.withUnsafeBytes({ write(fd, $0.baseAddress, 1) }) > 0 {}
    }
}

@Suite struct EngineDatabaseTests {
    @Test func secureDeleteIsOnForTheEnginesDatabases() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-chat-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // Opening the files blocks: on a thread of its own, as the engine does.
        let (chat, agent) = try await Blocking.run("open") {
            let chat = try ChatStore(path: dir.appendingPathComponent("x_chat.db"))
            let agent = try AgentStore(path: dir.appendingPathComponent("x_agent.db"))
            return (try chat.db.readNow { db in try Int.fetchOne(db, sql: "PRAGMA secure_delete") },
                    try agent.db.readNow { db in try Int.fetchOne(db, sql: "PRAGMA secure_delete") })
        }
        #expect(chat == 1)
        #expect(agent == 1)
    }
}
