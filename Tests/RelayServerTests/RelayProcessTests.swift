import Foundation
import RelayClient
import RelayProtocol
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
