import SwiftplexBase
/// Where a server listens, and whether that is loopback only.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    /// 0: an ephemeral port (tests); the bound one is reported once listening.
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `127.0.0.0/8`, `::1` or `localhost`: reachable from this machine only.
    public var isLoopback: Bool {
        let h = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if h == "localhost" || h == "::1" { return true }
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A server setting that cannot be used (a missing token beyond loopback).
public struct ServerConfigurationError: CodedError {
    public enum Code: Sendable, Hashable { case invalid }
    public var code: Code { .invalid }
    public let message: String
    public init(_ message: String) { self.message = message }
}
