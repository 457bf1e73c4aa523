import SwiftplexBase
import Testing

@Suite struct FIFOTests {
    /// Order and count survive the compactions (drained, and half taken of a long backlog), with
    /// appends between takes.
    @Test func keepsOrderAcrossCompactions() {
        var q = FIFO<Int>()
        #expect(q.isEmpty && q.popFirst() == nil)
        var next = 0, expected = 0
        for round in 0..<6 {
            for _ in 0..<(5000 * (round + 1)) { q.append(next); next += 1 }
            // Take most, leave a tail for the next round's appends to go behind.
            for _ in 0..<(4000 * (round + 1) + 7) {
                #expect(q.popFirst() == expected)
                expected += 1
            }
            #expect(q.count == next - expected)
        }
        while let v = q.popFirst() {
            #expect(v == expected)
            expected += 1
        }
        #expect(expected == next && q.isEmpty && q.count == 0)
        q.append(42)
        #expect(q.popFirst() == 42 && q.popFirst() == nil)
    }

    /// A taken element is released when taken, not when the queue next compacts.
    @Test func releasesTakenElements() {
        final class Token {}
        weak var watched: Token?
        var q = FIFO<Token>()
        do {
            let t = Token()
            watched = t
            q.append(t)
            q.append(Token())
        }
        #expect(watched != nil)
        _ = q.popFirst()
        #expect(watched == nil)
        #expect(q.count == 1)
    }
}
