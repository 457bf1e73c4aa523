import Foundation
import Logging
import NIOConcurrencyHelpers
import SwiftplexBase
import SwiftplexSpawn
import Synchronization

/// Runs a plugin in a child process (`swiftplex-plugin-runner`) over the same ABI: a crash or a
/// hang is contained, logged, counted, and the child restarted with exponential backoff.
///
/// Events are numbered and kept until the child reports them done. When the child dies, the
/// event it was handling is dropped (it may be what kills it) and the rest are sent again to
/// the restarted child, in order.
///
/// The host survives any bytes a child writes: frames and output lines are bounded, numbers are
/// converted with checks, a frame that breaks the protocol gets the child killed and restarted
/// (counted as a protocol error), the child's Chat API calls run at most
/// `limits.maxConcurrentCalls` at once, and its stdin is written by a thread of its own from a
/// bounded queue (``ChildInput``), so a child that stops reading delays nobody else and is
/// killed as hung.
final class IsolatedRunner: PluginRunner, Sendable {
    let info: PluginInfo
    private let path: String
    private let runnerExecutable: URL
    private let services: LocalServices
    private let queueLimit: Int
    private let timeout: Duration
    private let backoff: (initial: Duration, max: Duration)
    private let limits: PluginSpec.IsolationLimits
    private let logger: Logger
    private let state = Mutex(State())

    private struct State {
        var child: Child?
        /// Children spawned so far (each one's number).
        var generation = 0
        /// `start` waits here for the child's answer to its start frame.
        var startWaiter: CheckedContinuation<PluginError?, Never>?
        var config = "{}"
        var nextSeq = 1
        /// Sent (or waiting to be sent) and not yet done, in order.
        var inFlight: [(seq: Int, json: String, itemId: Int64?)] = []
        /// Commands issued so far by the child while handling an event (by the event's seq).
        var commandsIssued: [Int: Int] = [:]
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
    final class Child: Sendable {
        let process: SpawnedProcess
        let writer: ChildInput
        let generation: Int
        private let calls = Mutex(0)
        init(process: SpawnedProcess, writer: ChildInput, generation: Int) {
            self.process = process
            self.writer = writer
            self.generation = generation
        }

        /// Counts one more running call unless `limit` are running.
        func beginCall(limit: Int) -> Bool {
            calls.withLock { calls in
                guard calls < limit else { return false }
                calls += 1
                return true
            }
        }

        func endCall() { calls.withLock { $0 -= 1 } }
    }

    var stats: PluginStats { state.withLock { state in state.stats } }

    var handledMark: Int64? { services.handledMark }
    var condition: PluginCondition {
        state.withLock { state in state.stopping ? .stopping : (state.restartDelay != nil ? .restarting : .running) }
    }

    /// A child that ran this long before crashing restarts after the initial delay again.
    static let stableAfter = Duration.seconds(30)

    /// Spawns the child and waits for its descriptor; throws the load error if the plugin does not load.
    static func launch(path: String, runnerExecutable: URL, services: LocalServices,
                       queueLimit: Int, timeout: Duration, backoff: (Duration, Duration),
                       limits: PluginSpec.IsolationLimits = .init(), logger: Logger) async throws -> IsolatedRunner {
        let probe = try await Spawned.spawn(path: path, runner: runnerExecutable, limits: limits, helloTimeout: max(timeout, .seconds(10)),
                                            logger: logger, instance: services.instanceName)
        let runner = IsolatedRunner(info: probe.info, path: path, runnerExecutable: runnerExecutable, services: services,
                                    queueLimit: queueLimit, timeout: timeout, backoff: backoff,
                                    limits: limits, logger: logger)
        runner.adopt(probe)
        return runner
    }

    private init(info: PluginInfo, path: String, runnerExecutable: URL, services: LocalServices,
                 queueLimit: Int, timeout: Duration, backoff: (Duration, Duration), limits: PluginSpec.IsolationLimits, logger: Logger) {
        self.limits = limits
        self.info = info
        self.path = path
        self.runnerExecutable = runnerExecutable
        self.services = services
        self.queueLimit = queueLimit
        self.timeout = timeout
        self.backoff = backoff
        self.logger = logger
    }

    /// Makes a freshly spawned child the current one and starts reading its frames.
    private func adopt(_ spawned: Spawned) {
        let child = state.withLock { (state: inout State) -> Child in
            state.generation += 1
            let c = Child(process: spawned.process, writer: spawned.writer, generation: state.generation)
            state.child = c
            return c
        }
        spawned.writer.onOverflow { [weak self] in self?.inputOverflowed(child) }
        spawned.violations.set { [weak self] reason in self?.protocolViolation(child, reason) }
        let reader = spawned.reader
        Thread.detachNewThread { [self] in readLoop(child, reader) }
    }

    // MARK: Starting

    func start(configJSON: String) async -> PluginError? {
        state.withLock { state in state.config = configJSON }
        return await startChild()
    }

    private func startChild() async -> PluginError? {
        let child = state.withLock { state in state.child }
        guard let child else { return PluginError(.crashed, "the plugin process is not running") }
        let config = state.withLock { state in state.config }
        let result = await withCheckedContinuation { (cont: CheckedContinuation<PluginError?, Never>) in
            state.withLock { $0.startWaiter = cont }
            if !child.writer.send(.start(config: config)) {
                resolveStart(PluginError(.crashed, "the plugin process exited before it started"))
            }
        }
        if result == nil {
            // Send what waited while the child was down, then let `deliver` send directly again.
            // Both under the lock, so no event can overtake the ones that waited. Nothing is
            // written under the lock: `send` only queues for the child's writer thread.
            state.withLock { state in
                state.lastProgress = .now
                for event in state.inFlight { child.writer.send(.event(seq: UInt64(event.seq), json: event.json)) }
                state.restartDelay = nil
                state.childSince = .now
            }
        }
        return result
    }

    private func resolveStart(_ error: PluginError?) {
        let w = state.withLock { (state: inout State) -> CheckedContinuation<PluginError?, Never>? in
            defer { state.startWaiter = nil }
            return state.startWaiter
        }
        w?.resume(returning: error)
    }

    // MARK: Events

    var queued: Int { state.withLock { state in state.inFlight.count } }

    func deliver(_ eventJSON: String, itemId: Int64?) -> Bool {
        // Queued for the child under the lock (so events keep their order whoever delivers them);
        // `send` never blocks, whatever the child does with its stdin.
        let seq = state.withLock { (state: inout State) -> Int? in
            guard !state.stopping, state.inFlight.count < queueLimit else {
                state.stats.dropped += 1
                return nil
            }
            if state.inFlight.isEmpty { state.lastProgress = .now }
            let seq = state.nextSeq
            state.nextSeq += 1
            state.inFlight.append((seq, eventJSON, itemId))
            if state.restartDelay == nil, let child = state.child {
                child.writer.send(.event(seq: UInt64(seq), json: eventJSON))
            }
            return seq
        }
        guard seq != nil else {
            logger.error("plugin queue full: event dropped", metadata: ["plugin": "\(services.instanceName)", "limit": "\(queueLimit)"])
            return false
        }
        return true
    }

    func drain() async {
        await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
            let now = state.withLock { (state: inout State) -> Bool in
                if state.inFlight.isEmpty { return true }
                state.drainWaiters.append(cont)
                return false
            }
            if now { cont.resume() }
        }
        let services = services
        await Blocking.run("plugin-marks-flush") { services.flushMarks() }
    }

    /// A `done` frame from `child`: false when it names no event in flight (a protocol error).
    /// Frames of a child that is no longer the current one are ignored.
    private func childDone(seq: UInt64, error: String?, from child: Child) -> Bool {
        guard let seq = Int(exactly: seq) else { return false }
        let known = state.withLock { (state: inout State) -> Bool? in
            guard state.child === child else { return nil }
            return state.inFlight.contains { $0.seq == seq }
        }
        switch known {
        case nil: return true
        case false?: return false
        case true?:
            done(seq: seq, error: error)
            return true
        }
    }

    private func done(seq: Int, error: String?) {
        let (waiters, itemId) = state.withLock { (state: inout State) -> ([CheckedContinuation<Void, Never>], Int64?) in
            var itemId: Int64?
            if let i = state.inFlight.firstIndex(where: { $0.seq == seq }) { itemId = state.inFlight.remove(at: i).itemId }
            state.commandsIssued[seq] = nil
            state.lastProgress = .now
            state.stats.delivered += 1
            if error != nil { state.stats.failed += 1 }
            guard state.inFlight.isEmpty else { return ([], itemId) }
            defer { state.drainWaiters.removeAll() }
            return (state.drainWaiters, itemId)
        }
        if let itemId { services.handled(itemId: itemId) }
        if let error {
            logger.warning("plugin handler failed", metadata: ["plugin": "\(services.instanceName)", "error": "\(error.prefix(500))"])
        }
        waiters.forEach { $0.resume() }
    }

    /// Called by the manager's watchdog: a child that sat on an event longer than the timeout is killed.
    /// A child that has not read what waits for it on its stdin for longer than the timeout is
    /// killed too (it may have no event in flight: a flood of calls whose answers it never reads).
    func checkTimeout(now: ContinuousClock.Instant) {
        let victim = state.withLock { (state: inout State) -> Child? in
            guard state.restartDelay == nil, let child = state.child else { return nil }
            let eventHung = !state.inFlight.isEmpty && now - state.lastProgress > timeout
            let inputStalled = child.writer.stalledSince.map { now - $0 > timeout } ?? false
            guard eventHung || inputStalled else { return nil }
            state.stats.timedOut += 1
            state.lastProgress = now
            return child
        }
        guard let victim else { return }
        logger.error("isolated plugin hung past its timeout; killing it", metadata: ["plugin": "\(services.instanceName)", "timeout": "\(timeout)"])
        victim.process.signal(SIGKILL)
    }

    /// The child let more than `limits.maxPendingInputBytes` wait on its stdin: it is hung.
    private func inputOverflowed(_ child: Child) {
        let current = state.withLock { (state: inout State) -> Bool in
            guard state.child === child, !state.stopping else { return false }
            state.stats.timedOut += 1
            return true
        }
        guard current else { return }
        logger.error("isolated plugin does not read its input; killing it as hung",
                     metadata: ["plugin": "\(services.instanceName)", "limit": "\(limits.maxPendingInputBytes)"])
        child.process.signal(SIGKILL)
    }

    /// The child broke the protocol: it is killed (its exit restarts it) and the error counted.
    private func protocolViolation(_ child: Child, _ reason: String) {
        let current = state.withLock { (state: inout State) -> Bool in
            guard state.child === child, !state.stopping else { return false }
            state.stats.protocolErrors += 1
            return true
        }
        if current {
            logger.error("isolated plugin broke the frame protocol; killing it",
                         metadata: ["plugin": "\(services.instanceName)", "reason": "\(reason)"])
        }
        child.process.signal(SIGKILL)
    }

    // MARK: The child's frames

    private func readLoop(_ child: Child, _ reader: FrameReader) {
        while true {
            let frame: Frame
            do {
                frame = try reader.next()
            } catch {
                if case let .malformed(reason) = error { protocolViolation(child, reason) }
                childExited(child)
                return
            }
            if let reason = handle(frame, from: child) {
                protocolViolation(child, reason)
                childExited(child)
                return
            }
        }
    }

    /// Acts on one frame of the child; returns why it breaks the protocol, or nil.
    private func handle(_ frame: Frame, from child: Child) -> String? {
        switch frame {
        case .event:
            return "an event frame (only the host sends events)"
        case let .done(seq, error):
            guard childDone(seq: seq, error: error, from: child) else {
                return "a done frame for event \(seq), which is not in flight"
            }
            return nil
        case let .control(control):
            switch control {
            case .started:
                resolveStart(nil)
            case let .startFailed(error):
                resolveStart(PluginError(.startFailed, String(error.prefix(2000))))
            case let .log(level, message):
                services.log(level: level, message: message)
            case let .call(id, call):
                answer(call, id: id, on: child)
            case .start, .stop, .result:
                return "a \(control.op) frame (only the host sends it)"
            case .hello, .loadFailed:
                return "a second \(control.op) frame (the child sends one, first)"
            case let .unknown(op):
                logger.warning("isolated plugin sent an unknown frame", metadata: ["plugin": "\(services.instanceName)", "op": "\(op.prefix(100))"])
            }
        }
        return nil
    }

    private func answer(_ call: Control.Call, id: Int, on child: Child) {
        switch call {
        case let .command(line, event):
            let services = services
            // A call made while the child handles a received message's event (the frame names the
            // event) carries that event's idempotency key, so a replay after a crash does not send twice.
            let send = !LocalServices.isSend(line) ? nil : event.flatMap { Int(exactly: $0) }.flatMap { seq in
                state.withLock { (state: inout State) -> LocalServices.Send? in
                    guard let itemId = state.inFlight.first(where: { $0.seq == seq })?.itemId else { return nil }
                    let ordinal = state.commandsIssued[seq, default: 0]
                    state.commandsIssued[seq] = ordinal + 1
                    return LocalServices.Send(itemId: itemId, ordinal: ordinal)
                }
            }
            guard child.beginCall(limit: limits.maxConcurrentCalls) else {
                let refused = state.withLock { (state: inout State) -> Int in
                    state.stats.refusedCalls += 1
                    return state.stats.refusedCalls
                }
                if refused == 1 || refused.isMultiple(of: 1000) {
                    logger.warning("isolated plugin has too many Chat API calls running; refusing more",
                                   metadata: ["plugin": "\(services.instanceName)", "limit": "\(limits.maxConcurrentCalls)", "refused": "\(refused)"])
                }
                child.writer.send(.result(id: id, .init(value: Self.tooManyCalls(limits.maxConcurrentCalls))))
                return
            }
            Task {
                let response = await services.run(line, send: send)
                child.endCall()
                child.writer.send(.result(id: id, .init(value: response)))
            }
        case let .storageGet(key):
            child.writer.send(.result(id: id, .init(value: services.storageGet(key))))
        case let .storageSet(key, value):
            child.writer.send(.result(id: id, .init(ok: services.storageSet(key, value))))
        case let .setCommands(json):
            child.writer.send(.result(id: id, .init(ok: services.setCommands(json))))
        case .unknown:
            child.writer.send(.result(id: id, .init()))
        }
    }

    /// The answer to a call over the limit: a Chat API error, as the plugin would get for any failure.
    static func tooManyCalls(_ limit: Int) -> String {
        #"{"type":"chatCmdError","chatError":{"type":"error","errorType":{"type":"commandError","message":"too many Chat API calls running at once (the limit is \#(limit))"}}}"#
    }

    private func childExited(_ child: Child) {
        child.writer.close()
        let termination = child.process.waitUntilExit()
        let status = termination.status
        let signalled = if case .signal = termination { true } else { false }
        let (stopping, delay, lost, lostItem) = state.withLock { (state: inout State) -> (Bool, Duration, Int?, Int64?) in
            guard state.child === child else { return (true, .zero, nil, nil) }
            state.child = nil
            if state.stopping { return (true, .zero, nil, nil) }
            state.stats.crashes += 1
            // The event being handled may be what killed it: drop it, keep the rest.
            let dropped = state.inFlight.isEmpty ? nil : state.inFlight.removeFirst()
            let lost = dropped?.seq
            let crashedQuickly = ContinuousClock.now - state.childSince < Self.stableAfter
            let next = crashedQuickly ? state.lastDelay.map { min($0 * 2, backoff.max) } ?? backoff.initial : backoff.initial
            state.lastDelay = next
            state.restartDelay = next
            return (false, next, lost, dropped?.itemId)
        }
        resolveStart(PluginError(.crashed, "the plugin process exited (\(signalled ? "signal" : "status") \(status)) while starting"))
        guard !stopping else { return }
        logger.error("isolated plugin crashed; restarting", metadata: [
            "plugin": "\(services.instanceName)", signalled ? "signal" : "status": "\(status)",
            "restart_in": "\(delay)", "dropped_event": "\(lost.map(String.init) ?? "none")",
        ])
        // A message the plugin crashed on is finished with (dropped): the mark moves past it, so
        // a restart of the host does not give it again to crash the plugin once more.
        if let lostItem { services.handled(itemId: lostItem) }
        if lost != nil { done(seq: lost!, error: "the plugin crashed while handling this event") }
        Task { await restart(after: delay) }
    }

    private func restart(after delay: Duration) async {
        try? await Task.sleep(for: delay)
        guard !state.withLock({ state in state.stopping }) else { return }
        do {
            let spawned = try await Spawned.spawn(path: path, runner: runnerExecutable, limits: limits, helloTimeout: max(timeout, .seconds(10)),
                                                  logger: logger, instance: services.instanceName)
            adopt(spawned)
            state.withLock { state in state.stats.restarts += 1 }
            if let error = await startChild() {
                logger.error("restarted plugin failed to start", metadata: ["plugin": "\(services.instanceName)", "error": "\(error)"])
                return  // its exit (or the next crash) schedules another restart
            }
            logger.notice("isolated plugin restarted", metadata: ["plugin": "\(services.instanceName)"])
        } catch {
            logger.error("cannot restart isolated plugin", metadata: ["plugin": "\(services.instanceName)", "error": "\(error)"])
            let next = state.withLock { (state: inout State) -> Duration in
                let d = min((state.restartDelay ?? backoff.initial) * 2, backoff.max)
                state.restartDelay = d
                state.lastDelay = d
                return d
            }
            Task { await restart(after: next) }
        }
    }

    func stop() async {
        let child = state.withLock { (state: inout State) -> Child? in
            state.stopping = true
            return state.child
        }
        services.timers.close()
        guard let child else { return }
        child.writer.send(.stop)
        let deadline = ContinuousClock.now + .seconds(5)
        while child.process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if child.process.isRunning {
            logger.warning("isolated plugin did not stop in 5 s; killing it", metadata: ["plugin": "\(services.instanceName)"])
            child.process.signal(SIGKILL)
        }
        let waiters = state.withLock { (state: inout State) -> [CheckedContinuation<Void, Never>] in
            defer { state.drainWaiters.removeAll() }
            return state.drainWaiters
        }
        waiters.forEach { $0.resume() }
        let services = services
        await Blocking.run("plugin-marks-flush") { services.flushMarks() }
    }
}

/// Where the child's output reader reports a violation (an over-long line): the runner once it
/// has adopted the child, and until then a plain kill.
final class ViolationSink: Sendable {
    private let handler = Mutex<(@Sendable (String) -> Void)?>(nil)
    private let process: SpawnedProcess

    init(process: SpawnedProcess) { self.process = process }

    func set(_ h: @escaping @Sendable (String) -> Void) { handler.withLock { $0 = h } }

    func report(_ reason: String) {
        if let h = handler.withLock({ $0 }) { h(reason) } else { process.signal(SIGKILL) }
    }
}

/// A child process that has loaded the plugin and sent its descriptor.
struct Spawned: @unchecked Sendable {
    let process: SpawnedProcess
    let writer: ChildInput
    let reader: FrameReader
    let info: PluginInfo
    let violations: ViolationSink

    /// What an isolated child inherits of the host's environment: only what a program needs to
    /// run (its search paths, home, locale, time zone, temporary directory) — never the host's
    /// secrets (database URLs and passwords, tokens, `${ENV}` values of the configuration).
    static let inheritedVariables: Set<String> = ["PATH", "LD_LIBRARY_PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TMPDIR"]

    static func childEnvironment(_ host: [String: String]) -> [String: String] {
        host.filter { inheritedVariables.contains($0.key) }
    }

    static func spawn(path: String, runner: URL, limits: PluginSpec.IsolationLimits = .init(), helloTimeout: Duration = .seconds(10),
                      logger: Logger, instance: String) async throws -> Spawned {
        guard FileManager.default.isExecutableFile(atPath: runner.path) else {
            throw PluginLoadError(code: .notLoadable, path: path, message: "isolation: process needs \(runner.path), which is missing (build the swiftplex-plugin-runner product)")
        }
        // A child that dies while its stdin has bytes queued must give the writer thread EPIPE,
        // not kill the host.
        signal(SIGPIPE, SIG_IGN)
        // Swift's crash backtracer symbolicates for seconds before the process exits; a plugin
        // crash should be noticed (EOF on the pipe) and restarted at once. The host logs the signal.
        var environment = Self.childEnvironment(ProcessInfo.processInfo.environment)
        environment["SWIFT_BACKTRACE"] = "enable=no"
        // posix_spawn with closefrom in the child (SpawnedProcess), not Foundation's Process.run(),
        // which can crash the host when many descriptors are open.
        let process: SpawnedProcess
        do {
            process = try SpawnedProcess(runner.path, [path], environment: environment)
        } catch {
            throw PluginLoadError(code: .notLoadable, path: path, message: "isolation: cannot start \(runner.path): \(error)")
        }
        // The SpawnedProcess keeps the parent's pipe ends (and so their descriptors) alive.
        let toChild = process.standardInput!, fromChild = process.standardOutput!, errors = process.standardError!
        let writer = ChildInput(fd: toChild.fileDescriptor, limit: limits.maxPendingInputBytes)
        let reader = FrameReader(fd: fromChild.fileDescriptor, maxLength: limits.maxFrameBytes)
        let violations = ViolationSink(process: process)
        forwardStderr(errors, maxLine: limits.maxOutputLineBytes, logger: logger, instance: instance, violations: violations)
        // A child that never says hello (or says it slowly, byte by byte) is killed: the read ends.
        let answered = NIOLockedValueBox(false)
        let seconds = Double(helloTimeout.components.seconds) + Double(helloTimeout.components.attoseconds) / 1e18
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
            if !answered.withLockedValue({ $0 }) { process.signal(SIGKILL) }
        }
        let first: Frame
        do {
            first = try await withCheckedThrowingContinuation { cont in
                Thread.detachNewThread {
                    do { cont.resume(returning: try reader.next()) } catch {
                        cont.resume(throwing: PluginLoadError(code: .notLoadable, path: path, message: "the plugin runner exited before it said hello (\(error))"))
                    }
                }
            }
            answered.withLockedValue { $0 = true }
        } catch {
            answered.withLockedValue { $0 = true }
            process.signal(SIGKILL)
            writer.close()
            await Blocking.run("plugin-reap") { _ = process.waitUntilExit() }
            throw error
        }
        func refuse(_ message: String) async -> PluginLoadError {
            process.signal(SIGKILL)
            writer.close()
            await Blocking.run("plugin-reap") { _ = process.waitUntilExit() }
            return PluginLoadError(code: .notLoadable, path: path, message: message)
        }
        switch first {
        case let .control(.hello(info)):
            return Spawned(process: process, writer: writer, reader: reader, info: info, violations: violations)
        case let .control(.loadFailed(code, error)):
            writer.close()
            await Blocking.run("plugin-reap") { _ = process.waitUntilExit() }
            let code: PluginLoadError.Code = switch code {
            case "fileNotFound": .fileNotFound
            case "missingEntryPoint": .missingEntryPoint
            case "abiMismatch": .abiMismatch
            case "badDescriptor": .badDescriptor
            default: .notLoadable
            }
            throw PluginLoadError(code: code, path: path, message: String(error.prefix(2000)))
        default:
            throw await refuse("the plugin runner did not say hello")
        }
    }

    /// Logs what the plugin writes to stdout/stderr, line by line, under its instance name. A line
    /// longer than `maxLine` bytes is not collected: the child is reported (and killed) instead.
    static func forwardStderr(_ handle: FileHandle, maxLine: Int, logger: Logger, instance: String, violations: ViolationSink) {
        Thread.detachNewThread {
            var buffer = Data()
            var reported = false
            // Read with read(2), not `FileHandle.availableData`: Foundation's traps on EINTR, and
            // a signal (a child's SIGCHLD, say) landing on this thread would take the host down.
            let fd = handle.fileDescriptor
            var bytes = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0, errno == EINTR { continue }
                if n <= 0 { break }
                let chunk = Data(bytes[0..<n])
                if reported { continue }  // drain until the killed child's pipe closes
                buffer.append(chunk)
                while let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...nl)
                    logger.info("\(line)", metadata: ["plugin": "\(instance)", "stream": "output"])
                }
                if buffer.count > maxLine {
                    buffer = Data()
                    reported = true
                    violations.report("an output line longer than \(maxLine) bytes")
                }
            }
        }
    }
}
