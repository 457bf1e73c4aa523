import Testing
@testable import PluginHost

/// A plugin slot's state machine, driven step by step (its runner stands in as a name): what it
/// gives, keeps and drops while live, held for a reload, catching up from the store and in a gap
/// of the engine's connection. The same steps through real runners are in `ReplayTests` and
/// `PluginManagerTests`.
@Suite struct SlotStateTests {
    private enum Outcome: Equatable {
        case toRunner(String, previous: Int64)
        case kept
        case dropped
    }

    /// Delivers an event and names what became of it.
    private func deliver(_ slot: inout SlotState<String>, _ json: String, _ itemId: Int64?) -> Outcome {
        switch slot.deliver(json, itemId: itemId) {
        case let .toRunner(runner, previous): .toRunner(runner, previous: previous)
        case .kept: .kept
        case .dropped: .dropped
        }
    }

    @Test func liveEventsGoToTheRunnerAndAMessageItAlreadyHasIsNotGivenAgain() {
        var slot = SlotState(runner: "first", queueLimit: 4)
        let outcomes = [deliver(&slot, "m1", 1), deliver(&slot, "e", nil), deliver(&slot, "m3", 3),
                        deliver(&slot, "m2 again", 2), deliver(&slot, "m3 again", 3)]
        #expect(outcomes == [.toRunner("first", previous: 0), .toRunner("first", previous: 1), .toRunner("first", previous: 1),
                             .dropped, .dropped])
        #expect(slot.lastEnqueued == 3)
    }

    @Test func aReloadHoldsEventsInOrderUpToTheLimitAndGivesThemToTheNextRunner() {
        var slot = SlotState(runner: "old", queueLimit: 2)
        _ = deliver(&slot, "m5", 5)
        slot.holdEvents()
        #expect(slot.baseMark == 5)
        let outcomes = [deliver(&slot, "m6", 6), deliver(&slot, "e", nil), deliver(&slot, "m7", 7)]
        #expect(outcomes == [.kept, .kept, .dropped])
        let waiting = slot.resume(with: "new")
        #expect(waiting.map(\.json) == ["m6", "e"])
        #expect(waiting.map(\.itemId) == [6, nil])
        #expect(slot.runner == "new")
        let next = deliver(&slot, "m8", 8)
        #expect(next == .toRunner("new", previous: 7))
        let again = slot.resume(with: "newer")
        #expect(again.isEmpty)
    }

    @Test func aCatchUpLeavesReceivedMessagesToTheStoreKeepsOtherEventsAndEndsOnlyWhenNothingNewerCameIn() throws {
        var slot = SlotState(runner: "r", queueLimit: 2)
        slot.beginCatchUp(from: 10)
        #expect(slot.catchingUp && slot.lastEnqueued == 10 && slot.baseMark == 10)
        let outcomes = [deliver(&slot, "m12", 12), deliver(&slot, "e1", nil), deliver(&slot, "e2", nil), deliver(&slot, "e3", nil)]
        #expect(outcomes == [.kept, .kept, .kept, .dropped])
        #expect(slot.liveSeen == 12)
        // The reader read up to 11: message 12 came in since, so it reads again.
        slot.caughtUp(to: 11)
        let endedEarly = slot.endCatchUp(ifNothingAfter: 11) != nil
        #expect(!endedEarly)
        #expect(slot.catchingUp)
        slot.caughtUp(to: 12)
        let ended = slot.endCatchUp(ifNothingAfter: 12)
        let end = try #require(ended)
        #expect(end.runner == "r" && end.waiting == ["e1", "e2"])
        #expect(!slot.catchingUp && slot.lastEnqueued == 12 && slot.heldDuringCatchUp.isEmpty)
        // Live again: 12 is not given twice, 13 is.
        let live = [deliver(&slot, "m12", 12), deliver(&slot, "m13", 13)]
        #expect(live == [.dropped, .toRunner("r", previous: 12)])
    }

    @Test func anOverflowStartsACatchUpFromTheMessageBeforeOnlyWhenTheSlotCanCatchUp() {
        var slot = SlotState(runner: "r", queueLimit: 4)
        _ = deliver(&slot, "m1", 1)
        _ = deliver(&slot, "m2", 2)
        let withoutMark = slot.overflowed(2, after: 1)
        #expect(!withoutMark, "a slot without a durable mark has nothing to read again")
        slot.canCatchUp = true
        let started = slot.overflowed(2, after: 1)
        #expect(started)
        #expect(slot.catchingUp && slot.lastEnqueued == 1 && slot.liveSeen == 2)
        let twice = slot.overflowed(3, after: 2)
        #expect(!twice, "already catching up")
        var removed = SlotState(runner: "r", queueLimit: 4)
        removed.canCatchUp = true
        removed.remove()
        let afterRemoval = removed.overflowed(1, after: 0)
        #expect(!afterRemoval, "a removed slot does not catch up")
    }

    @Test func aGapPutsTheMarkBackToWhatWasHandledAndTheCatchUpWaitsForTheEngine() {
        var slot = SlotState(runner: "r", queueLimit: 4)
        slot.canCatchUp = true
        slot.beginCatchUp(from: 5)
        slot.caughtUp(to: 9)
        _ = slot.endCatchUp(ifNothingAfter: 9)
        _ = deliver(&slot, "m10", 10)
        // The runner handled up to 8 when the engine went away: 9 and 10 are given again.
        slot.connectionLost(handledMark: 8)
        #expect(slot.gap && slot.catchingUp && slot.lastEnqueued == 8)
        let duringGap = deliver(&slot, "m11", 11)
        #expect(duringGap == .kept)
        slot.caughtUp(to: 11)
        #expect(slot.lastEnqueued == 8, "in a gap the reader does not move the mark")
        let ended = slot.endCatchUp(ifNothingAfter: 11) != nil
        #expect(!ended)
        let forced = slot.endCatchUp(at: 11) != nil
        #expect(!forced, "not even when the store cannot be read")
        let restored = slot.connectionRestored()
        #expect(restored == 8)
        #expect(!slot.gap)
        let restoredAgain = slot.connectionRestored()
        #expect(restoredAgain == nil)
        // A runner that handled nothing yet falls back to the mark its instance started from.
        var fresh = SlotState(runner: "r", queueLimit: 4)
        fresh.canCatchUp = true
        fresh.beginCatchUp(from: 20)
        fresh.connectionLost(handledMark: nil)
        #expect(fresh.lastEnqueued == 20)
    }

    @Test func oneReaderRunsAtATimeAndIsAskedToReadAgain() {
        var slot = SlotState(runner: "r", queueLimit: 4)
        slot.beginCatchUp(from: 3)
        let first = slot.beginReading()
        let second = slot.beginReading()
        #expect(first && !second)
        slot.caughtUp(to: 7)
        let again = slot.endReading()
        #expect(again == 7)
        let next = slot.beginReading()
        let last = slot.endReading()
        #expect(next && last == nil, "no second ask: nothing more to read")
    }
}
