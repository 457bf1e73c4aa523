import Foundation
import SwiftplexSQL
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayClient
import RelayProtocol
import SwiftplexCrypto
import SwiftplexStorage

// MARK: - Deletion of connections and addresses
extension Agent {
    /// Deletes a connection: first delivers what its outbox still holds (such as a goodbye), then
    /// deletes its receiving queue on the relay (unless `deleteQueue` is false), then its state.
    public func deleteConnection(_ id: Int64, deleteQueue: Bool = true) async throws {
        guard let r = try await store.db.read({ db in try AgentStore.connection(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no connection \(id)")
        }
        pendingReceipts[id] = nil
        if deleteQueue {
            // A delivery already under way returns from `deliverOutbox` at once; wait for it (a
            // little), or the goodbye it is about to send would be deleted with the connection.
            let deadline = ContinuousClock.now + .seconds(5)
            while deliveringOutbox.contains(id), ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            await deliverOutbox(id)
            if let q = try? r.receivingQueue, let relay = try? RelayAddress(parsing: r.rcv.relay) {
                try? await relayConnection(relay).delete(q)
            }
        }
        // Under the connection's lock: a message being received for it commits before the row
        // goes, or finds it gone and is dropped (no half-done receive, no foreign-key failure).
        try await withConnectionLock(id) {
            try await store.db.write { db in try AgentStore.delete(db, id: id) }
            forgetRecord(id)
        }
    }

    /// Deletes an address: its queue on the relay, its pending requests. Connections made through it stay.
    public func deleteAddress(_ id: Int64, deleteQueue: Bool = true) async throws {
        guard let a = try await store.db.read({ db in try AgentStore.address(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no address \(id)")
        }
        let q = try a.receivingQueue
        if deleteQueue { try? await relayConnection(q.relay).delete(q) }
        try await store.db.write { db in try AgentStore.deleteAddress(db, id: id) }
    }
}
