import ChatAPI
import ChatCore
import Foundation
import Logging
import NIOCore
import NIOPosix
import RelayServer
import SwiftplexBase

/// Set-up shared by the benchmarks that run chat engines in this process (`echo`, `group`).
enum ChatBench {
    /// A scratch directory, a logger that stays quiet, and an in-process durable relay on loopback.
    /// `configure` changes the relay's configuration first (limits a benchmark must exceed).
    static func startRelay(label: String, configure: (inout RelayConfiguration) -> Void = { _ in }) async throws -> (dir: URL, logger: Logger, server: RelayServer) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-bench-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var logger = Logger(label: "bench.\(label)")
        logger.logLevel = .critical
        var configuration = RelayConfiguration(dataDirectory: dir.appendingPathComponent("relay"), host: "127.0.0.1", port: 0)
        configure(&configuration)
        let server = try await RelayServer.start(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
        return (dir, logger, server)
    }

    /// An engine on its own files under `dir`, running, with a user named `name`, started.
    /// Cancel the returned task (after `/_stop`) to end it.
    static func startEngine(_ name: String, dir: URL, relay: RelayServer, logger: Logger, database: EngineDatabase? = nil) async throws -> (ChatAPI, Task<Void, any Error>) {
        let controller = try await ChatController.open(database: database ?? .sqlite(prefix: dir.appendingPathComponent(name).path), defaultRelays: [relay.address], logger: logger)
        let api = ChatAPI(controller: controller)
        let task = Task { try await controller.run() }
        let newUser = #"/_create user {"profile": {"displayName": "\#(name)", "fullName": ""}, "pastTimestamp": false, "userChatRelay": false, "clientService": false}"#
        try expect(await api.execute(newUser), "activeUser")
        try expect(await api.execute("/_start"), "chatStarted")
        return (api, task)
    }

    /// `inviter` makes a one-time invitation and `joiner` connects with it; the caller waits for
    /// `contactConnected` on whichever event stream it reads.
    static func invite(_ inviter: ChatAPI, _ joiner: ChatAPI) async throws {
        let invitation = await inviter.execute("/_connect 1")
        guard let link = invitation["connLinkInvitation"]?["connFullLink"]?.stringValue else { throw BenchFailure("no invitation: \(invitation)") }
        try expect(await joiner.execute("/_connect 1 \(link)"), "sentConfirmation")
    }

    /// An echo bot: every text a contact sends `bot` is sent back to that contact, until the
    /// task is cancelled. Reads `bot`'s events (their one consumer).
    static func answerEveryText(_ bot: ChatAPI) -> Task<Void, Never> {
        Task {
            for await event in bot.events where event["type"]?.stringValue == "newChatItems" {
                guard case let .array(items)? = event["chatItems"] else { continue }
                for item in items where item["chatItem"]?["content"]?["type"]?.stringValue == "rcvMsgContent" {
                    guard let contactId = item["chatInfo"]?["contact"]?["contactId"]?.intValue,
                          let text = item["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue else { continue }
                    _ = await bot.execute("/_send @\(contactId) json \(textMessage(text))")
                }
            }
        }
    }

    /// The `json` argument of `/_send` for one text message.
    static func textMessage(_ text: String) -> JSONValue {
        .array([.object([("msgContent", .object([("type", .string("text")), ("text", .string(text))])), ("mentions", .object([]))])])
    }

    static func expect(_ response: JSONValue, _ type: String) throws {
        guard response["type"]?.stringValue == type else { throw BenchFailure("expected \(type), got \(response)") }
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
