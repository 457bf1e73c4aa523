import ChatAPI
import ChatCore
import ChatModel
import ChatServer
import ChatTestSupport
import Foundation
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import RelayServer
import TestSupport
import Testing
import SwiftplexBase

/// The framing of SimpleX's WebSocket API and its token checks, as pure functions.
@Suite struct WebSocketFramingTests {
    @Test func aCommandFrameIsParsedAndAnsweredWithItsCorrId() {
        #expect(WebSocketAPI.parse(#"{"corrId": "7", "cmd": "/user"}"#) == .command(corrId: "7", cmd: "/user"))
        #expect(WebSocketAPI.parse(#"{"corrId": 7, "cmd": "/user"}"#) == .command(corrId: "7", cmd: "/user"))
        let answer = try! JSONValue.parse(WebSocketAPI.response(corrId: "7", resp: .object([("type", .string("activeUser"))])))
        #expect(answer["corrId"]?.stringValue == "7")
        #expect(answer["resp"]?["type"]?.stringValue == "activeUser")
    }

    @Test func eventFramesCarryNoCorrId() throws {
        let frame = try JSONValue.parse(WebSocketAPI.event(.object([("type", .string("contactConnected"))])))
        #expect(frame["corrId"] == nil)
        #expect(frame["resp"]?["type"]?.stringValue == "contactConnected")
    }

    @Test func anEncodedEventIsFramedAsItsJSONObjectWouldBe() {
        let events: [ChatEvent] = [.hostConnected(protocol: "smp", transportHost: "relay.example \"quoted\""),
                                   .chatError(.error(.internalError(message: "ü\n\u{1}")))]
        for event in events {
            let encoded = EncodedChatEvent(event)
            #expect(encoded.json == ChatAPI.encode(event).description)
            #expect(encoded.webSocketFrame == WebSocketAPI.event(ChatAPI.encode(event)))
            #expect(ChatAPI.encode(event).webSocketFrame == WebSocketAPI.event(ChatAPI.encode(event)))
        }
    }

    @Test func malformedFramesAreNamedWithTheirCorrIdWhenTheyHaveOne() {
        guard case let .invalid(nil, reason) = WebSocketAPI.parse("not json") else { Issue.record("not json accepted"); return }
        #expect(reason.contains("not JSON"))
        guard case .invalid(nil, _) = WebSocketAPI.parse("[1, 2]") else { Issue.record("array accepted"); return }
        guard case .invalid(nil, _) = WebSocketAPI.parse(#"{"cmd": "/user"}"#) else { Issue.record("missing corrId accepted"); return }
        guard case let .invalid("3", why) = WebSocketAPI.parse(#"{"corrId": "3", "cmd": 5}"#) else { Issue.record("numeric cmd accepted"); return }
        #expect(why.contains("cmd"))
    }

    @Test func tokensComeFromTheHeaderOrTheQueryAndCompareExactly() {
        #expect(BearerToken.presented(authorization: "Bearer abc", uri: "/") == "abc")
        #expect(BearerToken.presented(authorization: "bearer  abc ", uri: "/") == "abc")
        #expect(BearerToken.presented(authorization: nil, uri: "/?x=1&token=a%2Bb") == "a+b")
        #expect(BearerToken.presented(authorization: "Basic abc", uri: "/") == nil)
        #expect(BearerToken.matches("secret", "secret"))
        #expect(!BearerToken.matches("secreT", "secret"))
        #expect(!BearerToken.matches("secret1", "secret"))
        #expect(!BearerToken.matches("", "secret"))
        #expect(!BearerToken.matches(nil, "secret"))
        #expect(!BearerToken.matches("", ""))
        let a = BearerToken.generate(), b = BearerToken.generate()
        #expect(a.count == 64 && a != b)
    }

    @Test func loopbackAddressesAreRecognised() {
        for h in ["127.0.0.1", "127.1.2.3", "localhost", "::1"] { #expect(ListenAddress(host: h, port: 1).isLoopback, "\(h)") }
        for h in ["0.0.0.0", "10.0.0.1", "::", "example.org", "127.0.0"] { #expect(!ListenAddress(host: h, port: 1).isLoopback, "\(h)") }
    }

    @Test func aServerBeyondLoopbackWithoutATokenIsRefused() async throws {
        let dir = TemporaryDirectory(prefix: "swiftplex-ws").url
        defer { try? FileManager.default.removeItem(at: dir) }
        let controller = try ChatController(prefix: dir.appendingPathComponent("c").path, defaultRelays: [], logger: silent)
        let api = ChatAPI(controller: controller)
        let hub = EventHub(source: api.events)
        #expect(throws: ServerConfigurationError.self) {
            try ChatWebSocketServer(api: api, events: hub, listen: ListenAddress(host: "0.0.0.0", port: 0), token: nil, logger: silent)
        }
        #expect(throws: ServerConfigurationError.self) {
            try ChatWebSocketServer(api: api, events: hub, listen: ListenAddress(host: "127.0.0.1", port: 0), token: "", logger: silent)
        }
        _ = try ChatWebSocketServer(api: api, events: hub, listen: ListenAddress(host: "0.0.0.0", port: 0), token: "a-long-enough-token", logger: silent)
        await controller.close()
    }
}

@Suite struct EventHubTests {
    @Test func everySubscriberGetsEveryEventAndALimitedOneDropsWhatItCannotKeep() async throws {
        let (source, sink) = AsyncStream.makeStream(of: JSONValue.self)
        let hub = EventHub(source: source)
        let all = hub.subscribe()
        let second = hub.subscribe()
        let limited = hub.subscribe(limit: 2)
        let pump = Task { await hub.run() }
        for i in 0..<5 { sink.yield(.int(Int64(i))) }
        sink.finish()
        await pump.value
        var a: [JSONValue] = [], b: [JSONValue] = [], c: [JSONValue] = []
        for await e in all.events { a.append(e) }
        for await e in second.events { b.append(e) }
        for await e in limited.events { c.append(e) }
        #expect(a == (0..<5).map { .int(Int64($0)) })
        #expect(b == a)
        #expect(c == [.int(0), .int(1)])
        #expect(limited.dropped == 3)
        // Subscribing after the source ended gives an ended stream.
        var late = 0
        for await _ in hub.subscribe().events { late += 1 }
        #expect(late == 0)
    }
}

/// A WebSocket API server over a real engine and an in-process relay, on loopback.
@Suite(.timeLimit(.minutes(2))) struct WebSocketServerTests: LiveRelaySuite {
    static let token = "test-token-0123456789abcdef"

    /// Runs a bot engine with the WebSocket API on an ephemeral port; `body` gets its port.
    func withServer(_ dir: URL, relay: RelayServer, _ body: @Sendable (ChatAPI, Int) async throws -> Void) async throws {
        let controller = try ChatController(prefix: dir.appendingPathComponent("bot").path, defaultRelays: [relay.address], logger: silent)
        let api = ChatAPI(controller: controller)
        let hub = EventHub(source: api.events)
        let ports = AsyncInbox<Int>()
        let server = try ChatWebSocketServer(api: api, events: hub, listen: ListenAddress(host: "127.0.0.1", port: 0), token: Self.token,
                                             logger: silent, onListening: { ports.yield($0.port) })
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try? await controller.run() }
                group.addTask { await hub.run() }
                group.addTask { try await server.run() }
                defer { group.cancelAll() }
                let port = try await ports.first(where: { _ in true }, "the server listening", timeout: .seconds(20))
                try await body(api, port)
            }
        } catch {
            await controller.close()
            throw error
        }
        await controller.close()
    }

    @Test func commandsAreAnsweredByCorrIdEventsArriveAndBadFramesDoNotEndTheConnection() async throws {
        try await withLiveRelay { dir, relay in
            try await withServer(dir, relay: relay) { _, port in
                try await withEngine(dir, "peer", relays: [relay.address]) { peer, peerInbox in
                    await startUser(peer, "peer")
                    let frames = AsyncInbox<JSONValue>()
                    let (outbox, outboxSink) = AsyncStream.makeStream(of: String.self)
                    var configuration = WebSocketClientConfiguration()
                    configuration.additionalHeaders[.authorization] = "Bearer \(Self.token)"
                    let client = Task {
                        try await WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/", configuration: configuration, logger: silent) { inbound, outbound, _ in
                            // Writes what the test sends; closes the connection when it is done.
                            let writer = Task {
                                for await text in outbox { try await outbound.write(.text(text)) }
                                try await outbound.close(.normalClosure, reason: nil)
                            }
                            defer { writer.cancel() }
                            for try await message in inbound.messages(maxSize: 1 << 20) {
                                if case let .text(t) = message { frames.yield(try JSONValue.parse(t)) }
                            }
                        }
                    }
                    defer { client.cancel() }
                    func answer(_ corrId: String) async throws -> JSONValue {
                        try await frames.first(where: { $0["corrId"]?.stringValue == corrId }, "answer \(corrId)", timeout: .seconds(20))["resp"] ?? .null
                    }

                    outboxSink.yield(#"{"corrId": "1", "cmd": \#(JSONValue.string(createUser("bot")).description)}"#)
                    #expect(try await answer("1")["type"]?.stringValue == "activeUser")
                    outboxSink.yield(#"{"corrId": "2", "cmd": "/_start"}"#)
                    #expect(try await answer("2")["type"]?.stringValue == "chatStarted")
                    outboxSink.yield(#"{"corrId": "3", "cmd": "/_connect 1"}"#)
                    let link = try #require(try await answer("3")["connLinkInvitation"]?["connFullLink"]?.stringValue)

                    // The peer joins: the bot's contactConnected arrives as an event frame.
                    _ = await peer.execute("/_connect 1 \(link)")
                    let event = try await frames.first(where: { $0["corrId"] == nil && $0["resp"]?["type"]?.stringValue == "contactConnected" },
                                                       "contactConnected event", timeout: .seconds(30))
                    let peerId = try #require(event["resp"]?["contact"]?["contactId"]?.intValue)
                    _ = try await peerInbox.next("contactConnected")

                    // Bad frames get a chatCmdError; the connection keeps serving.
                    outboxSink.yield("this is not JSON")
                    let bad = try await frames.first(where: { $0["corrId"] == nil && $0["resp"]?["type"]?.stringValue == "chatCmdError" },
                                                     "error frame", timeout: .seconds(20))
                    #expect(bad["resp"]?["chatError"]?.description.contains("not JSON") == true)
                    outboxSink.yield(#"{"corrId": "4"}"#)
                    #expect(try await answer("4")["type"]?.stringValue == "chatCmdError")
                    outboxSink.yield(#"{"corrId": "5", "cmd": "/no_such_command"}"#)
                    #expect(try await answer("5")["type"]?.stringValue == "chatCmdError")

                    // A message to the peer, answered by corrId, received by the peer.
                    let messages: JSONValue = .array([.object([("msgContent", .object([("type", .string("text")), ("text", .string("hello over ws"))]))])])
                    outboxSink.yield(JSONValue.object([("corrId", .string("6")), ("cmd", .string("/_send @\(peerId) json \(messages.description)"))]).description)
                    #expect(try await answer("6")["type"]?.stringValue == "newChatItems")
                    let received = try await peerInbox.next("newChatItems")
                    #expect(text(received["chatItems"]?.arrayFirst) == "hello over ws")
                    outboxSink.finish()
                    _ = try await client.value
                }
            }
        }
    }

    @Test func aWrongOrMissingTokenIsRefusedWith401BeforeTheUpgrade() async throws {
        try await withLiveRelay { dir, relay in
            try await withServer(dir, relay: relay) { _, port in
                let probe = HTTPProbe(port: port)
                let missing = try await probe.upgrade("/")
                #expect(missing.status == 401)
                #expect(missing.body.contains("unauthorized"))
                let wrong = try await probe.upgrade("/", headers: ["Authorization": "Bearer \(Self.token)x"])
                #expect(wrong.status == 401)
                let wrongQuery = try await probe.upgrade("/?token=nope")
                #expect(wrongQuery.status == 401)
                let right = try await probe.upgrade("/?token=\(Self.token)")
                #expect(right.status == 101)
                let header = try await probe.upgrade("/", headers: ["Authorization": "Bearer \(Self.token)"])
                #expect(header.status == 101)
            }
        }
    }
}
