import Foundation
import Logging
import NIOConcurrencyHelpers
import Synchronization

/// How one configured plugin instance should run.
public struct PluginSpec: Sendable {
    public enum Isolation: String, Sendable { case inProcess = "in-process", process }

    public struct Backoff: Sendable, Equatable {
        public var initial: Duration
        public var max: Duration
        public init(initial: Duration, max: Duration) {
            self.initial = initial
            self.max = max
        }
    }

    /// Bounds on what an isolated child may make the host hold or do (`isolation: process` only).
    public struct IsolationLimits: Sendable, Equatable, CustomStringConvertible {
        /// The largest frame the child may send (a bigger one is a protocol error).
        public var maxFrameBytes: Int
        /// The longest line of the child's own output (stderr) the host collects before it
        /// treats the child as broken.
        public var maxOutputLineBytes: Int
        /// Chat API commands one child may have running at once; more are answered with an error.
        public var maxConcurrentCalls: Int
        /// Bytes queued for the child's stdin before a child that does not read is treated as hung.
        public var maxPendingInputBytes: Int

        public init(maxFrameBytes: Int = 8 << 20, maxOutputLineBytes: Int = 16 << 10, maxConcurrentCalls: Int = 16,
                    maxPendingInputBytes: Int = 64 << 20) {
            self.maxFrameBytes = maxFrameBytes
            self.maxOutputLineBytes = maxOutputLineBytes
            self.maxConcurrentCalls = maxConcurrentCalls
            self.maxPendingInputBytes = maxPendingInputBytes
        }

        public var description: String {
            "frame≤\(maxFrameBytes) line≤\(maxOutputLineBytes) calls≤\(maxConcurrentCalls) input≤\(maxPendingInputBytes)"
        }
    }

    /// Instance name, unique in the host (`greeter-en`).
    public var name: String
    /// The shared object's file path, resolved.
    public var path: String
    public var isolation: Isolation
    public var timeout: Duration
    public var queueLimit: Int
    public var backoff: Backoff
    public var limits: IsolationLimits
    /// Text that changes whenever the instance's configuration changes (reload compares it).
    public var configFingerprint: String
    /// Validates the instance's `config:` against the loaded plugin's schema; returns its JSON.
    public var configure: @Sendable (PluginInfo) -> Result<String, PluginError>

    public init(name: String, path: String, isolation: Isolation = .inProcess, timeout: Duration = .seconds(5),
                queueLimit: Int = 1000, backoff: Backoff = Backoff(initial: .seconds(1), max: .seconds(60)),
                configFingerprint: String, limits: IsolationLimits = IsolationLimits(),
                configure: @escaping @Sendable (PluginInfo) -> Result<String, PluginError>) {
        self.limits = limits
        self.name = name
        self.path = path
        self.isolation = isolation
        self.timeout = timeout
        self.queueLimit = queueLimit
        self.backoff = backoff
        self.configFingerprint = configFingerprint
        self.configure = configure
    }
}

/// What happened to one instance when a configuration was applied.
public enum PluginOutcome: Sendable, CustomStringConvertible {
    case started(PluginInfo)
    case unchanged
    case stopped
    /// Did not start; nothing of it runs.
    case failed(any Error & Sendable)
    /// The new version failed; the previous one runs again.
    case rolledBack(any Error & Sendable)

    public var description: String {
        switch self {
        case let .started(info): "started \(info.name) \(info.version)"
        case .unchanged: "unchanged"
        case .stopped: "stopped"
        case let .failed(e): "failed: \(e)"
        case let .rolledBack(e): "new version failed (\(e)); rolled back to the previous one"
        }
    }

    public var isFailure: Bool {
        switch self {
        case .failed, .rolledBack: true
        default: false
        }
    }
}

/// A running instance as `status` shows it.
public struct PluginStatus: Sendable {
    public var name: String
    public var info: PluginInfo
    public var isolation: PluginSpec.Isolation
    public var stats: PluginStats
    /// What the instance is doing now.
    public var condition: PluginCondition
    /// Events waiting for the instance or being handled.
    public var queueDepth: Int
}

/// Loads plugin instances, keeps them running, and dispatches events to them in order.
///
/// Each instance has its own queue (a thread in process, or a child process), so a slow or
/// hung plugin delays only itself. `apply` is both the first load and a reload: changed
/// instances are stopped, loaded and started again, and rolled back to the old version if the
/// new one fails; unchanged ones keep running without a hiccup.
public final class PluginManager: Sendable {
    private let storage: PluginStorage
    private let runCommand: KeyedCommandRunner
    private let feed: ReceivedItemFeed?
    /// Whether the engine can be reached now, and its gaps so far (for the instances' marks).
    private let reachability = EngineReachability()
    private let runnerExecutable: URL
    private let logger: Logger
    private let commandsChanged: @Sendable ([[String: String]]) -> Void
    private let slots = NIOLockedValueBox<[Slot]>([])
    private let menus = NIOLockedValueBox<[String: [[String: String]]]>([:])
    private let applying = AsyncSerial()

    /// - Parameters:
    ///   - runCommand: runs a Chat API command as the bot.
    ///   - runnerExecutable: the `swiftplex-plugin-runner` binary for `isolation: process`.
    ///   - commandsChanged: receives the merged bot command menu whenever a plugin publishes one.
    public convenience init(storage: PluginStorage, runCommand: @escaping CommandRunner, runnerExecutable: URL, logger: Logger,
                            commandsChanged: @escaping @Sendable ([[String: String]]) -> Void = { _ in }) {
        self.init(storage: storage, runKeyedCommand: { line, _ in await runCommand(line) }, feed: nil,
                  runnerExecutable: runnerExecutable, logger: logger, commandsChanged: commandsChanged)
    }

    /// - Parameters:
    ///   - runKeyedCommand: runs a Chat API command as the bot, with the idempotency key of the
    ///     received message being handled (nil for none).
    ///   - feed: the engine's received messages. With one, each instance keeps a durable mark (the
    ///     last received message it finished handling, in `plugins.db`); at start it is given the
    ///     received messages after its mark before any live event, and no live message twice.
    public init(storage: PluginStorage, runKeyedCommand: @escaping KeyedCommandRunner, feed: ReceivedItemFeed?, runnerExecutable: URL,
                logger: Logger, commandsChanged: @escaping @Sendable ([[String: String]]) -> Void = { _ in }) {
        self.storage = storage
        self.runCommand = runKeyedCommand
        self.feed = feed
        self.runnerExecutable = runnerExecutable
        self.logger = logger
        self.commandsChanged = commandsChanged
    }

    /// Routes one event (its `type` and JSON text) to every instance that wants it, in order.
    /// `receivedItemId` is the received chat item a `newChatItems` event announces (nil for other
    /// events): an instance that has it already (from a replay) does not get it again.
    public func dispatch(type: String, json: String, receivedItemId: Int64? = nil) {
        for slot in slots.withLockedValue({ $0 }) where slot.info.wants(type) {
            slot.deliver(json, itemId: receivedItemId)
        }
    }

    /// The engine became unreachable (a WebSocket engine's connection dropped): the events it
    /// sends until ``engineConnectionRestored()`` are gone. Each instance that keeps a mark
    /// stops taking live received messages, which it reads from the store once the engine is back.
    public func engineConnectionLost() {
        reachability.lost()
        for slot in slots.withLockedValue({ $0 }) { slot.connectionLost() }
    }

    /// The engine is reachable again: each instance reads the received messages after the last one
    /// it was given back from the engine, then takes live events again.
    public func engineConnectionRestored() {
        reachability.restored()
        for slot in slots.withLockedValue({ $0 }) { slot.connectionRestored() }
    }

    /// Whether every instance has caught up with the received messages it had missed.
    public var caughtUp: Bool {
        slots.withLockedValue { $0 }.allSatisfy { !$0.isCatchingUp }
    }

    /// Waits until every instance has handled what it was given.
    public func drain() async {
        for slot in slots.withLockedValue({ $0 }) { await slot.runner.drain() }
    }

    public func statuses() -> [PluginStatus] {
        slots.withLockedValue { $0 }.map { slot in
            let runner = slot.runner
            let condition = runner.condition == .running && slot.isCatchingUp ? .catchingUp : runner.condition
            return PluginStatus(name: slot.spec.name, info: slot.info, isolation: slot.spec.isolation, stats: runner.stats,
                                condition: condition, queueDepth: runner.queued)
        }
    }

    /// Reports handlers running past their timeouts (and kills hung isolated plugins) until cancelled.
    public func runWatchdog(every interval: Duration = .milliseconds(200)) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            let now = ContinuousClock.now
            for slot in slots.withLockedValue({ $0 }) {
                (slot.runner as? InProcessRunner)?.checkTimeout(now: now)
                (slot.runner as? IsolatedRunner)?.checkTimeout(now: now)
            }
        }
    }

    /// Brings the running instances in line with `specs` and reports each instance's outcome.
    @discardableResult
    public func apply(_ specs: [PluginSpec]) async -> [(name: String, outcome: PluginOutcome)] {
        await applying.run { await self.applyNow(specs) }
    }

    /// Stops every instance.
    public func stopAll() async {
        _ = await apply([])
    }

    private func applyNow(_ specs: [PluginSpec]) async -> [(name: String, outcome: PluginOutcome)] {
        var results: [(String, PluginOutcome)] = []
        let current = slots.withLockedValue { $0 }
        let wanted = Set(specs.map(\.name))
        for old in current where !wanted.contains(old.spec.name) {
            old.remove()
            await old.runner.stop()
            slots.withLockedValue { $0.removeAll { $0 === old } }
            clearMenu(old.spec.name)
            logger.info("plugin stopped", metadata: ["plugin": "\(old.spec.name)"])
            results.append((old.spec.name, .stopped))
        }
        for spec in specs {
            let fingerprint = Self.fingerprint(spec)
            if let old = current.first(where: { $0.spec.name == spec.name }) {
                if old.fingerprint == fingerprint {
                    results.append((spec.name, .unchanged))
                    continue
                }
                results.append((spec.name, await replace(old, with: spec, fingerprint: fingerprint)))
            } else {
                switch await launch(spec) {
                case let .success(runner):
                    let slot = Slot(spec: spec, fingerprint: fingerprint, runner: runner)
                    let from = feed == nil ? nil : await startMark(spec.name, wantsMessages: runner.info.wants("newChatItems"))
                    if let from, let feed {
                        slot.beginCatchUp(from: from)
                        // A received message its full queue refuses, and what it missed while the
                        // engine could not be reached, is read again from the store.
                        slot.setCatchUpHandler { [weak self, weak slot] after in
                            guard let self, let slot else { return }
                            Task { await self.catchUp(slot, from: after, feed: feed) }
                        }
                    }
                    slots.withLockedValue { $0.append(slot) }
                    if let from, let feed { Task { await self.catchUp(slot, from: from, feed: feed) } }
                    logger.info("plugin started", metadata: ["plugin": "\(spec.name)", "version": "\(runner.info.version)", "isolation": "\(spec.isolation.rawValue)"])
                    results.append((spec.name, .started(runner.info)))
                case let .failure(error):
                    logger.error("plugin not started", metadata: ["plugin": "\(spec.name)", "error": "\(error)"])
                    results.append((spec.name, .failed(error)))
                }
            }
        }
        // Keep dispatch order equal to the configuration's order.
        let order = Dictionary(uniqueKeysWithValues: specs.enumerated().map { ($1.name, $0) })
        slots.withLockedValue { $0.sort { order[$0.spec.name, default: .max] < order[$1.spec.name, default: .max] } }
        publishMenu()
        return results
    }

    /// Stop → load → start; on failure start the old version again.
    private func replace(_ old: Slot, with spec: PluginSpec, fingerprint: String) async -> PluginOutcome {
        let previous = old.spec
        let previousFingerprint = old.fingerprint
        old.holdEvents()
        await old.runner.stop()
        clearMenu(spec.name)
        switch await launch(spec) {
        case let .success(runner):
            old.resume(with: runner, spec: spec, fingerprint: fingerprint)
            logger.info("plugin reloaded", metadata: ["plugin": "\(spec.name)", "version": "\(runner.info.version)"])
            return .started(runner.info)
        case let .failure(error):
            logger.error("reloaded plugin failed; rolling back", metadata: ["plugin": "\(spec.name)", "error": "\(error)"])
            switch await launch(previous) {
            case let .success(runner):
                old.resume(with: runner, spec: previous, fingerprint: previousFingerprint)
                return .rolledBack(error)
            case let .failure(second):
                logger.error("rollback failed too; plugin stopped", metadata: ["plugin": "\(spec.name)", "error": "\(second)"])
                old.remove()
                slots.withLockedValue { $0.removeAll { $0 === old } }
                return .failed(error)
            }
        }
    }

    private func launch(_ spec: PluginSpec) async -> Result<any PluginRunner, any Error & Sendable> {
        let slotRef = RunnerRef()
        let services = LocalServices(
            instanceName: spec.name, runCommand: runCommand, storage: storage, logger: logger, keepsMark: feed != nil,
            reachability: reachability, deliverTimer: { json in _ = slotRef.runner?.deliver(json) },
            commandsChanged: { [weak self] name, menu in self?.setMenu(name, menu) })
        let runner: any PluginRunner
        do {
            switch spec.isolation {
            case .inProcess:
                let library = try PluginLibrary.load(path: spec.path)
                runner = InProcessRunner(library: library, services: services, queueLimit: spec.queueLimit, timeout: spec.timeout, logger: logger)
            case .process:
                runner = try await IsolatedRunner.launch(path: spec.path, runnerExecutable: runnerExecutable, services: services,
                                                         queueLimit: spec.queueLimit, timeout: spec.timeout,
                                                         backoff: (spec.backoff.initial, spec.backoff.max), limits: spec.limits, logger: logger)
            }
        } catch let e as PluginLoadError {
            return .failure(e)
        } catch {
            return .failure(PluginLoadError(code: .notLoadable, path: spec.path, message: "\(error)"))
        }
        switch spec.configure(runner.info) {
        case let .failure(error):
            await runner.stop()
            return .failure(error)
        case let .success(config):
            slotRef.runner = runner
            if let error = await runner.start(configJSON: config) {
                await runner.stop()
                return .failure(error)
            }
            return .success(runner)
        }
    }

    // MARK: Replay

    /// Where an instance's replay starts: its mark, or for a new instance the newest item now
    /// (recorded as its mark: it gets no history). Nil when there is nothing to replay (an
    /// instance that does not take messages: its mark is kept at the newest item) or the store
    /// cannot say.
    private func startMark(_ name: String, wantsMessages: Bool) async -> Int64? {
        guard let feed else { return nil }
        do {
            if wantsMessages, let mark = try await storage.handledMark(instance: name) { return mark }
            let newest = try await feed.lastItemId()
            if !wantsMessages {
                try await storage.setHandledMark(instance: name, itemId: newest)
                return nil
            }
            try await storage.setHandledMark(instance: name, itemId: newest)
            return newest
        } catch {
            logger.error("cannot read the plugin's dispatch mark; it gets live events only", metadata: ["plugin": "\(name)", "error": "\(error)"])
            return nil
        }
    }

    /// Gives an instance the received messages after its mark, in id order, a page at a time
    /// (waiting for its queue between pages), then switches it to live events. Live messages
    /// that arrive meanwhile are taken from the store instead; other live events wait.
    private func catchUp(_ slot: Slot, from mark: Int64, feed: ReceivedItemFeed) async {
        // One reader per instance; one asked for while another runs is started when it ends.
        guard slot.beginReading() else { return }
        let name = slot.spec.name
        var last = mark
        var replayed = 0
        defer {
            if replayed > 0 {
                logger.notice("gave the plugin received messages from the store (missed before a restart, while the engine was unreachable, or refused by its full queue)",
                              metadata: ["plugin": "\(name)", "messages": "\(replayed)"])
            }
            if let again = slot.endReading() { Task { await self.catchUp(slot, from: again, feed: feed) } }
        }
        let page = max(1, min(100, slot.spec.queueLimit))
        // While the engine is unreachable, the reading stops; it starts again from the last
        // message given once the engine is back (``Slot/connectionRestored()``).
        while !slot.isRemoved, !slot.isInGap {
            // Every live message seen before this read was stored before it: the read sees it.
            let seen = slot.liveSeenNow
            let events: [(itemId: Int64, json: String)]
            do {
                events = try await feed.eventsAfter(last, page)
            } catch {
                if slot.isInGap { return }
                logger.error("cannot read received messages to replay; the plugin gets live events only",
                             metadata: ["plugin": "\(name)", "error": "\(error)"])
                slot.endCatchUp(at: last)
                return
            }
            if events.isEmpty {
                last = max(last, seen)  // nothing left up to there (such a message may have been deleted)
                if slot.endCatchUp(ifNothingAfter: last) { break }
                continue
            }
            await slot.runner.drain()
            for event in events {
                var tries = 0
                while !slot.runner.deliver(event.json, itemId: event.itemId), !slot.isRemoved, tries < 100 {
                    tries += 1
                    await slot.runner.drain()
                }
                last = event.itemId
                replayed += 1
            }
            slot.caughtUp(to: last)
        }
    }

    /// Identity of what an instance runs: the spec, and the file as it is on disk now.
    private static func fingerprint(_ spec: PluginSpec) -> String {
        let attributes = try? FileManager.default.attributesOfItem(atPath: spec.path)
        let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        let size = attributes?[.size] as? Int ?? -1
        return "\(spec.path)|\(modified)|\(size)|\(spec.isolation)|\(spec.timeout)|\(spec.queueLimit)|\(spec.backoff)|\(spec.limits)|\(spec.configFingerprint)"
    }

    private func setMenu(_ name: String, _ menu: [[String: String]]) {
        menus.withLockedValue { $0[name] = menu }
        publishMenu()
    }

    private func clearMenu(_ name: String) {
        menus.withLockedValue { $0[name] = nil }
    }

    private func publishMenu() {
        let names = slots.withLockedValue { $0.map(\.spec.name) }
        let all = menus.withLockedValue { m in names.flatMap { m[$0] ?? [] } }
        commandsChanged(all)
    }
}

/// One instance in the dispatch list: its spec and runner, and its ``SlotState`` (held during a
/// reload, catching up from the store, in a gap of the engine's connection) under one lock. While it
/// is being reloaded its events wait, then go, in order and before any newer event, to whichever
/// runner comes next, so a reload loses nothing.
final class Slot: Sendable {
    private struct Locked {
        var spec: PluginSpec
        var fingerprint: String
        var machine: SlotState<any PluginRunner>
        /// Starts a reader of the store from a mark (after an overflow, or a gap in the engine's connection).
        var catchUpHandler: (@Sendable (Int64) -> Void)?
    }

    private let state: Mutex<Locked>

    var spec: PluginSpec { state.withLock { $0.spec } }
    var fingerprint: String { state.withLock { $0.fingerprint } }
    var runner: any PluginRunner { state.withLock { $0.machine.runner } }
    var info: PluginInfo { runner.info }
    var isCatchingUp: Bool { state.withLock { $0.machine.catchingUp } }
    var isRemoved: Bool { state.withLock { $0.machine.removed } }
    var liveSeenNow: Int64 { state.withLock { $0.machine.liveSeen } }
    var isInGap: Bool { state.withLock { $0.machine.gap } }

    init(spec: PluginSpec, fingerprint: String, runner: any PluginRunner) {
        state = Mutex(Locked(spec: spec, fingerprint: fingerprint, machine: SlotState(runner: runner, queueLimit: spec.queueLimit)))
    }

    func deliver(_ json: String, itemId: Int64?) {
        guard case let .toRunner(runner, previous) = state.withLock({ $0.machine.deliver(json, itemId: itemId) }) else { return }
        if !runner.deliver(json, itemId: itemId), let itemId { overflowed(itemId, after: previous) }
    }

    /// How the slot starts a catch-up from a mark (after an overflow, or a gap in the engine's connection).
    func setCatchUpHandler(_ handler: @escaping @Sendable (Int64) -> Void) {
        state.withLock {
            $0.catchUpHandler = handler
            $0.machine.canCatchUp = true
        }
    }

    /// The runner's queue refused received message `itemId`: the slot catches up from the store
    /// after `previous` (once the queue has drained) instead of losing it.
    private func overflowed(_ itemId: Int64, after previous: Int64) {
        let handler = state.withLock { $0.machine.overflowed(itemId, after: previous) ? $0.catchUpHandler : nil }
        handler?(previous)
    }

    /// The host lost its connection to the engine (``SlotState/connectionLost(handledMark:)``).
    func connectionLost() {
        state.withLock { s in
            let handled = s.machine.runner.handledMark
            s.machine.connectionLost(handledMark: handled)
        }
    }

    /// The connection is back: the instance reads what it missed from the store, from the last
    /// received message it was given (at once, or when the reader still running ends).
    func connectionRestored() {
        let (handler, from) = state.withLock { s -> ((@Sendable (Int64) -> Void)?, Int64) in
            guard let mark = s.machine.connectionRestored() else { return (nil, 0) }
            return (s.catchUpHandler, mark)
        }
        // A reader still running is asked to read again instead (``beginReading()``).
        handler?(from)
    }

    /// A catch-up reader starts; false if one already runs (it is asked to read again instead).
    func beginReading() -> Bool { state.withLock { $0.machine.beginReading() } }

    /// The reader ends; the mark to read after if another is wanted (the catch-up is still on).
    func endReading() -> Int64? { state.withLock { $0.machine.endReading() } }

    func beginCatchUp(from mark: Int64) { state.withLock { $0.machine.beginCatchUp(from: mark) } }

    func caughtUp(to itemId: Int64) { state.withLock { $0.machine.caughtUp(to: itemId) } }

    /// Ends the catch-up unless a live received message newer than `last` came in since it was
    /// last read (it is then read from the store first). Events that waited go to the runner,
    /// under the lock, so that no live event overtakes them.
    func endCatchUp(ifNothingAfter last: Int64) -> Bool {
        state.withLock { s in
            guard let (runner, waiting) = s.machine.endCatchUp(ifNothingAfter: last) else { return false }
            for json in waiting { _ = runner.deliver(json, itemId: nil) }
            return true
        }
    }

    /// Ends the catch-up whatever came in (the store cannot be read).
    func endCatchUp(at last: Int64) {
        state.withLock { s in
            guard let (runner, waiting) = s.machine.endCatchUp(at: last) else { return }
            for json in waiting { _ = runner.deliver(json, itemId: nil) }
        }
    }

    func remove() { state.withLock { $0.machine.remove() } }

    func holdEvents() { state.withLock { $0.machine.holdEvents() } }

    /// Installs the next runner and gives it the events that waited, before any newer one.
    func resume(with runner: any PluginRunner, spec: PluginSpec, fingerprint: String) {
        state.withLock { s in
            s.spec = spec
            s.fingerprint = fingerprint
            s.machine.queueLimit = spec.queueLimit
            for event in s.machine.resume(with: runner) { _ = runner.deliver(event.json, itemId: event.itemId) }
        }
    }
}

/// Late binding from an instance's timers to its runner.
final class RunnerRef: Sendable {
    private let current = Mutex<(any PluginRunner)?>(nil)
    var runner: (any PluginRunner)? {
        get { current.withLock { $0 } }
        set { current.withLock { $0 = newValue } }
    }
}

/// Runs async operations one at a time, in the order they arrive.
final class AsyncSerial: Sendable {
    private let tail = NIOLockedValueBox<Task<Void, Never>?>(nil)

    func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T {
        let box = NIOLockedValueBox<T?>(nil)
        let task = tail.withLockedValue { tail -> Task<Void, Never> in
            let previous = tail
            let t = Task {
                await previous?.value
                let r = await body()
                box.withLockedValue { $0 = r }
            }
            tail = t
            return t
        }
        await task.value
        return box.withLockedValue { $0! }
    }
}

/// Whether a chat engine in another process can be reached, and how many times it could not.
/// A command that ran across a change (``unbroken(since:)`` false) may or may not have happened.
final class EngineReachability: Sendable {
    struct Moment: Sendable, Equatable {
        var reachable = true
        var gaps = 0
    }

    private let state = NIOLockedValueBox(Moment())

    var now: Moment { state.withLockedValue { $0 } }

    func lost() { state.withLockedValue { $0.reachable = false; $0.gaps += 1 } }

    func restored() { state.withLockedValue { $0.reachable = true } }

    /// The engine could be reached at `moment` and has been all along since.
    func unbroken(since moment: Moment) -> Bool {
        moment.reachable && state.withLockedValue { $0 } == moment
    }
}
