import Foundation
import Logging
import NIOConcurrencyHelpers

/// Runs a Chat API command as the bot and returns its response JSON text.
public typealias CommandRunner = @Sendable (String) async -> String

/// The host callbacks of one instance, answered in the host process: commands through the Chat
/// API, storage in `plugins.db`, timers on the instance's queue, log lines under its name.
final class LocalServices: HostServices, @unchecked Sendable {
    let instanceName: String
    private let runCommand: CommandRunner
    private let storage: PluginStorage
    private let logger: Logger
    let timers: PluginTimers
    private let commandsChanged: @Sendable (String, [[String: String]]) -> Void

    init(instanceName: String, runCommand: @escaping CommandRunner, storage: PluginStorage, logger: Logger,
         deliverTimer: @escaping @Sendable (String) -> Void,
         commandsChanged: @escaping @Sendable (String, [[String: String]]) -> Void) {
        self.instanceName = instanceName
        self.runCommand = runCommand
        self.storage = storage
        self.logger = logger
        self.commandsChanged = commandsChanged
        timers = PluginTimers(fire: deliverTimer)
    }

    func command(_ line: String) -> String {
        let result = NIOLockedValueBox<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        let run = runCommand
        Task {
            let r = await run(line)
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
