import Foundation
import NIOCore
import RelayProtocol

/// The relay's persistence seam: everything ``RelayCore`` asks of durable storage, in the relay's
/// terms. Two stores implement it: ``RelayStore`` (an SQLite file, the default) and the PostgreSQL
/// store of the `RelayPostgres` module (`swiftplex-relay --store postgresql://…`).
///
/// The guarantees both keep (docs/relay.md, "Durability and the store"):
/// - Writes are committed in groups; a write's completion runs only once it is durable, and
///   completions run in commit order (the relay answers `OK` from them).
/// - A failing write fails alone: the others of its group still commit.
/// - Reads see what was committed when they start and run beside the writer.
/// - ``loadQueue(_:owner:completion:)`` runs in commit order with the writes (its completion
///   is ordered with theirs), so a queue loaded on demand is counted exactly as the writes before
///   and after it leave it.
package protocol RelayQueueStore: AnyObject, Sendable {
    /// Whether queue metadata is loaded on demand into a bounded cache (``loadQueue``) rather than
    /// all at start (``loadAll()``).
    var loadsOnDemand: Bool { get }

    /// Every queue and the message count and bytes of each (stores that load everything at start).
    func loadAll() async throws -> (LoadedQueues, [[UInt8]: (count: Int, bytes: Int)])
    /// How many queues, messages and message bytes are stored (stores that load on demand).
    func totals() async throws -> RelayStoreTotals
    /// One queue by its recipient, sender or link id, with its message count and bytes; nil if none.
    func loadQueue(_ key: QueueKey, owner: UInt64, completion: @escaping @Sendable (Result<LoadedQueue?, Error>) -> Void)

    func insertQueue(_ q: StoredQueue, now: Int64, owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void)
    /// Sets the sender key of an enabled messaging queue that has none; the result says whether it did.
    func setSenderKey(recipientId: [UInt8], key: [UInt8], owner: UInt64, completion: @escaping @Sendable (Result<Bool, Error>) -> Void)
    func disable(recipientId: [UInt8], owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void)
    func deleteQueue(recipientId: [UInt8], owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void)
    func setLink(recipientId: [UInt8], linkId: [UInt8]?, data: [UInt8]?, owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void)
    /// Appends a message; the result is its sequence number. Fails if the queue is gone.
    func insertMessage(recipientId: [UInt8], id: [UInt8], timestamp: Int64, flags: UInt8, body: [UInt8], owner: UInt64,
                       completion: @escaping @Sendable (Result<Int64, Error>) -> Void)
    func deleteMessage(seq: Int64, owner: UInt64, completion: @escaping @Sendable (Result<Void, Error>) -> Void)
    /// Deletes messages created before `cutoff` (the relay's own work: a fence after everything
    /// submitted before it); the result lists the queue, sequence number and body size of each.
    func deleteExpired(before cutoff: Int64, completion: @escaping @Sendable (Result<[ExpiredMessage], Error>) -> Void)

    /// The oldest message of a queue after `after` not older than `notBefore` (a read).
    func oldestMessage(recipientId: [UInt8], after: Int64, notBefore: Int64, completion: @escaping @Sendable (Result<StoredMessage?, Error>) -> Void)
    /// The data of an enabled queue's link (a read).
    func linkData(linkId: [UInt8], completion: @escaping @Sendable (Result<[UInt8]?, Error>) -> Void)

    /// Waits until everything submitted so far is committed.
    func barrier() async
    /// Closes the store once everything is committed (after ``barrier()``).
    func closeStore() async throws

    // MARK: Moving a relay between stores (`swiftplex-relay store copy`)

    /// Queues and messages stored (for the copy's checks).
    func copyCounts() async throws -> (queues: Int, messages: Int)
    /// Up to `limit` queue rows, as stored, with recipient ids after `after`, in recipient-id order.
    func copyQueues(after: [UInt8]?, limit: Int) async throws -> [CopiedQueue]
    /// Up to `limit` message rows, as stored, with sequence numbers after `after`, in order.
    func copyMessages(after: Int64, limit: Int) async throws -> [CopiedMessage]
    /// Writes rows as they were read (sequence numbers kept) in one transaction.
    func copyWrite(queues: [CopiedQueue], messages: [CopiedMessage]) async throws
    /// Deletes every queue and message (`store copy --force` on a store that is not empty).
    func copyClear() async throws
}

/// A queue row as stored, every column (for moving a relay between stores unchanged).
package struct CopiedQueue: Sendable, Equatable {
    package var recipientId: [UInt8]
    package var senderId: [UInt8]
    package var recipientKey: [UInt8]
    package var boxKey: [UInt8]
    package var senderKey: [UInt8]?
    package var enabled: Int64
    package var linkId: [UInt8]?
    package var linkData: [UInt8]?
    package var createdAt: Int64
    package var mode: String

    package init(recipientId: [UInt8], senderId: [UInt8], recipientKey: [UInt8], boxKey: [UInt8], senderKey: [UInt8]?, enabled: Int64,
                 linkId: [UInt8]?, linkData: [UInt8]?, createdAt: Int64, mode: String) {
        self.recipientId = recipientId
        self.senderId = senderId
        self.recipientKey = recipientKey
        self.boxKey = boxKey
        self.senderKey = senderKey
        self.enabled = enabled
        self.linkId = linkId
        self.linkData = linkData
        self.createdAt = createdAt
        self.mode = mode
    }
}

/// A message row as stored.
package struct CopiedMessage: Sendable, Equatable {
    package var seq: Int64
    package var recipientId: [UInt8]
    package var messageId: [UInt8]
    package var createdAt: Int64
    package var flags: Int64
    package var body: [UInt8]

    package init(seq: Int64, recipientId: [UInt8], messageId: [UInt8], createdAt: Int64, flags: Int64, body: [UInt8]) {
        self.seq = seq
        self.recipientId = recipientId
        self.messageId = messageId
        self.createdAt = createdAt
        self.flags = flags
        self.body = body
    }
}

/// Which id a queue is looked up by.
package enum QueueKey: Sendable, Hashable {
    case recipient([UInt8])
    case sender([UInt8])
}

/// A queue loaded on demand, with its message count and body bytes.
package struct LoadedQueue: Sendable {
    /// Nil if the row cannot be a valid queue (counted as corrupt; the queue is unavailable).
    package var queue: StoredQueue?
    package var count: Int
    package var bytes: Int

    package init(queue: StoredQueue?, count: Int, bytes: Int) {
        self.queue = queue
        self.count = count
        self.bytes = bytes
    }
}

package struct RelayStoreTotals: Sendable {
    package var queues: Int
    package var messages: Int
    package var bytes: Int

    package init(queues: Int, messages: Int, bytes: Int) {
        self.queues = queues
        self.messages = messages
        self.bytes = bytes
    }
}

package struct ExpiredMessage: Sendable {
    package var recipientId: [UInt8]
    package var seq: Int64
    package var bytes: Int

    package init(recipientId: [UInt8], seq: Int64, bytes: Int) {
        self.recipientId = recipientId
        self.seq = seq
        self.bytes = bytes
    }
}

/// The group-commit limits both stores share (``RelayStore`` names them too).
package enum GroupCommit {
    /// The owner of operations that are not a connection's (load, expiry sweep, barrier): fences.
    package static let globalOwner: UInt64 = 0
    /// Large-write bytes one group transaction takes at most (one large write always fits).
    package static let batchBytes = 128 << 10
    /// Writes up to this size are small: they are never held back by the byte budget.
    package static let smallWriteBytes = 2 << 10
    /// Operations one group transaction takes at most.
    package static let maxBatchOperations = 4096
}

/// The group-commit schedule both stores share: operations waiting per owner, taken into groups.
///
/// Fairness: each operation belongs to an owner (a connection; ``RelayStore/globalOwner`` for the
/// relay's own work). A group takes operations from the owners round-robin, each owner's in the
/// order it submitted them, and holds at most ``RelayStore/batchBytes`` of large writes (message
/// bodies over ``RelayStore/smallWriteBytes``): one connection's pile of 16 KB `SEND`s fills its
/// share of a group, not the group, and a small write waits for at most the commit under way and
/// its own. ``RelayStore/globalOwner``'s operations are fences: they run only after everything
/// submitted before them.
package struct GroupCommitSchedule<Payload: Sendable>: Sendable {
    package struct Operation: Sendable {
        package let payload: Payload
        package let bytes: Int
        /// Submission order over all owners (for fences).
        let order: UInt64
    }

    var lanes: [UInt64: CircularBuffer<Operation>] = [:]
    var owners: [UInt64] = []
    /// A drain (the writer loop) is running.
    package var draining = false
    var submitted: UInt64 = 0
    /// The last group took only small writes while large ones waited (the next one takes both).
    var lastWasSmallOnly = false

    package init() {}

    package mutating func append(_ payload: Payload, bytes: Int, owner: UInt64) {
        submitted += 1
        if lanes[owner] == nil {
            lanes[owner] = CircularBuffer()
            owners.append(owner)
        }
        lanes[owner]!.append(Operation(payload: payload, bytes: bytes, order: submitted))
    }

    /// One operation per owner per round, until nothing more fits (with `smallOnly`, no large write).
    private mutating func collect(smallOnly: Bool) -> [Operation] {
        var batch: [Operation] = []
        var largeBytes = 0
        var candidates = owners
        while !candidates.isEmpty, batch.count < GroupCommit.maxBatchOperations {
            var next: [UInt64] = []
            var took = false
            for owner in candidates {
                guard batch.count < GroupCommit.maxBatchOperations, let op = lanes[owner]?.first else { continue }
                if owner == GroupCommit.globalOwner,
                   lanes.contains(where: { $0.key != owner && ($0.value.first?.order ?? .max) < op.order }) {
                    next.append(owner) // a fence: only once nothing older waits
                    continue
                }
                let large = op.bytes > GroupCommit.smallWriteBytes
                if large, smallOnly { continue }
                // Over the budget: this owner's turn in this group is over (its later operations wait behind it).
                if large, largeBytes > 0, largeBytes + op.bytes > GroupCommit.batchBytes { continue }
                if large { largeBytes += op.bytes }
                batch.append(lanes[owner]!.removeFirst())
                took = true
                if !lanes[owner]!.isEmpty { next.append(owner) }
            }
            if !took { break }
            candidates = next
        }
        return batch
    }

    /// The next group: one operation per owner per round, until nothing more fits.
    package mutating func nextBatch() -> [Operation] {
        // Small writes go ahead of large ones: while both wait, every other group takes only
        // small writes (each owner's up to its first large one), so a small write waits for at
        // most the group under way and a group of small writes — not a group full of 16 KB
        // bodies. Groups alternate, so large writes are never starved by a stream of small ones.
        var heads = (small: false, large: false)
        for owner in owners {
            guard let op = lanes[owner]?.first else { continue }
            if op.bytes > GroupCommit.smallWriteBytes { heads.large = true } else { heads.small = true }
        }
        let smallOnly = heads.small && heads.large && !lastWasSmallOnly
        var batch = collect(smallOnly: smallOnly)
        // Nothing small could go yet (a fence waiting for older large writes): a normal group.
        if smallOnly, batch.isEmpty { batch = collect(smallOnly: false) }
        lastWasSmallOnly = smallOnly && !batch.isEmpty
        // Emptied lanes are dropped; the round-robin order moves on by one for the next group.
        owners.removeAll { owner in
            guard let lane = lanes[owner], !lane.isEmpty else { lanes[owner] = nil; return true }
            return false
        }
        if owners.count > 1 { owners.append(owners.removeFirst()) }
        return batch
    }
}
