import ChatAPI
import ChatCore
import ChatModel
import Foundation
import SwiftplexBase

/// The one seam between the bot host and a chat engine: SimpleX's bot API — command strings in,
/// JSON responses and events out. The host's start-up, its plugins, the admin API and the
/// WebSocket API go through it, so the same host drives
/// - ``EmbeddedEngine``: Swiftplex's own engine in this process (the default);
/// - ``LibSimplexEngine``: a `libsimplex.so` loaded at run time (SimpleX's official build, or
///   Swiftplex's own), through its C ABI;
/// - ``WebSocketEngine``: a `simplex-chat -p PORT` process the operator runs, over SimpleX's
///   WebSocket API.
///
/// What only Swiftplex's engine has (replay of received messages read from its store with
/// idempotent answers — a foreign engine's are read back through the bot API, ``ForeignItemFeed``
/// —, the outbox gauge, a chat relay's policy and statistics) is reached through ``controller``,
/// nil on a foreign engine; the configuration refuses what a bot asks for that its engine lacks
/// (`chat_relay`, contact-request limits, `peer_relays`), at the `engine:` line.
public protocol BotEngine: ChatCommandRunner {
    /// `swiftplex`, `libsimplex` or `websocket`.
    var kind: String { get }
    /// Every event the engine reports, in order; one consumer (the bot's event hub). Typed where
    /// this host knows the type, passed on as the engine wrote it always.
    var events: AsyncStream<EncodedChatEvent> { get }
    /// Serves until cancelled: the embedded engine's background work, a foreign engine's event
    /// reader (and, for the WebSocket engine, its reconnections).
    func run() async throws
    /// After ``run()`` ended: stops the engine and closes its databases or connection.
    func close() async
    /// Swiftplex's own engine, for its extensions; nil on a foreign engine.
    var controller: ChatController? { get }
    /// Tells `observer` when the host's connection to the engine is lost and when it is made
    /// again (only an engine in another process has such gaps: ``WebSocketEngine``). Events the
    /// engine sent meanwhile are gone; the host reads its plugins' missed messages back.
    /// `observer` is called in the engine's connection task: `.lost` after the last event of the
    /// old connection was put in ``events``, `.restored` before the first of the new one.
    func observeConnection(_ observer: @escaping @Sendable (EngineConnectionChange) -> Void)
}

/// A change of the host's connection to an engine in another process.
public enum EngineConnectionChange: Sendable, Equatable {
    case lost
    case restored
}

extension BotEngine {
    /// An engine in this process never loses its connection.
    public func observeConnection(_ observer: @escaping @Sendable (EngineConnectionChange) -> Void) {}
}

/// Swiftplex's engine in this process.
public struct EmbeddedEngine: BotEngine {
    public let api: ChatAPI
    public var controller: ChatController? { api.controller }
    public var kind: String { "swiftplex" }

    public init(_ api: ChatAPI) { self.api = api }

    public func execute(_ line: String, idempotencyKey: String?) async -> JSONValue {
        await api.execute(line, idempotencyKey: idempotencyKey)
    }

    public func respond(_ line: String, idempotencyKey: String?) async -> Result<ChatResponse, ChatFailure> {
        await api.respond(line, idempotencyKey: idempotencyKey)
    }

    public var events: AsyncStream<EncodedChatEvent> { api.encodedEvents }
    public func run() async throws { try await api.controller.run() }
    public func close() async { await api.controller.close() }
}

/// Reading a foreign engine's answers: the response object of a command, typed when it can be.
enum ForeignResponse {
    /// The typed form of `response` (a response object); a `chatCmdError` or `chatError` becomes
    /// the failure it carries, and a response this host cannot read a `commandError` naming its type.
    static func typed(_ response: JSONValue) -> Result<ChatResponse, ChatFailure> {
        let type = response["type"]?.stringValue ?? ""
        if type == "chatCmdError" || type == "chatError", let error = response["chatError"] {
            return .failure(failure(error))
        }
        do { return .success(try JSONValueDecoder().decode(ChatResponse.self, from: response)) } catch {
            return .failure(ChatFailure(commandError: "the engine's \(type.isEmpty ? "answer" : type) response cannot be read here: \(error)"))
        }
    }

    /// A `ChatError` object as a failure (its own when this host can read it).
    static func failure(_ chatError: JSONValue) -> ChatFailure {
        if let error = try? JSONValueDecoder().decode(ChatError.self, from: chatError) { return ChatFailure(error) }
        return ChatFailure(commandError: "the engine failed: \(chatError.description.prefix(2000))")
    }

    /// A `chatCmdError` response object carrying `chatError`.
    static func commandError(_ chatError: JSONValue) -> JSONValue {
        .object([("type", .string("chatCmdError")), ("chatError", chatError)])
    }

    /// A `chatCmdError` response with a `commandError` (what the engine layer itself refuses).
    static func commandError(message: String) -> JSONValue {
        commandError(ChatFailure(commandError: message).chatError)
    }
}
