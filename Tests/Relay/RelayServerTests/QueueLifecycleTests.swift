import NIOCore
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import Testing

@Suite(.timeLimit(.minutes(2))) struct QueueLifecycleTests {
    @Test(arguments: RelayStoreKind.all) func queueLifecycleFromCreateToDelete(store: RelayStoreKind) async throws {
        try await withRelay(store: store) { relay in
            let recipient = try await RelayConnection.connect(to: relay.address)
            let sender = try await RelayConnection.connect(to: relay.address)
            let inbox = EventInbox(recipient)
            let queue = try await recipient.createQueue()
            #expect(queue.recipientId != queue.senderId)
            #expect(queue.recipientId.count == 24 && queue.senderId.count == 24)

            // Unsecured: the first message may be unsigned.
            try await sender.sendMessage(senderId: queue.senderId, key: nil, body: "confirmation".bytes)
            // Sender secures the queue; from now on only its signature is accepted.
            let senderKey = AuthPrivateKey.newX25519()
            try await sender.secureAsSender(senderId: queue.senderId, senderKey: senderKey)
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await sender.sendMessage(senderId: queue.senderId, key: nil, body: "unsigned".bytes)
            }
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await sender.sendMessage(senderId: queue.senderId, key: .newX25519(), body: "wrong key".bytes)
            }
            // A second SKEY with another key is refused; repeating the same one is fine.
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await sender.secureAsSender(senderId: queue.senderId, senderKey: .newX25519())
            }
            try await sender.secureAsSender(senderId: queue.senderId, senderKey: senderKey)
            try await sender.sendMessage(senderId: queue.senderId, key: senderKey, body: "second".bytes, flags: .notification)

            try await recipient.subscribe(queue)
            let first = try await inbox.nextMessage(for: queue)
            #expect(first.body == "confirmation".bytes)
            try await recipient.acknowledge(queue, messageId: first.id)
            let second = try await inbox.nextMessage(for: queue)
            #expect(second.body == "second".bytes && second.flags == .notification)
            // Acknowledging something that is not in flight is NO_MSG.
            await #expect(throws: RelayClientError.relay(.noMessage)) {
                try await recipient.acknowledge(queue, messageId: first.id)
            }
            try await recipient.acknowledge(queue, messageId: second.id)

            // OFF: senders are refused, as if the queue did not exist.
            try await recipient.disable(queue)
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await sender.sendMessage(senderId: queue.senderId, key: senderKey, body: "late".bytes)
            }
            try await recipient.delete(queue)
            await #expect(throws: RelayClientError.relay(.auth)) { try await recipient.subscribe(queue) }
            #expect(relay.stats.queues == 0)
            await recipient.close()
            await sender.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func recipientSecuresWithKEY(store: RelayStoreKind) async throws {
        try await withRelay(store: store) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            let senderKey = AuthPrivateKey.newX25519()
            try await c.secure(q, senderKey: senderKey.publicKey)
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await c.sendMessage(senderId: q.senderId, key: nil, body: [1])
            }
            try await c.sendMessage(senderId: q.senderId, key: senderKey, body: [2])
            #expect(try await c.get(q)?.body == [2])
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func deliveredBytesDifferFromSentBytes(store: RelayStoreKind) async throws {
        try await withRelay(store: store) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let inbox = EventInbox(c)
            let q = try await c.createQueue()
            let body = Sodium.randomBytes(1000)
            try await c.sendMessage(senderId: q.senderId, key: nil, body: body)
            try await c.subscribe(q)
            guard case let .message(_, id, sealed) = try await inbox.next() else { Issue.record("no MSG"); return }
            #expect(!sealed.contains(subsequence: body))
            #expect(try q.open(messageId: id, sealed: sealed).body == body)
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func messagesArriveInOrderOneAtATimeUntilAcknowledged(store: RelayStoreKind) async throws {
        try await withRelay(store: store) { relay in
            let recipient = try await RelayConnection.connect(to: relay.address)
            let sender = try await RelayConnection.connect(to: relay.address)
            let inbox = EventInbox(recipient)
            let q = try await recipient.createQueue()
            try await recipient.subscribe(q)
            for i in 0..<20 { try await sender.sendMessage(senderId: q.senderId, key: nil, body: [UInt8(i)]) }
            for i in 0..<20 {
                let m = try await inbox.nextMessage(for: q)
                #expect(m.body == [UInt8(i)])
                if i == 0 {
                    // Nothing else arrives before the ACK: a message on a second queue, sent after
                    // all twenty, is the next event (an early delivery of message 1 would come first).
                    let probe = try await recipient.createQueue()
                    try await recipient.subscribe(probe)
                    try await sender.sendMessage(senderId: probe.senderId, key: nil, body: "probe".bytes)
                    let p = try await inbox.nextMessage(for: probe)
                    #expect(p.body == "probe".bytes)
                    try await recipient.acknowledge(probe, messageId: p.id)
                }
                try await recipient.acknowledge(q, messageId: m.id)
            }
            #expect(relay.stats.storedMessages == 0)
            await recipient.close()
            await sender.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func secondSubscriberEndsTheFirstAndGetsTheUnacknowledgedMessage(store: RelayStoreKind) async throws {
        try await withRelay(store: store) { relay in
            let first = try await RelayConnection.connect(to: relay.address)
            let second = try await RelayConnection.connect(to: relay.address)
            let inbox1 = EventInbox(first)
            let inbox2 = EventInbox(second)
            let q = try await first.createQueue()
            try await first.subscribe(q)
            try await first.sendMessage(senderId: q.senderId, key: nil, body: "one".bytes)
            let m = try await inbox1.nextMessage(for: q)
            try await second.subscribe(q)
            #expect(try await inbox1.next() == .end(recipientId: q.recipientId))
            // Not acknowledged by the first subscriber: delivered again to the second.
            let again = try await inbox2.nextMessage(for: q)
            #expect(again.id == m.id && again.body == "one".bytes)
            try await second.acknowledge(q, messageId: again.id)
            await first.close()
            await second.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func quotaRefusesThenAcceptsAfterDrain(store: RelayStoreKind) async throws {
        try await withRelay(store: store, configure: { $0.queueQuota = 5 }) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            for i in 0..<5 { try await c.sendMessage(senderId: q.senderId, key: nil, body: [UInt8(i)]) }
            await #expect(throws: RelayClientError.relay(.quota)) {
                try await c.sendMessage(senderId: q.senderId, key: nil, body: [99])
            }
            let m = try #require(try await c.get(q))
            #expect(m.body == [0])
            try await c.acknowledge(q, messageId: m.id)
            try await c.sendMessage(senderId: q.senderId, key: nil, body: [5])
            var bodies: [[UInt8]] = []
            while let m = try await c.get(q) {
                bodies.append(m.body)
                try await c.acknowledge(q, messageId: m.id)
            }
            #expect(bodies == [[1], [2], [3], [4], [5]])
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func expiredMessagesAreSweptAndNeverDelivered(store: RelayStoreKind) async throws {
        let clock = ManualClock()
        try await withRelay(store: store, configure: { $0.messageTTL = .seconds(3600); $0.clock = clock }) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            try await c.sendMessage(senderId: q.senderId, key: nil, body: "old".bytes)
            clock.advance(seconds: 1800)
            try await c.sendMessage(senderId: q.senderId, key: nil, body: "new".bytes)
            clock.advance(seconds: 1801)
            // Past its TTL the old message is not delivered even before a sweep…
            #expect(try await c.get(q)?.body == "new".bytes)
            // …and the sweep deletes it.
            #expect(try await relay.sweepExpired() == 1)
            #expect(relay.stats.messagesExpired == 1)
            #expect(relay.stats.storedMessages == 1)
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func shortLinkDataIsStoredAndReadable(store: RelayStoreKind) async throws {
        try await withRelay(store: store) { relay in
            let owner = try await RelayConnection.connect(to: relay.address)
            let reader = try await RelayConnection.connect(to: relay.address)
            let q = try await owner.createQueue()
            let id = try await owner.setLinkData(q, data: "encrypted invitation".bytes)
            #expect(try await reader.linkData(linkId: id) == "encrypted invitation".bytes)
            // Updating keeps the same link ID.
            #expect(try await owner.setLinkData(q, data: "v2".bytes) == id)
            #expect(try await reader.linkData(linkId: id) == "v2".bytes)
            await #expect(throws: RelayClientError.relay(.auth)) { try await reader.linkData(linkId: Sodium.randomBytes(24)) }
            try await owner.send(.linkDelete, entityId: q.recipientId, key: q.recipientKey)
            await #expect(throws: RelayClientError.relay(.auth)) { try await reader.linkData(linkId: id) }
            await #expect(throws: RelayClientError.relay(.largeMessage)) {
                try await owner.setLinkData(q, data: [UInt8](repeating: 0, count: RelayLimits.maxLinkDataLength + 1))
            }
            await owner.close()
            await reader.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func queuesAndMessagesSurviveARestart(store: RelayStoreKind) async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let (q, fingerprint) = try await withRelay(store: store, dataDirectory: dir.url) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            try await c.sendMessage(senderId: q.senderId, key: nil, body: "kept".bytes)
            await c.close()
            return (q, relay.address.fingerprint)
        }
        try await withRelay(store: store, dataDirectory: dir.url) { relay in
            #expect(relay.address.fingerprint == fingerprint)
            let c = try await RelayConnection.connect(to: relay.address)
            // The queue handle must point at the new port.
            var q = q
            q.relay = relay.address
            #expect(try await c.get(q)?.body == "kept".bytes)
            await c.close()
        }
    }

    @Test(arguments: RelayStoreKind.all) func dataFilesArePrivate(store: RelayStoreKind) async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        try await withRelay(store: store, dataDirectory: dir.url) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue()
            try await c.sendMessage(senderId: q.senderId, key: nil, body: [1])
            await c.close()
        }
        let fm = FileManagerPermissions()
        #expect(fm.mode(dir.url.path) == 0o700)
        for name in try fm.list(dir.url.path) {
            #expect(fm.mode(dir.url.appendingPathComponent(name).path) == 0o600, "\(name)")
        }
    }
}

import Foundation

struct FileManagerPermissions {
    func mode(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? Int ?? -1) & 0o777
    }
    func list(_ path: String) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: path) }
}

extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        for i in 0...(count - subsequence.count) where Array(self[i..<i + subsequence.count]) == subsequence { return true }
        return false
    }
}
