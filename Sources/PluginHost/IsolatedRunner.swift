import Foundation
import Logging
import NIOConcurrencyHelpers

/// Runs a plugin in a child process (`swiftplex-plugin-runner`) over the same ABI: a crash or a
/// hang is contained, logged, counted, and the child restarted with exponential backoff.
///
/// Events are numbered and kept until the child reports them done. When the child dies, the
/// event it was handling is dropped (it may be what kills it) and the rest are sent again to
/// the restarted child, in order.
final class IsolatedRunner: PluginRunner, @unchecked Sendable {
    let info: PluginInfo
    private let path: String
    private let runnerExecutable: URL
    private let services: LocalServices
    private let runCommand: CommandRunner
    private let queueLimit: Int
    private let timeout: Duration
    private let backoff: (initial: Duration, max: Duration)
    private let logger: Logger
    private let lock = NSLock()
    private var state = State()

    private struct State {
        var child: Child?
        var config = "{}"
        var nextSeq = 1
        /// Sent (or waiting to be sent) and not yet done, in order.
        var inFlight: [(seq: Int, json: String)] = []
        var lastProgress = ContinuousClock.now
        var stats = PluginStats()
        var stopping = false
        /// Set while the child is down and a restart is pending.
        var restartDelay: Duration?
        /// The delay of the last restart, and when the current child started: a child that
        /// crashes within `stableAfter` of starting doubles the next delay, up to the maximum.
        var lastDelay: Duration?
        var childSince = ContinuousClock.now
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
    }

    /// One running child process.
    final class Child: @unchecked Sendable {
        let process: Process
        let writer: FrameWriter
        let generation: Int
        init(process: Process, writer: FrameWriter, generation: Int) {
            self.process = process
            self.writer = writer
            self.generation = generation
        }
    }

    var stats: PluginStats { lock.withLock { state.stats } }

    /// A child that ran this long before crashing restarts after the initial delay again.
    static let stableAfter = Duration.seconds(30)

    /// Spawns the child and waits for its descriptor; throws the load error if the plugin does not load.
    static func launch(path: String, runnerExecutable: URL, services: LocalServices, runCommand: @escaping CommandRunner,
                       queueLimit: Int, timeout: Duration, backoff: (Duration, Duration), logger: Logger) async throws -> IsolatedRunner {
        let probe = try await Spawned.spawn(path: path, runner: runnerExecutable, logger: logger, instance: services.instanceName)
        let runner = IsolatedRunner(info: probe.info, path: path, runnerExecutable: runnerExecutable, services: services,
                                    runCommand: runCommand, queueLimit: queueLimit, timeout: timeout, backoff: backoff, logger: logger)
        runner.adopt(probe)
        return runner
    }

    private init(info: PluginInfo, path: String, runnerExecutable: URL, services: LocalServices, runCommand: @escaping CommandRunner,
                 queueLimit: Int, timeout: Duration, backoff: (Duration, Duration), logger: Logger) {
        self.info = info
        self.path = path
        self.runnerExecutable = runnerExecutable
        self.services = services
        self.runCommand = runCommand
        self.queueLimit = queueLimit
        self.timeout = timeout
        self.backoff = backoff
        self.logger = logger
    }

    private var generation = 0

    /// Makes a freshly spawned child the current one and starts reading its frames.
    private func adopt(_ spawned: Spawned) {
        let child = lock.withLock { () -> Child in
            generation += 1
            let c = Child(process: spawned.process, writer: spawned.writer, generation: generation)
            state.child = c
            return c
        }
        let reader = spawned.reader
        Thread.detachNewThread { [self] in readLoop(child, reader) }
    }

    // MARK: Starting

    private var startWaiter: CheckedContinuation<PluginError?, Never>?

    func start(configJSON: String) async -> PluginError? {
        lock.withLock { state.config = configJSON }
        return await startChild()
    }

    private func startChild() async -> PluginError? {
        let child = lock.withLock { state.child }
        guard let child else { return PluginError(.crashed, "the plugin process is not running") }
        let config = lock.withLock { state.config }
        let result = await withCheckedContinuation { (cont: CheckedContinuation<PluginError?, Never>) in
            lock.withLock { startWaiter = cont }
            if !child.writer.send(["op": "start", "config": config]) {
                resolveStart(PluginError(.crashed, "the plugin process exited before it started"))
            }
        }
        if result == nil {
            // Send what waited while the child was down, then let `deliver` send directly again.
            // Both under the lock, so no event can overtake the ones that waited. (Writing under
            // the lock cannot deadlock: the child's reader thread always drains its stdin.)
            lock.withLock {
                state.lastProgress = .now
                for event in state.inFlight { child.writer.send(.event(seq: UInt64(event.seq), json: event.json)) }
                state.restartDelay = nil
                state.childSince = .now
            }
        }
        return result
    }

    private func resolveStart(_ error: PluginError?) {
        let w = lock.withLock { () -> CheckedContinuation<PluginError?, Never>? in
            defer { startWaiter = nil }
            return startWaiter
        }
        w?.resume(returning: error)
    }

    // MARK: Events

    func deliver(_ eventJSON: String) -> Bool {
        let (seq, child) = lock.withLock { () -> (Int?, Child?) in
            guard !state.stopping, state.inFlight.count < queueLimit else {
                state.stats.dropped += 1
                return (nil, nil)
            }
            if state.inFlight.isEmpty { state.lastProgress = .now }
            let seq = state.nextSeq
            state.nextSeq += 1
            state.inFlight.append((seq, eventJSON))
            return (seq, state.restartDelay == nil ? state.child : nil)
        }
        guard let seq else {
            logger.error("plugin queue full: event dropped", metadata: ["plugin": "\(services.instanceName)", "limit": "\(queueLimit)"])
            return false
        }
        child?.writer.send(.event(seq: UInt64(seq), json: eventJSON))
        return true
    }

    func drain() async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if state.inFlight.isEmpty { return true }
                state.drainWaiters.append(cont)
                return false
            }
            if now { cont.resume() }
        }
    }

    private func done(seq: Int, error: String?) {
        let waiters = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            if let i = state.inFlight.firstIndex(where: { $0.seq == seq }) { state.inFlight.remove(at: i) }
            state.lastProgress = .now
            state.stats.delivered += 1
            if error != nil { state.stats.failed += 1 }
            guard state.inFlight.isEmpty else { return [] }
            defer { state.drainWaiters.removeAll() }
            return state.drainWaiters
        }
        if let error {
            logger.warning("plugin handler failed", metadata: ["plugin": "\(services.instanceName)", "error": "\(error)"])
        }
        waiters.forEach { $0.resume() }
    }

    /// Called by the manager's watchdog: a child that sat on an event longer than the timeout is killed.
    func checkTimeout(now: ContinuousClock.Instant) {
        let victim = lock.withLock { () -> Child? in
            guard !state.inFlight.isEmpty, state.restartDelay == nil, now - state.lastProgress > timeout else { return nil }
            state.stats.timedOut += 1
            state.lastProgress = now
            return state.child
        }
        guard let victim else { return }
        logger.error("isolated plugin hung past its timeout; killing it", metadata: ["plugin": "\(services.instanceName)", "timeout": "\(timeout)"])
        kill(victim.process.processIdentifier, SIGKILL)
    }

    // MARK: The child's frames

    private func readLoop(_ child: Child, _ reader: FrameReader) {
        while true {
            let frame: [String: Any]
            switch Result(catching: { try reader.next() }) {
            case let .success(.done(seq, error)):
                done(seq: Int(seq), error: error)
                continue
            case let .success(.control(object)):
                frame = object
            case .success(.event), .failure:
                childExited(child)
                return
            }
            switch frame["op"] as? String {
            case "started": resolveStart(nil)
            case "startFailed": resolveStart(PluginError(.startFailed, frame["error"] as? String ?? "start failed"))
            case "log":
                services.log(level: Int32(frame["level"] as? Int ?? 2), message: frame["message"] as? String ?? "")
            case "call": answer(frame, on: child)
            default:
                logger.warning("isolated plugin sent an unknown frame", metadata: ["plugin": "\(services.instanceName)"])
            }
        }
    }

    private func answer(_ frame: [String: Any], on child: Child) {
        let id = frame["id"] as? Int ?? 0
        switch frame["fn"] as? String {
        case "command":
            let line = frame["command"] as? String ?? ""
            let run = runCommand
            Task {
                let response = await run(line)
                child.writer.send(["op": "result", "id": id, "value": response])
            }
        case "storageGet":
            var r: [String: Any] = ["op": "result", "id": id]
            if let v = services.storageGet(frame["key"] as? String ?? "") { r["value"] = v }
            child.writer.send(r)
        case "storageSet":
            let ok = services.storageSet(frame["key"] as? String ?? "", frame["value"] as? String)
            child.writer.send(["op": "result", "id": id, "ok": ok])
        case "setCommands":
            child.writer.send(["op": "result", "id": id, "ok": services.setCommands(frame["commands"] as? String ?? "")])
        default:
            child.writer.send(["op": "result", "id": id])
        }
    }

    private func childExited(_ child: Child) {
        child.process.waitUntilExit()
        let status = child.process.terminationStatus
        let signalled = child.process.terminationReason == .uncaughtSignal
        let (stopping, delay, lost) = lock.withLock { () -> (Bool, Duration, Int?) in
            guard state.child === child else { return (true, .zero, nil) }
            state.child = nil
            if state.stopping { return (true, .zero, nil) }
            state.stats.crashes += 1
            // The event being handled may be what killed it: drop it, keep the rest.
            let lost = state.inFlight.isEmpty ? nil : state.inFlight.removeFirst().seq
            let crashedQuickly = ContinuousClock.now - state.childSince < Self.stableAfter
            let next = crashedQuickly ? state.lastDelay.map { min($0 * 2, backoff.max) } ?? backoff.initial : backoff.initial
            state.lastDelay = next
            state.restartDelay = next
            return (false, next, lost)
        }
        resolveStart(PluginError(.crashed, "the plugin process exited (\(signalled ? "signal" : "status") \(status)) while starting"))
        guard !stopping else { return }
        logger.error("isolated plugin crashed; restarting", metadata: [
            "plugin": "\(services.instanceName)", signalled ? "signal" : "status": "\(status)",
            "restart_in": "\(delay)", "dropped_event": "\(lost.map(String.init) ?? "none")",
        ])
        if lost != nil { done(seq: lost!, error: "the plugin crashed while handling this event") }
        Task { await restart(after: delay) }
    }

    private func restart(after delay: Duration) async {
        try? await Task.sleep(for: delay)
        guard !lock.withLock({ state.stopping }) else { return }
        do {
            let spawned = try await Spawned.spawn(path: path, runner: runnerExecutable, logger: logger, instance: services.instanceName)
            adopt(spawned)
            lock.withLock { state.stats.restarts += 1 }
            if let error = await startChild() {
                logger.error("restarted plugin failed to start", metadata: ["plugin": "\(services.instanceName)", "error": "\(error)"])
                return  // its exit (or the next crash) schedules another restart
            }
            logger.notice("isolated plugin restarted", metadata: ["plugin": "\(services.instanceName)"])
        } catch {
            logger.error("cannot restart isolated plugin", metadata: ["plugin": "\(services.instanceName)", "error": "\(error)"])
            let next = lock.withLock { () -> Duration in
                let d = min((state.restartDelay ?? backoff.initial) * 2, backoff.max)
                state.restartDelay = d
                state.lastDelay = d
                return d
            }
            Task { await restart(after: next) }
        }
    }

    func stop() async {
        let child = lock.withLock { () -> Child? in
            state.stopping = true
            return state.child
        }
        services.timers.close()
        guard let child else { return }
        child.writer.send(["op": "stop"])
        let deadline = ContinuousClock.now + .seconds(5)
        while child.process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if child.process.isRunning {
            logger.warning("isolated plugin did not stop in 5 s; killing it", metadata: ["plugin": "\(services.instanceName)"])
            kill(child.process.processIdentifier, SIGKILL)
        }
        let waiters = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            defer { state.drainWaiters.removeAll() }
            return state.drainWaiters
        }
        waiters.forEach { $0.resume() }
    }
}

/// A child process that has loaded the plugin and sent its descriptor.
struct Spawned: @unchecked Sendable {
    let process: Process
    let writer: FrameWriter
    let reader: FrameReader
    let info: PluginInfo

    static func spawn(path: String, runner: URL, logger: Logger, instance: String) async throws -> Spawned {
        guard FileManager.default.isExecutableFile(atPath: runner.path) else {
            throw PluginLoadError(code: .notLoadable, path: path, message: "isolation: process needs \(runner.path), which is missing (build the swiftplex-plugin-runner product)")
        }
        let process = Process()
        process.executableURL = runner
        process.arguments = [path]
        // Swift's crash backtracer symbolicates for seconds before the process exits; a plugin
        // crash should be noticed (EOF on the pipe) and restarted at once. The host logs the signal.
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        process.environment = environment
        let toChild = Pipe(), fromChild = Pipe(), errors = Pipe()
        process.standardInput = toChild
        process.standardOutput = fromChild
        process.standardError = errors
        try process.run()
        // The Process keeps its three Pipe objects (and so their descriptors) alive.
        let writer = FrameWriter(fd: toChild.fileHandleForWriting.fileDescriptor)
        let reader = FrameReader(fd: fromChild.fileHandleForReading.fileDescriptor)
        forwardStderr(errors.fileHandleForReading, logger: logger, instance: instance)
        let first: Frame = try await withCheckedThrowingContinuation { cont in
            Thread.detachNewThread {
                do { cont.resume(returning: try reader.next()) } catch {
                    cont.resume(throwing: PluginLoadError(code: .notLoadable, path: path, message: "the plugin runner exited before it said hello"))
                }
            }
        }
        guard case let .control(hello) = first else {
            kill(process.processIdentifier, SIGKILL)
            throw PluginLoadError(code: .notLoadable, path: path, message: "the plugin runner sent a malformed hello")
        }
        switch hello["op"] as? String {
        case "hello":
            guard let d = hello["info"] as? [String: Any], let info = PluginInfo(json: d) else { fallthrough }
            return Spawned(process: process, writer: writer, reader: reader, info: info)
        case "loadFailed":
            process.waitUntilExit()
            let code: PluginLoadError.Code = switch hello["code"] as? String {
            case "fileNotFound": .fileNotFound
            case "missingEntryPoint": .missingEntryPoint
            case "abiMismatch": .abiMismatch
            case "badDescriptor": .badDescriptor
            default: .notLoadable
            }
            throw PluginLoadError(code: code, path: path, message: hello["error"] as? String ?? "cannot load")
        default:
            kill(process.processIdentifier, SIGKILL)
            throw PluginLoadError(code: .notLoadable, path: path, message: "the plugin runner did not say hello")
        }
    }

    /// Logs what the plugin writes to stdout/stderr, line by line, under its instance name.
    static func forwardStderr(_ handle: FileHandle, logger: Logger, instance: String) {
        Thread.detachNewThread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                buffer.append(chunk)
                while let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...nl)
                    logger.info("\(line)", metadata: ["plugin": "\(instance)", "stream": "output"])
                }
            }
        }
    }
}
