import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One HTTP/1.1 exchange over a plain loopback socket (`Connection: close`, the whole answer
/// read to the end), for tests of the project's HTTP servers: real sockets, any header or body
/// (a WebSocket upgrade with a wrong token, malformed JSON, an oversized body) sent as given.
public struct HTTPProbe: Sendable {
    public struct Answer: Sendable {
        public let status: Int
        /// Header names lowercased.
        public let headers: [String: String]
        public let body: String
    }

    public let port: Int
    public init(port: Int) { self.port = port }

    /// Sends `method path` with `headers` and `body`; waits at most `timeout` for the answer.
    public func send(_ method: String, _ path: String, headers: [String: String] = [:], body: String? = nil,
                     timeout: Duration = .seconds(15)) async throws -> Answer {
        // `Host` is 127.0.0.1:<port> unless `headers` names another.
        var head = "\(method) \(path) HTTP/1.1\r\n" + (headers["Host"] == nil ? "Host: 127.0.0.1:\(port)\r\n" : "") + "Connection: close\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if let body { head += "Content-Length: \(body.utf8.count)\r\n" }
        let request = Array((head + "\r\n" + (body ?? "")).utf8)
        let port = self.port
        let seconds = Int(timeout.components.seconds)
        let raw = try await Self.onThread { try Self.exchange(port: port, request: request, timeoutSeconds: max(1, seconds)) }
        return try Self.parse(raw)
    }

    public func get(_ path: String, token: String? = nil) async throws -> Answer {
        try await send("GET", path, headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
    }

    public func post(_ path: String, token: String? = nil, body: String? = nil) async throws -> Answer {
        var h = token.map { ["Authorization": "Bearer \($0)"] } ?? [:]
        if body != nil { h["Content-Type"] = "application/json" }
        return try await send("POST", path, headers: h, body: body)
    }

    /// A WebSocket upgrade request's answer (a server that refuses answers with a status; one
    /// that accepts answers 101, and the connection is closed right after).
    public func upgrade(_ path: String, headers: [String: String] = [:]) async throws -> Answer {
        var h = headers
        h["Upgrade"] = "websocket"
        h["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ=="
        h["Sec-WebSocket-Version"] = "13"
        var head = "GET \(path) HTTP/1.1\r\n" + (h["Host"] == nil ? "Host: 127.0.0.1:\(port)\r\n" : "") + "Connection: Upgrade\r\n"
        for (k, v) in h { head += "\(k): \(v)\r\n" }
        let request = Array((head + "\r\n").utf8)
        let port = self.port
        let raw = try await Self.onThread { try Self.exchange(port: port, request: request, timeoutSeconds: 15, stopAtHead: true) }
        return try Self.parse(raw)
    }

    /// Runs blocking socket calls on a thread of their own, never on Swift concurrency's few
    /// shared threads (which the server under test needs).
    static func onThread(_ work: @escaping @Sendable () throws -> [UInt8]) async throws -> [UInt8] {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }

    static func exchange(port: Int, request: [UInt8], timeoutSeconds: Int, stopAtHead: Bool = false) throws -> [UInt8] {
        guard let fd = Loopback.connect(port: port) else { throw WaitTimeout("cannot connect to 127.0.0.1:\(port)") }
        defer { close(fd) }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { break }  // the server may answer (413) and close before taking it all
            sent += n
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && answer.isEmpty { throw WaitTimeout("no answer from 127.0.0.1:\(port) within \(timeoutSeconds) s") }
            if n <= 0 { break }
            answer += buffer[0..<n]
            if stopAtHead, answer.count >= 4, String(decoding: answer, as: UTF8.self).contains("\r\n\r\n") { break }
        }
        return answer
    }

    static func parse(_ raw: [UInt8]) throws -> Answer {
        let text = String(decoding: raw, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw WaitTimeout("not an HTTP answer: \(text.prefix(200))") }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw WaitTimeout("not an HTTP status line: \(lines[0])") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = String(text[split.upperBound...])
        if headers["transfer-encoding"]?.lowercased() == "chunked" { body = Self.unchunk(body) }
        return Answer(status: status, headers: headers, body: body)
    }

    static func unchunk(_ s: String) -> String {
        var out = "", rest = Substring(s)
        while let lineEnd = rest.range(of: "\r\n"), let size = Int(rest[..<lineEnd.lowerBound], radix: 16), size > 0 {
            let start = lineEnd.upperBound
            let bytes = Array(rest[start...].utf8)
            out += String(decoding: bytes.prefix(size), as: UTF8.self)
            rest = Substring(String(decoding: bytes.dropFirst(size + 2), as: UTF8.self))
        }
        return out
    }
}
