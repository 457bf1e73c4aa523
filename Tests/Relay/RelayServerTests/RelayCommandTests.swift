import Foundation
import NIOCore
import NIOPosix
import RelayClient
import RelayProtocol
import TestSupport
import Testing

/// The `swiftplex-relay` command line: durations that cannot overflow, the resource
/// limits and the password as flags, and their metrics on `/metrics`.
@Suite(.timeLimit(.minutes(2))) struct RelayCommandTests {
    @Test(arguments: ["999999999999999d", "9223372036854775807s", "106751991167301d", "36501d", "0s", "-5m", "12x", ""])
    func anImpossibleDurationIsAUsageErrorNotATrap(ttl: String) throws {
        let (termination, stderr) = try runToExit(["--data-dir", "/tmp/unused", "--ttl", ttl])
        guard case let .exit(status) = termination else {
            Issue.record("the relay died of a signal: \(termination)")
            return
        }
        #expect(status != 0)
        #expect(stderr.contains("--ttl"))
    }

    @Test func aLongButPossibleTTLIsAccepted() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let relay = try await RelayProcess.start(dataDirectory: dir.url, arguments: ["--ttl", "36500d"])
        let c = try await RelayConnection.connect(to: relay.address)
        let q = try await c.createQueue()
        try await c.sendMessage(senderId: q.senderId, key: nil, body: [1])
        #expect(try await c.get(q)?.body == [1])
        await c.close()
        #expect(await relay.terminate() == 0)
    }

    @Test func limitFlagsAreEnforcedAndCountedInMetrics() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let passwordFile = dir.url.appendingPathComponent("password")
        try "flag-pw\n".write(to: passwordFile, atomically: true, encoding: .utf8)
        let metricsPort = try freePort()
        let relay = try await RelayProcess.start(dataDirectory: dir.url.appendingPathComponent("data"), arguments: [
            "--max-queues", "1", "--max-stored-messages", "2", "--password-file", passwordFile.path,
            "--metrics", "127.0.0.1:\(metricsPort)",
        ])
        #expect(relay.address.password == "flag-pw")
        let c = try await RelayConnection.connect(to: relay.address)
        let q = try await c.createQueue()
        await #expect(throws: RelayClientError.relay(.quota)) { _ = try await c.createQueue() }
        try await c.sendMessage(senderId: q.senderId, key: nil, body: [1])
        try await c.sendMessage(senderId: q.senderId, key: nil, body: [2])
        await #expect(throws: RelayClientError.relay(.quota)) { try await c.sendMessage(senderId: q.senderId, key: nil, body: [3]) }
        let anonymous = try await RelayConnection.connect(to: relay.address.withoutPassword)
        await #expect(throws: RelayClientError.relay(.auth)) { _ = try await anonymous.createQueue() }
        await anonymous.close()
        await c.close()
        let metrics = try await httpGet(port: metricsPort, path: "/metrics")
        #expect(metrics.contains(#"swiftplex_relay_limit_refusals_total{limit="queues_total"} 1"#))
        #expect(metrics.contains(#"swiftplex_relay_limit_refusals_total{limit="stored_messages"} 1"#))
        #expect(metrics.contains("swiftplex_relay_stored_messages 2"))
        #expect(!metrics.contains("flag-pw"))
        #expect(await relay.terminate() == 0)
    }

    @Test func aBadPasswordFileIsAUsageError() throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let file = dir.url.appendingPathComponent("pw")
        try "has space\n".write(to: file, atomically: true, encoding: .utf8)
        let (termination, stderr) = try runToExit(["--data-dir", dir.url.path, "--password-file", file.path])
        #expect(termination != SpawnedProcess.Termination.exit(0) && { if case .exit = termination { true } else { false } }(), "\(termination)")
        #expect(stderr.contains("--password-file"))
        #expect(!stderr.contains("has space"))
    }

    private func runToExit(_ arguments: [String]) throws -> (SpawnedProcess.Termination, String) {
        let result = try runProgram(RelayProcess.executable("swiftplex-relay").path, arguments)
        return (result.termination, result.errors)
    }

    /// A loopback port nobody listens on right now.
    private func freePort() throws -> Int {
        let channel = try ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).wait()
        let port = channel.localAddress?.port ?? 0
        try channel.close().wait()
        return port
    }

    /// A plain HTTP GET over a socket; the body once all of it (Content-Length) has arrived.
    private func httpGet(port: Int, path: String) async throws -> String {
        let raw = try await RawClient(host: "127.0.0.1", port: port, tls: false)
        defer { Task { await raw.close() } }
        try await raw.write(Array("GET \(path) HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
        var body = ""
        try await eventually("the metrics answer") {
            let text = String(decoding: raw.bytesReceived, as: UTF8.self)
            guard let split = text.range(of: "\r\n\r\n"),
                  let lengthLine = text[..<split.lowerBound].split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("content-length:") }),
                  let length = Int(lengthLine.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
            else { return false }
            body = String(text[split.upperBound...])
            return body.utf8.count >= length
        }
        return body
    }
}
