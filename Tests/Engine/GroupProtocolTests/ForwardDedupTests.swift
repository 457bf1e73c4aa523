import Testing
@testable import GroupProtocol

@Suite struct ForwardDedupTests {
    let alice = MemberId("YWxpY2U")!
    let bob = MemberId("Ym9i")!
    let host = MemberId("aG9zdA")!

    @Test func secondCopyIsDuplicateAndSaysWhoForwardedTheFirst() {
        var d = ForwardDedup()
        #expect(d.record(author: alice, msgId: "m1", forwardedBy: host) == .new)
        #expect(d.record(author: alice, msgId: "m1", forwardedBy: nil) == .duplicate(firstForwardedBy: host))
        #expect(d.record(author: alice, msgId: "m2", forwardedBy: nil) == .new)
        #expect(d.record(author: alice, msgId: "m2", forwardedBy: host) == .duplicate(firstForwardedBy: nil))
    }

    /// The key includes the author: another member reusing a message id does not suppress it.
    @Test func sameMessageIdFromAnotherAuthorIsNew() {
        var d = ForwardDedup()
        #expect(d.record(author: alice, msgId: "m1", forwardedBy: nil) == .new)
        #expect(d.record(author: bob, msgId: "m1", forwardedBy: nil) == .new)
        #expect(d.contains(author: alice, msgId: "m1") && d.contains(author: bob, msgId: "m1"))
    }

    @Test func messagesWithoutIdAreNeverDuplicates() {
        var d = ForwardDedup()
        #expect(d.record(author: alice, msgId: nil, forwardedBy: nil) == .new)
        #expect(d.record(author: alice, msgId: nil, forwardedBy: nil) == .new)
        #expect(d.count == 0)
    }

    @Test func totalIsBoundedOldestFirst() {
        var d = ForwardDedup(capacity: 100, perAuthor: 100)
        var authors: [MemberId] = []
        for i in 0 ..< 10 { authors.append(MemberId("QUFB\(i)x")!) }
        for n in 0 ..< 1_000 { #expect(d.record(author: authors[n % 10], msgId: "m\(n)", forwardedBy: nil) == .new) }
        #expect(d.count == 100)
        // The newest 100 are remembered, the older ones forgotten.
        for n in 900 ..< 1_000 { #expect(d.contains(author: authors[n % 10], msgId: "m\(n)")) }
        for n in 0 ..< 900 { #expect(!d.contains(author: authors[n % 10], msgId: "m\(n)")) }
    }

    /// A member flooding message ids evicts only its own.
    @Test func floodingAuthorEvictsOnlyItsOwn() {
        var d = ForwardDedup(capacity: 1_000, perAuthor: 50)
        for n in 0 ..< 40 { _ = d.record(author: alice, msgId: "a\(n)", forwardedBy: nil) }
        for n in 0 ..< 10_000 { _ = d.record(author: bob, msgId: "b\(n)", forwardedBy: nil) }
        #expect(d.count == 90)
        for n in 0 ..< 40 { #expect(d.contains(author: alice, msgId: "a\(n)")) }
        for n in 9_950 ..< 10_000 { #expect(d.contains(author: bob, msgId: "b\(n)")) }
        #expect(!d.contains(author: bob, msgId: "b9949"))
    }

    @Test func forgetAuthor() {
        var d = ForwardDedup(capacity: 10, perAuthor: 10)
        for n in 0 ..< 5 { _ = d.record(author: alice, msgId: "a\(n)", forwardedBy: nil) }
        for n in 0 ..< 5 { _ = d.record(author: bob, msgId: "b\(n)", forwardedBy: nil) }
        d.forget(author: alice)
        #expect(d.count == 5)
        #expect(!d.contains(author: alice, msgId: "a0"))
        // Capacity freed by forgetting is reused without evicting bob's.
        for n in 5 ..< 10 { _ = d.record(author: alice, msgId: "a\(n)", forwardedBy: nil) }
        #expect(d.count == 10)
        for n in 0 ..< 5 { #expect(d.contains(author: bob, msgId: "b\(n)")) }
    }

    /// Long runs with mixed evictions keep the count at the bound (no leak in the queues' stale
    /// slots changes what is remembered).
    @Test func longMixedRunStaysBounded() {
        var d = ForwardDedup(capacity: 64, perAuthor: 16)
        let authors = (0 ..< 7).map { MemberId("QkJC\($0)y")! }
        var live: [ForwardDedup.Key] = []
        for n in 0 ..< 20_000 {
            let a = authors[(n * 7 + n / 3) % authors.count]
            _ = d.record(author: a, msgId: "m\(n)", forwardedBy: nil)
            live.append(.init(author: a, msgId: "m\(n)"))
            if n % 997 == 0 { d.forget(author: authors[n % authors.count]) }
            #expect(d.count <= 64)
        }
        // The very last pair is always remembered.
        #expect(d.contains(author: live.last!.author, msgId: live.last!.msgId))
    }
}
