/// One plugin instance's place in the dispatch list, as a value: the state machine behind ``Slot``,
/// which holds it under a lock and does what each step returns. It calls nothing and waits for
/// nothing, so it is tested by driving it (generic in the runner, which it only keeps and hands out).
///
/// A slot is **live** — events go to its runner as they come — unless it is:
/// - **held**: a reload is replacing its runner; events wait, in order and up to the queue limit,
///   for the next runner (``holdEvents()``, ``resume(with:)``);
/// - **catching up**: after a start from a durable mark, a queue that refused a received message, or
///   a gap in the engine's connection, received messages are read from the store by a reader the
///   slot's owner runs, live ones only noted (``liveSeen``), other events kept until the reader has
///   caught up (``endCatchUp(ifNothingAfter:)``); **in a gap** while the engine cannot be reached,
///   the catch-up waits for it (``connectionLost(handledMark:)``, ``connectionRestored()``);
/// - **removed**: the instance is going; a reader stops.
///
/// With a durable mark it knows the last received message given to a runner (``lastEnqueued``), so
/// that a live message it already has is not given again.
struct SlotState<Runner> {
    private(set) var runner: Runner
    /// Events a held or catching-up slot keeps at most (the instance's queue limit).
    var queueLimit: Int
    /// Whether the slot can catch up from the store: its instance has a durable mark and its
    /// owner a reader to start.
    var canCatchUp = false

    /// Events given while held, in order (nil: not held).
    private(set) var held: [(json: String, itemId: Int64?)]?
    /// The newest received message given to a runner, or read for it from the store.
    private(set) var lastEnqueued: Int64 = 0
    private(set) var catchingUp = false
    /// The newest live received message seen while catching up.
    private(set) var liveSeen: Int64 = 0
    private(set) var removed = false
    /// Events other than received messages that came in while catching up.
    private(set) var heldDuringCatchUp: [String] = []
    /// The engine cannot be reached: the catch-up waits for it.
    private(set) var gap = false
    /// Every received message up to here was handled by an earlier runner (the mark the instance
    /// started from, or the last message given before its runner was replaced).
    private(set) var baseMark: Int64 = 0
    /// A catch-up reader runs; `readAgain`: another is wanted when it ends.
    private(set) var reading = false
    private(set) var readAgain = false

    init(runner: Runner, queueLimit: Int) {
        self.runner = runner
        self.queueLimit = queueLimit
    }

    /// What becomes of an event.
    enum Delivery {
        /// Give it to this runner now; if the runner refuses a received message, the slot catches
        /// up from `previous` (``overflowed(_:after:)``).
        case toRunner(Runner, previous: Int64)
        /// Kept by the slot (held, or waiting for a catch-up), or left to the reader of the store.
        case kept
        /// Not given: a received message the runner already has, or one event more than the limit
        /// while held or catching up.
        case dropped
    }

    mutating func deliver(_ json: String, itemId: Int64?) -> Delivery {
        if catchingUp {
            if let itemId {
                // The reader reads it from the store.
                liveSeen = max(liveSeen, itemId)
                return .kept
            }
            guard heldDuringCatchUp.count < queueLimit else { return .dropped }
            heldDuringCatchUp.append(json)
            return .kept
        }
        let previous = lastEnqueued
        if let itemId {
            guard itemId > lastEnqueued else { return .dropped }
            lastEnqueued = itemId
        }
        if held != nil {
            guard held!.count < queueLimit else { return .dropped }
            held!.append((json, itemId))
            return .kept
        }
        return .toRunner(runner, previous: previous)
    }

    /// The runner's queue refused received message `itemId`: true if the slot now catches up from
    /// `previous` (its owner starts the reader, which waits for the queue to drain) instead of
    /// losing it.
    mutating func overflowed(_ itemId: Int64, after previous: Int64) -> Bool {
        guard !catchingUp, !removed, canCatchUp else { return false }
        catchingUp = true
        lastEnqueued = min(lastEnqueued, previous)
        liveSeen = max(liveSeen, itemId)
        return true
    }

    /// The owner lost its connection to the engine; events sent meanwhile are gone. From now on, as
    /// in a catch-up, received messages are left to be read from the store and other events wait.
    /// What was given and not yet handled (beyond `handledMark`, the runner's) is handled without an
    /// engine to answer through, so it is given again: the mark goes back to what was handled.
    mutating func connectionLost(handledMark: Int64?) {
        guard canCatchUp, !removed else { return }
        gap = true
        catchingUp = true
        lastEnqueued = min(lastEnqueued, max(handledMark ?? baseMark, baseMark))
    }

    /// The connection is back: the mark to read after (the owner starts a reader, or asks the one
    /// still running to read again), or nil when there was no gap.
    mutating func connectionRestored() -> Int64? {
        guard gap else { return nil }
        gap = false
        return lastEnqueued
    }

    /// A catch-up reader starts; false if one already runs (it is asked to read again instead).
    mutating func beginReading() -> Bool {
        guard !reading else {
            readAgain = true
            return false
        }
        reading = true
        return true
    }

    /// The reader ends; the mark to read after if another is wanted (the catch-up is still on).
    mutating func endReading() -> Int64? {
        reading = false
        guard readAgain, !removed, !gap else { return nil }
        readAgain = false
        return catchingUp ? lastEnqueued : nil
    }

    /// The instance starts from its durable mark: everything up to it was handled.
    mutating func beginCatchUp(from mark: Int64) {
        catchingUp = true
        lastEnqueued = mark
        baseMark = mark
    }

    /// The reader gave the runner received messages up to `itemId`. In a gap the mark stays where
    /// ``connectionLost(handledMark:)`` put it: what the reader gave since may have been handled
    /// without an engine to answer through.
    mutating func caughtUp(to itemId: Int64) {
        if !gap { lastEnqueued = max(lastEnqueued, itemId) }
    }

    /// Ends the catch-up unless a live received message newer than `last` came in since the store
    /// was last read (it is read first), or the engine cannot be reached. Returns the runner and the
    /// events that waited, for the owner to give before any newer event (under its lock).
    mutating func endCatchUp(ifNothingAfter last: Int64) -> (runner: Runner, waiting: [String])? {
        guard (liveSeen <= last && !gap) || removed else { return nil }
        catchingUp = false
        lastEnqueued = max(lastEnqueued, last)
        defer { heldDuringCatchUp = [] }
        return (runner, heldDuringCatchUp)
    }

    /// Ends the catch-up whatever came in (the store cannot be read).
    mutating func endCatchUp(at last: Int64) -> (runner: Runner, waiting: [String])? {
        liveSeen = 0
        return endCatchUp(ifNothingAfter: last)
    }

    mutating func remove() {
        removed = true
    }

    /// A reload begins: events wait for the next runner; the one being replaced handles everything
    /// given to it before it stops.
    mutating func holdEvents() {
        held = []
        baseMark = max(baseMark, lastEnqueued)
    }

    /// Installs the next runner; returns the events that waited, for the owner to give it before any
    /// newer one (under its lock).
    mutating func resume(with next: Runner) -> [(json: String, itemId: Int64?)] {
        runner = next
        defer { held = nil }
        return held ?? []
    }
}

extension SlotState.Delivery: Sendable where Runner: Sendable {}
