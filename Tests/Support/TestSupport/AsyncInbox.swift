import Foundation

/// Elements of an `AsyncSequence` (or yielded by hand), buffered in arrival order, for a test to
/// take as they come. Waiting is continuation-based: a waiter is resumed by the element that
/// satisfies it, not by polling. `first(where:)` takes the first matching element and keeps the
/// others for later waits, so a test can wait for events in the order it cares about.
public final class AsyncInbox<Element: Sendable>: Sendable {
    private let core: WaitCore<Element>
    private let feeder: Task<Void, Never>?

    /// An inbox fed by `yield(_:)` and `finish()`.
    public init(describe: @escaping @Sendable (Element) -> String = { String(describing: $0) }) {
        core = WaitCore(consuming: true, describe: describe)
        feeder = nil
    }

    /// An inbox fed from `sequence` until it ends (then waits fail at once instead of timing out).
    /// `describe` renders buffered elements in timeout errors.
    public init<S: AsyncSequence & Sendable>(_ sequence: S,
                                             describe: @escaping @Sendable (Element) -> String = { String(describing: $0) })
    where S.Element == Element {
        let core = WaitCore<Element>(consuming: true, describe: describe)
        self.core = core
        feeder = Task {
            do {
                for try await e in sequence { core.append(e) }
                core.finish("the event source ended")
            } catch {
                core.finish("the event source failed: \(error)")
            }
        }
    }

    deinit { feeder?.cancel() }

    public func yield(_ element: Element) { core.append(element) }
    public func finish(_ reason: String = "the event source ended") { core.finish(reason) }

    /// The elements received and not yet taken.
    public var pending: [Element] { core.snapshot }

    /// Takes the next element.
    public func next(timeout: Duration = .seconds(10)) async throws -> Element {
        try await core.wait(from: 0, what: "the next event", timeout: timeout) { $0 }.1
    }

    /// Takes the first element (received or still to come) that `predicate` accepts; earlier
    /// elements that do not match stay for later waits.
    public func first(where predicate: @escaping @Sendable (Element) -> Bool, _ what: String = "a matching event",
                      timeout: Duration = .seconds(10)) async throws -> Element {
        try await core.wait(from: 0, what: what, timeout: timeout) { predicate($0) ? $0 : nil }.1
    }

    /// Takes the first element `match` maps to a value, and returns that value.
    public func first<T: Sendable>(_ what: String, timeout: Duration = .seconds(10),
                                   _ match: @escaping @Sendable (Element) -> T?) async throws -> T {
        try await core.wait(from: 0, what: what, timeout: timeout, match).1
    }
}

/// An append-only record (lines of a process's output, commands a host ran): waits look for an
/// element from an index on and leave the record as it is.
public final class AsyncLog<Element: Sendable>: Sendable {
    private let core: WaitCore<Element>

    public init(describe: @escaping @Sendable (Element) -> String = { String(describing: $0) }) {
        core = WaitCore(consuming: false, describe: describe)
    }

    public func append(_ element: Element) { core.append(element) }
    /// No more elements: waits not yet satisfied fail at once with `reason`.
    public func finish(_ reason: String) { core.finish(reason) }

    public var all: [Element] { core.snapshot }
    public var count: Int { core.snapshot.count }
    /// Whether `finish` was called.
    public var isFinished: Bool { core.endReason != nil }

    /// Waits for the first element at index `from` or later that `predicate` accepts.
    @discardableResult
    public func first(from: Int = 0, _ what: String, timeout: Duration = .seconds(10),
                      where predicate: @escaping @Sendable (Element) -> Bool) async throws -> (index: Int, element: Element) {
        try await core.wait(from: from, what: what, timeout: timeout) { predicate($0) ? $0 : nil }
    }

    /// Waits until `condition` holds for the whole record: checked now and again as each element
    /// arrives (under the log's lock: `condition` must not call back into the log).
    public func waitUntil(_ what: String, timeout: Duration = .seconds(10),
                          _ condition: @escaping @Sendable ([Element]) -> Bool) async throws {
        try await core.waitUntil(what: what, timeout: timeout, condition)
    }

    /// Waits until the record is finished (a pipe's end of file).
    public func waitForEnd(_ what: String, timeout: Duration = .seconds(10)) async throws {
        // A predicate no element satisfies: the wait ends when the record does.
        do {
            _ = try await core.wait(from: Int.max, what: what, timeout: timeout) { _ in () }
        } catch let error as WaitTimeout {
            if core.endReason == nil { throw error }
        }
    }
}
