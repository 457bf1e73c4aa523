import ChatAPI
import ChatCore
import ChatModel
@testable import ChatServer
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
        let controller = try await ChatController.open(prefix: dir.appendingPathComponent("c").path, defaultRelays: [], logger: silent)
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
    func withServer(_ dir: URL, relay: RelayServer, token: String? = Self.token, browsers: BrowserGuard = BrowserGuard(),
                    _ body: @Sendable (ChatAPI, Int) async throws -> Void) async throws {
        let controller = try await ChatController.open(prefix: dir.appendingPathComponent("bot").path, defaultRelays: [relay.address], logger: silent)
        let api = ChatAPI(controller: controller)
        let hub = EventHub(source: api.events)
        let ports = AsyncInbox<Int>()
        let server = try ChatWebSocketServer(api: api, events: hub, listen: ListenAddress(host: "127.0.0.1", port: 0), token: token,
                                             browsers: browsers, logger: silent, onListening: { ports.yield($0.port) })
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

    /// A web page the operator visits cannot reach a tokenless API on loopback: a browser's
    /// WebSocket handshake carries the page's `Origin`, a DNS-rebinding page's requests carry the
    /// attacker's name in `Host`. SimpleX's clients send neither and keep working.
    @Test func browsersOriginsAndForeignHostsAreRefusedWith403AndClientsWithoutOriginWork() async throws {
        try await withLiveRelay { dir, relay in
            try await withServer(dir, relay: relay, token: nil, browsers: BrowserGuard(allowedOrigins: ["http://127.0.0.1:8080"])) { _, port in
                let probe = HTTPProbe(port: port)
                // A client without Origin (SimpleX's own, scripts) is upgraded, by IP or loopback name.
                #expect(try await probe.upgrade("/").status == 101)
                #expect(try await probe.upgrade("/", headers: ["Host": "localhost:\(port)"]).status == 101)
                #expect(try await probe.upgrade("/", headers: ["Host": "[::1]:\(port)"]).status == 101)
                // A page on another site, a sandboxed or file: page (Origin null), and a page on
                // another port of this machine are all browsers' origins not allowed.
                for origin in ["https://evil.example", "null", "http://127.0.0.1:9999", "http://localhost:\(port + 1)"] {
                    let answer = try await probe.upgrade("/", headers: ["Origin": origin])
                    #expect(answer.status == 403, "Origin \(origin)")
                    #expect(answer.body.contains("forbidden"))
                }
                // DNS rebinding: the page's origin is its own name, and so is Host.
                let rebound = try await probe.upgrade("/", headers: ["Host": "evil.example:\(port)", "Origin": "http://evil.example:\(port)"])
                #expect(rebound.status == 403)
                #expect(rebound.body.contains("evil.example"))
                #expect(try await probe.upgrade("/", headers: ["Host": "evil.example:\(port)"]).status == 403)
                // Plain HTTP requests meet the same check.
                #expect(try await probe.get("/").status == 400)
                #expect(try await probe.send("GET", "/", headers: ["Host": "evil.example"]).status == 403)
                #expect(try await probe.send("GET", "/", headers: ["Origin": "https://evil.example"]).status == 403)
                // An origin the configuration allows gets in.
                #expect(try await probe.upgrade("/", headers: ["Origin": "http://127.0.0.1:8080"]).status == 101)

                // A real WebSocket client sending a hostile Origin is refused; one without is served.
                var hostile = WebSocketClientConfiguration()
                hostile.additionalHeaders[.origin] = "https://evil.example"
                let refused: Bool
                do {
                    try await WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/", configuration: hostile, logger: silent) { _, _, _ in
                        Issue.record("a hostile origin was upgraded")
                    }
                    refused = false
                } catch {
                    refused = true
                }
                #expect(refused)
                let answered = AsyncInbox<String>()
                try await WebSocketClient.connect(url: "ws://127.0.0.1:\(port)/", logger: silent) { inbound, outbound, _ in
                    try await outbound.write(.text(#"{"corrId": "1", "cmd": "/user"}"#))
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        if case let .text(t) = message, t.contains(#""corrId":"1""#) || t.contains(#""corrId": "1""#) {
                            answered.yield(t)
                            break
                        }
                    }
                    try await outbound.close(.normalClosure, reason: nil)
                }
                _ = try await answered.first(where: { _ in true }, "the answer to a client without Origin", timeout: .seconds(20))
            }
        }
    }
}

/// ``BrowserGuard`` as a pure function.
@Suite struct BrowserGuardTests {
    let loopback = ListenAddress(host: "127.0.0.1", port: 5225)

    @Test func loopbackNamesTheListenAddressAndAllowedHostsPassOthersAreRefused() {
        let guard_ = BrowserGuard(allowedHosts: ["Bot.Example.com"])
        for host in ["127.0.0.1:5225", "127.0.0.1", "localhost:5225", "LOCALHOST", "[::1]:5225", "127.0.0.2:5225", "bot.example.com:443", "localhost."] {
            #expect(guard_.check(host: host, origin: nil, listen: loopback) == nil, "\(host)")
        }
        for host in ["evil.example", "evil.example:5225", "127.0.0.1.evil.example", "localhost.evil.example", "10.0.0.1:5225", "[::2]:5225"] {
            #expect(guard_.check(host: host, origin: nil, listen: loopback) == .host(host), "\(host)")
        }
        // A server on every interface cannot know its names: any Host, unless allowed_hosts is set.
        let everywhere = ListenAddress(host: "0.0.0.0", port: 5225)
        #expect(BrowserGuard().check(host: "203.0.113.7:5225", origin: nil, listen: everywhere) == nil)
        #expect(guard_.check(host: "203.0.113.7:5225", origin: nil, listen: everywhere) != nil)
        #expect(BrowserGuard().check(host: "192.168.1.5:5225", origin: nil, listen: ListenAddress(host: "192.168.1.5", port: 5225)) == nil)
    }

    @Test func anOriginPassesOnlyWhenItIsTheServerItselfOrAllowed() {
        let guard_ = BrowserGuard(allowedOrigins: ["HTTPS://Dash.Example.com:443/"])
        #expect(guard_.check(host: "127.0.0.1:5225", origin: nil, listen: loopback) == nil)
        // What WebSocket client libraries send; never a browser.
        #expect(guard_.check(host: "127.0.0.1:5225", origin: "ws://127.0.0.1", listen: loopback) == nil)
        #expect(guard_.check(host: "127.0.0.1:5225", origin: "WSS://x.example", listen: loopback) == nil)
        #expect(guard_.check(host: "127.0.0.1:5225", origin: "http://127.0.0.1:5225", listen: loopback) == nil)
        #expect(guard_.check(host: "localhost:5225", origin: "http://LOCALHOST:5225", listen: loopback) == nil)
        #expect(guard_.check(host: "127.0.0.1:5225", origin: "https://dash.example.com", listen: loopback) == nil)
        for origin in ["null", "https://evil.example", "http://127.0.0.1:5226", "http://localhost:5225", "file://", "chrome-extension://abc",
                       "https://dash.example.com.evil.example", "http://dash.example.com"] {
            #expect(guard_.check(host: "127.0.0.1:5225", origin: origin, listen: loopback) == .origin(origin), "\(origin)")
        }
        // Without Host the server's own origin cannot be known; only an allowed one passes.
        #expect(guard_.check(host: nil, origin: "http://127.0.0.1:5225", listen: loopback) != nil)
    }

    @Test func originsAreValidatedAndNormalised() {
        #expect(BrowserGuard.isValidOrigin("https://a.example"))
        #expect(BrowserGuard.isValidOrigin("http://127.0.0.1:8080/"))
        #expect(!BrowserGuard.isValidOrigin("a.example"))
        #expect(!BrowserGuard.isValidOrigin("https://a.example/path"))
        #expect(!BrowserGuard.isValidOrigin("https://user@a.example"))
        #expect(!BrowserGuard.isValidOrigin("null"))
        #expect(BrowserGuard.normalisedOrigin("HTTP://A.example:80") == "http://a.example")
        #expect(BrowserGuard.normalisedOrigin("https://a.example:8443") == "https://a.example:8443")
    }
}
