/// Which (author, shared message id) pairs a member has already received — directly from the
/// author or forwarded by a host — so that the second copy is dropped. Bounded in memory and
/// independent of any store: the engine keeps one per group (in memory, refilled from the chat
/// store's recent items at start if it wants dedup across restarts — the store's own uniqueness
/// check stays the last word).
///
/// SimpleX keys this on `(group, shared msgId)` alone (`Store/Messages.hs` `createNewRcvMessage`,
/// `SEDuplicateGroupMessage`), which lets any member who saw a message id reuse it to suppress
/// the genuine message at members who have not seen it yet. Swiftplex keys on the author too: a
/// message id counts as seen only for the member who authored it.
///
/// Bounds: at most `capacity` pairs in all, and at most `perAuthor` per author, each evicting its
/// oldest first — so one member flooding ids evicts only its own. Evicted pairs are forgotten: a
/// copy arriving after its pair was evicted counts as new (the store's check catches it).
public struct ForwardDedup: Sendable {
    public struct Key: Hashable, Sendable {
        public let author: MemberId
        public let msgId: String

        public init(author: MemberId, msgId: String) {
            self.author = author
            self.msgId = msgId
        }
    }

    public enum Outcome: Sendable, Hashable {
        /// First copy: process it.
        case new
        /// Seen before; `firstForwardedBy` is the host that forwarded the first copy (nil when it
        /// came directly) — a direct copy after a forwarded one tells the host to stop forwarding
        /// (SimpleX sends it `x.grp.mem.con`).
        case duplicate(firstForwardedBy: MemberId?)
    }

    public let capacity: Int
    public let perAuthor: Int

    private struct Entry: Sendable {
        var seq: UInt64
        var forwardedBy: MemberId?
    }

    private var entries: [Key: Entry] = [:]
    private var order: [(key: Key, seq: UInt64)] = []
    private var head = 0
    private var authorOrder: [MemberId: [(msgId: String, seq: UInt64)]] = [:]
    private var authorHead: [MemberId: Int] = [:]
    private var authorCount: [MemberId: Int] = [:]
    private var nextSeq: UInt64 = 0

    public init(capacity: Int = 20_000, perAuthor: Int = 2_000) {
        precondition(capacity > 0 && perAuthor > 0 && perAuthor <= capacity)
        self.capacity = capacity
        self.perAuthor = perAuthor
    }

    /// Pairs remembered now.
    public var count: Int { entries.count }

    public func contains(author: MemberId, msgId: String) -> Bool {
        entries[Key(author: author, msgId: msgId)] != nil
    }

    /// Records a received copy and says whether it is the first. A message without a shared id
    /// cannot be deduplicated and is always new (SimpleX checks only messages with one).
    public mutating func record(author: MemberId, msgId: String?, forwardedBy: MemberId?) -> Outcome {
        guard let msgId else { return .new }
        let key = Key(author: author, msgId: msgId)
        if let existing = entries[key] { return .duplicate(firstForwardedBy: existing.forwardedBy) }
        if authorCount[author, default: 0] >= perAuthor { evictOldest(of: author) }
        if entries.count >= capacity { evictOldest() }
        let seq = nextSeq
        nextSeq += 1
        entries[key] = Entry(seq: seq, forwardedBy: forwardedBy)
        order.append((key, seq))
        authorOrder[author, default: []].append((msgId, seq))
        authorCount[author, default: 0] += 1
        return .new
    }

    /// Forgets everything from `author` (the member was removed or left: later copies are refused
    /// by membership, not by dedup).
    public mutating func forget(author: MemberId) {
        guard let list = authorOrder[author] else { return }
        for (msgId, seq) in list[(authorHead[author] ?? 0)...] {
            let key = Key(author: author, msgId: msgId)
            if entries[key]?.seq == seq { entries[key] = nil }
        }
        authorOrder[author] = nil
        authorHead[author] = nil
        authorCount[author] = nil
        compactIfNeeded()
    }

    private mutating func evictOldest() {
        while head < order.count {
            let (key, seq) = order[head]
            head += 1
            if entries[key]?.seq == seq {
                remove(key)
                break
            }
        }
        compactIfNeeded()
    }

    private mutating func evictOldest(of author: MemberId) {
        guard var list = authorOrder[author] else { return }
        var h = authorHead[author] ?? 0
        while h < list.count {
            let (msgId, seq) = list[h]
            h += 1
            let key = Key(author: author, msgId: msgId)
            if entries[key]?.seq == seq {
                entries[key] = nil
                authorCount[author, default: 1] -= 1
                break
            }
        }
        if h > 64 && h * 2 > list.count {
            list.removeFirst(h)
            h = 0
        }
        authorOrder[author] = list
        authorHead[author] = h
    }

    private mutating func remove(_ key: Key) {
        entries[key] = nil
        let n = (authorCount[key.author] ?? 1) - 1
        if n <= 0 {
            authorCount[key.author] = nil
            authorOrder[key.author] = nil
            authorHead[key.author] = nil
            return
        }
        authorCount[key.author] = n
        // Both queues are in arrival order, so the author's oldest live pair was the one evicted:
        // skip it (and any stale slots) at the head of the author's queue.
        guard var list = authorOrder[key.author] else { return }
        var h = authorHead[key.author] ?? 0
        while h < list.count, entries[Key(author: key.author, msgId: list[h].msgId)]?.seq != list[h].seq { h += 1 }
        if h > 64 && h * 2 > list.count {
            list.removeFirst(h)
            h = 0
        }
        authorOrder[key.author] = list
        authorHead[key.author] = h
    }

    /// Drops stale queue slots once they outnumber live ones, so memory stays proportional to
    /// `count`.
    private mutating func compactIfNeeded() {
        if head > 64 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
        if order.count > 64 && order.count > entries.count * 2 {
            order = order[head...].filter { entries[$0.key]?.seq == $0.seq }
            head = 0
        }
    }
}
