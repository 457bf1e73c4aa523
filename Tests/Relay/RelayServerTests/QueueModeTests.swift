import Foundation
import GRDB
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import Testing

/// A contact queue (an address) can never be secured, so a stranger holding its public
/// sender ID cannot lock out the requests of everyone else.
@Suite(.timeLimit(.minutes(2))) struct QueueModeTests {
    @Test(arguments: RelayStoreKind.all) func aStrangersSKEYOnAContactQueueIsAUTHAndRequestsStillArrive(store: RelayStoreKind) async throws {
        try await withRelay(store: store) { relay in
            let owner = try await RelayConnection.connect(to: relay.address)
            let stranger = try await RelayConnection.connect(to: relay.address)
            let requester = try await RelayConnection.connect(to: relay.address)
            let inbox = EventInbox(owner)
            let q = try await owner.createQueue(mode: .contact)
            try await owner.subscribe(q)
            // The sender ID is public (it is in the address link): the stranger tries to secure it.
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await stranger.secureAsSender(senderId: q.senderId, senderKey: .newX25519())
            }
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await stranger.secureAsSender(senderId: q.senderId, senderKey: .newEd25519())
            }
            // The recipient cannot secure it either.
            await #expect(throws: RelayClientError.relay(.auth)) { try await owner.secure(q, senderKey: AuthPrivateKey.newX25519().publicKey) }
            // Unsigned requests from anyone are still accepted and delivered, in order.
            try await requester.sendMessage(senderId: q.senderId, key: nil, body: "request 1".bytes)
            try await stranger.sendMessage(senderId: q.senderId, key: nil, body: "request 2".bytes)
            for expected in ["request 1", "request 2"] {
                let m = try await inbox.nextMessage(for: q)
                #expect(m.body == expected.bytes)
                try await owner.acknowledge(q, messageId: m.id)
            }
            // A messaging queue is still secured by its sender as before.
            let messaging = try await owner.createQueue()
            let key = AuthPrivateKey.newX25519()
            try await requester.secureAsSender(senderId: messaging.senderId, senderKey: key)
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await stranger.sendMessage(senderId: messaging.senderId, key: nil, body: [1])
            }
            for c in [owner, stranger, requester] { await c.close() }
        }
    }

    @Test(arguments: RelayStoreKind.all) func theModeSurvivesARestart(store: RelayStoreKind) async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        let q = try await withRelay(store: store, dataDirectory: dir.url) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            let q = try await c.createQueue(mode: .contact)
            await c.close()
            return q
        }
        try await withRelay(store: store, dataDirectory: dir.url) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await c.secureAsSender(senderId: q.senderId, senderKey: .newX25519())
            }
            try await c.sendMessage(senderId: q.senderId, key: nil, body: "still open".bytes)
            var q = q
            q.relay = relay.address
            #expect(try await c.get(q)?.body == "still open".bytes)
            await c.close()
        }
    }

    /// A database made before queue modes: its unsecured queues (addresses among them) become
    /// contact queues, its secured ones stay messaging queues.
    @Test func queuesFromBeforeModesAreMigrated() async throws {
        let dir = TempDirectory()
        defer { dir.cleanup() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let unsecured = LegacyQueue()
        let secured = LegacyQueue(senderKey: .newX25519())
        do {
            let db = try DatabaseQueue(path: dir.url.appendingPathComponent("relay.db").path)
            try await db.write { db in
                try db.execute(sql: """
                    CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                    INSERT INTO grdb_migrations VALUES ('v1');
                    CREATE TABLE queue (
                        recipient_id BLOB PRIMARY KEY NOT NULL, sender_id BLOB NOT NULL UNIQUE, recipient_key BLOB NOT NULL,
                        box_key BLOB NOT NULL, sender_key BLOB, enabled INTEGER NOT NULL DEFAULT 1, link_id BLOB UNIQUE,
                        link_data BLOB, created_at INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE TABLE message (
                        seq INTEGER PRIMARY KEY AUTOINCREMENT,
                        recipient_id BLOB NOT NULL REFERENCES queue(recipient_id) ON DELETE CASCADE,
                        message_id BLOB NOT NULL, created_at INTEGER NOT NULL, flags INTEGER NOT NULL, body BLOB NOT NULL
                    );
                    """)
                for q in [unsecured, secured] { try q.insert(db) }
            }
            try db.close()
        }
        try await withRelay(dataDirectory: dir.url) { relay in
            let c = try await RelayConnection.connect(to: relay.address)
            await #expect(throws: RelayClientError.relay(.auth)) {
                try await c.secureAsSender(senderId: unsecured.senderId, senderKey: .newX25519())
            }
            try await c.sendMessage(senderId: unsecured.senderId, key: nil, body: "request".bytes)
            #expect(try await c.get(unsecured.queue(relay.address))?.body == "request".bytes)
            try await c.sendMessage(senderId: secured.senderId, key: secured.senderKey, body: "signed".bytes)
            #expect(try await c.get(secured.queue(relay.address))?.body == "signed".bytes)
            await c.close()
        }
    }
}

/// A queue row as a relay before queue modes stored it, with the keys to use it.
struct LegacyQueue {
    let recipientId = Sodium.randomBytes(24)
    let senderId = Sodium.randomBytes(24)
    let recipientKey = AuthPrivateKey.newEd25519()
    let delivery = X25519.PrivateKey()
    let relayDh = X25519.PrivateKey()
    let senderKey: AuthPrivateKey?

    init(senderKey: AuthPrivateKey? = nil) { self.senderKey = senderKey }

    func insert(_ db: Database) throws {
        let box = try BoxKey(privateKey: relayDh, peer: delivery.publicKey)
        try db.execute(sql: "INSERT INTO queue (recipient_id, sender_id, recipient_key, box_key, sender_key, created_at) VALUES (?, ?, ?, ?, ?, 0)",
                       arguments: [Data(recipientId), Data(senderId), Data(recipientKey.publicKey.wireBytes), Data(box.secretBytes),
                                   senderKey.map { Data($0.publicKey.wireBytes) }])
    }

    func queue(_ relay: RelayAddress) throws -> RecipientQueue {
        RecipientQueue(relay: relay, recipientId: recipientId, senderId: senderId, recipientKey: recipientKey,
                       deliveryKey: try BoxKey(privateKey: delivery, peer: relayDh.publicKey))
    }
}
