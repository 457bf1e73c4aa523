import ChatAPI
import ChatCore
import ChatModel
import Foundation
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import SwiftplexBase

/// A chat engine the operator runs as `simplex-chat -p PORT` (or `swiftplex-chat -p PORT`),
/// driven over SimpleX's WebSocket API: `{"corrId", "cmd"}` frames out, `{"corrId", "resp"}`
/// answers and `{"resp"}` events in.
///
/// ``connect(url:token:logger:)`` returns once the first connection is up (or throws, naming the
/// URL). A lost connection is made again with back-off (0.5 s doubling to 30 s); commands in
/// flight when it drops, and commands sent while it is down, fail at once with a `commandError`
/// saying so. Events the engine sent before the drop were all read; what it sends after the new
/// connection is up is read too; what it sent in between is gone (SimpleX's CLI keeps no backlog
/// for a connection that is gone): the observers of ``observeConnection(_:)`` hear of the gap, and
/// the host reads the received messages its plugins missed back through the bot API.
public final class WebSocketEngine: BotEngine {
    public let url: String
    private let token: String?
    private let logger: Logger
    private let state = NIOLockedValueBox(State())
    public let events: AsyncStream<EncodedChatEvent>
    private let eventSink: AsyncStream<EncodedChatEvent>.Continuation
    private let connection = NIOLockedValueBox<Task<Void, Never>?>(nil)

    /// Largest frame taken from the engine (a `newChatItems` with many items can be large).
    static let maxFrameBytes = 16 << 20

    private struct State {
        /// The current connection's writer; nil while disconnected.
        var outgoing: AsyncStream<String>.Continuation?
        var pending: [String: CheckedContinuation<JSONValue, Never>] = [:]
        var nextId: UInt64 = 0
        var closed = false
        var connections = 0
        var observers: [@Sendable (EngineConnectionChange) -> Void] = []
        /// Between a lost connection and the next one that is up.
        var down = false
    }

    public var kind: String { "websocket" }
    public var controller: ChatController? { nil }

    private init(url: String, token: String?, logger: Logger) {
        self.url = url
        self.token = token
        self.logger = logger
        (events, eventSink) = AsyncStream.makeStream(of: EncodedChatEvent.self)
    }

    /// Connects to the engine at `url` (`ws://host:port`); `token` is sent as a bearer token.
    public static func connect(url: String, token: String?, logger: Logger) async throws -> WebSocketEngine {
        guard url.hasPrefix("ws://") || url.hasPrefix("wss://") else {
            throw BotHostError("engine url \(url) is not a WebSocket URL (ws://host:port, as simplex-chat -p PORT serves)")
        }
        let engine = WebSocketEngine(url: url, token: token, logger: logger)
        let (first, firstSink) = AsyncStream.makeStream(of: Result<Void, any Error>.self)
        let task = Task { await engine.serve(first: firstSink) }
        engine.connection.withLockedValue { $0 = task }
        for await outcome in first {
            switch outcome {
            case .success: return engine
            case let .failure(error):
                task.cancel()
                await task.value
                throw BotHostError("cannot reach the chat engine at \(url): \(error) — is `simplex-chat -p PORT` running there?")
            }
        }
        throw BotHostError("cannot reach the chat engine at \(url)")
    }

    /// Serves until cancelled: the connection task (reads, reconnections) runs until then.
    public func run() async throws {
        guard let task = connection.withLockedValue({ $0 }) else { return }
        await withTaskCancellationHandler { await task.value } onCancel: { task.cancel() }
    }

    public func close() async {
        let task = connection.withLockedValue { c -> Task<Void, Never>? in defer { c = nil }; return c }
        let failed = state.withLockedValue { s -> [CheckedContinuation<JSONValue, Never>] in
            s.closed = true
            s.outgoing?.finish()
            defer { s.pending.removeAll() }
            return Array(s.pending.values)
        }
        for c in failed { c.resume(returning: ForeignResponse.commandError(message: "the bot host closed its connection to the chat engine at \(url)")) }
        task?.cancel()
        await task?.value
        eventSink.finish()
    }

    public func execute(_ line: String, idempotencyKey: String?) async -> JSONValue {
        await withCheckedContinuation { (continuation: CheckedContinuation<JSONValue, Never>) in
            let sent = state.withLockedValue { s -> String? in
                guard !s.closed, let outgoing = s.outgoing else { return nil }
                s.nextId += 1
                let corrId = String(s.nextId)
                s.pending[corrId] = continuation
                outgoing.yield(JSONValue.object([("corrId", .string(corrId)), ("cmd", .string(line))]).description)
                return corrId
            }
            if sent == nil {
                continuation.resume(returning: ForeignResponse.commandError(
                    message: "the chat engine at \(url) is not connected (the bot host is reconnecting); the command was not sent"))
            }
        }
    }

    public func respond(_ line: String, idempotencyKey: String?) async -> Result<ChatResponse, ChatFailure> {
        ForeignResponse.typed(await execute(line, idempotencyKey: idempotencyKey))
    }

    public func observeConnection(_ observer: @escaping @Sendable (EngineConnectionChange) -> Void) {
        state.withLockedValue { $0.observers.append(observer) }
    }

    private func tell(_ change: EngineConnectionChange) {
        for observer in state.withLockedValue({ $0.observers }) { observer(change) }
    }

    /// Connects, serves the connection until it drops, and connects again with back-off, until
    /// cancelled. The first attempt's outcome goes to `first`.
    private func serve(first: AsyncStream<Result<Void, any Error>>.Continuation) async {
        var configuration = WebSocketClientConfiguration()
        if let token { configuration.additionalHeaders[.authorization] = "Bearer \(token)" }
        configuration.maxFrameSize = Self.maxFrameBytes
        var delay = Duration.milliseconds(500)
        let reportedFirst = NIOLockedValueBox(false)
        while !Task.isCancelled {
            let started = ContinuousClock.now
            do {
                try await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, outbound, _ in
                    let (outgoing, outgoingSink) = AsyncStream.makeStream(of: String.self)
                    let closed = self.state.withLockedValue { s -> Bool in
                        if !s.closed { s.outgoing = outgoingSink; s.connections += 1 }
                        return s.closed
                    }
                    if closed { return }
                    if !reportedFirst.withLockedValue({ r in defer { r = true }; return r }) {
                        first.yield(.success(()))
                        first.finish()
                    } else {
                        self.logger.notice("reconnected to the chat engine", metadata: ["url": "\(self.url)"])
                        self.state.withLockedValue { $0.down = false }
                        self.tell(.restored)  // before the new connection's first event is read
                    }
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await text in outgoing { try await outbound.write(.text(text)) }
                        }
                        group.addTask {
                            for try await message in inbound.messages(maxSize: Self.maxFrameBytes) {
                                guard case let .text(text) = message else { continue }
                                self.received(text)
                            }
                        }
                        defer { group.cancelAll() }
                        try await group.next()
                    }
                }
            } catch {
                if !reportedFirst.withLockedValue({ $0 }) {
                    first.yield(.failure(error))
                    first.finish()
                    return
                }
                logger.warning("the connection to the chat engine failed", metadata: ["url": "\(url)", "error": "\(error)"])
            }
            let lost = state.withLockedValue { s -> [CheckedContinuation<JSONValue, Never>] in
                s.outgoing?.finish()
                s.outgoing = nil
                defer { s.pending.removeAll() }
                return Array(s.pending.values)
            }
            // Once per gap, however many attempts fail — every event of the old connection is in
            // `events` by now — and before the commands in flight fail, so that a plugin still
            // waiting for one has not finished the message it handles.
            let gapBegins = reportedFirst.withLockedValue { $0 } && !Task.isCancelled
                && state.withLockedValue { s in defer { s.down = true }; return !s.down && !s.closed }
            if gapBegins { tell(.lost) }
            for c in lost {
                c.resume(returning: ForeignResponse.commandError(message: "the connection to the chat engine at \(url) was lost before it answered; the command may or may not have run"))
            }
            if Task.isCancelled || state.withLockedValue({ $0.closed }) { return }
            if !reportedFirst.withLockedValue({ $0 }) {
                first.yield(.failure(BotHostError("the engine closed the connection at once")))
                first.finish()
                return
            }
            // A connection that lasted a while starts the back-off again.
            if ContinuousClock.now - started > .seconds(30) { delay = .milliseconds(500) }
            logger.warning("lost the connection to the chat engine; reconnecting", metadata: ["url": "\(url)", "in": "\(delay)"])
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(30))
        }
    }

    /// One frame from the engine: an answer (by `corrId`) or an event.
    private func received(_ text: String) {
        guard let frame = try? JSONValue.parse(text), let resp = frame["resp"] else {
            logger.warning("the chat engine sent a frame that is not {\"resp\": …}; ignored", metadata: ["bytes": "\(text.utf8.count)"])
            return
        }
        if let corrId = frame["corrId"]?.stringValue, !corrId.isEmpty {
            let waiter = state.withLockedValue { $0.pending.removeValue(forKey: corrId) }
            waiter?.resume(returning: resp)
        } else {
            eventSink.yield(EncodedChatEvent(foreign: resp))
        }
    }
}
