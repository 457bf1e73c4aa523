import BotHost
import ChatAPI
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOConcurrencyHelpers
import SwiftplexBase
import TestSupport
import Testing

/// ``WebSocketEngine`` against a scripted engine: a WebSocket server in this process that answers
/// as `simplex-chat -p` would and sends what Swiftplex's engine never does (an event type it does
/// not know), drops the connection with a command in flight and refuses new ones for a while.
@Suite(.timeLimit(.minutes(2))) struct WebSocketEngineTests {
    /// The scripted engine on a free port until its task is cancelled. Commands: `/slow` is never
    /// answered: the engine drops the connection under it and refuses new connections until
    /// `accepting` is set again; anything else is answered `{"type": "echo", "cmd": …}`, after an
    /// unknown event when it is `/event`.
    static func serve(ports: AsyncInbox<Int>, connections: AsyncInbox<String>, accepting: NIOLockedValueBox<Bool>) -> Task<Void, any Error> {
        Task {
            let router = Router(context: BasicWebSocketRequestContext.self)
            router.ws("/") { _, _ in accepting.withLockedValue { $0 } ? .upgrade([:]) : .dontUpgrade } onUpgrade: { inbound, outbound, _ in
                connections.yield("connected")
                for try await message in inbound.messages(maxSize: 1 << 20) {
                    guard case let .text(text) = message, let frame = try? JSONValue.parse(text),
                          let corrId = frame["corrId"]?.stringValue, let cmd = frame["cmd"]?.stringValue else { continue }
                    if cmd == "/slow" {
                        accepting.withLockedValue { $0 = false }
                        return
                    }
                    if cmd == "/event" {
                        let event: JSONValue = .object([("type", .string("newFancyEvent")), ("fancy", .object([("level", .int(9))]))])
                        try await outbound.write(.text(JSONValue.object([("resp", event)]).description))
                    }
                    let answer: JSONValue = .object([("corrId", .string(corrId)),
                                                     ("resp", .object([("type", .string("echo")), ("cmd", .string(cmd))]))])
                    try await outbound.write(.text(answer.description))
                }
            }
            let app = Application(router: Router(context: BasicWebSocketRequestContext.self),
                                  server: .http1WebSocketUpgrade(webSocketRouter: router),
                                  configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: nil),
                                  onServerRunning: { channel in ports.yield(channel.localAddress?.port ?? 0) },
                                  logger: Logger(label: "scripted-engine", factory: { _ in SwiftLogNoOpLogHandler() }))
            try await app.run()
        }
    }

    @Test func answersByCorrIdUnknownEventsAsTheyCameAndAReconnectAfterADrop() async throws {
        let ports = AsyncInbox<Int>()
        let connections = AsyncInbox<String>()
        let accepting = NIOLockedValueBox(true)
        let server = Self.serve(ports: ports, connections: connections, accepting: accepting)
        let port = try await ports.next(timeout: .seconds(20))
        var logger = Logger(label: "ws-engine-test")
        logger.logLevel = .critical
        let engine = try await WebSocketEngine.connect(url: "ws://127.0.0.1:\(port)", token: nil, logger: logger)
        _ = try await connections.next(timeout: .seconds(20))
        let events = AsyncInbox(engine.events)

        // Answers are matched by corrId, several at once.
        async let a = engine.execute("/one")
        async let b = engine.execute("/two")
        #expect(await a["cmd"]?.stringValue == "/one")
        #expect(await b["cmd"]?.stringValue == "/two")

        // An event type this host does not know reaches its readers as the engine wrote it.
        #expect(await engine.execute("/event")["type"]?.stringValue == "echo")
        let fancy = try await events.next(timeout: .seconds(20))
        #expect(fancy.event == nil && fancy.type == "newFancyEvent")
        #expect(try JSONValue.parse(fancy.json)["fancy"]?["level"]?.intValue == 9)

        // The engine drops the connection with a command in flight: the command fails, saying so,
        // after the host heard of the gap (so a plugin waiting for it is not done yet).
        let changes = AsyncInbox<EngineConnectionChange>()
        engine.observeConnection { changes.yield($0) }
        let lost = await engine.execute("/slow")
        #expect(lost["type"]?.stringValue == "chatCmdError")
        #expect(lost.description.contains("lost"), "\(lost)")
        #expect(changes.pending == [.lost], "the gap is told before the command in flight fails")
        // While it is down, commands fail at once instead of waiting.
        let down = await engine.execute("/while-down")
        #expect(down["type"]?.stringValue == "chatCmdError" && down.description.contains("not connected"), "\(down)")

        // It takes connections again: the engine reconnects by itself (with back-off) and serves again.
        accepting.withLockedValue { $0 = true }
        _ = try await connections.next(timeout: .seconds(30))
        // The scripted engine has the connection; the client side takes it up a moment later
        // (until then a command fails at once, as above): the sanctioned poll.
        try await eventually(timeout: .seconds(30), "a command answered over the new connection") {
            await engine.execute("/again")["cmd"]?.stringValue == "/again"
        }
        // Told once each: lost (however many attempts failed), then restored.
        #expect(try await changes.next(timeout: .seconds(20)) == .lost)
        #expect(try await changes.next(timeout: .seconds(20)) == .restored)
        #expect(changes.pending.isEmpty)

        await engine.close()
        server.cancel()
        _ = try? await server.value
    }
}
