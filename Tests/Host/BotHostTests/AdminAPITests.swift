@testable import BotHost
import ChatCore
import ChatModel
import ChatServer
import ChatTestSupport
import Foundation
import HummingbirdWSClient
import Logging
import NIOConcurrencyHelpers
import PluginHost
import SwiftplexPluginTesting
import TestSupport
import Testing
import SwiftplexBase

/// The admin API and the WebSocket API of a real bot host (embedded relay, a real plugin, a
/// person on their own engine), over HTTP and WebSocket on loopback.
@Suite(.timeLimit(.minutes(3))) struct AdminAPITests {
    static let wsToken = "ws-token-0123456789abcdef"

    func options(_ dir: URL, burst: Int = 10_000, rate: Double = 10_000, pluginSource: (@Sendable (String) async throws -> [PluginSpec])? = nil) -> BotHostOptions {
        var options = BotHostOptions(dataDirectory: dir, profile: .init(displayName: "Admin Test Bot"),
                                     relays: .embedded(host: "127.0.0.1", port: 0, publicHost: nil),
                                     plugins: [testPluginSpec("menu", tag: "status")],
                                     runnerExecutable: URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner")))
        var admin = AdminOptions(listen: ListenAddress(host: "127.0.0.1", port: 0))
        admin.burst = burst
        admin.requestsPerSecond = rate
        admin.maxBodyBytes = 4096
        admin.pluginSource = pluginSource
        options.admin = admin
        options.webSocketAPI = WebSocketAPIOptions(listen: ListenAddress(host: "127.0.0.1", port: 0), token: Self.wsToken)
        return options
    }

    /// Runs a host with its servers; `body` gets it, an HTTP probe on its admin port and the token.
    func withHost(_ options: BotHostOptions, _ body: (BotHost, HTTPProbe, String) async throws -> Void) async throws {
        let host = try await BotHost.start(options, logger: quiet)
        let running = Task { await host.run() }
        do {
            let admin = await host.adminAddress()
            let token = try AdminToken.read(dataDirectory: options.dataDirectory)
            try await body(host, HTTPProbe(port: admin.port), token)
        } catch {
            await host.shutdown()
            await running.value
            throw error
        }
        await host.shutdown()
        await running.value
    }

    /// The answer's JSON body (null when it is none, which the checks then fail on).
    func json(_ a: HTTPProbe.Answer) -> JSONValue { (try? JSONValue.parse(a.body)) ?? .null }

    @Test func theTokenIsMadeOnFirstStartPrivateRequiredAndRotatable() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withHost(options(dir)) { host, http, token in
            let mode = try FileManager.default.attributesOfItem(atPath: AdminToken.file(in: dir).path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            #expect(token.count == 64)
            // Open: health and readiness. Everything else needs the token.
            #expect(try await http.get("/healthz").status == 200)
            // Ready once the engine's relay connection is up, which a loaded machine may take a
            // moment after the start (readiness has no event: the sanctioned poll).
            try await eventually(timeout: .seconds(30), "/readyz to answer ready without a token") {
                let ready = try await http.get("/readyz")
                return ready.status == 200 && self.json(ready)["ready"]?.boolValue == true
            }
            let missing = try await http.get("/api/status")
            #expect(missing.status == 401)
            #expect((json(missing))["error"]?["type"]?.stringValue == "unauthorized")
            #expect(try await http.get("/api/status", token: token + "0").status == 401)
            #expect(try await http.get("/api/status", token: String(token.dropLast())).status == 401)
            let status = try await http.get("/api/status", token: token)
            #expect(status.status == 200)
            let s = json(status)
            #expect(s["engineRunning"]?.boolValue == true)
            #expect(s["authFailures"]?.intValue == 3)
            #expect(s["address"]?.stringValue == host.address)
            #expect(s["relays"]?.arrayCount == 1)
            #expect(status.headers["x-request-id"]?.isEmpty == false)

            // Rotation: the old token stops working at the next request, the new one works.
            let rotated = try AdminToken.rotate(dataDirectory: dir)
            #expect(rotated != token)
            #expect(try await http.get("/api/status", token: token).status == 401)
            #expect(try await http.get("/api/status", token: rotated).status == 200)
        }
    }

    @Test func theOpenAPIDocumentListsEveryRouteAndEveryListedPathAnswers() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withHost(options(dir)) { host, http, token in
            let answer = try await http.get("/api/openapi.json", token: token)
            #expect(answer.status == 200)
            let doc = json(answer)
            guard case let .object(paths)? = doc["paths"] else { Issue.record("no paths"); return }
            var documented = Set<String>()
            for (path, item) in paths {
                guard case let .object(methods) = item else { continue }
                for (method, op) in methods {
                    documented.insert("\(method.uppercased()) \(path)")
                    // Each operation is well formed: a summary, answers, and every {parameter} of its path declared.
                    #expect(op["summary"]?.stringValue?.isEmpty == false && op["responses"]?["default"] != nil, "\(method) \(path)")
                    let declared = Set((op["parameters"]?.arrayValue ?? []).filter { $0["in"]?.stringValue == "path" }.compactMap { $0["name"]?.stringValue })
                    let inPath = Set(path.split(separator: "/").filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) })
                    #expect(declared == inPath, "\(method) \(path): \(declared) vs \(inPath)")
                }
            }
            #expect(doc["components"]?["securitySchemes"]?["bearer"]?["scheme"]?.stringValue == "bearer")
            // The routes the server's Hummingbird routers really have (HTTP and WebSocket), in
            // OpenAPI's form: a route added beside the table, or a table entry not routed, fails.
            let server = AdminServer(host: host, options: options(dir).admin!, tokens: try AdminTokenStore(dataDirectory: dir),
                                     listening: ListeningAddress(), logger: quiet)
            let (httpRouter, wsRouter) = server.makeRouters()
            let routes = Set((httpRouter.routes + wsRouter.routes).map { route in
                "\(route.method.rawValue) " + "\(route.path)".split(separator: "/", omittingEmptySubsequences: false)
                    .map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }.joined(separator: "/")
            })
            #expect(routes.count >= 20)
            #expect(documented == routes, "documented but not routed: \(documented.subtracting(routes)); routed but not documented: \(routes.subtracting(documented))")
            // Open paths are exactly those the document marks with no security.
            var open = Set<String>()
            for (path, item) in paths {
                guard case let .object(methods) = item else { continue }
                for (_, op) in methods where op["security"]?.arrayCount == 0 { open.insert(path) }
            }
            let openPaths = AdminServer.openPaths(server.routeTable())
            #expect(open == openPaths && open == ["/healthz", "/readyz", "/", "/dashboard.js", "/dashboard.css"])
            // Every documented path answers (not "no such endpoint"); parameters get values
            // that may not exist (a typed 404/422 is fine, a missing route is not).
            for entry in documented.sorted() {
                let parts = entry.split(separator: " ", maxSplits: 1)
                let method = String(parts[0])
                let path = String(parts[1]).replacingOccurrences(of: "{name}", with: "menu")
                    .replacingOccurrences(of: "{contactId}", with: "999").replacingOccurrences(of: "{requestId}", with: "999")
                let a: HTTPProbe.Answer
                if openPaths.contains(path) {
                    // Open paths answer without the token; the rest refuse it.
                    #expect(try await http.send(method, path).status != 401, "\(entry)")
                } else {
                    #expect(try await http.send(method, path).status == 401, "\(entry)")
                }
                if path == "/api/events" {
                    a = try await http.upgrade(path, headers: ["Authorization": "Bearer \(token)"])
                    #expect(a.status == 101, "\(entry)")
                    continue
                }
                let body: String? = method == "POST" ? (path == "/api/command" ? #"{"cmd": "/user"}"# : #"{"text": "hi"}"#) : nil
                a = try await http.send(method, path, headers: ["Authorization": "Bearer \(token)", "Content-Type": "application/json"], body: body)
                #expect(a.status != 404 || json(a)["error"]?["type"]?.stringValue != "notFound", "\(entry): \(a.status) \(a.body)")
                #expect(a.status < 500, "\(entry): \(a.status) \(a.body)")
            }
        }
    }

    @Test func badInputGetsTypedErrors() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withHost(options(dir)) { _, http, token in
            func errorType(_ a: HTTPProbe.Answer) -> String? { json(a)["error"]?["type"]?.stringValue }
            let unknown = try await http.get("/api/nothing-here", token: token)
            #expect(unknown.status == 404 && (errorType(unknown)) == "notFound")
            let malformed = try await http.post("/api/command", token: token, body: "{not json")
            #expect(malformed.status == 400 && (errorType(malformed)) == "malformedJSON")
            let wrongShape = try await http.post("/api/command", token: token, body: #"{"command": "/user"}"#)
            #expect(wrongShape.status == 400 && (errorType(wrongShape)) == "badRequest")
            let big = try await http.post("/api/command", token: token, body: #"{"cmd": "\#(String(repeating: "x", count: 10_000))"}"#)
            #expect(big.status == 413 && (errorType(big)) == "bodyTooLarge")
            let badPage = try await http.get("/api/contacts?limit=0", token: token)
            #expect(badPage.status == 400 && (errorType(badPage)) == "badRequest")
            let badId = try await http.post("/api/contact-requests/abc/accept", token: token)
            #expect(badId.status == 400)
            let noPlugin = try await http.post("/api/plugins/nosuch/reload", token: token)
            #expect(noPlugin.status == 404 && (errorType(noPlugin)) == "noSuchPlugin")
            // Still serving, and the Chat API's own errors come back as its JSON.
            let command = try await http.post("/api/command", token: token, body: #"{"cmd": "/no_such_command"}"#)
            #expect(command.status == 200 && (json(command))["type"]?.stringValue == "chatCmdError")
            let user = try await http.post("/api/command", token: token, body: #"{"cmd": "/user"}"#)
            #expect((json(user))["type"]?.stringValue == "activeUser")
        }
    }

    @Test func tooManyRequestsFromOneClientAreRefused() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withHost(options(dir, burst: 3, rate: 0.001)) { _, http, token in
            for _ in 0..<3 { #expect(try await http.get("/api/status", token: token).status == 200) }
            let limited = try await http.get("/api/status", token: token)
            #expect(limited.status == 429)
            #expect((json(limited))["error"]?["type"]?.stringValue == "rateLimited")
        }
    }

    @Test func pluginsAreListedAndReloadedWithTheirOutcome() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = NIOLockedValueBoxHolder(value: [testPluginSpec("menu", tag: "status")])
        try await withHost(options(dir, pluginSource: { _ in source.get() })) { _, http, token in
            let list = json(try await http.get("/api/plugins", token: token))
            let menu = try #require(list["plugins"]?.arrayFirst)
            #expect(menu["name"]?.stringValue == "menu")
            #expect(menu["counters"]?["handled"]?.intValue != nil)
            let same = json(try await http.post("/api/plugins/reload", token: token))
            #expect(same["results"]?.arrayFirst?["outcome"]?.stringValue == "unchanged")
            source.set([testPluginSpec("menu", tag: "help")])
            let changed = json(try await http.post("/api/plugins/menu/reload", token: token))
            #expect(changed["results"]?.arrayFirst?["outcome"]?.stringValue == "started")
            // A library that does not load rolls back to the running version.
            source.set([PluginSpec(name: "menu", path: dir.appendingPathComponent("missing.so").path, configFingerprint: "x", configure: { _ in .success("{}") })])
            let failed = json(try await http.post("/api/plugins/reload", token: token))
            let outcome = failed["results"]?.arrayFirst?["outcome"]?.stringValue
            #expect(outcome == "rolledBack" || outcome == "failed")
            #expect(failed["results"]?.arrayFirst?["failed"]?.boolValue == true)
        }
    }

    @Test func aContactRequestIsListedAcceptedAndMessagedAndEventsStream() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withHost(options(dir)) { host, http, token in
            let relay = try #require(host.relayAddress)
            let address = try #require(host.address)
            // The event stream, opened before the request is made.
            let events = AsyncInbox<JSONValue>()
            var configuration = WebSocketClientConfiguration()
            configuration.additionalHeaders[.authorization] = "Bearer \(token)"
            let stream = Task {
                try await WebSocketClient.connect(url: "ws://127.0.0.1:\(http.port)/api/events", configuration: configuration, logger: quiet) { inbound, _, _ in
                    for try await m in inbound.messages(maxSize: 1 << 20) {
                        if case let .text(t) = m { events.yield(try JSONValue.parse(t)) }
                    }
                }
            }
            defer { stream.cancel() }
            // Wait until the stream is subscribed (the host counts its event subscribers).
            try await eventually(timeout: .seconds(20), "the event stream subscribed") { host.events.subscriberCount >= 2 }

            try await withEngine(dir, "person", relays: [relay]) { person, inbox in
                await startUser(person, "person")
                _ = await person.execute("/_connect 1 \(address)")
                _ = try await events.first(where: { $0["type"]?.stringValue == "receivedContactRequest" }, "receivedContactRequest", timeout: .seconds(30))
                let requests = json(try await http.get("/api/contact-requests", token: token))
                #expect(requests["total"]?.intValue == 1)
                let requestId = try #require(requests["contactRequests"]?.arrayFirst?["contactRequestId"]?.intValue)
                let accepted = try await http.post("/api/contact-requests/\(requestId)/accept", token: token)
                #expect(accepted.status == 200, "\(accepted.body)")
                _ = try await inbox.next("contactConnected", timeout: .seconds(30))
                _ = try await events.first(where: { $0["type"]?.stringValue == "contactConnected" }, "contactConnected", timeout: .seconds(30))

                let contacts = json(try await http.get("/api/contacts?offset=0&limit=10", token: token))
                #expect(contacts["total"]?.intValue == 1)
                let contactId = try #require(contacts["contacts"]?.arrayFirst?["contactId"]?.intValue)
                let sent = try await http.post("/api/contacts/\(contactId)/messages", token: token, body: #"{"text": "hello from the admin API"}"#)
                #expect(sent.status == 200, "\(sent.body)")
                let received = try await inbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "hello from the admin API" }, timeout: .seconds(30))
                #expect(received["chatItems"] != nil)

                // Groups: made through /api/command, the person joins; listed, members, a message.
                #expect(json(try await http.get("/api/groups", token: token))["total"]?.intValue == 0)
                let created = json(try await http.post("/api/command", token: token, body: #"{"cmd": "/_group \#(host.userId) {\"displayName\":\"ops\",\"fullName\":\"\"}"}"#))
                let groupId = try #require(created["groupInfo"]?["groupId"]?.intValue, "\(created)")
                _ = json(try await http.post("/api/command", token: token, body: #"{"cmd": "/_add #\#(groupId) \#(contactId) member"}"#))
                let invitation = try await inbox.next("receivedGroupInvitation", timeout: .seconds(30))
                let groupInPerson = try #require(invitation["groupInfo"]?["groupId"]?.intValue)
                _ = await person.execute("/_join #\(groupInPerson)")
                _ = try await events.first(where: { $0["type"]?.stringValue == "joinedGroupMember" }, "joinedGroupMember", timeout: .seconds(30))
                let groups = json(try await http.get("/api/groups?limit=5", token: token))
                #expect(groups["total"]?.intValue == 1 && groups["groups"]?.arrayFirst?["groupProfile"]?["displayName"]?.stringValue == "ops", "\(groups)")
                let members = json(try await http.get("/api/groups/\(groupId)/members", token: token))
                #expect(members["groupInfo"]?["groupId"]?.intValue == groupId)
                #expect(members["members"]?.arrayCount == 1 && members["members"]?.arrayFirst?["memberProfile"]?["displayName"]?.stringValue == "person", "\(members)")
                #expect(try await http.get("/api/groups/999/members", token: token).status == 422)
                #expect(try await http.post("/api/groups/\(groupId)/messages", token: token, body: #"{"text": ""}"#).status == 400)
                let toGroup = try await http.post("/api/groups/\(groupId)/messages", token: token, body: #"{"text": "hello group"}"#)
                #expect(toGroup.status == 200, "\(toGroup.body)")
                _ = try await inbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "hello group" }, timeout: .seconds(30))

                let link = json(try await http.get("/api/address", token: token))
                #expect(link["link"]?.stringValue == address)
                let svg = try await http.get("/api/address/qr.svg", token: token)
                #expect(svg.status == 200 && svg.headers["content-type"] == "image/svg+xml" && svg.body.hasPrefix("<svg"))

                // The person answers. /metrics (token required) counts both directions, the time
                // the bot's message took to reach its relay, the relay connected, the plugin's
                // series and the process' figures.
                let botInPerson = try #require(received["chatItems"]?.arrayFirst?["chatInfo"]?["contact"]?["contactId"]?.intValue)
                let reply: JSONValue = .array([.object([("msgContent", .object([("type", .string("text")), ("text", .string("hi bot"))]))])])
                _ = await person.execute("/_send @\(botInPerson) json \(reply.description)")
                #expect(try await http.get("/metrics").status == 401)
                var figures: [String: Double] = [:]
                try await eventually(timeout: .seconds(30), "the metrics count the messages") {
                    let m = try await http.get("/metrics", token: token)
                    #expect(m.status == 200 && m.headers["content-type"]?.hasPrefix("text/plain") == true)
                    figures = Self.prometheus(m.body)
                    return (figures[#"swiftplex_engine_messages_received_total{bot="bot"}"#] ?? 0) >= 1 && (figures[#"swiftplex_engine_messages_sent_total{bot="bot"}"#] ?? 0) >= 1
                }
                #expect(figures[#"swiftplex_engine_relays_connected{bot="bot"}"#] == 1)
                #expect((figures[#"swiftplex_engine_delivery_seconds_count{bot="bot",stage="relay"}"#] ?? 0) >= 1)
                #expect(figures[#"swiftplex_engine_outbox_pending{bot="bot"}"#] != nil)
                #expect(figures[#"swiftplex_engine_running{bot="bot"}"#] == 1)
                #expect(figures[#"swiftplex_engine_contact_requests_total{bot="bot"}"#] == 1)
                #expect((figures["swiftplex_admin_requests_total"] ?? 0) >= 5)
                #expect(figures[#"swiftplex_plugin_condition{bot="bot",instance="menu",condition="running"}"#] == 1)
                #expect(figures[#"swiftplex_plugin_condition{bot="bot",instance="menu",condition="restarting"}"#] == 0)
                #expect(figures[#"swiftplex_plugin_queue_depth{bot="bot",instance="menu"}"#] != nil)
                #expect(figures[#"swiftplex_plugin_events_handled_total{bot="bot",instance="menu"}"#] != nil)
                #expect((figures["process_open_fds"] ?? 0) > 10)
                #expect((figures["process_resident_memory_bytes"] ?? 0) > 1_000_000)
                let ready = json(try await http.get("/readyz", token: token))
                #expect(ready["ready"]?.boolValue == true && ready["relaysConnected"]?.intValue == 1)
                // Without the token: ready or not, and nothing that names a bot or a relay.
                #expect(json(try await http.get("/readyz")) == .object([("ready", .bool(true))]))
                let plugin = json(try await http.get("/api/plugins", token: token))["plugins"]?.arrayFirst
                #expect(plugin?["state"]?.stringValue == "running" && plugin?["queueDepth"]?.intValue != nil)
            }

            // The host's WebSocket API answers too, with its own token.
            let ws = await host.webSocketAddress()
            #expect(try await HTTPProbe(port: ws.port).upgrade("/").status == 401)
            #expect(try await HTTPProbe(port: ws.port).upgrade("/?token=\(Self.wsToken)").status == 101)
        }
    }

    /// `name{labels} value` lines of the Prometheus text format, by `name{labels}`.
    static func prometheus(_ text: String) -> [String: Double] {
        var out: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            out[String(line[..<space])] = value
        }
        return out
    }

    /// The admin API's routes that need no token and its event stream, and a host's tokenless
    /// WebSocket API, refuse browsers' origins and foreign `Host` names; the dashboard's own
    /// origin and clients without `Origin` are served.
    @Test func browsersAreRefusedOnOpenRoutesTheEventStreamAndATokenlessWebSocketAPI() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        var options = options(dir)
        options.webSocketAPI = WebSocketAPIOptions(listen: ListenAddress(host: "127.0.0.1", port: 0))
        try await withHost(options) { host, http, token in
            let own = "http://127.0.0.1:\(http.port)"
            #expect(try await http.get("/healthz").status == 200)
            #expect(try await http.send("GET", "/", headers: ["Origin": own]).status == 200)
            #expect(try await http.send("GET", "/api/status", headers: ["Origin": own, "Authorization": "Bearer \(token)"]).status == 200)
            for headers in [["Origin": "https://evil.example"], ["Origin": "null"], ["Host": "evil.example:\(http.port)"],
                            ["Host": "evil.example:\(http.port)", "Origin": "http://evil.example:\(http.port)"]] {
                for path in ["/healthz", "/readyz", "/"] {
                    let answer = try await http.send("GET", path, headers: headers)
                    #expect(answer.status == 403, "\(path) \(headers)")
                    #expect(json(answer)["error"]?["type"]?.stringValue == "forbidden")
                }
                // Even with the token: a page that somehow has it is still a page.
                var withToken = headers
                withToken["Authorization"] = "Bearer \(token)"
                #expect(try await http.send("GET", "/api/status", headers: withToken).status == 403)
                #expect(try await http.upgrade("/api/events?token=\(token)", headers: headers).status == 403)
            }
            #expect(try await http.upgrade("/api/events?token=\(token)", headers: ["Origin": own]).status == 101)
            #expect(try await http.upgrade("/api/events?token=\(token)").status == 101)

            let ws = HTTPProbe(port: await host.webSocketAddress().port)
            #expect(try await ws.upgrade("/").status == 101)
            #expect(try await ws.upgrade("/", headers: ["Origin": "https://evil.example"]).status == 403)
            #expect(try await ws.upgrade("/", headers: ["Host": "rebind.example:\(ws.port)", "Origin": "http://rebind.example:\(ws.port)"]).status == 403)
        }
    }

    /// A flood of addresses cannot make the limiter forget a client's debt: when the table is
    /// full, refilled buckets go first, and new addresses beyond it share one overflow bucket.
    @Test func theRateLimiterKeepsEveryDebtWhenItTracksManyAddresses() {
        let limiter = RateLimiter(rate: 0.001, burst: 2, maxClients: 3)
        #expect(limiter.take("a") && limiter.take("a") && !limiter.take("a"))
        for c in ["b", "c"] { _ = limiter.take(c) }
        // The table is full of buckets in debt: new addresses share the overflow bucket …
        #expect(limiter.take("x1") && limiter.take("x2"))
        #expect(!limiter.take("x3"))
        #expect(limiter.trackedClients == 4)
        // … and "a" is still out of budget (before: the table was emptied and "a" began anew).
        #expect(!limiter.take("a"))
        // Buckets that have refilled are forgotten to make room.
        let fast = RateLimiter(rate: 1_000_000, burst: 1, maxClients: 2)
        #expect(fast.take("p") && fast.take("q"))
        var taken = false
        for _ in 0..<1_000_000 where fast.take("r") { taken = true; break }  // p and q refill within a microsecond
        #expect(taken)
        #expect(fast.trackedClients <= 2)
    }

    @Test func readinessFollowsTheRelayConnections() {
        let host = HostMetrics()
        let metrics = host.engine(bot: "bot")
        func event(_ type: String, _ host: String) -> ChatEvent {
            type == "hostConnected" ? .hostConnected(protocol: "smp", transportHost: host) : .hostDisconnected(protocol: "smp", transportHost: host)
        }
        metrics.observe(event("hostConnected", "relay-a"))
        metrics.observe(event("hostConnected", "relay-b"))
        #expect(metrics.relayState.connected == ["relay-a", "relay-b"] && metrics.relayState.lost.isEmpty)
        metrics.observe(event("hostDisconnected", "relay-a"))
        #expect(metrics.relayState.connected == ["relay-b"] && metrics.relayState.lost == ["relay-a"])
        metrics.observe(event("hostConnected", "relay-a"))
        #expect(metrics.relayState.lost.isEmpty)
        let text = String(decoding: host.registry.emitToBuffer(), as: UTF8.self)
        #expect(Self.prometheus(text)[#"swiftplex_engine_relays_connected{bot="bot"}"#] == 2)
        #expect(Self.prometheus(text)[#"swiftplex_engine_relay_disconnects_total{bot="bot"}"#] == 1)
        // Readiness looks at the bot's own relays only: a contact's relay it sent to and dropped does not count.
        func own(_ state: HostMetrics.RelayState, _ hosts: Set<String>) -> HostMetrics.RelayState {
            .init(connected: state.connected.intersection(hosts), lost: state.lost.intersection(hosts))
        }
        metrics.observe(event("hostConnected", "peer-relay"))
        metrics.observe(event("hostDisconnected", "peer-relay"))
        #expect(BotHost.isReady(engineRunning: true, hasAddress: true, ownRelays: own(metrics.relayState, ["relay-a"])))
        #expect(!BotHost.isReady(engineRunning: true, hasAddress: true, ownRelays: own(metrics.relayState, ["relay-a", "peer-relay"])))
        metrics.observe(event("hostDisconnected", "relay-a"))
        #expect(!BotHost.isReady(engineRunning: true, hasAddress: true, ownRelays: own(metrics.relayState, ["relay-a"])))
        #expect(!BotHost.isReady(engineRunning: true, hasAddress: false, ownRelays: own(metrics.relayState, ["relay-a"])))
        #expect(BotHost.isReady(engineRunning: true, hasAddress: false, ownRelays: own(metrics.relayState, ["relay-c"])))
        #expect(!BotHost.isReady(engineRunning: false, hasAddress: false, ownRelays: own(metrics.relayState, ["relay-c"])))
    }

    @Test func aWebSocketAPIBeyondLoopbackWithoutATokenDoesNotStart() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        var o = options(dir)
        o.webSocketAPI = WebSocketAPIOptions(listen: ListenAddress(host: "0.0.0.0", port: 0), token: nil)
        await #expect(throws: BotHostError.self) { _ = try await BotHost.start(o, logger: quiet) }
    }
}

/// A value tests change while the host reads it.
final class NIOLockedValueBoxHolder<T: Sendable>: Sendable {
    private let box: NIOLockedValueBox<T>
    init(value: T) { box = NIOLockedValueBox(value) }
    func get() -> T { box.withLockedValue { $0 } }
    func set(_ v: T) { box.withLockedValue { $0 = v } }
}
