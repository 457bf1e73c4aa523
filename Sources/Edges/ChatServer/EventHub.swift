import ChatCore
import Logging
import NIOConcurrencyHelpers
import SwiftplexBase

/// One chat event stream for many readers: the Chat API's `events` can be iterated once, so the
/// hub reads it and hands every event to each subscriber (plugins, WebSocket clients, the admin
/// API's event stream).
///
/// The element is what the source gives: the bot host's hub carries ``EncodedChatEvent``s (the
/// typed event and its JSON text, written once before the fan-out), `swiftplex-chat`'s carries
/// the Chat API's JSON objects.
///
/// A subscriber made with a `limit` is a remote client: when it falls that many events behind,
/// the oldest kept ones stay and newer ones are dropped for it alone (counted in
/// ``Subscription/dropped``), so a slow client never holds the engine or other readers back.
/// A subscriber without a limit gets every event (the plugins).
public final class EventHub<Element: Sendable>: Sendable {
    private struct State {
        var next = 0
        var subscribers: [Int: Entry] = [:]
        var finished = false
    }

    private struct Entry {
        let sink: AsyncStream<Element>.Continuation
        let dropped: NIOLockedValueBox<Int>
    }

    private let source: AsyncStream<Element>
    private let state = NIOLockedValueBox(State())

    public init(source: AsyncStream<Element>) { self.source = source }

    /// A subscription: its events, and how many were dropped because it fell behind.
    public struct Subscription: Sendable {
        public let events: AsyncStream<Element>
        private let droppedCount: NIOLockedValueBox<Int>
        public var dropped: Int { droppedCount.withLockedValue { $0 } }

        init(events: AsyncStream<Element>, dropped: NIOLockedValueBox<Int>) {
            self.events = events
            self.droppedCount = dropped
        }
    }

    /// Subscribes from now on. The stream ends when the hub's source ends (or at once, when it
    /// already has); ending the iteration (or dropping the stream) unsubscribes.
    public func subscribe(limit: Int? = nil) -> Subscription {
        let policy: AsyncStream<Element>.Continuation.BufferingPolicy = limit.map { .bufferingOldest($0) } ?? .unbounded
        let (stream, sink) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: policy)
        let dropped = NIOLockedValueBox(0)
        let id = state.withLockedValue { s -> Int? in
            guard !s.finished else { return nil }
            defer { s.next += 1 }
            s.subscribers[s.next] = Entry(sink: sink, dropped: dropped)
            return s.next
        }
        if let id {
            sink.onTermination = { [weak self] _ in
                _ = self?.state.withLockedValue { $0.subscribers.removeValue(forKey: id) }
            }
        } else {
            sink.finish()
        }
        return Subscription(events: stream, dropped: dropped)
    }

    /// The number of current subscribers.
    public var subscriberCount: Int { state.withLockedValue { $0.subscribers.count } }

    /// Reads the source until it ends or the task is cancelled, then ends every subscription.
    public func run() async {
        for await event in source {
            let entries = state.withLockedValue { Array($0.subscribers.values) }
            for e in entries {
                if case .dropped = e.sink.yield(event) { e.dropped.withLockedValue { $0 += 1 } }
            }
        }
        let entries = state.withLockedValue { s -> [Entry] in
            s.finished = true
            defer { s.subscribers = [:] }
            return Array(s.subscribers.values)
        }
        for e in entries { e.sink.finish() }
    }
}
