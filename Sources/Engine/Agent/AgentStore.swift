import Foundation
import SwiftplexSQL
import RelayClient
import RelayProtocol
import SwiftplexCrypto
import SwiftplexStorage

/// One duplex connection as the agent persists it: its receiving queue, its sending queue once
/// known, the handshake keys while needed, the ratchet, and the integrity counters.
struct ConnectionRecord: Codable, Sendable {
    enum Role: String, Codable, Sendable { case inviter, joiner }
    enum Status: String, Codable, Sendable {
        /// Inviter: waiting for a confirmation. Joiner: confirmation sent, waiting for the inviter's answer.
        case pending
        /// Inviter: confirmation received, waiting for `allow`.
        case confirmed
        /// Inviter: answer sent, waiting for the joiner's hello.
        case accepted
        case connected
    }

    var id: Int64 = 0
    var role: Role
    var status: Status
    var rcv: OwnQueue
    var rcvPeerE2E: Data?
    var sndQueue: String?
    var sndKey: Data?
    var sndE2E: Data?
    var sndConfirmationSent = false
    var x3dhKey1: Data?
    var x3dhKey2: Data?
    var associatedData: Data?
    var ratchet: DoubleRatchet?
    var peerInfo: Data?
    var sndSeq: UInt64 = 0
    var sndLastHash = Data(count: 32)
    var rcvSeq: UInt64 = 0
    var rcvLastHash = Data(count: 32)
    /// Requester of a contact address: allow the owner's confirmation at once, sending this info.
    var autoAllowInfo: Data?
    /// The relay's ID of the last message processed, so that a redelivery (after a crash between
    /// commit and ACK) is acknowledged without being processed twice.
    var lastRelayMessageId: Data?

    var receivingQueue: RecipientQueue { get throws { try rcv.recipientQueue } }
}

// MARK: - Stored form

/// A record is saved on every message sent and received, ratchet included, so it is stored in a
/// binary form (``BinaryStateWriter``): the first byte ``binaryMark`` (a JSON record, as
/// earlier versions stored it, starts with `{`), a layout version, then every field in order.
/// Records stored as JSON still read (``ConnectionRecord/decodeState(_:)``) and are written in
/// the binary form at their next save. What SQL needs of a record — its status and receiving
/// queue — is kept in columns of its own (`status`, `rcv`; migration `v5`).
extension ConnectionRecord {
    static let binaryMark: UInt8 = 0xB5
    static let binaryVersion: UInt8 = 1

    func binaryState() -> Data {
        var w = BinaryStateWriter(capacity: 1024 + 96 * (ratchet?.skippedKeyCount ?? 0))
        w.u8(Self.binaryMark)
        w.u8(Self.binaryVersion)
        w.i64(id)
        w.string(role.rawValue)
        w.string(status.rawValue)
        w.string(rcv.relay)
        w.bytes(rcv.id)
        w.bytes(rcv.senderId)
        w.bytes(rcv.key)
        w.bytes(rcv.deliveryKey)
        w.bytes(rcv.e2e)
        w.optionalBytes(rcvPeerE2E)
        w.optionalString(sndQueue)
        w.optionalBytes(sndKey)
        w.optionalBytes(sndE2E)
        w.bool(sndConfirmationSent)
        w.optionalBytes(x3dhKey1)
        w.optionalBytes(x3dhKey2)
        w.optionalBytes(associatedData)
        if let ratchet {
            w.u8(1)
            ratchet.write(to: &w)
        } else {
            w.u8(0)
        }
        w.optionalBytes(peerInfo)
        w.u64(sndSeq)
        w.bytes(sndLastHash)
        w.u64(rcvSeq)
        w.bytes(rcvLastHash)
        w.optionalBytes(autoAllowInfo)
        w.optionalBytes(lastRelayMessageId)
        return Data(w.bytes)
    }

    init(binary bytes: [UInt8]) throws {
        var r = BinaryStateReader(bytes)
        guard try r.u8() == Self.binaryMark else { throw BinaryStateError("not a binary connection record") }
        let version = try r.u8()
        guard version == Self.binaryVersion else { throw BinaryStateError("connection record version \(version) is not known") }
        let id = try r.i64()
        guard let role = Role(rawValue: try r.string()), let status = Status(rawValue: try r.string()) else {
            throw BinaryStateError("connection record with an unknown role or status")
        }
        let relay = try r.string()
        let rcv = OwnQueue(relay: relay, id: Data(try r.bytes()), senderId: Data(try r.bytes()), key: Data(try r.bytes()),
                           deliveryKey: Data(try r.bytes()), e2e: Data(try r.bytes()))
        self.init(id: id, role: role, status: status, rcv: rcv)
        rcvPeerE2E = try r.optionalBytes().map { Data($0) }
        sndQueue = try r.optionalString()
        sndKey = try r.optionalBytes().map { Data($0) }
        sndE2E = try r.optionalBytes().map { Data($0) }
        sndConfirmationSent = try r.bool()
        x3dhKey1 = try r.optionalBytes().map { Data($0) }
        x3dhKey2 = try r.optionalBytes().map { Data($0) }
        associatedData = try r.optionalBytes().map { Data($0) }
        ratchet = try r.bool() ? try DoubleRatchet(from: &r) : nil
        peerInfo = try r.optionalBytes().map { Data($0) }
        sndSeq = try r.u64()
        sndLastHash = Data(try r.bytes())
        rcvSeq = try r.u64()
        rcvLastHash = Data(try r.bytes())
        autoAllowInfo = try r.optionalBytes().map { Data($0) }
        lastRelayMessageId = try r.optionalBytes().map { Data($0) }
        guard r.isAtEnd else { throw BinaryStateError("connection record has bytes past its end") }
    }

    /// A stored record: the binary form, or JSON as earlier versions stored it.
    static func decodeState(_ data: Data) throws -> ConnectionRecord {
        if data.first == binaryMark { return try ConnectionRecord(binary: [UInt8](data)) }
        return try JSONDecoder().decode(ConnectionRecord.self, from: data)
    }
}

/// A queue this agent receives on, as stored: what rebuilds the relay client's `RecipientQueue`,
/// plus the agent's own end-to-end key for the envelopes that arrive on it.
struct OwnQueue: Codable, Sendable {
    var relay: String
    var id: Data
    var senderId: Data
    var key: Data
    var deliveryKey: Data
    var e2e: Data

    init(relay: String, id: Data, senderId: Data, key: Data, deliveryKey: Data, e2e: Data) {
        (self.relay, self.id, self.senderId, self.key, self.deliveryKey, self.e2e) = (relay, id, senderId, key, deliveryKey, e2e)
    }

    init(_ q: RecipientQueue, relay: RelayAddress, e2e: X25519.PrivateKey) {
        self.relay = relay.description
        id = Data(q.recipientId)
        senderId = Data(q.senderId)
        key = Data(q.recipientKey.secretBytes)
        deliveryKey = Data(q.deliveryKey.secretBytes)
        self.e2e = Data(e2e.secretBytes)
    }

    var recipientQueue: RecipientQueue {
        get throws {
            RecipientQueue(relay: try RelayAddress(parsing: relay), recipientId: [UInt8](id), senderId: [UInt8](senderId),
                           recipientKey: try AuthPrivateKey(secretBytes: [UInt8](key)), deliveryKey: try BoxKey(secretBytes: [UInt8](deliveryKey)))
        }
    }

    var e2eKey: X25519.PrivateKey { get throws { try X25519.PrivateKey(secretBytes: [UInt8](e2e)) } }
}

/// A contact address this agent owns: a reusable queue whose messages are contact requests.
struct AddressRecord: Codable, Sendable {
    var id: Int64 = 0
    var rcv: OwnQueue
    var lastRelayMessageId: Data?

    var receivingQueue: RecipientQueue { get throws { try rcv.recipientQueue } }
}

/// A ready envelope waiting to be sent, in order, for one connection.
struct PendingEnvelope: Sendable {
    var id: Int64
    var connectionId: Int64
    var envelope: [UInt8]
    /// The application message number, for the `sent` event (nil for handshake envelopes).
    var messageSeq: UInt64?
}

/// `<prefix>_agent.db`: connections and the outbox, in SQLite (WAL). What runs for every message
/// sent or received goes through cached statements (compiled once per database connection:
/// compiling, with GRDB's authorizer, was ~6 % of the echo benchmark's samples).
/// A transaction's connection (the store's `read` and `write` closures take one).
typealias Database = any SQLConnection
typealias Row = SQLRow

final class AgentStore: Sendable {
    let db: any SQLStore

    convenience init(path: URL) throws { try self.init(location: .sqlite(path)) }

    init(location: DatabaseLocation) throws {
        do {
            db = try location.open(label: "agent", migrations: Self.migrations)
        } catch {
            throw AgentError(.store, "cannot open the agent database \(location): \(error)")
        }
    }

    static var migrations: [SQLMigration] {
        var m: [SQLMigration] = []
        m.append(SQLMigration("v1", sql: """
                CREATE TABLE connection (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    rcv_id BLOB NOT NULL UNIQUE,
                    rcv_sender_id BLOB NOT NULL,
                    state BLOB NOT NULL
                );
                CREATE TABLE pending (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    connection_id INTEGER NOT NULL REFERENCES connection(id) ON DELETE CASCADE,
                    envelope BLOB NOT NULL,
                    message_seq INTEGER,
                    created_at INTEGER NOT NULL
                );
                CREATE INDEX pending_by_connection ON pending(connection_id, id);
                """))
        m.append(SQLMigration("v2: addresses", sql: """
                CREATE TABLE address (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    rcv_id BLOB NOT NULL UNIQUE,
                    rcv_sender_id BLOB NOT NULL,
                    state BLOB NOT NULL
                );
                CREATE TABLE contact_request (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    address_id INTEGER NOT NULL REFERENCES address(id) ON DELETE CASCADE,
                    invitation TEXT NOT NULL,
                    info BLOB NOT NULL,
                    created_at INTEGER NOT NULL
                );
                """))
            // Received messages wait here, committed with the ratchet step that decrypted them,
            // until the chat layer has stored them (`Agent.messageProcessed`): the relay's ACK can
            // go out at once, and a crash between the agent and the chat database loses nothing.
        m.append(SQLMigration("v3: inbox", sql: """
                CREATE TABLE inbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    connection_id INTEGER NOT NULL REFERENCES connection(id) ON DELETE CASCADE,
                    seq INTEGER NOT NULL,
                    body BLOB NOT NULL,
                    UNIQUE (connection_id, seq)
                );
                """))
            // The key of a send the caller may repeat (the bot host replaying an event after a
            // crash), committed with the ratchet step and the outbox entry of that send: a send
            // whose key is here was made, and is not made again.
        m.append(SQLMigration("v4: idempotent sends", sql: """
                CREATE TABLE send_key (
                    connection_id INTEGER NOT NULL REFERENCES connection(id) ON DELETE CASCADE,
                    key TEXT NOT NULL,
                    seq INTEGER NOT NULL,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (connection_id, key)
                ) WITHOUT ROWID;
                CREATE INDEX send_key_by_age ON send_key(created_at);
                """))
            // Records are stored in a binary form from now on (``ConnectionRecord/binaryState()``),
            // which SQLite's JSON functions cannot read: what queries select by moves to columns.
        m.append(SQLMigration("v5: connection status and queue columns", sqlite: """
                ALTER TABLE connection ADD COLUMN status TEXT;
                ALTER TABLE connection ADD COLUMN rcv TEXT;
                UPDATE connection SET status = json_extract(CAST(state AS TEXT), '$.status'),
                                      rcv = json_extract(CAST(state AS TEXT), '$.rcv');
                CREATE INDEX connection_by_status ON connection(status);
                """, postgres: """
                ALTER TABLE connection ADD COLUMN status TEXT;
                ALTER TABLE connection ADD COLUMN rcv TEXT;
                UPDATE connection SET status = convert_from(state, 'UTF8')::jsonb #>> '{status}',
                                      rcv = convert_from(state, 'UTF8')::jsonb #>> '{rcv}';
                CREATE INDEX connection_by_status ON connection(status);
                """))
        return m
    }

    /// The message number of the send made on `connectionId` with `key`, if there was one.
    static func sentSeq(_ db: Database, connectionId: Int64, key: String) throws -> UInt64? {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT seq FROM send_key WHERE connection_id = ? AND key = ?"), arguments: [connectionId, key])
            .map { UInt64(max(0, $0)) }
    }

    static func recordSendKey(_ db: Database, connectionId: Int64, key: String, seq: UInt64) throws {
        try db.cachedStatement(sql: "INSERT INTO send_key (connection_id, key, seq, created_at) VALUES (?, ?, ?, ?)")
            .execute(arguments: [connectionId, key, Int64(seq), Int64(Date().timeIntervalSince1970)])
    }

    /// Forgets send keys older than `age` seconds (a repeat comes within minutes of the crash).
    static func pruneSendKeys(_ db: Database, olderThan age: TimeInterval) throws {
        try db.execute(sql: "DELETE FROM send_key WHERE created_at < ?", arguments: [Int64(Date().timeIntervalSince1970 - age)])
    }

    /// Keeps a received message until the chat layer has stored it.
    static func keepInInbox(_ db: Database, connectionId: Int64, seq: UInt64, body: [UInt8]) throws {
        try db.cachedStatement(sql: "INSERT INTO inbox (connection_id, seq, body) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
            .execute(arguments: [connectionId, Int64(seq), Data(body)])
    }

    static func removeFromInbox(_ db: Database, connectionId: Int64, seq: UInt64) throws {
        try db.cachedStatement(sql: "DELETE FROM inbox WHERE connection_id = ? AND seq = ?").execute(arguments: [connectionId, Int64(seq)])
    }

    /// Removes processed messages (connection, seq) from the inbox.
    static func removeFromInbox(_ db: Database, _ marks: [(Int64, UInt64)]) throws {
        for (connectionId, seq) in marks { try removeFromInbox(db, connectionId: connectionId, seq: seq) }
    }

    /// Messages the chat layer had not stored when the process last stopped, in arrival order.
    static func inbox(_ db: Database) throws -> [(connectionId: Int64, seq: UInt64, body: [UInt8])] {
        try Row.fetchAll(db, sql: "SELECT connection_id, seq, body FROM inbox ORDER BY id").map {
            (connectionId: $0["connection_id"], seq: UInt64(max(0, $0["seq"] as Int64)), body: [UInt8]($0["body"] as Data))
        }
    }

    private static let encoder = JSONEncoder()
    private static let decoder = JSONDecoder()

    /// Inserts (id 0) or updates a connection; returns its id.
    @discardableResult
    static func save(_ db: Database, _ record: ConnectionRecord) throws -> Int64 {
        var r = record
        if r.id == 0 {
            r.id = try db.insert(sql: "INSERT INTO connection (rcv_id, rcv_sender_id, state, status, rcv) VALUES (?, ?, ?, ?, ?)",
                                 arguments: [r.rcv.id, r.rcv.senderId, Data(), r.status.rawValue, String(decoding: try encoder.encode(r.rcv), as: UTF8.self)])
        }
        try db.cachedStatement(sql: "UPDATE connection SET state = ?, status = ? WHERE id = ?").execute(arguments: [r.binaryState(), r.status.rawValue, r.id])
        return r.id
    }

    static func connection(_ db: Database, id: Int64) throws -> ConnectionRecord? {
        try Data.fetchOne(db.cachedStatement(sql: "SELECT state FROM connection WHERE id = ?"), arguments: [id]).map(ConnectionRecord.decodeState)
    }

    static func connection(_ db: Database, recipientId: [UInt8]) throws -> ConnectionRecord? {
        try Data.fetchOne(db.cachedStatement(sql: "SELECT state FROM connection WHERE rcv_id = ?"), arguments: [Data(recipientId)]).map(ConnectionRecord.decodeState)
    }

    static func isOwnQueue(_ db: Database, senderId: [UInt8]) throws -> Bool {
        let d = Data(senderId)
        return try Bool.fetchOne(db, sql: "SELECT 1 FROM connection WHERE rcv_sender_id = ? UNION SELECT 1 FROM address WHERE rcv_sender_id = ?",
                                 arguments: [d, d]) ?? false
    }

    @discardableResult
    static func save(_ db: Database, _ record: AddressRecord) throws -> Int64 {
        var r = record
        if r.id == 0 {
            r.id = try db.insert(sql: "INSERT INTO address (rcv_id, rcv_sender_id, state) VALUES (?, ?, ?)", arguments: [r.rcv.id, r.rcv.senderId, Data()])
        }
        try db.execute(sql: "UPDATE address SET state = ? WHERE id = ?", arguments: [try encoder.encode(r), r.id])
        return r.id
    }

    static func address(_ db: Database, recipientId: [UInt8]) throws -> AddressRecord? {
        try Data.fetchOne(db.cachedStatement(sql: "SELECT state FROM address WHERE rcv_id = ?"), arguments: [Data(recipientId)]).map { try decoder.decode(AddressRecord.self, from: $0) }
    }

    static func address(_ db: Database, id: Int64) throws -> AddressRecord? {
        try Data.fetchOne(db, sql: "SELECT state FROM address WHERE id = ?", arguments: [id]).map { try decoder.decode(AddressRecord.self, from: $0) }
    }

    static func deleteAddress(_ db: Database, id: Int64) throws {
        try db.execute(sql: "DELETE FROM address WHERE id = ?", arguments: [id])
    }

    static func insertRequest(_ db: Database, addressId: Int64, invitation: InvitationLink, info: [UInt8]) throws -> Int64 {
        try db.insert(sql: "INSERT INTO contact_request (address_id, invitation, info, created_at) VALUES (?, ?, ?, ?)",
                      arguments: [addressId, invitation.description, Data(info), Int64(Date().timeIntervalSince1970)])
    }

    static func request(_ db: Database, id: Int64) throws -> (invitation: InvitationLink, info: [UInt8])? {
        guard let row = try Row.fetchOne(db, sql: "SELECT invitation, info FROM contact_request WHERE id = ?", arguments: [id]) else { return nil }
        return (try InvitationLink(parsing: row["invitation"]), [UInt8](row["info"] as Data))
    }

    static func deleteRequest(_ db: Database, id: Int64) throws {
        try db.execute(sql: "DELETE FROM contact_request WHERE id = ?", arguments: [id])
    }

    /// Every receiving queue, connections' (with their id, from the `rcv` column) then addresses'
    /// (nil, read out of the stored JSON by SQLite's `json_extract`), without decoding whole
    /// records — ratchets and keys are most of each record, and a restart of a bot with many
    /// contacts needs only the queues.
    static func receivingQueues(_ db: Database) throws -> [(connection: Int64?, queue: OwnQueue)] {
        let connections = try Row.fetchAll(db, sql: "SELECT id, rcv FROM connection ORDER BY id").map {
            (connection: Optional<Int64>($0["id"] as Int64), queue: try decoder.decode(OwnQueue.self, from: Data(($0["rcv"] as String).utf8)))
        }
        let rcv = db.dialect.jsonText(db.dialect.utf8Text("state"), "rcv")
        let addresses = try String.fetchAll(db, sql: "SELECT \(rcv) FROM address ORDER BY id").map {
            (connection: Int64?.none, queue: try decoder.decode(OwnQueue.self, from: Data($0.utf8)))
        }
        return connections + addresses
    }

    /// The relays that hold our receiving queues (`OwnQueue.relay` as stored).
    static func relaysInUse(_ db: Database) throws -> Set<String> {
        let d = db.dialect
        return Set(try String.fetchAll(db, sql: """
            SELECT \(d.jsonText("rcv", "relay")) FROM connection
            UNION SELECT \(d.jsonText(d.utf8Text("state"), "rcv", "relay")) FROM address
            """))
    }

    /// The connections in `status` (the `status` column; only those records decoded).
    static func connections(_ db: Database, status: ConnectionRecord.Status) throws -> [ConnectionRecord] {
        try Data.fetchAll(db, sql: "SELECT state FROM connection WHERE status = ? ORDER BY id", arguments: [status.rawValue]).map(ConnectionRecord.decodeState)
    }

    static func delete(_ db: Database, id: Int64) throws {
        try db.execute(sql: "DELETE FROM connection WHERE id = ?", arguments: [id])
    }

    static func enqueue(_ db: Database, connectionId: Int64, envelope: [UInt8], messageSeq: UInt64?) throws {
        try db.cachedStatement(sql: "INSERT INTO pending (connection_id, envelope, message_seq, created_at) VALUES (?, ?, ?, ?)")
            .execute(arguments: [connectionId, Data(envelope), messageSeq.map { Int64($0) }, Int64(Date().timeIntervalSince1970)])
    }

    static func pending(_ db: Database, connectionId: Int64) throws -> [PendingEnvelope] {
        try Row.fetchAll(db.cachedStatement(sql: "SELECT id, connection_id, envelope, message_seq FROM pending WHERE connection_id = ? ORDER BY id"), arguments: [connectionId]).map {
            PendingEnvelope(id: $0["id"], connectionId: $0["connection_id"], envelope: [UInt8]($0["envelope"] as Data),
                            messageSeq: ($0["message_seq"] as Int64?).map { UInt64($0) })
        }
    }

    static func connectionsWithPending(_ db: Database) throws -> [Int64] {
        try Int64.fetchAll(db, sql: "SELECT DISTINCT connection_id FROM pending")
    }

    /// Drops every envelope waiting for a connection; returns the message numbers among them.
    static func dropPending(_ db: Database, connectionId: Int64) throws -> [UInt64] {
        let seqs = try Int64.fetchAll(db, sql: "SELECT message_seq FROM pending WHERE connection_id = ? AND message_seq IS NOT NULL ORDER BY id",
                                      arguments: [connectionId]).map { UInt64($0) }
        try db.execute(sql: "DELETE FROM pending WHERE connection_id = ?", arguments: [connectionId])
        return seqs
    }

    static func removePending(_ db: Database, id: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM pending WHERE id = ?").execute(arguments: [id])
    }
}
