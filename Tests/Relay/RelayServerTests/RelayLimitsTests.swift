import Foundation
import NIOCore
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing

/// Every resource a client can make the relay spend is bounded, over real TLS.
@Suite(.timeLimit(.minutes(2))) struct RelayLimitsTests {
    @Test(arguments: RelayStoreKind.all) func newQueuesPerConnectionAreLimited(store: RelayStoreKind) async throws {
        try await withRelay(store: store, configure: { $0.maxNewQueuesPerConnection = 3; $0.newQueueWindow = .seconds(3600) }) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            for _ in 0..<3 { _ = try await c.createQueue() }
            await #expect(throws: RelayClientError.relay(.quota)) { _ = try await c.createQueue() }
            // The connection stays usable, and another connection has its own budget.
            try await c.ping()
            let other = try await RelayConnection.connect(to: relay.address)
            _ = try await other.createQueue()
            #expect(relay.stats.queues == 4)
            #expect(relay.stats.limitRefusals == 1)
            await c.close()
            await other.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func queuesInTotalAreLimited(store: RelayStoreKind) async throws {
        try await withRelay(store: store, configure: { $0.maxQueues = 3 }) { relay in
            let a = try await RelayConnection.connect(to: relay.address)
            let b = try await RelayConnection.connect(to: relay.address)
            let first = try await a.createQueue()
            _ = try await b.createQueue()
            _ = try await a.createQueue()
            await #expect(throws: RelayClientError.relay(.quota)) { _ = try await b.createQueue() }
            // Concurrent NEWs cannot overshoot the limit either.
            try await a.delete(first)
            let results = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<10 { group.addTask { (try? await b.createQueue()) != nil } }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(results.filter { $0 }.count == 1)
            #expect(relay.stats.queues == 3)
            await a.close()
            await b.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func connectionsAreLimited(store: RelayStoreKind) async throws {
        try await withRelay(store: store, configure: { $0.maxConnections = 2 }) { relay in
            let a = try await RelayConnection.connect(to: relay.address)
            let b = try await RelayConnection.connect(to: relay.address)
            // The third is closed as it is accepted: no TLS, no hello.
            await #expect(throws: RelayClientError.self) { _ = try await RelayConnection.connect(to: relay.address, timeout: .seconds(5)) }
            let raw = try await RawClient(host: relay.address.host, port: relay.address.port, tls: false)
            #expect(await raw.waitForClose())
            try await a.ping()
            try await b.ping()
            // Once one closes, a new connection is admitted.
            await b.close()
            try await eventually("a connection slot is free again") {
                guard let c = try? await RelayConnection.connect(to: relay.address, timeout: .seconds(2)) else { return false }
                try await c.ping()
                await c.close()
                return true
            }
            await a.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func storedMessagesInTotalAreLimited(store: RelayStoreKind) async throws {
        try await withRelay(store: store, configure: { $0.maxStoredMessages = 5 }) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            // Unsigned SENDs to one's own unsecured queues: the way to fill a disk, bounded in total.
            let q1 = try await c.createQueue()
            let q2 = try await c.createQueue()
            for i in 0..<3 { try await c.sendMessage(senderId: q1.senderId, key: nil, body: [UInt8(i)]) }
            for i in 0..<2 { try await c.sendMessage(senderId: q2.senderId, key: nil, body: [UInt8(i)]) }
            await #expect(throws: RelayClientError.relay(.quota)) { try await c.sendMessage(senderId: q2.senderId, key: nil, body: [9]) }
            let m = try #require(try await c.get(q1))
            try await c.acknowledge(q1, messageId: m.id)
            try await c.sendMessage(senderId: q2.senderId, key: nil, body: [2])
            #expect(relay.stats.storedMessages == 5)
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func storedBytesInTotalAreLimited(store: RelayStoreKind) async throws {
        try await withRelay(store: store, configure: { $0.maxStoredBytes = 10_000 }) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            for _ in 0..<2 { try await c.sendMessage(senderId: q.senderId, key: nil, body: [UInt8](repeating: 1, count: 4000)) }
            await #expect(throws: RelayClientError.relay(.quota)) {
                try await c.sendMessage(senderId: q.senderId, key: nil, body: [UInt8](repeating: 1, count: 4000))
            }
            try await c.sendMessage(senderId: q.senderId, key: nil, body: [UInt8](repeating: 1, count: 2000))
            #expect(relay.stats.storedBytes == 10_000)
            let m = try #require(try await c.get(q))
            try await c.acknowledge(q, messageId: m.id)
            #expect(relay.stats.storedBytes == 6000)
            try await c.sendMessage(senderId: q.senderId, key: nil, body: [UInt8](repeating: 1, count: 4000))
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func repeatedAuthFailuresCloseTheConnectionAndNoOtherOne(store: RelayStoreKind) async throws {
        try await withRelay(store: store, configure: { $0.maxAuthFailures = 5; $0.authFailureWindow = .seconds(60) }) { relay in
            let attacker = try await RelayConnection.connect(to: relay.address)
            let inbox = EventInbox(attacker)
            let good = try await RelayConnection.connect(to: relay.address)
            let q = try await good.createQueue()
            // Five wrong keys are answered AUTH and the connection stays…
            for _ in 0..<5 {
                await #expect(throws: RelayClientError.relay(.auth)) {
                    try await attacker.secureAsSender(senderId: Sodium.randomBytes(24), senderKey: .newEd25519())
                }
            }
            try await attacker.ping()
            // …the sixth is answered AUTH too, then the relay closes the connection.
            var wrong = q
            wrong.recipientKey = .newEd25519()
            await #expect(throws: RelayClientError.relay(.auth)) { try await attacker.subscribe(wrong) }
            #expect(try await inbox.next() == .disconnected)
            #expect(!attacker.isActive)
            // The owner's connection and queue are untouched.
            try await good.sendMessage(senderId: q.senderId, key: nil, body: [1])
            #expect(try await good.get(q)?.body == [1])
            await good.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func aBlockWithMoreAuthorisedTransmissionsThanAllowedIsRefused(store: RelayStoreKind) async throws {
        try await withRelay(store: store) { relay in
            let raw = try await RawClient(host: relay.address.host, port: relay.address.port, tls: true)
            let allocator = ByteBufferAllocator()
            try await raw.write(Array(buffer: BlockCodec.encode([ClientHello(version: 1).encoded()], allocator: allocator)[0]))
            let signed = (0...RelayLimits.maxAuthorizedPerBlock).map { _ in
                Transmission(signature: Sodium.randomBytes(64), correlationId: Sodium.randomBytes(24), entityId: Sodium.randomBytes(24),
                             command: ClientCommand.subscribe.encoded()).encoded(allocator: allocator)
            }
            let blocks = BlockCodec.encode(signed, allocator: allocator)
            #expect(blocks.count == 1)
            try await raw.write(Array(buffer: blocks[0]))
            #expect(await raw.waitForClose())
            // It was told why, and no signature was checked (no AUTH counted).
            let received = raw.bytesReceived
            try #require(received.count >= 2 * RelayLimits.blockSize)
            let block = ByteBufferAllocator().buffer(bytes: received[RelayLimits.blockSize..<2 * RelayLimits.blockSize])
            let t = try Transmission.decode(try BlockCodec.decode(block)[0])
            #expect(try ServerResponse.decode(t.command) == .error(.block))
            #expect(relay.stats.authFailures == 0)

            // The client library never packs more than that: 300 pipelined signed commands all answered.
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<300 { group.addTask { _ = try await c.get(q) } }
                try await group.waitForAll()
            }
            try await c.ping()
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func aPrivateRelayAsksForItsPasswordToCreateQueues(store: RelayStoreKind) async throws {
        try await withRelay(store: store, configure: { $0.newQueuePassword = "s3cret-pw" }) { relay in
            #expect(relay.address.password == "s3cret-pw")
            #expect(relay.address.description.contains(":s3cret-pw@"))
            let anonymous = relay.address.withoutPassword
            let c = try await RelayConnection.connect(to: anonymous)
            await #expect(throws: RelayClientError.relay(.auth)) { _ = try await c.createQueue() }
            await #expect(throws: RelayClientError.relay(.auth)) { _ = try await c.createQueue(password: "wrong") }
            await #expect(throws: RelayClientError.relay(.auth)) { _ = try await c.createQueue(password: "s3cret-pw-longer") }
            let q = try await c.createQueue(password: "s3cret-pw")
            // Everything else works without it: the password guards creation only.
            let key = AuthPrivateKey.newX25519()
            try await c.secureAsSender(senderId: q.senderId, senderKey: key)
            try await c.sendMessage(senderId: q.senderId, key: key, body: [1])
            #expect(try await c.get(q)?.body == [1])
            await c.close()
            // A connection made with the full address uses its password.
            let owner = try await RelayConnection.connect(to: relay.address)
            _ = try await owner.createQueue(mode: .contact)
            await owner.close()
            #expect(relay.stats.queues == 2)
        }
    }
}
