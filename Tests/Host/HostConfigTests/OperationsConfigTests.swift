import Foundation
import Testing
@testable import HostConfig

/// `ws_api:` and `admin:` (docs/operations.md).
@Suite struct OperationsConfigTests {
    @Test func bothAreOffUnlessGivenAndTakeTheirDefaults() throws {
        let (plain, _) = try load(minimal)
        #expect(plain.webSocketAPI == nil)
        #expect(!plain.admin.enabled)
        let (c, _) = try load(minimal + "ws_api: {}\nadmin: {}\n")
        #expect(c.webSocketAPI?.host == "127.0.0.1" && c.webSocketAPI?.port == 5225 && c.webSocketAPI?.token == nil)
        #expect(c.admin.enabled && c.admin.host == "127.0.0.1" && c.admin.port == 5280)
        #expect(c.admin.maxBodyBytes == 64 << 10 && c.admin.requestsPerSecond == 20 && c.admin.burst == 40)
        let (off, _) = try load(minimal + "admin:\n  enabled: false\n")
        #expect(!off.admin.enabled)
    }

    @Test func listenAddressesTokensAndLimitsAreRead() throws {
        let (c, _) = try load(minimal + """
            ws_api:
              listen: 0.0.0.0:6000
              token: ${WS_TOKEN}
            admin:
              listen: 127.0.0.1:0
              max_body_bytes: 2048
              requests_per_second: 5
              burst: 10
            """, environment: ["WS_TOKEN": "0123456789abcdef0123"])
        #expect(c.webSocketAPI?.host == "0.0.0.0" && c.webSocketAPI?.port == 6000 && c.webSocketAPI?.token == "0123456789abcdef0123")
        #expect(c.admin.port == 0 && c.admin.maxBodyBytes == 2048 && c.admin.requestsPerSecond == 5 && c.admin.burst == 10)
    }

    @Test func theLogFormatIsTextUnlessToldAndOnlyAKnownOne() throws {
        #expect(try load(minimal).0.logFormat == .text)
        #expect(try load(minimal + "log:\n  format: logfmt\n").0.logFormat == .logfmt)
        #expect(try load(minimal + "log: {format: json}\n").0.logFormat == .json)
        let bad = try problems(minimal + "log:\n  format: xml\n  colour: blue\n")
        #expect(bad.contains { $0.contains("log.format") && $0.contains("json") }, "\(bad)")
        #expect(bad.contains { $0.contains("colour") }, "\(bad)")
    }

    @Test func aWebSocketAPIBeyondLoopbackNeedsAToken() throws {
        let p = try problems(minimal + "ws_api:\n  listen: 0.0.0.0:5225\n")
        #expect(p.contains { $0.contains("ws_api.listen") && $0.contains("token") }, "\(p)")
        let short = try problems(minimal + "ws_api:\n  token: short\n")
        #expect(short.contains { $0.contains("ws_api.token") && $0.contains("16") }, "\(short)")
        let bad = try problems(minimal + "ws_api:\n  listen: nowhere\n  colour: blue\nadmin:\n  listen: 1.2.3.4:99999\n  burst: 0\n")
        #expect(bad.contains { $0.contains("ws_api.listen") }, "\(bad)")
        #expect(bad.contains { $0.contains("colour") }, "\(bad)")
        #expect(bad.contains { $0.contains("admin.listen") }, "\(bad)")
        #expect(bad.contains { $0.contains("admin.burst") }, "\(bad)")
    }

    @Test func browsersAllowedOriginsAndHostsAreReadAndCheckedWhereTheyAreWritten() throws {
        let (c, _) = try load(minimal + """
            ws_api:
              allowed_origins: [https://app.example.com, "http://127.0.0.1:8080"]
              allowed_hosts: [bot.lan]
            admin:
              allowed_hosts: [admin.lan]
            """)
        #expect(c.webSocketAPI?.allowedOrigins == ["https://app.example.com", "http://127.0.0.1:8080"])
        #expect(c.webSocketAPI?.allowedHosts == ["bot.lan"])
        #expect(c.admin.allowedHosts == ["admin.lan"] && c.admin.allowedOrigins.isEmpty)
        #expect(try load(minimal + "ws_api: {}\n").0.webSocketAPI?.allowedOrigins == [])
        let bad = try problems(minimal + "ws_api:\n  allowed_origins:\n    - https://ok.example\n    - app.example.com\nadmin:\n  allowed_hosts: bot.lan\n")
        #expect(bad.contains { $0.contains("ws_api.allowed_origins[1]") && $0.contains("not an origin") }, "\(bad)")
        #expect(bad.contains { $0.contains("admin.allowed_hosts") && $0.contains("list") }, "\(bad)")
        let line = try #require(bad.first { $0.contains("allowed_origins[1]") })
        #expect(line.hasPrefix("\(minimal.split(separator: "\n", omittingEmptySubsequences: false).count + 3):"), "\(line)")
    }

    @Test func theEngineIsSwiftplexUnlessToldAndAForeignOneIsReadPerBot() throws {
        #expect(try load(minimal).0.bots[0].engine == .swiftplex)
        #expect(try load(minimal + "engine: swiftplex\n").0.bots[0].engine == .swiftplex)
        let (lib, _) = try load(minimal + "engine:\n  type: libsimplex\n  library: lib/libsimplex.so\n  confirm_migrations: error\n")
        guard case let .libsimplex(library, key, confirm) = lib.bots[0].engine else { Issue.record("\(lib.bots[0].engine)"); return }
        #expect(library.hasSuffix("/lib/libsimplex.so") && library.hasPrefix("/"), "resolved against the config's directory: \(library)")
        #expect(key == "" && confirm == "error")
        let (ws, _) = try load(minimal + "engine: {type: websocket, url: ws://127.0.0.1:5225, token: abc}\n")
        #expect(ws.bots[0].engine == .websocket(url: "ws://127.0.0.1:5225", token: "abc"))
        let (bots, _) = try load("""
            bots:
              - name: a
                display_name: A
              - name: b
                display_name: B
                engine: {type: websocket, url: "ws://127.0.0.1:6000"}
            """)
        #expect(bots.bots.map(\.engine) == [.swiftplex, .websocket(url: "ws://127.0.0.1:6000", token: nil)])
    }

    @Test func badEnginesAndWhatOnlySwiftplexsEngineDoesAreRefusedWhereTheyAreWritten() throws {
        let unknown = try problems(minimal + "engine: haskell\n")
        #expect(unknown.contains { $0.hasPrefix("3:") && $0.contains("engine") && $0.contains("swiftplex") }, "\(unknown)")
        let noLibrary = try problems(minimal + "engine:\n  type: libsimplex\n")
        #expect(noLibrary.contains { $0.contains("library") }, "\(noLibrary)")
        let badURL = try problems(minimal + "engine:\n  type: websocket\n  url: http://x:1\n")
        #expect(badURL.contains { $0.hasPrefix("5:") && $0.contains("ws://") }, "\(badURL)")
        let mixed = try problems(minimal + "engine:\n  type: websocket\n  url: ws://x:1\n  library: /l.so\n")
        #expect(mixed.contains { $0.contains("engine.library") && $0.contains("not a setting") }, "\(mixed)")
        let confirm = try problems(minimal + "engine:\n  type: libsimplex\n  library: /l.so\n  confirm_migrations: maybe\n")
        #expect(confirm.contains { $0.contains("confirm_migrations") }, "\(confirm)")
        // What needs Swiftplex's engine, asked of another: at the engine line.
        let relay = try problems(minimal + "chat_relay: true\nengine: {type: websocket, url: ws://x:1}\n")
        #expect(relay.contains { $0.hasPrefix("4:") && $0.contains("chat_relay") && $0.contains("Swiftplex's engine") }, "\(relay)")
        let limits = try problems(minimal + "address:\n  requests_per_minute: 5\nengine: {type: websocket, url: ws://x:1}\n")
        #expect(limits.contains { $0.contains("requests_per_minute") && $0.contains("Swiftplex's engine") }, "\(limits)")
        let groups = try problems(minimal + "groups:\n  max_members: 50\nengine: {type: websocket, url: ws://x:1}\n")
        #expect(groups.contains { $0.hasPrefix("5:") && $0.contains("groups.max_members") && $0.contains("Swiftplex's engine") }, "\(groups)")
        let peer = try problems(minimal + "peer_relays:\n  refuse_private: true\nengine: {type: websocket, url: ws://x:1}\n")
        #expect(peer.contains { $0.contains("peer_relays") && $0.contains("Swiftplex's engine") }, "\(peer)")
    }
}
