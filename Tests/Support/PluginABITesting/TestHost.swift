import CSwiftplexPlugin
import Foundation

/// A host for plugin tests: a real `swiftplex_host_api` table whose callbacks record what a
/// plugin does (commands, log lines, storage, timers, command menu) and answer commands through
/// `respond`, a function the test writes (usually with `ChatFixtures`). Plugins see exactly the C
/// ABI the real host gives them.
public final class TestHost: @unchecked Sendable {
    // @unchecked: every mutable field is read and written under `lock`; the callbacks may come
    // from any thread, as the ABI allows.
    private let lock = NSLock()
    private var _respond: @Sendable (String) -> String
    private var _commands: [String] = []
    private var _logs: [(level: Int32, message: String)] = []
    private var _storage: [String: String] = [:]
    private var _timers: [UInt64: Timer] = [:]
    private var _menu: String?
    private var _messagesSent = 0
    private var nextTimer: UInt64 = 1

    /// A timer a plugin started.
    public struct Timer: Sendable, Hashable {
        public let id: UInt64
        public let name: String
        public let delayMs: UInt64
        public let repeatMs: UInt64
    }

    /// The callback table to pass to `start`; valid while the host lives.
    public let api: UnsafeMutablePointer<swiftplex_host_api>

    /// - Parameter respond: answers a command string with the response JSON object.
    public init(respond: @escaping @Sendable (String) -> String = { _ in #"{"type":"chatCmdError","chatError":{"type":"error","errorType":{"type":"commandError","message":"no response scripted"}}}"# }) {
        _respond = respond
        api = .allocate(capacity: 1)
        api.initialize(to: swiftplex_host_api(
            abi_version: SWIFTPLEX_PLUGIN_ABI_VERSION,
            struct_size: UInt32(MemoryLayout<swiftplex_host_api>.size),
            context: nil,
            command: { ctx, cmd in
                let host = TestHost.from(ctx)
                let command = cmd.map { String(cString: $0) } ?? ""
                return strdup(host.answer(command))
            },
            log: { ctx, level, message in
                let host = TestHost.from(ctx)
                host.lock.withLock { host._logs.append((level, message.map { String(cString: $0) } ?? "")) }
            },
            storage_get: { ctx, key in
                let host = TestHost.from(ctx)
                guard let key else { return nil }
                return host.lock.withLock { host._storage[String(cString: key)] }.map { strdup($0) }
            },
            storage_set: { ctx, key, value in
                let host = TestHost.from(ctx)
                guard let key else { return Int32(SWIFTPLEX_ERROR) }
                host.lock.withLock { host._storage[String(cString: key)] = value.map { String(cString: $0) } }
                return Int32(SWIFTPLEX_OK)
            },
            timer_start: { ctx, name, delay, repeatMs in
                let host = TestHost.from(ctx)
                return host.lock.withLock {
                    let id = host.nextTimer
                    host.nextTimer += 1
                    host._timers[id] = Timer(id: id, name: name.map { String(cString: $0) } ?? "", delayMs: delay, repeatMs: repeatMs)
                    return id
                }
            },
            timer_cancel: { ctx, id in
                let host = TestHost.from(ctx)
                return host.lock.withLock { host._timers.removeValue(forKey: id) } != nil ? Int32(SWIFTPLEX_OK) : Int32(SWIFTPLEX_ERROR)
            },
            set_commands: { ctx, json in
                let host = TestHost.from(ctx)
                guard let json, let data = String(cString: json).data(using: .utf8),
                      (try? JSONSerialization.jsonObject(with: data)) is [Any] else { return Int32(SWIFTPLEX_ERROR) }
                host.lock.withLock { host._menu = String(cString: json) }
                return Int32(SWIFTPLEX_OK)
            },
            free_string: { free($0) },
            post_to_channel: { ctx, channelId, content in
                // Recorded as the `/_send` the real host ends with (after checking the channel).
                let host = TestHost.from(ctx)
                let body = content.map { String(cString: $0) } ?? "null"
                return strdup(host.answer("/_send #\(channelId) json [{\"msgContent\":\(body),\"mentions\":{}}]"))
            },
            send_message: { ctx, chatRef, content, quotedItemId in
                // Recorded as the `/_send` the real host makes of it (HostServices.sendMessage).
                let host = TestHost.from(ctx)
                let body = content.map { String(cString: $0) } ?? "null"
                let quote = quotedItemId > 0 ? ",\"quotedItemId\":\(quotedItemId)" : ""
                return strdup(host.answer("/_send \(chatRef.map { String(cString: $0) } ?? "") json [{\"msgContent\":\(body),\"mentions\":{}\(quote)}]",
                                          viaSendMessage: true))
            }
        ))
        api.pointee.context = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        api.deinitialize(count: 1)
        api.deallocate()
    }

    /// Records `command` (the `/_send` the real host makes of a callback that is not `command`)
    /// and answers it with `respond`.
    private func answer(_ command: String, viaSendMessage: Bool = false) -> String {
        let respond = lock.withLock {
            _commands.append(command)
            if viaSendMessage { _messagesSent += 1 }
            return _respond
        }
        return respond(command)
    }

    private static func from(_ ctx: UnsafeMutableRawPointer?) -> TestHost {
        Unmanaged<TestHost>.fromOpaque(ctx!).takeUnretainedValue()
    }

    /// Replaces the function that answers commands.
    public func respond(with respond: @escaping @Sendable (String) -> String) { lock.withLock { _respond = respond } }

    /// Every command the plugin ran, in order.
    public var commands: [String] { lock.withLock { _commands } }
    /// How many of the recorded `/_send` commands came through `send_message` (ABI 1.2) rather than `command`.
    public var messagesSent: Int { lock.withLock { _messagesSent } }
    /// Forgets the recorded commands.
    public func clearCommands() { lock.withLock { _commands.removeAll() } }
    /// The log lines.
    public var logs: [(level: Int32, message: String)] { lock.withLock { _logs } }
    /// The storage, as the plugin left it; tests may also preset it.
    public var storage: [String: String] {
        get { lock.withLock { _storage } }
        set { lock.withLock { _storage = newValue } }
    }
    /// Timers started and not cancelled.
    public var timers: [Timer] { lock.withLock { _timers.values.sorted { $0.id < $1.id } } }
    /// The last command menu the plugin published (JSON array text).
    public var menu: String? { lock.withLock { _menu } }

    /// The event the host sends when a timer fires.
    public static func timerEvent(_ timer: Timer) -> String {
        #"{"type":"swiftplex.timer","timerId":\#(timer.id),"name":"\#(timer.name)"}"#
    }
}
