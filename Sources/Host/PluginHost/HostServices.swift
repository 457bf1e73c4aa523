import CSwiftplexPlugin
import Foundation
import SwiftplexBase

/// What the host offers a plugin instance through `swiftplex_host_api`. In the host process
/// these are answered locally; in an isolated plugin's child process they are forwarded to the
/// host over a pipe. Every method may block its calling (plugin) thread.
package protocol HostServices: AnyObject, Sendable {
    func command(_ line: String) -> String
    func log(level: Int32, message: String)
    func storageGet(_ key: String) -> String?
    func storageSet(_ key: String, _ value: String?) -> Bool
    func timerStart(name: String, delayMs: UInt64, repeatMs: UInt64) -> UInt64
    func timerCancel(_ id: UInt64) -> Bool
    func setCommands(_ json: String) -> Bool
}

extension HostServices {
    /// A `chatCmdError` response with a `commandError` saying `message`: what a callback answers
    /// when it refuses its arguments without running anything.
    static func refusal(_ message: String) -> String {
        JSONValue.object([("type", .string("chatCmdError")),
                          ("chatError", .object([("type", .string("error")),
                                                 ("errorType", .object([("type", .string("commandError")), ("message", .string(message))]))]))]).description
    }

    /// `send_message` (ABI 1.2): the `/_send` command the plugin would otherwise write, built
    /// from a checked chat ref and content, and run through `command` — so it is the same in the
    /// host and in an isolated plugin's child, and carries the same idempotency key as a
    /// `/_send` while a received message is handled.
    func sendMessage(chatRef: String, contentJSON: String, quotedItemId: Int64) -> String {
        guard let kind = chatRef.first, kind == "@" || kind == "#",
              let id = Int64(chatRef.dropFirst()), id > 0, chatRef.dropFirst().allSatisfy({ $0.isASCII && $0.isNumber }) else {
            return Self.refusal("send_message: the chat ref is \"\(chatRef.prefix(40))\", not @<contactId> or #<groupId>")
        }
        guard let content = try? JSONValue.parse(contentJSON), case .object = content else {
            return Self.refusal("send_message: the content is not a JSON object (a MsgContent such as {\"type\":\"text\",\"text\":\"…\"})")
        }
        guard quotedItemId >= 0 else { return Self.refusal("send_message: the quoted item id \(quotedItemId) is negative") }
        return send(to: "\(kind)\(id)", content: content, quotedItemId: quotedItemId > 0 ? quotedItemId : nil)
    }

    /// The one `/_send` both callbacks end with: one message of `content` to `chatRef`.
    private func send(to chatRef: String, content: JSONValue, quotedItemId: Int64?) -> String {
        var composed: [(String, JSONValue)] = [("msgContent", content), ("mentions", .object([]))]
        if let quotedItemId { composed.append(("quotedItemId", .int(quotedItemId))) }
        return command("/_send \(chatRef) json \(JSONValue.array([.object(composed)]).description)")
    }

    /// `post_to_channel` (ABI 1.1): made of Chat API commands, so it is the same in the host and
    /// in an isolated plugin's child (whose `command` goes to the host): `/_get relays #<id>`
    /// must show a channel whose member the bot is as `owner`, then `/_send #<id> json` posts.
    func postToChannel(_ channelId: Int64, contentJSON: String) -> String {
        guard let content = try? JSONValue.parse(contentJSON), case .object = content else {
            return Self.refusal("post_to_channel: the content is not a JSON object (a MsgContent such as {\"type\":\"text\",\"text\":\"…\"})")
        }
        let relays = command("/_get relays #\(channelId)")
        guard let answer = try? JSONValue.parse(relays), answer["type"]?.stringValue == "groupRelays" else {
            return Self.refusal("post_to_channel: #\(channelId) is not a channel of this bot")
        }
        guard answer["groupInfo"]?["membership"]?["memberRole"]?.stringValue == "owner" else {
            return Self.refusal("post_to_channel: the bot does not own channel #\(channelId)")
        }
        return send(to: "#\(channelId)", content: content, quotedItemId: nil)
    }
}

/// The C callback table for one instance, pointing back at its `HostServices`.
///
/// The table owns a strong reference to the services until `release()`; the plugin sees
/// `context` as an opaque pointer.
final class HostAPITable: @unchecked Sendable {
    let table: UnsafeMutablePointer<swiftplex_host_api>
    private let services: Unmanaged<AnyObject>

    init(_ services: any HostServices) {
        self.services = Unmanaged.passRetained(services as AnyObject)
        table = .allocate(capacity: 1)
        table.initialize(to: swiftplex_host_api(
            abi_version: SWIFTPLEX_PLUGIN_ABI_VERSION,
            struct_size: UInt32(MemoryLayout<swiftplex_host_api>.size),
            context: self.services.toOpaque(),
            command: { ctx, line in
                let s = HostAPITable.services(ctx)
                return strdup(s.command(line.map { String(cString: $0) } ?? ""))
            },
            log: { ctx, level, message in
                HostAPITable.services(ctx).log(level: level, message: message.map { String(cString: $0) } ?? "")
            },
            storage_get: { ctx, key in
                guard let key else { return nil }
                return HostAPITable.services(ctx).storageGet(String(cString: key)).flatMap { strdup($0) }
            },
            storage_set: { ctx, key, value in
                guard let key else { return Int32(SWIFTPLEX_ERROR) }
                let ok = HostAPITable.services(ctx).storageSet(String(cString: key), value.map { String(cString: $0) })
                return ok ? Int32(SWIFTPLEX_OK) : Int32(SWIFTPLEX_ERROR)
            },
            timer_start: { ctx, name, delay, repeatMs in
                HostAPITable.services(ctx).timerStart(name: name.map { String(cString: $0) } ?? "", delayMs: delay, repeatMs: repeatMs)
            },
            timer_cancel: { ctx, id in
                HostAPITable.services(ctx).timerCancel(id) ? Int32(SWIFTPLEX_OK) : Int32(SWIFTPLEX_ERROR)
            },
            set_commands: { ctx, json in
                guard let json else { return Int32(SWIFTPLEX_ERROR) }
                return HostAPITable.services(ctx).setCommands(String(cString: json)) ? Int32(SWIFTPLEX_OK) : Int32(SWIFTPLEX_ERROR)
            },
            free_string: { free($0) },
            post_to_channel: { ctx, channelId, content in
                strdup(HostAPITable.services(ctx).postToChannel(channelId, contentJSON: content.map { String(cString: $0) } ?? ""))
            },
            send_message: { ctx, chatRef, content, quotedItemId in
                strdup(HostAPITable.services(ctx).sendMessage(chatRef: chatRef.map { String(cString: $0) } ?? "",
                                                              contentJSON: content.map { String(cString: $0) } ?? "",
                                                              quotedItemId: quotedItemId))
            }
        ))
    }

    private static func services(_ ctx: UnsafeMutableRawPointer?) -> any HostServices {
        // swiftlint-style guard: a NULL context is a plugin bug; crash loudly rather than guess.
        Unmanaged<AnyObject>.fromOpaque(ctx!).takeUnretainedValue() as! any HostServices
    }

    /// Frees the table; call only after the plugin's `stop` returned.
    func release() {
        table.deinitialize(count: 1)
        table.deallocate()
        services.release()
    }
}

/// A started plugin instance: the vtable calls, made on the instance's own thread.
final class PluginInstance: @unchecked Sendable {
    private let descriptor: UnsafePointer<swiftplex_plugin_descriptor>
    private let api: HostAPITable
    private var instance: UnsafeMutableRawPointer?

    private init(descriptor: UnsafePointer<swiftplex_plugin_descriptor>, api: HostAPITable, instance: UnsafeMutableRawPointer) {
        self.descriptor = descriptor
        self.api = api
        self.instance = instance
    }

    /// Calls the plugin's `start`. On failure returns the plugin's message.
    static func start(_ library: PluginLibrary, services: any HostServices, configJSON: String) -> Result<PluginInstance, PluginError> {
        let api = HostAPITable(services)
        let d = library.descriptor
        var error: UnsafeMutablePointer<CChar>?
        let handle = configJSON.withCString { d.pointee.start(UnsafePointer(api.table), $0, &error) }
        let message = take(error, descriptor: d)
        guard let handle else {
            api.release()
            return .failure(PluginError(.startFailed, message ?? "start returned no instance"))
        }
        return .success(PluginInstance(descriptor: d, api: api, instance: handle))
    }

    /// Calls `handle_event`. Returns the plugin's error message if it reported one.
    func handle(_ eventJSON: String) -> PluginError? {
        guard let instance else { return PluginError(.stopped, "instance is stopped") }
        var error: UnsafeMutablePointer<CChar>?
        let rc = eventJSON.withCString { descriptor.pointee.handle_event(instance, $0, &error) }
        let message = Self.take(error, descriptor: descriptor)
        return rc == SWIFTPLEX_OK ? nil : PluginError(.handlerFailed, message ?? "handler returned error \(rc)")
    }

    /// Calls `stop` once, then frees the host table.
    func stop() {
        guard let instance else { return }
        self.instance = nil
        descriptor.pointee.stop(instance)
        api.release()
    }

    private static func take(_ p: UnsafeMutablePointer<CChar>?, descriptor: UnsafePointer<swiftplex_plugin_descriptor>) -> String? {
        guard let p else { return nil }
        defer { descriptor.pointee.free_string(p) }
        return String(cString: p)
    }
}

/// A failure of a running plugin (start, handler, timeout, crash), as logged and counted.
public struct PluginError: CodedError {
    public enum Code: String, Sendable {
        case startFailed = "start failed"
        case handlerFailed = "handler failed"
        case timeout = "timed out"
        case crashed = "crashed"
        case stopped = "stopped"
        case invalidConfig = "invalid config"
        case queueFull = "queue full"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
