import Foundation
import SwiftplexBase

/// The timers of one plugin instance. A fired timer becomes a `swiftplex.timer` event delivered
/// through the instance's queue, so handlers never run concurrently.
final class PluginTimers: @unchecked Sendable {  // mutable state only under `lock`
    private let lock = NSLock()
    private var nextId: UInt64 = 1
    private var timers: [UInt64: DispatchSourceTimer] = [:]
    private var closed = false
    private let fire: @Sendable (String) -> Void
    private static let queue = DispatchQueue(label: "swiftplex.plugin-timers")

    /// - Parameter fire: receives the timer event JSON.
    init(fire: @escaping @Sendable (String) -> Void) {
        self.fire = fire
    }

    func start(name: String, delayMs: UInt64, repeatMs: UInt64) -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return 0 }
        let id = nextId
        nextId += 1
        let timer = DispatchSource.makeTimerSource(queue: Self.queue)
        let event = Self.event(id: id, name: name)
        let fire = self.fire
        let clamp = { (ms: UInt64) in Int(min(ms, UInt64(Int32.max))) }
        timer.schedule(deadline: .now() + .milliseconds(clamp(delayMs)),
                       repeating: repeatMs > 0 ? .milliseconds(clamp(repeatMs)) : .never)
        timer.setEventHandler { [weak self] in
            fire(event)
            if repeatMs == 0 { _ = self?.cancel(id) }
        }
        timers[id] = timer
        timer.resume()
        return id
    }

    func cancel(_ id: UInt64) -> Bool {
        let timer = lock.withLock { timers.removeValue(forKey: id) }
        timer?.cancel()
        return timer != nil
    }

    /// Cancels every timer and refuses new ones.
    func close() {
        let all = lock.withLock { () -> [DispatchSourceTimer] in
            closed = true
            defer { timers.removeAll() }
            return Array(timers.values)
        }
        all.forEach { $0.cancel() }
    }
}

extension PluginTimers {
    /// `{"type":"swiftplex.timer","timerId":…,"name":…}` as JSON text.
    static func event(id: UInt64, name: String) -> String {
        JSONWriter.text(["name": .string(name), "timerId": .int(Int64(truncatingIfNeeded: id)), "type": .string(PluginEvents.timer)])
    }
}
