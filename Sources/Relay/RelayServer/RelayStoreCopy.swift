import Foundation

/// Moves a relay's queues and messages from one ``RelayQueueStore`` to another (`swiftplex-relay
/// store copy`): every row as stored (sequence numbers kept, so delivery order is the same), queues
/// first in recipient-id order, then messages in sequence order, in batches of one transaction
/// each. The destination must be empty unless `force` (then it is emptied first). At the end the
/// destination's counts must equal the source's, or the copy fails.
package enum StoreCopy {
    package static func copy(from source: any RelayQueueStore, to destination: any RelayQueueStore, force: Bool, batch: Int,
                             progress: (String) -> Void) async throws -> (queues: Int, messages: Int) {
        let want = try await source.copyCounts()
        let existing = try await destination.copyCounts()
        if existing.queues > 0 || existing.messages > 0 {
            guard force else {
                throw RelayServerError(.database, "the destination is not empty (\(existing.queues) queues, \(existing.messages) messages); --force deletes them first")
            }
            progress("deleting \(existing.queues) queues and \(existing.messages) messages from the destination")
            try await destination.copyClear()
        }
        progress("copying \(want.queues) queues and \(want.messages) messages")
        var queues = 0
        var after: [UInt8]?
        while true {
            let rows = try await source.copyQueues(after: after, limit: batch)
            if rows.isEmpty { break }
            try await destination.copyWrite(queues: rows, messages: [])
            queues += rows.count
            after = rows.last!.recipientId
            progress("queues: \(queues)/\(want.queues)")
        }
        var messages = 0
        var seq: Int64 = 0
        while true {
            let rows = try await source.copyMessages(after: seq, limit: batch)
            if rows.isEmpty { break }
            try await destination.copyWrite(queues: [], messages: rows)
            messages += rows.count
            seq = rows.last!.seq
            progress("messages: \(messages)/\(want.messages)")
        }
        let got = try await destination.copyCounts()
        let now = try await source.copyCounts()
        guard got == want, now == want else {
            throw RelayServerError(.database, "the counts differ: source \(want.queues) queues and \(want.messages) messages (now \(now.queues), \(now.messages)), destination \(got.queues) and \(got.messages) — was the relay running?")
        }
        return want
    }
}
