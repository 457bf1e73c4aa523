import Foundation
import SwiftplexBase
import Synchronization

/// The timers of one plugin instance. A fired timer becomes a `swiftplex.timer` event delivered
/// through the instance's queue, so handlers never run concurrently.
final class PluginTimers: Sendable {
    private struct State {
        var nextId: UInt64 = 1
        var timers: [UInt64: any DispatchSourceTimer] = [:]
        var closed = false
    }

    private let state = Mutex(State())
    private let fire: @Sendable (String) -> Void
    private static let queue = DispatchQueue(label: "swiftplex.plugin-timers")

    /// - Parameter fire: receives the timer event JSON.
    init(fire: @escaping @Sendable (String) -> Void) {
        self.fire = fire
    }

    func start(name: String, delayMs: UInt64, repeatMs: UInt64) -> UInt64 {
        let fire = self.fire
        return state.withLock { state in
        guard !state.closed else { return 0 }
        let id = state.nextId
        state.nextId += 1
        let timer = DispatchSource.makeTimerSource(queue: Self.queue)
        let event = Self.event(id: id, name: name)
        let clamp = { (ms: UInt64) in Int(min(ms, UInt64(Int32.max))) }
        timer.schedule(deadline: .now() + .milliseconds(clamp(delayMs)),
                       repeating: repeatMs > 0 ? .milliseconds(clamp(repeatMs)) : .never)
        timer.setEventHandler { [weak self] in
            fire(event)
            if repeatMs == 0 { _ = self?.cancel(id) }
        }
        state.timers[id] = timer
        timer.resume()
        return id
        }
    }

    /// Cancelling a dispatch timer does not wait for it, so it is done under the lock.
    func cancel(_ id: UInt64) -> Bool {
        state.withLock { state in
            guard let timer = state.timers.removeValue(forKey: id) else { return false }
            timer.cancel()
            return true
        }
    }

    /// Cancels every timer and refuses new ones.
    func close() {
        state.withLock { state in
            state.closed = true
            state.timers.values.forEach { $0.cancel() }
            state.timers.removeAll()
        }
    }
}

extension PluginTimers {
    /// `{"type":"swiftplex.timer","timerId":…,"name":…}` as JSON text.
    static func event(id: UInt64, name: String) -> String {
        JSONWriter.text(["name": .string(name), "timerId": .int(Int64(truncatingIfNeeded: id)), "type": .string(PluginEvents.timer)])
    }
}
