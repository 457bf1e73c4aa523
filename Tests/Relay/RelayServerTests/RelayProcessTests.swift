import Foundation
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing

@Suite(.timeLimit(.minutes(2))) struct RelayProcessTests {
    @Test func acknowledgedMessagesSurviveKill9() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        var relay = try await RelayProcess.start(dataDirectory: dir.url)
        let fingerprint = relay.address.fingerprint
        var queue: RecipientQueue
        let count = 60
        do {
            let c = try await RelayConnection.connect(to: relay.address)
            queue = try await c.createQueue()
            let key = AuthPrivateKey.newX25519()
            try await c.secureAsSender(senderId: queue.senderId, senderKey: key)
            // Sent concurrently so that they share group commits.
            let senderId = queue.senderId
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<count {
                    group.addTask { try await c.sendMessage(senderId: senderId, key: key, body: [UInt8(i)]) }
                }
                try await group.waitForAll()
            }
            // Every SEND above was answered OK; now the relay dies without any chance to flush.
            relay.kill9()
        }
        relay = try await RelayProcess.start(dataDirectory: dir.url)
        #expect(relay.address.fingerprint == fingerprint)
        queue.relay = relay.address
        let c = try await RelayConnection.connect(to: relay.address)
        let inbox = EventInbox(c)
        try await c.subscribe(queue)
        var bodies = Set<UInt8>()
        for _ in 0..<count {
            let m = try await inbox.nextMessage(for: queue)
            bodies.insert(m.body[0])
            try await c.acknowledge(queue, messageId: m.id)
        }
        #expect(bodies == Set((0..<count).map(UInt8.init)))
        await c.close()
        #expect(await relay.terminate() == 0)
    }

    @Test func sigtermStopsTheRelayCleanly() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let relay = try await RelayProcess.start(dataDirectory: dir.url)
        let c = try await RelayConnection.connect(to: relay.address)
        try await c.ping()
        #expect(await relay.terminate() == 0)
        await c.close()
    }

    /// Debian's soft open-file limit is 1,024; a relay for more connections raises its own soft
    /// limit (to the hard one) at start, and says so when even the hard limit is too low.
    @Test func theRelayRaisesItsOpenFileLimitForItsConnections() async throws {
        let hard = try #require(OpenFileLimit.current()).hard
        try #require(hard >= 2048, "the test needs a hard open-file limit of at least 2048, this machine has \(hard)")
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let relay = try await RelayProcess.start(dataDirectory: dir.url, arguments: ["--max-connections", "1500"],
                                                 launcher: ["/usr/bin/prlimit", "--nofile=256:\(hard)", "--"])
        #expect(try Self.softOpenFileLimit(of: relay.process.processIdentifier) == hard)
        #expect(!relay.child.errorText.contains("open-file limit"))
        #expect(await relay.terminate() == 0)

        let low = try await RelayProcess.start(dataDirectory: dir.url, arguments: ["--max-connections", "1500"],
                                               launcher: ["/usr/bin/prlimit", "--nofile=256:1024", "--"])
        let line = try await low.child.waitForErrorLine("the warning about the open-file limit") { $0.contains("open-file limit") }
        #expect(line.1.contains("LimitNOFILE"))
        #expect(try Self.softOpenFileLimit(of: low.process.processIdentifier) == 1024)
        // It still serves, as many connections as it can.
        let c = try await RelayConnection.connect(to: low.address)
        try await c.ping()
        await c.close()
        #expect(await low.terminate() == 0)
    }

    static func softOpenFileLimit(of pid: Int32) throws -> Int {
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        return try #require(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(3).first.flatMap { Int($0) })
    }

    @Test func badArgumentsAreRefusedWithAMessage() async throws {
        let (status, stderr) = try await runRelayToExit(["--data-dir", "/tmp/unused", "--ttl", "forever"])
        #expect(status != 0)
        #expect(stderr.contains("--ttl"))
    }

    @Test func aPortInUseIsReportedNotCrashedOn() async throws {
        let dir = TempDirectory()
        let other = TempDirectory()
        defer { dir.cleanup(); other.cleanup() }
        let first = try await RelayProcess.start(dataDirectory: dir.url)
        let (status, stderr) = try await runRelayToExit(["--data-dir", other.url.path, "--listen", "127.0.0.1:\(first.address.port)"])
        #expect(status != 0)
        #expect(stderr.contains("cannot listen"))
        #expect(await first.terminate() == 0)
    }

    /// Runs the relay with `arguments` until it exits; returns its status and standard error.
    private func runRelayToExit(_ arguments: [String]) async throws -> (Int32, String) {
        let p = try ChildProcess(RelayProcess.executable("swiftplex-relay"), arguments)
        let status = try await p.waitForExit()
        return (status, p.errorText)
    }
}
