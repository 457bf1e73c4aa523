import Foundation
import Logging
import NIOConcurrencyHelpers
import SwiftplexBase

/// Log records as one machine-readable line each (`log: {format: logfmt|json}` in the host's
/// YAML): time, level, logger label, message and metadata. The host's log calls carry no
/// message texts, keys or tokens, so neither do these lines; admin API calls carry their request
/// id (`request_id`, also returned as `X-Request-Id`).
public struct StructuredLogHandler: LogHandler {
    public enum Format: Sendable { case logfmt, json }

    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let format: Format
    private let write: @Sendable (String) -> Void

    /// - Parameter write: where each finished line goes (standard error by default).
    public init(label: String, format: Format, write: @escaping @Sendable (String) -> Void = StructuredLogHandler.standardError) {
        self.label = label
        self.format = format
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    private static let lock = NIOLock()

    /// Writes one line to standard error with a single `write(2)`, so lines from threads never interleave.
    public static let standardError: @Sendable (String) -> Void = { line in
        let bytes = Array(line.utf8)
        lock.withLock {
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes { Foundation.write(2, $0.baseAddress, $0.count) }
                if n < 0 { if errno == EINTR { continue } else { return } }
                offset += n
            }
        }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let own = event.metadata { merged.merge(own) { _, new in new } }
        write(Self.line(format: format, time: Date(), level: event.level, label: label, message: "\(event.message)", metadata: merged))
    }

    /// One record as a line (with its newline).
    static func line(format: Format, time: Date, level: Logger.Level, label: String, message: String, metadata: Logger.Metadata) -> String {
        let timestamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(time)
        let fixed: [(String, String)] = [("ts", timestamp), ("level", level.rawValue), ("logger", label), ("msg", message)]
        let extra = metadata.sorted { $0.key < $1.key }
        switch format {
        case .logfmt:
            let pairs = fixed + extra.map { (key($0.key), "\($0.value)") }
            return pairs.map { "\($0.0)=\(logfmtValue($0.1))" }.joined(separator: " ") + "\n"
        case .json:
            let pairs: [(String, JSONValue)] = fixed.map { ($0.0, .string($0.1)) } + extra.map { (key($0.key), json($0.value)) }
            return JSONValue.object(pairs).description + "\n"
        }
    }

    /// Metadata keys as one token (`hb.request.id` → `request_id` for the request id Hummingbird adds).
    static func key(_ k: String) -> String {
        if k == "hb.request.id" { return "request_id" }
        return String(k.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." || $0 == "-" ? $0 : "_" })
    }

    static func logfmtValue(_ v: String) -> String {
        let needsQuotes = v.isEmpty || v.contains { $0 == " " || $0 == "=" || $0 == "\"" || $0 == "\\" || $0.isNewline || ($0.asciiValue.map { $0 < 0x20 } ?? false) }
        guard needsQuotes else { return v }
        var out = "\""
        for c in v.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if c.value < 0x20 { out += String(format: "\\u%04x", c.value) } else { out.unicodeScalars.append(c) }
            }
        }
        return out + "\""
    }

    static func json(_ v: Logger.Metadata.Value) -> JSONValue {
        switch v {
        case let .string(s): .string(s)
        case let .stringConvertible(s): .string(s.description)
        case let .array(items): .array(items.map(json))
        case let .dictionary(d): .object(d.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) })
        }
    }
}
