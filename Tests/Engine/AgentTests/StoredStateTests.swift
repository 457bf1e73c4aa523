import Foundation
import GRDB
import SwiftplexSQL
import RelayProtocol
import SwiftplexCrypto
import TestSupport
import Testing
@testable import Agent

/// Connection records are stored in a binary form; records stored as JSON by earlier versions
/// (and databases from before the `status` / `rcv` columns) still read and go on working.
@Suite struct StoredStateTests {
    @Test func recordsAreBinaryAndAJSONDatabaseOfAnEarlierVersionIsMigratedAndGoesOn() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        let alicePath = dir.url.appendingPathComponent("alice_agent.db")
        let oldPath = dir.url.appendingPathComponent("old_agent.db")
        try await withTestRelay(dir.url) { relay in
            try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: relay.address) { bob, bobInbox in
                var b: Int64 = 0
                try await withAgent(alicePath, relay: relay.address) { alice, aliceInbox in
                    let (a, bobConn) = try await connect(alice, aliceInbox, bob, bobInbox)
                    b = bobConn
                    try await alice.send(a, "one".bytes)
                    #expect(try await bobInbox.message().body == "one".bytes)
                    try await bob.send(b, "two".bytes)
                    #expect(try await aliceInbox.message().body == "two".bytes)
                    _ = try await aliceInbox.next("sent") { if case let .sent(c, 1) = $0, c == a { true } else { nil } }
                }
                // Alice's records as this version stored them: binary, with the status and queue columns.
                let stored = try DatabaseQueue(path: alicePath.path)
                let rows: [GRDB.Row] = try stored.read { db in
                    try GRDB.Row.fetchAll(db, sql: "SELECT id, rcv_id, rcv_sender_id, state, status, rcv FROM connection ORDER BY id")
                }
                try stored.close()
                #expect(!rows.isEmpty)
                var records: [ConnectionRecord] = []
                for row in rows {
                    let state: Data = row["state"]
                    #expect(state.first == ConnectionRecord.binaryMark)
                    let r = try ConnectionRecord.decodeState(state)
                    #expect(r.id == row["id"] as Int64)
                    #expect(row["status"] as String == r.status.rawValue)
                    #expect(try JSONDecoder().decode(OwnQueue.self, from: Data((row["rcv"] as String).utf8)).id == r.rcv.id)
                    // The binary form keeps every field: the JSON of what it reads equals the JSON of the record.
                    #expect(try ConnectionRecord(binary: [UInt8](r.binaryState())).json == r.json)
                    records.append(r)
                }
                let connected = try #require(records.first { $0.status == .connected })
                #expect(connected.ratchet != nil && connected.rcvSeq == 1 && connected.sndSeq == 1)

                // The same records in a database of the previous version (migrations up to v4,
                // each record JSON in `state`, no `status` / `rcv` columns).
                let old = try DatabaseQueue(path: oldPath.path)
                try SQLiteStore.migrator(AgentStore.migrations).migrate(old, upTo: "v4: idempotent sends")
                let toStore = records
                try await old.write { db in
                    for r in toStore {
                        try db.execute(sql: "INSERT INTO connection (id, rcv_id, rcv_sender_id, state) VALUES (?, ?, ?, ?)",
                                       arguments: [r.id, r.rcv.id, r.rcv.senderId, try JSONEncoder().encode(r)])
                    }
                }
                try old.close()

                // Alice runs on it: migrated, subscribed from the new columns, and the conversation goes on.
                try await withAgent(oldPath, relay: relay.address) { alice, aliceInbox in
                    try await bob.send(b, "three".bytes)
                    let m = try await aliceInbox.message()
                    #expect(m.body == "three".bytes && m.seq == 2 && m.integrity == .ok)
                    try await alice.send(connected.id, "four".bytes)
                    let back = try await bobInbox.message()
                    #expect(back.body == "four".bytes && back.seq == 2 && back.integrity == .ok)
                }
                let migrated = try DatabaseQueue(path: oldPath.path)
                defer { try? migrated.close() }
                let after = try migrated.read { db in
                    try GRDB.Row.fetchOne(db, sql: "SELECT state, status, json_extract(rcv, '$.relay') AS relay FROM connection WHERE id = ?", arguments: [connected.id])
                }
                let row = try #require(after)
                #expect((row["state"] as Data).first == ConnectionRecord.binaryMark)  // saved binary since
                #expect(row["status"] as String == "connected" && row["relay"] as String == connected.rcv.relay)
            }
        }
    }

    @Test func aDamagedBinaryRecordIsAnErrorNotACrash() throws {
        let q = OwnQueue(relay: "smp://x@localhost:1", id: Data([1]), senderId: Data([2]), key: Data([3]), deliveryKey: Data([4]), e2e: Data([5]))
        let r = ConnectionRecord(id: 7, role: .joiner, status: .pending, rcv: q, sndQueue: "q", lastRelayMessageId: Data([9]))
        let bytes = [UInt8](r.binaryState())
        #expect(try ConnectionRecord(binary: bytes).json == r.json)
        for cut in [1, 2, 10, bytes.count / 2, bytes.count - 1] {
            #expect(throws: BinaryStateError.self) { try ConnectionRecord(binary: Array(bytes.prefix(cut))) }
        }
        #expect(throws: BinaryStateError.self) { try ConnectionRecord(binary: bytes + [0]) }
    }
}

extension ConnectionRecord {
    /// The record's JSON with sorted keys, to compare two records field by field.
    var json: String {
        let e = JSONEncoder()
        e.outputFormatting = .sortedKeys
        return String(decoding: (try? e.encode(self)) ?? Data(), as: UTF8.self)
    }
}
