@testable import BotHost
import ChatServer
import Foundation
import Logging
import NIOConcurrencyHelpers
import SwiftplexBase
import Testing
import TestSupport

/// `log: {format: logfmt|json}`: one parseable line per record, values quoted where they must be,
/// the admin API's request id under `request_id`.
@Suite struct StructuredLogTests {
    final class Lines: Sendable {
        let box = NIOLockedValueBox<[String]>([])
        func append(_ s: String) { box.withLockedValue { $0.append(s) } }
        var all: [String] { box.withLockedValue { $0 } }
    }

    @Test func logfmtLinesQuoteWhatTheyMust() throws {
        let lines = Lines()
        var logger = Logger(label: "swiftplex") { StructuredLogHandler(label: $0, format: .logfmt, write: lines.append) }
        logger[metadataKey: "hb.request.id"] = "abc123"
        logger.info("admin call", metadata: ["path": "/api/status", "note": "two words \"quoted\"\nand a newline", "status": "200"])
        logger.debug("not shown at info")
        let line = try #require(lines.all.first)
        #expect(lines.all.count == 1 && line.hasSuffix("\n") && line.dropLast().contains("\n") == false)
        #expect(line.hasPrefix("ts=") && line.contains(" level=info logger=swiftplex msg=\"admin call\" "))
        #expect(line.contains(#"note="two words \"quoted\"\nand a newline""#))
        #expect(line.contains(" path=/api/status ") && line.contains(" request_id=abc123 ") && line.contains(" status=200"))
    }

    /// A real host logging as logfmt: each admin call is one line with its request id (the same
    /// as the answer's X-Request-Id), and neither the token nor a message text is in any line.
    @Test(.timeLimit(.minutes(2))) func adminCallsAreLoggedWithTheirRequestIdAndNoSecrets() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let lines = Lines()
        var logger = Logger(label: "swiftplex") { StructuredLogHandler(label: $0, format: .logfmt, write: lines.append) }
        logger.logLevel = .info
        let host = try await BotHost.start(AdminAPITests().options(dir), logger: logger)
        let running = Task { await host.run() }
        let http = HTTPProbe(port: await host.adminAddress().port)
        let token = try AdminToken.read(dataDirectory: dir)
        let secret = "a private message text 7f3a"
        let answer = try await http.post("/api/command", token: token, body: #"{"cmd": "/_send @1 json [{\"msgContent\": {\"type\": \"text\", \"text\": \"\#(secret)\"}}]"}"#)
        let requestId = try #require(answer.headers["x-request-id"])
        #expect(try await http.get("/api/status", token: "wrong-\(token)").status == 401)
        // The dashboard's event stream presents the token in the URL: it is not logged either.
        #expect(try await http.upgrade("/api/events?token=\(token)").status == 101)
        #expect(try await http.get("/api/plugins?token=\(token)").status == 200)
        await host.shutdown()
        await running.value
        let all = lines.all
        let call = all.first { $0.contains(#"msg="admin call""#) && $0.contains("path=/api/command") }
        #expect(call?.contains("request_id=\(requestId) ") == true, "\(call ?? "no admin call line")")
        #expect(call?.contains("status=200") == true && call?.hasPrefix("ts=") == true)
        #expect(all.contains { $0.contains("status=401") || $0.contains("without a valid token") })
        #expect(!all.contains { $0.contains(token) || $0.contains(secret) })
        #expect(all.count > 3)
    }

    @Test func jsonLinesParseWithTheirMetadata() throws {
        let lines = Lines()
        let logger = Logger(label: "swiftplex") { StructuredLogHandler(label: $0, format: .json, write: lines.append) }
        logger.warning("plugin reload requested", metadata: ["instance": "echo", "counts": ["a": "1"], "list": ["x", "y"]])
        let value = try JSONValue.parse(try #require(lines.all.first))
        #expect(value["level"]?.stringValue == "warning" && value["msg"]?.stringValue == "plugin reload requested")
        #expect(value["logger"]?.stringValue == "swiftplex" && value["instance"]?.stringValue == "echo")
        #expect(value["counts"]?["a"]?.stringValue == "1" && value["list"]?.arrayCount == 2)
        let ts = try #require(value["ts"]?.stringValue)
        #expect(HostMetrics.parseTimestamp(ts) != nil, "\(ts)")
    }

    /// An admin API beyond loopback is plain HTTP: the host says so loudly when it starts.
    @Test(.timeLimit(.minutes(2))) func anAdminAPIBeyondLoopbackIsWarnedAbout() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let lines = Lines()
        var logger = Logger(label: "swiftplex") { StructuredLogHandler(label: $0, format: .logfmt, write: lines.append) }
        logger.logLevel = .info
        var options = AdminAPITests().options(dir)
        options.admin?.listen = ListenAddress(host: "0.0.0.0", port: 0)
        let host = try await BotHost.start(options, logger: logger)
        let running = Task { await host.run() }
        _ = await host.adminAddress()
        await host.shutdown()
        await running.value
        let warning = lines.all.first { $0.contains("level=warning") && $0.contains("plain HTTP") }
        #expect(warning?.contains("address=0.0.0.0:") == true, "\(lines.all.filter { $0.contains("admin") })")
        // On loopback (every other test): no such line.
        let quiet = Lines()
        var loopbackLogger = Logger(label: "swiftplex") { StructuredLogHandler(label: $0, format: .logfmt, write: quiet.append) }
        loopbackLogger.logLevel = .info
        let dir2 = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir2) }
        let second = try await BotHost.start(AdminAPITests().options(dir2), logger: loopbackLogger)
        let secondRunning = Task { await second.run() }
        _ = await second.adminAddress()
        await second.shutdown()
        await secondRunning.value
        #expect(quiet.all.contains { $0.contains("admin API listening") })
        #expect(!quiet.all.contains { $0.contains("plain HTTP") })
    }
}
