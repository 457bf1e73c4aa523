import Foundation
import HummingbirdWSClient
import Logging
import SwiftplexBase
import TestSupport
import Testing

/// `swiftplex-chat` started with SimpleX CLI's command lines, as bot guides and SDKs start
/// `simplex-chat` (`-p PORT --create-bot-display-name NAME -d PREFIX`), and driven over the
/// WebSocket API with the terminal's own commands (`/u`, `/ad`, `/sa`, `/c`).
@Suite(.timeLimit(.minutes(3))) struct SimpleXCompatibilityTests {
    func tempDir() -> URL { TemporaryDirectory(prefix: "swiftplex-simplex-cli").url }

    @Test func aBotStartedLikeSimpleXsCLIServesAfterItsInputEndsAndAnswersTheTerminalsCommands() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let relay = try await RelayProcess.start(dataDirectory: dir.appendingPathComponent("relay"))
        defer { Task { await relay.stop() } }
        let prefix = dir.appendingPathComponent("bots/first").path
        let bot = try LineProcess(Binaries.url("swiftplex-chat"),
                                  ["-p", "0", "--create-bot-display-name", "CompatBot", "-d", prefix, "-s", relay.address, "-y", "--device-name", "box"])
        // As `</dev/null`: the input ends at once, and the process keeps serving.
        bot.closeInput()
        let (_, listening) = try await bot.child.waitForErrorLine("the WebSocket API listening") { $0.hasPrefix("WebSocket API listening on ") }
        let port = try #require(Int(listening.split(separator: ":").last ?? ""))
        try await bot.child.waitForErrorLine("the end of input noticed") { $0 == "standard input ended; serving until SIGTERM or SIGINT" }
        try await bot.waitFor(line: "bot profile CompatBot created")
        // SimpleX's file names at the prefix (its directory made).
        for suffix in ["_chat.db", "_agent.db"] {
            #expect(FileManager.default.fileExists(atPath: prefix + suffix), "\(prefix + suffix)")
        }

        try await WebSocketConversation.with(port: port) { ws in
            let user = try await ws.command("/u")
            #expect(user["type"]?.stringValue == "activeUser")
            #expect(user["user"]?["profile"]?["displayName"]?.stringValue == "CompatBot")
            #expect(user["user"]?["profile"]?["peerType"]?.stringValue == "bot")

            let missing = try await ws.command("/sa")
            #expect(missing["chatError"]?["storeError"]?["type"]?.stringValue == "userContactLinkNotFound")
            let created = try await ws.command("/ad")
            #expect(created["type"]?.stringValue == "userContactLinkCreated")
            let link = try #require(created["connLinkContact"]?["connFullLink"]?.stringValue)
            let shown = try await ws.command("/sa")
            #expect(shown["type"]?.stringValue == "userContactLink")
            #expect(shown["contactLink"]?["connLinkContact"]?["connFullLink"]?.stringValue == link)

            let accept = try await ws.command("/auto_accept on Welcome!")
            #expect(accept["type"]?.stringValue == "userContactLinkUpdated")
            #expect(accept["contactLink"]?["addressSettings"]?["autoReply"]?["text"]?.stringValue == "Welcome!")

            let invitation = try await ws.command("/c")
            #expect(invitation["type"]?.stringValue == "invitation")
            #expect(invitation["connLinkInvitation"]?["connFullLink"]?.stringValue?.isEmpty == false)

            let contacts = try await ws.command("/contacts")
            #expect(contacts["type"]?.stringValue == "contactsList")
            let help = try await ws.command("/help")
            #expect(help["type"]?.stringValue == "chatHelp" && help["helpSection"]?.stringValue == "main")
            let nobody = try await ws.command("@nobody hello")
            #expect(nobody["chatError"]?["storeError"]?["type"]?.stringValue == "contactNotFoundByName")
            let unknown = try await ws.command("/tail")
            #expect(unknown["type"]?.stringValue == "chatCmdError")
            #expect(unknown["chatError"]?["errorType"]?["type"]?.stringValue == "commandError")

            let deleted = try await ws.command("/da")
            #expect(deleted["type"]?.stringValue == "userContactLinkDeleted")
        }

        bot.signal(SIGTERM)
        #expect(await bot.waitForExit() == 0)
    }

    @Test func unsupportedSimpleXFlagsExit64NamingTheFlag() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let chat = Binaries.url("swiftplex-chat")
        let prefix = dir.appendingPathComponent("bot").path
        for (arguments, named) in [(["--tor"], "--tor"), (["-x"], "-x"), (["--socks-proxy=127.0.0.1:9050"], "--socks-proxy"),
                                   (["-p", "0", "--key", "secret"], "--key"), (["--files-folder", "/tmp"], "--files-folder")] {
            let p = try LineProcess(chat, ["-d", prefix] + arguments)
            #expect(await p.waitForExit() == 64, "\(arguments)")
            #expect(p.errorLines.contains { $0.hasPrefix("swiftplex-chat: \(named) is SimpleX CLI's flag but is not supported here") },
                    "\(arguments): \(p.errorLines)")
        }
        // Nothing was created.
        #expect(!FileManager.default.fileExists(atPath: prefix + "_chat.db"))

        let both = try LineProcess(chat, ["-d", prefix, "--data-dir", dir.appendingPathComponent("d").path])
        #expect(await both.waitForExit() == 64)
        #expect(both.errorLines.joined(separator: "\n").contains("give one"))
        let filesAlone = try LineProcess(chat, ["-d", prefix, "--create-bot-allow-files"])
        #expect(await filesAlone.waitForExit() == 64)
        #expect(filesAlone.errorLines.joined(separator: "\n").contains("--create-bot-allow-files needs --create-bot-display-name"))
    }

    @Test func executeRunsOneCommandPrintsItsAnswerAndExits() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let prefix = dir.appendingPathComponent("bot").path
        let run = try LineProcess(Binaries.url("swiftplex-chat"), ["-d", prefix, "--create-bot-display-name", "ExecBot", "-e", "/u", "-t", "0"])
        #expect(await run.waitForExit() == 0)
        let answer = try JSONValue.parse(try #require(run.lines.last { $0.hasPrefix("{") }))
        #expect(answer["type"]?.stringValue == "activeUser")
        #expect(answer["user"]?["profile"]?["displayName"]?.stringValue == "ExecBot")
        #expect(!run.lines.contains { $0.contains("is ready") })
        // The stored profile is used the next time; no profile and no name is an error, not a prompt.
        let again = try LineProcess(Binaries.url("swiftplex-chat"), ["-d", prefix, "-e", "/users", "-t", "0"])
        #expect(await again.waitForExit() == 0)
        #expect(again.lines.contains { $0.contains("\"usersList\"") && $0.contains("ExecBot") })
        let none = try LineProcess(Binaries.url("swiftplex-chat"), ["-d", dir.appendingPathComponent("none").path, "-e", "/u"])
        #expect(await none.waitForExit() == 1)
        #expect(none.errorLines.joined(separator: "\n").contains("--create-bot-display-name"))

        // Without -d or --data-dir: ~/.swiftplex/simplex_v1_*.db (HOME as SimpleX finds it).
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = dir.path
        let home = try ChildProcess(Binaries.url("swiftplex-chat"), ["--create-bot-display-name", "HomeBot", "-e", "/u", "-t", "0"],
                                    environment: environment)
        #expect(try await home.waitForExit() == 0)
        for file in ["simplex_v1_chat.db", "simplex_v1_agent.db"] {
            #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent(".swiftplex/\(file)").path), "\(file)")
        }
    }

    @Test func headlessRelayMakesAChatRelayAndServesUntilStopped() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let relay = try await RelayProcess.start(dataDirectory: dir.appendingPathComponent("relay"))
        defer { Task { await relay.stop() } }
        let prefix = dir.appendingPathComponent("chat-relay").path
        let arguments = ["--headless", "--relay", "--create-bot-display-name", "RelayOne", "-d", prefix, "-s", relay.address]
        let p = try LineProcess(Binaries.url("swiftplex-chat"), arguments)
        let (_, line) = try await p.waitFor(timeout: .seconds(60), "the relay address") { $0.hasPrefix("chat relay address: ") }
        #expect(line.contains("/r"))
        #expect(p.lines.contains("chat relay profile RelayOne created"))
        p.signal(SIGTERM)
        #expect(await p.waitForExit() == 0)

        // Its data says it is a chat relay user.
        let check = try LineProcess(Binaries.url("swiftplex-chat"), ["-d", prefix, "-e", "/u", "-t", "0"])
        #expect(await check.waitForExit() == 0)
        let answer = try JSONValue.parse(try #require(check.lines.last { $0.hasPrefix("{") }))
        #expect(answer["user"]?["userChatRelay"]?.boolValue == true)
    }
}

/// One WebSocket API connection to a `swiftplex-chat -p PORT`: commands sent with a corrId,
/// answers awaited by it.
struct WebSocketConversation: Sendable {
    let frames: AsyncInbox<JSONValue>
    let send: AsyncStream<String>.Continuation
    let counter = Counter()

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func next() -> Int { lock.withLock { value += 1; return value } }
    }

    /// Sends `command` and returns its answer (`resp`).
    func command(_ command: String, timeout: Duration = .seconds(30)) async throws -> JSONValue {
        let id = "\(counter.next())"
        send.yield(JSONValue.object([("corrId", .string(id)), ("cmd", .string(command))]).description)
        let frame = try await frames.first(where: { $0["corrId"]?.stringValue == id }, "the answer to \(command)", timeout: timeout)
        return frame["resp"] ?? .null
    }

    static func with(port: Int, _ body: @Sendable (WebSocketConversation) async throws -> Void) async throws {
        let frames = AsyncInbox<JSONValue>()
        let (outbox, sink) = AsyncStream.makeStream(of: String.self)
        var logger = Logger(label: "ws-test")
        logger.logLevel = .critical
        let quiet = logger
        let client = Task {
            try await WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/", logger: quiet) { inbound, outbound, _ in
                let writer = Task {
                    for await text in outbox { try await outbound.write(.text(text)) }
                    try await outbound.close(.normalClosure, reason: nil)
                }
                defer { writer.cancel() }
                for try await message in inbound.messages(maxSize: 1 << 22) {
                    if case let .text(t) = message { frames.yield(try JSONValue.parse(t)) }
                }
            }
        }
        defer { client.cancel() }
        try await body(WebSocketConversation(frames: frames, send: sink))
        sink.finish()
        _ = try await client.value
    }
}
