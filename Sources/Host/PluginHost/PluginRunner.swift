import Foundation
import Logging
import NIOConcurrencyHelpers

/// Counters of one instance, as shown by `status` and exported as metrics.
public struct PluginStats: Sendable, Equatable {
    public var delivered = 0
    public var failed = 0
    public var timedOut = 0
    public var dropped = 0
    public var crashes = 0
    public var restarts = 0
    /// Isolated children killed for breaking the frame protocol (bad frames, values out of range,
    /// over-long output lines).
    public var protocolErrors = 0
    /// Host calls refused because the child had too many running.
    public var refusedCalls = 0
}

/// What an instance is doing, as the admin API and `/metrics` show it.
public enum PluginCondition: String, Sendable, CaseIterable {
    /// Taking events.
    case running
    /// Being given the received messages it missed (before a restart, or refused by its full queue).
    case catchingUp
    /// A handler runs past its timeout (in process: its queue waits; isolated: the child is killed).
    case overdue
    /// Isolated: the child died and a restart is pending (backoff).
    case restarting
    /// Being stopped (a reload or shutdown).
    case stopping
}

/// How an instance runs: in the host process or in a child process. Both keep events in order
/// on a queue of their own.
protocol PluginRunner: AnyObject, Sendable {
    var info: PluginInfo { get }
    /// Starts the plugin with its validated config JSON.
    func start(configJSON: String) async -> PluginError?
    /// Queues an event; false when the queue is full. `itemId` names the received chat item of a
    /// `newChatItems` event: while it is handled the plugin's commands carry idempotency keys,
    /// and once it is handled the instance's mark moves to it.
    func deliver(_ eventJSON: String, itemId: Int64?) -> Bool
    /// Events waiting or being handled.
    var queued: Int { get }
    /// Waits until every queued event has been handled (for tests and benchmarks).
    func drain() async
    /// Stops the plugin; queued events are handled first.
    func stop() async
    var stats: PluginStats { get }
    /// What the instance is doing now.
    var condition: PluginCondition { get }
    /// The newest received message this runner has finished handling (nil: none yet).
    var handledMark: Int64? { get }
}

extension PluginRunner {
    /// Queues an event that is not a received message (timers, tests).
    func deliver(_ eventJSON: String) -> Bool { deliver(eventJSON, itemId: nil) }
}

/// Runs a plugin's shared object inside the host, on its own thread.
final class InProcessRunner: PluginRunner, @unchecked Sendable {
    let library: PluginLibrary
    var info: PluginInfo { library.info }
    private let services: LocalServices
    private let worker: SerialWorker
    private let queueLimit: Int
    private let timeout: Duration
    private let logger: Logger
    private let state = NIOLockedValueBox(State())
    private var instance: PluginInstance?  // touched only on the worker thread

    private struct State {
        var stats = PluginStats()
        var busySince: ContinuousClock.Instant?
        var reportedTimeout = false
        var stopping = false
    }

    var stats: PluginStats { state.withLockedValue { $0.stats } }

    var handledMark: Int64? { services.handledMark }
    var condition: PluginCondition {
        state.withLockedValue { s in s.stopping ? .stopping : (s.busySince != nil && s.reportedTimeout ? .overdue : .running) }
    }

    init(library: PluginLibrary, services: LocalServices, queueLimit: Int, timeout: Duration, logger: Logger) {
        self.library = library
        self.services = services
        self.queueLimit = queueLimit
        self.timeout = timeout
        self.logger = logger
        worker = SerialWorker(name: "plugin:\(services.instanceName)")
    }

    func start(configJSON: String) async -> PluginError? {
        let library = library
        let services = services
        // The instance is installed on the worker itself, before any event or timer queued after it.
        let result = await worker.run { [self] () -> Result<Void, PluginError> in
            PluginInstance.start(library, services: services, configJSON: configJSON).map { instance = $0 }
        }
        switch result {
        case .success?:
            return nil
        case let .failure(e)?: return e
        case nil: return PluginError(.stopped, "the plugin's queue is closed")
        }
    }

    var queued: Int { worker.depth }

    func deliver(_ eventJSON: String, itemId: Int64?) -> Bool {
        let accepted = worker.submit(limit: queueLimit) { [self] in
            guard let instance else { return }
            state.withLockedValue { $0.busySince = .now; $0.reportedTimeout = false }
            services.beginHandling(itemId: itemId)
            let error = instance.handle(eventJSON)
            services.endHandling()
            if let itemId { services.handled(itemId: itemId) }
            state.withLockedValue { s in
                s.busySince = nil
                s.stats.delivered += 1
                if error != nil { s.stats.failed += 1 }
            }
            if let error {
                logger.warning("plugin handler failed", metadata: ["plugin": "\(services.instanceName)", "error": "\(error.message)"])
            }
        }
        if !accepted {
            let dropped = state.withLockedValue { s -> Int in s.stats.dropped += 1; return s.stats.dropped }
            if dropped == 1 || dropped.isMultiple(of: 1000) {
                logger.error("plugin queue full: event dropped", metadata: ["plugin": "\(services.instanceName)", "dropped": "\(dropped)", "limit": "\(queueLimit)"])
            }
        }
        return accepted
    }

    /// Called by the manager's watchdog: reports (once per event) a handler running past its timeout.
    /// An in-process handler cannot be interrupted; only its own queue waits.
    func checkTimeout(now: ContinuousClock.Instant) {
        let overdue = state.withLockedValue { s -> Duration? in
            guard let since = s.busySince, !s.reportedTimeout, now - since > timeout else { return nil }
            s.reportedTimeout = true
            s.stats.timedOut += 1
            return now - since
        }
        if let overdue {
            logger.error("plugin handler exceeded its timeout; its queue waits (use isolation: process to have hangs killed)",
                         metadata: ["plugin": "\(services.instanceName)", "running": "\(overdue)", "timeout": "\(timeout)"])
        }
    }

    func drain() async {
        _ = await worker.run { [services] in services.flushMarks() }
    }

    func stop() async {
        state.withLockedValue { $0.stopping = true }
        services.timers.close()
        _ = await worker.run { [self] in
            instance?.stop()
            instance = nil
            services.flushMarks()
        }
        worker.shutdown()
    }
}
