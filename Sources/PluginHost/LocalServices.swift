import Foundation
import Logging
import NIOConcurrencyHelpers

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
    private let storage: PluginStorage
    /// Whether handled received items move the instance's mark (the host has a ``ReceivedItemFeed``).
    private let keepsMark: Bool
    /// The received item whose event the instance is handling now (in-process) and how many
    /// commands it has issued for it.
    private let handling = NIOLockedValueBox<(itemId: Int64, commands: Int)?>(nil)
    private let logger: Logger
    let timers: PluginTimers
    private let commandsChanged: @Sendable (String, [[String: String]]) -> Void

    init(instanceName: String, runCommand: @escaping KeyedCommandRunner, storage: PluginStorage, logger: Logger, keepsMark: Bool = false,
         deliverTimer: @escaping @Sendable (String) -> Void,
         commandsChanged: @escaping @Sendable (String, [[String: String]]) -> Void) {
        self.instanceName = instanceName
        self.keepsMark = keepsMark
        self.runCommand = runCommand
        self.storage = storage
        self.logger = logger
        self.commandsChanged = commandsChanged
        timers = PluginTimers(fire: deliverTimer)
    }

    // MARK: Crash safety

    /// The idempotency key of the `ordinal`-th send (from 0) issued while handling the event of
    /// received item `itemId`: the same on a replay of that event after a crash.
    func idempotencyKey(itemId: Int64, ordinal: Int) -> String { "\(instanceName):\(itemId):\(ordinal)" }

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

    /// The instance finished handling the event of received item `itemId`: its mark moves there.
    func handled(itemId: Int64) {
        guard keepsMark else { return }
        do { try storage.setHandledMark(instance: instanceName, itemId: itemId) } catch {
            logger.error("cannot record the plugin's dispatch mark", metadata: ["plugin": "\(instanceName)", "error": "\(error)"])
        }
    }

    /// Runs a command with a key (for an isolated child's call made while handling an event).
    func run(_ line: String, idempotencyKey: String?) async -> String {
        await runCommand(line, idempotencyKey)
    }

    func command(_ line: String) -> String {
        let result = NIOLockedValueBox<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let run = runCommand
        let key = !Self.isSend(line) ? nil : handling.withLockedValue { h -> String? in
            guard let current = h else { return nil }
            h!.commands += 1
            return idempotencyKey(itemId: current.itemId, ordinal: current.commands)
        }
        Task {
            let r = await run(line, key)
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
        guard let data = json.data(using: .utf8),
              let list = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]] else { return false }
        var commands: [[String: String]] = []
        for item in list {
            guard let keyword = item["keyword"] as? String, !keyword.isEmpty else { return false }
            commands.append(["keyword": keyword, "label": item["label"] as? String ?? keyword])
        }
        commandsChanged(instanceName, commands)
        return true
    }
}
