import Foundation

/// A wait that ran out of time (or whose source ended first): what it waited for and what it had.
public struct WaitTimeout: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One waiting caller: `offer` resumes it (and returns true) if it takes the element at `index`;
/// `fail` resumes it with an error. Touched only under the owner's lock.
final class Waiter<Element>: @unchecked Sendable {
    let id: UInt64
    let offer: (Int, Element) -> Bool
    let fail: (Error) -> Void
    var deadline: DispatchWorkItem?

    init(id: UInt64, offer: @escaping (Int, Element) -> Bool, fail: @escaping (Error) -> Void) {
        self.id = id
        self.offer = offer
        self.fail = fail
    }
}

/// The shared machinery of `AsyncInbox` and `AsyncLog`: a buffer, waiters resumed by the element
/// that satisfies them (continuations, no polling), a deadline per waiter, and the end of the source.
final class WaitCore<Element: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var elements: [Element] = []
    private var waiters: [Waiter<Element>] = []
    private var nextId: UInt64 = 0
    private var ended: String?
    let consuming: Bool
    let describe: @Sendable (Element) -> String

    init(consuming: Bool, describe: @escaping @Sendable (Element) -> String) {
        self.consuming = consuming
        self.describe = describe
    }

    var snapshot: [Element] { lock.withLock { elements } }

    func append(_ element: Element) {
        lock.withLock {
            guard ended == nil else { return }
            let index = elements.count
            if consuming {
                // The first waiter that takes it gets it; otherwise it waits in the buffer.
                if let i = waiters.firstIndex(where: { $0.offer(index, element) }) {
                    waiters.remove(at: i).deadline?.cancel()
                } else {
                    elements.append(element)
                }
            } else {
                // A log keeps every element, and resumes every waiter it satisfies.
                elements.append(element)
                waiters.removeAll { w in
                    guard w.offer(index, element) else { return false }
                    w.deadline?.cancel()
                    return true
                }
            }
        }
    }

    var endReason: String? { lock.withLock { ended } }

    /// The source ended (`reason` says how): waiters still waiting fail at once.
    func finish(_ reason: String) {
        let failed: [Waiter<Element>] = lock.withLock {
            guard ended == nil else { return [] }
            ended = reason
            let all = waiters
            waiters = []
            return all
        }
        for w in failed {
            w.deadline?.cancel()
            w.fail(WaitTimeout("\(reason); \(have())"))
        }
    }

    func have(last n: Int = 20) -> String {
        let items = snapshot
        let shown = items.suffix(n).map(describe)
        return items.count > n ? "have \(items.count), the last \(n): \(shown)" : "have \(shown)"
    }

    /// Waits for the first element at an index `>= from` that `match` accepts.
    /// An inbox removes it; a log keeps it. Fails after `timeout`, on cancellation, or when the
    /// source ends, saying what it waited for and what it has.
    func wait<T: Sendable>(from: Int, what: String, timeout: Duration,
                           _ match: @escaping @Sendable (Element) -> T?) async throws -> (Int, T) {
        let id: UInt64 = lock.withLock { nextId += 1; return nextId }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<(Int, T), Error>) in
                lock.withLock {
                    if Task.isCancelled {
                        c.resume(throwing: CancellationError())
                        return
                    }
                    for (i, e) in elements.enumerated() where i >= from {
                        if let t = match(e) {
                            if consuming { elements.remove(at: i) }
                            c.resume(returning: (i, t))
                            return
                        }
                    }
                    register(id: id, what: what, timeout: timeout, offer: { index, e in
                        guard index >= from, let t = match(e) else { return false }
                        c.resume(returning: (index, t))
                        return true
                    }, fail: { c.resume(throwing: $0) })
                }
            }
        } onCancel: {
            expire(id, CancellationError())
        }
    }

    /// Waits until `condition` holds for the whole record (checked now and after each new element).
    /// Only for a log (elements are never removed).
    func waitUntil(what: String, timeout: Duration, _ condition: @escaping @Sendable ([Element]) -> Bool) async throws {
        let id: UInt64 = lock.withLock { nextId += 1; return nextId }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, Error>) in
                lock.withLock {
                    if Task.isCancelled {
                        c.resume(throwing: CancellationError())
                        return
                    }
                    if condition(elements) {
                        c.resume()
                        return
                    }
                    // Called under the lock, after the new element is appended.
                    register(id: id, what: what, timeout: timeout, offer: { [unowned self] _, _ in
                        guard condition(self.elements) else { return false }
                        c.resume()
                        return true
                    }, fail: { c.resume(throwing: $0) })
                }
            }
        } onCancel: {
            expire(id, CancellationError())
        }
    }

    /// Adds a waiter with its deadline, or fails it at once if the source has ended. Under the lock.
    private func register(id: UInt64, what: String, timeout: Duration,
                          offer: @escaping (Int, Element) -> Bool, fail: @escaping (Error) -> Void) {
        if let ended {
            let have = elements.suffix(20).map(describe)
            fail(WaitTimeout("waited for \(what), but \(ended); have \(have)"))
            return
        }
        let w = Waiter<Element>(id: id, offer: offer, fail: fail)
        let deadline = DispatchWorkItem { [weak self] in
            self?.expire(id, WaitTimeout("timed out after \(timeout) waiting for \(what)"))
        }
        w.deadline = deadline
        waiters.append(w)
        let (s, atto) = timeout.components
        let nanos = max(0, s) * 1_000_000_000 + max(0, atto) / 1_000_000_000
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanos)), execute: deadline)
    }

    private func expire(_ id: UInt64, _ error: Error) {
        let w: Waiter<Element>? = lock.withLock {
            guard let i = waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return waiters.remove(at: i)
        }
        guard let w else { return }
        w.deadline?.cancel()
        if let timeout = error as? WaitTimeout {
            w.fail(WaitTimeout("\(timeout.description); \(have())"))
        } else {
            w.fail(error)
        }
    }
}

/// Polls `condition` until it holds. THE LAST RESORT: use it only for a condition that cannot be
/// observed as an event (a row in a database, a counter without a notification). Anything that
/// arrives on a stream, a pipe or a callback is awaited with `AsyncInbox`, `AsyncLog` or
/// `ChildProcess` instead. Throws `WaitTimeout` naming `what` after `timeout` — 30 s unless
/// given: the limit only matters when the condition never comes, and `make test` runs beside other
/// work on a 2-core machine (10 s was met by a PostgreSQL relay's first 60 acknowledged SENDs).
public func eventually(timeout: Duration = .seconds(30), _ what: String,
                       pollingEvery interval: Duration = .milliseconds(20),
                       _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return }
        guard ContinuousClock.now < deadline else { throw WaitTimeout("timed out after \(timeout) waiting for \(what)") }
        try await Task.sleep(for: interval)
    }
}

/// The result of `body`, or `WaitTimeout` naming `what` once `limit` has passed (`body` is then
/// cancelled). For "this returns promptly" checks, where the slow alternative would take far longer.
public func returnsWithin<T: Sendable>(_ limit: Duration, _ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask { try await Task.sleep(for: limit); return nil }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let result = first else { throw WaitTimeout("timed out after \(limit) waiting for \(what)") }
        return result
    }
}

/// A test's own failure, with what it saw.
public struct TestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
