import Foundation
import Logging
import NIOConcurrencyHelpers
import SwiftplexBase
import Synchronization

/// Runs a Chat API command as the bot and returns its response JSON text.
public typealias CommandRunner = @Sendable (String) async -> String

/// Runs a Chat API command as the bot with an idempotency key (nil for none): a `/_send` run
/// again with the same key sends nothing and answers with the items of the first run
/// (`ChatAPI.execute(_:idempotencyKey:)`).
public typealias KeyedCommandRunner = @Sendable (_ line: String, _ idempotencyKey: String?) async -> String

/// Where the host finds received messages again after a restart: the engine's received chat
/// items, each as the `newChatItems` event it was announced with.
public struct ReceivedItemFeed: Sendable {
    /// The newest chat item id (where a new instance starts: it gets no history).
    public var lastItemId: @Sendable () async throws -> Int64
    /// The events of received items after an id, oldest first, at most `limit`.
    public var eventsAfter: @Sendable (_ itemId: Int64, _ limit: Int) async throws -> [(itemId: Int64, json: String)]

    public init(lastItemId: @escaping @Sendable () async throws -> Int64,
                eventsAfter: @escaping @Sendable (_ itemId: Int64, _ limit: Int) async throws -> [(itemId: Int64, json: String)]) {
        self.lastItemId = lastItemId
        self.eventsAfter = eventsAfter
    }
}

/// The host callbacks of one instance, answered in the host process: commands through the Chat
/// API, storage in `plugins.db`, timers on the instance's queue, log lines under its name.
final class LocalServices: HostServices, @unchecked Sendable {
    let instanceName: String
    private let runCommand: KeyedCommandRunner
    /// Whether the engine could be reached throughout a send (nil: the engine is in process).
    private let reachability: EngineReachability?
    private let storage: PluginStorage
    /// Writes the instance's mark when handled received items move it (the host has a
    /// ``ReceivedItemFeed``); nil otherwise.
    private let marks: MarkWriter?
    /// The received item whose event the instance is handling now (in-process) and how many
    /// commands it has issued for it.
    private let handling = NIOLockedValueBox<(itemId: Int64, commands: Int)?>(nil)
    private let markState: NIOLockedValueBox<MarkState>

    private struct MarkState {
        /// Received items with a send that may not have happened, being handled.
        var unsure: Set<Int64> = []
        /// The oldest item handled without being done: no mark moves past it.
        var blockedAt: Int64?
        var lastHandled: Int64?
    }
    private let logger: Logger
    let timers: PluginTimers
    private let commandsChanged: @Sendable (String, [[String: String]]) -> Void

    init(instanceName: String, runCommand: @escaping KeyedCommandRunner, storage: PluginStorage, logger: Logger, keepsMark: Bool = false,
         reachability: EngineReachability? = nil,
         deliverTimer: @escaping @Sendable (String) -> Void,
         commandsChanged: @escaping @Sendable (String, [[String: String]]) -> Void) {
        self.instanceName = instanceName
        marks = keepsMark ? MarkWriter(instance: instanceName, storage: storage, logger: logger) : nil
        markState = NIOLockedValueBox(MarkState())
        self.runCommand = runCommand
        self.reachability = reachability
        self.storage = storage
        self.logger = logger
        self.commandsChanged = commandsChanged
        timers = PluginTimers(fire: deliverTimer)
    }

    // MARK: Crash safety

    /// The `ordinal`-th send (from 0) issued while handling the event of received item `itemId`.
    struct Send: Sendable {
        var itemId: Int64
        var ordinal: Int
    }

    /// The idempotency key of `send`: the same on a replay of that event after a crash.
    func idempotencyKey(_ send: Send) -> String { "\(instanceName):\(send.itemId):\(send.ordinal)" }

    /// Whether a command line is a `/_send` (only sends carry keys and are counted: other
    /// commands, such as a lookup the plugin caches, may differ between the first run and a replay).
    static func isSend(_ line: String) -> Bool {
        line.drop { $0.isWhitespace }.prefix { !$0.isWhitespace } == "/_send"
    }

    /// The in-process instance starts handling the event of received item `itemId` (nil: an event
    /// that is not replayed, whose commands carry no key).
    func beginHandling(itemId: Int64?) {
        handling.withLockedValue { $0 = itemId.map { ($0, 0) } }
    }

    func endHandling() {
        handling.withLockedValue { $0 = nil }
    }

    /// The instance finished handling the event of received item `itemId`: its mark moves there
    /// (written off the plugin's thread, soon after).
    ///
    /// A message one of whose sends may not have happened (the engine could not be reached) is
    /// not done: the mark stays below it, whatever is handled after it, until it is handled
    /// again with every send answered (the host gives it again once the engine is back).
    func handled(itemId: Int64) {
        let done = markState.withLockedValue { m -> Bool in
            if m.unsure.remove(itemId) != nil {
                m.blockedAt = min(m.blockedAt ?? itemId, itemId)
                return false
            }
            if let blocked = m.blockedAt {
                if itemId > blocked { return false }
                if itemId == blocked { m.blockedAt = nil }
            }
            m.lastHandled = max(m.lastHandled ?? itemId, itemId)
            return true
        }
        if done { marks?.record(itemId) }
    }

    /// The newest received item handled and done (in memory; the durable mark may lag it).
    var handledMark: Int64? { markState.withLockedValue { $0.lastHandled } }

    /// Waits until the marks recorded so far are written.
    func flushMarks() {
        marks?.flush()
    }

    /// Runs a command as the bot; `send` names the received message it answers (its key makes a
    /// replay send nothing twice). A send that ran while the engine could not be reached, or
    /// across a lost connection, may not have happened: that message is not done (``handled(itemId:)``).
    func run(_ line: String, send: Send?) async -> String {
        let before = reachability?.now
        let result = await runCommand(line, send.map(idempotencyKey))
        if let send, let reachability, let before, !reachability.unbroken(since: before) {
            markState.withLockedValue { _ = $0.unsure.insert(send.itemId) }
        }
        return result
    }

    func command(_ line: String) -> String {
        Blocking.willWait("a plugin's synchronous command call")
        let result = NIOLockedValueBox<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let send = !Self.isSend(line) ? nil : handling.withLockedValue { h -> Send? in
            guard let current = h else { return nil }
            h!.commands += 1
            return Send(itemId: current.itemId, ordinal: current.commands)
        }
        Task {
            let r = await self.run(line, send: send)
            result.withLockedValue { $0 = r }
            done.signal()
        }
        done.wait()
        return result.withLockedValue { $0 } ?? #"{"type":"chatCmdError","chatError":{"type":"error","errorType":{"type":"commandError","message":"no response"}}}"#
    }

    func log(level: Int32, message: String) {
        logger.log(level: Self.level(level), "\(message)", metadata: ["plugin": "\(instanceName)"])
    }

    static func level(_ l: Int32) -> Logger.Level {
        switch l {
        case ...0: .trace
        case 1: .debug
        case 2: .info
        case 3: .notice
        case 4: .warning
        case 5: .error
        default: .critical
        }
    }

    func storageGet(_ key: String) -> String? {
        do { return try storage.get(instance: instanceName, key: key) } catch {
            logger.error("plugin storage read failed", metadata: ["plugin": "\(instanceName)", "error": "\(error)"])
            return nil
        }
    }

    func storageSet(_ key: String, _ value: String?) -> Bool {
        do { try storage.set(instance: instanceName, key: key, value: value); return true } catch {
            logger.error("plugin storage write failed", metadata: ["plugin": "\(instanceName)", "error": "\(error)"])
            return false
        }
    }

    func timerStart(name: String, delayMs: UInt64, repeatMs: UInt64) -> UInt64 {
        timers.start(name: name, delayMs: delayMs, repeatMs: repeatMs)
    }

    func timerCancel(_ id: UInt64) -> Bool { timers.cancel(id) }

    func setCommands(_ json: String) -> Bool {
        guard let list = (try? JSONValue.parse(json))?.arrayValue else { return false }
        var commands: [[String: String]] = []
        for item in list {
            guard let keyword = item["keyword"]?.stringValue, !keyword.isEmpty else { return false }
            commands.append(["keyword": keyword, "label": item["label"]?.stringValue ?? keyword])
        }
        commandsChanged(instanceName, commands)
        return true
    }
}

/// Writes an instance's mark to `plugins.db` on a thread of its own, so the plugin's thread does
/// not wait for SQLite after every message, and coalesces bursts: while one write runs, newer
/// marks replace each other and the newest is written next. The mark may lag the handler by a
/// write; a crash then replays those messages (at least once, and their sends are deduplicated).
final class MarkWriter: Sendable {
    private let instance: String
    private let storage: PluginStorage
    private let logger: Logger
    private let queue: DispatchQueue
    /// The newest mark not yet written, and whether a write loop runs.
    private let state = Mutex<(pending: Int64?, writing: Bool)>((nil, false))

    init(instance: String, storage: PluginStorage, logger: Logger) {
        self.instance = instance
        self.storage = storage
        self.logger = logger
        queue = DispatchQueue(label: "swiftplex.plugin-mark")
    }

    func record(_ itemId: Int64) {
        let start = state.withLock { s -> Bool in
            s.pending = max(s.pending ?? itemId, itemId)
            if s.writing { return false }
            s.writing = true
            return true
        }
        if start { queue.async { self.writeLoop() } }
    }

    private func writeLoop() {
        while true {
            let next = state.withLock { s -> Int64? in
                defer { s.pending = nil }
                if s.pending == nil { s.writing = false }
                return s.pending
            }
            guard let next else { return }
            do { try storage.setHandledMark(instance: instance, itemId: next) } catch {
                logger.error("cannot record the plugin's dispatch mark", metadata: ["plugin": "\(instance)", "error": "\(error)"])
            }
        }
    }

    /// Returns once every mark recorded before the call is written.
    func flush() {
        Blocking.willWait("the plugin marks' flush")
        while true {
            queue.sync {}
            if state.withLock({ !$0.writing && $0.pending == nil }) { return }
        }
    }
}
