@testable import BotHost
import Foundation
import Logging
import NIOConcurrencyHelpers
import SwiftplexBase
import Testing

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
}
