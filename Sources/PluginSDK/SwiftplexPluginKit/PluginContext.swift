import CSwiftplexPlugin
import Foundation

/// What an instance can ask of the host: run Chat API commands, send messages, log, keep data
/// in storage, set timers. Wraps the host's callback table; callbacks may be used from any
/// thread (the ABI allows it) but are normally used inside handlers.
public final class PluginContext: @unchecked Sendable {
    // @unchecked: `host` is an immutable pointer the host keeps valid until stop; the timer
    // table and the cached user id are guarded by `lock`.
    private let host: UnsafePointer<swiftplex_host_api>
    private let lock = NSLock()
    private var timers: [UInt64: () throws -> Void] = [:]
    private var cachedUserId: Int64?
    private var stopped = false

    /// Per-instance key-value storage in the host's database.
    public let storage: PluginStorage
    /// The host's log, under the instance's name.
    public let log: PluginLog

    /// The host's table as it must look: this ABI version, and at least as large as this SDK knows it.
    init(host: UnsafePointer<swiftplex_host_api>?) throws(PluginError) {
        guard let host else { throw PluginError(.host, "the host passed no callback table") }
        guard host.pointee.abi_version == SWIFTPLEX_PLUGIN_ABI_VERSION else {
            throw PluginError(.host, "host ABI version \(host.pointee.abi_version), plugin ABI version \(SWIFTPLEX_PLUGIN_ABI_VERSION)")
        }
        // ABI 1.0's table is enough; fields added since (post_to_channel) are checked when used.
        guard Int(host.pointee.struct_size) >= Self.hostTableSize10 else {
            throw PluginError(.host, "the host's callback table is \(host.pointee.struct_size) bytes, expected at least \(Self.hostTableSize10)")
        }
        let t = host.pointee
        guard t.command != nil, t.log != nil, t.storage_get != nil, t.storage_set != nil, t.timer_start != nil,
              t.timer_cancel != nil, t.set_commands != nil, t.free_string != nil else {
            throw PluginError(.host, "the host's callback table has empty entries")
        }
        self.host = host
        storage = PluginStorage(host: host)
        log = PluginLog(host: host)
    }

    /// The size of an ABI 1.0 host table (everything before `post_to_channel`).
    static let hostTableSize10 = MemoryLayout<swiftplex_host_api>.offset(of: \swiftplex_host_api.post_to_channel)!

    /// Whether the host's table reaches past the field at `offset` (a field added in a later
    /// revision is there only when the table is that large).
    private func hostHasField(at offset: Int) -> Bool {
        Int(host.pointee.struct_size) >= offset + MemoryLayout<UnsafeRawPointer>.size
    }

    /// Whether the host has `post_to_channel` (ABI 1.1).
    public var canPostToChannel: Bool {
        hostHasField(at: Self.hostTableSize10) && host.pointee.post_to_channel != nil
    }

    /// The size of an ABI 1.1 host table (everything before `send_message`).
    static let hostTableSize11 = MemoryLayout<swiftplex_host_api>.offset(of: \swiftplex_host_api.send_message)!

    /// Whether the host has `send_message` (ABI 1.2); without it ``send(chatRef:content:quotedItemId:)``
    /// writes the `/_send` command itself.
    public var canSendMessage: Bool {
        hostHasField(at: Self.hostTableSize11) && host.pointee.send_message != nil
    }

    // MARK: Channels

    /// Posts a message as the channel to a channel the bot owns (its group id, as `/_public group`
    /// answered it): the host's `post_to_channel` (ABI 1.1). Throws when the group is no channel
    /// the bot owns, the channel has no active relay, or the host is older than ABI 1.1.
    @discardableResult
    public func post(toChannel channelId: Int64, content: JSONValue) throws(PluginError) -> ChatEvent {
        try ensureRunning()
        guard canPostToChannel else { throw PluginError(.host, "post(toChannel:): the host has no post_to_channel (ABI 1.0 host)") }
        let t = host.pointee
        let raw = content.text.withCString { t.post_to_channel!(t.context, channelId, $0) }
        return try response(raw, of: "post(toChannel:)")
    }

    /// The response a callback returned (and frees): a `chatCmdError` (or an `{"error": …}`
    /// envelope) throws, naming `what` (a command's keyword, never its arguments).
    private func response(_ raw: UnsafeMutablePointer<CChar>?, of what: String) throws(PluginError) -> ChatEvent {
        guard let raw else { throw PluginError(.command, "\(what): the host returned no response") }
        defer { host.pointee.free_string!(raw) }
        var json = try JSONValue.parse(String(cString: raw), as: .command)
        if let result = json["result"] { json = result }
        if let error = json["error"], json["type"] == nil { json = ["type": "chatCmdError", "chatError": error] }
        let response = try ChatEvent(json: json)
        if response.type == "chatCmdError" || response.type == "chatError" {
            throw PluginError(.command, "\(what): \(Self.errorSummary(json["chatError"]))")
        }
        return response
    }

    /// Posts a text as the channel (``post(toChannel:content:)``).
    @discardableResult
    public func post(toChannel channelId: Int64, text: String) throws(PluginError) -> ChatEvent {
        try post(toChannel: channelId, content: .sorted(["type": "text", "text": .string(text)]))
    }

    // MARK: Chat API

    /// Runs a Chat API command (`/_send @3 json [...]`, `/user`, …) as the bot and returns its
    /// response. A `chatCmdError` (or an `{"error": …}` envelope) throws, naming the command's
    /// keyword only (arguments may carry message text).
    @discardableResult
    public func command(_ command: String) throws(PluginError) -> ChatEvent {
        try ensureRunning()
        let t = host.pointee
        let raw = command.withCString { t.command!(t.context, $0) }
        return try response(raw, of: Self.keyword(command))
    }

    /// Runs a command that must answer with `type` (e.g. `/_accept 3` → `acceptingContactRequest`).
    @discardableResult
    public func command(_ command: String, expecting type: String) throws(PluginError) -> ChatEvent {
        let response = try self.command(command)
        guard response.type == type else {
            throw PluginError(.command, "\(Self.keyword(command)): expected \(type), got \(response.type)")
        }
        return response
    }

    /// Runs a command and decodes its response into your own `Decodable` type (only the fields
    /// you declare are read), e.g. `struct Contacts: Decodable { var contacts: [C] }`.
    public func command<T: Decodable>(_ command: String, decoding type: T.Type) throws(PluginError) -> T {
        let response = try self.command(command)
        do {
            return try response.json.decode(T.self)
        } catch {
            throw PluginError(.command, "\(Self.keyword(command)): response \(response.type) does not decode as \(T.self): \(JSONValue.describe(error))")
        }
    }

    /// The bot user's id (from `/user`, asked once).
    public func userId() throws(PluginError) -> Int64 {
        if let id = lock.withLock({ cachedUserId }) { return id }
        let r = try command("/user", expecting: "activeUser")
        guard let id = r.json["user"]?["userId"]?.int64Value else { throw PluginError(.command, "/user: no userId") }
        lock.withLock { cachedUserId = id }
        return id
    }

    /// Sends a text to a contact; returns the response (`newChatItems`).
    @discardableResult
    public func send(contactId: Int64, text: String) throws(PluginError) -> ChatEvent {
        try send(chatRef: "@\(contactId)", content: .sorted(["type": "text", "text": .string(text)]))
    }

    /// Sends a text to a group.
    @discardableResult
    public func send(groupId: Int64, text: String) throws(PluginError) -> ChatEvent {
        try send(chatRef: "#\(groupId)", content: .sorted(["type": "text", "text": .string(text)]))
    }

    /// Sends any message content (`{"type":"text","text":…}`, a link, an image, …) to `@id` / `#id`:
    /// the host's `send_message` (ABI 1.2), or on an older host the `/_send` command.
    @discardableResult
    public func send(chatRef: String, content: JSONValue, quotedItemId: Int64? = nil) throws(PluginError) -> ChatEvent {
        if canSendMessage {
            try ensureRunning()
            let t = host.pointee
            let raw = chatRef.withCString { ref in content.text.withCString { t.send_message!(t.context, ref, $0, quotedItemId ?? 0) } }
            let answer = try response(raw, of: "/_send")
            guard answer.type == "newChatItems" else {
                throw PluginError(.command, "/_send: expected newChatItems, got \(answer.type)")
            }
            return answer
        }
        var composed: [String: JSONValue] = ["msgContent": content, "mentions": [:]]
        if let quotedItemId { composed["quotedItemId"] = .int(quotedItemId) }
        return try command("/_send \(chatRef) json \(JSONValue.array([.sorted(composed)]).text)", expecting: "newChatItems")
    }

    /// Answers a message in its chat: the contact's direct chat, or the group. In a group the
    /// answer quotes the message (as SimpleX's `msg.reply`), so everyone sees what it answers;
    /// `quote` overrides that either way.
    @discardableResult
    public func reply(to message: Message, text: String, quote: Bool? = nil) throws(PluginError) -> ChatEvent {
        let quoted = quote ?? (message.chatType == .group)
        return try send(chatRef: message.chatRef, content: .sorted(["type": "text", "text": .string(text)]),
                        quotedItemId: quoted ? message.itemId : nil)
    }

    // MARK: Groups

    /// Joins a group the bot was invited to (`/_join #<groupId>`; see ``GroupEvent/invitation(_:)``).
    @discardableResult
    public func join(groupId: Int64) throws(PluginError) -> ChatEvent {
        try command("/_join #\(groupId)", expecting: "userAcceptedGroupSent")
    }

    /// Deletes a member's message for every member (`/_delete member item`; the bot must be a
    /// moderator, and at least the author's role).
    @discardableResult
    public func deleteForAll(_ message: Message) throws(PluginError) -> ChatEvent {
        guard let groupId = message.groupId else { throw PluginError(.plugin, "deleteForAll: not a group message") }
        return try command("/_delete member item #\(groupId) \(message.itemId)", expecting: "chatItemsDeleted")
    }

    /// Blocks (or unblocks) a member for every member (`/_block`; moderator).
    @discardableResult
    public func block(groupId: Int64, groupMemberId: Int64, blocked: Bool = true) throws(PluginError) -> ChatEvent {
        try command("/_block #\(groupId) \(groupMemberId) blocked=\(blocked ? "on" : "off")", expecting: "membersBlockedForAllUser")
    }

    /// Removes a member from the group (`/_remove`; admin), optionally deleting its messages.
    @discardableResult
    public func remove(groupId: Int64, groupMemberId: Int64, withMessages: Bool = false) throws(PluginError) -> ChatEvent {
        try command("/_remove #\(groupId) \(groupMemberId)\(withMessages ? " messages=on" : "")", expecting: "userDeletedMembers")
    }

    /// The group's members as the bot knows them (`/_members`), the bot itself not included.
    public func members(groupId: Int64) throws(PluginError) -> [GroupMemberInfo] {
        let r = try command("/_members #\(groupId)", expecting: "groupMembers")
        return (r.json["group"]?["members"]?.arrayValue ?? []).compactMap(GroupMemberInfo.init(json:))
    }

    /// The bot's contacts (`/_contacts <userId>`).
    public func contacts() throws(PluginError) -> [Contact] {
        let r = try command("/_contacts \(try userId())", expecting: "contactsList")
        return (r.json["contacts"]?.arrayValue ?? []).compactMap(Contact.init(json:))
    }

    // MARK: Timers

    /// Runs `handler` every `interval` (first after one interval) until cancelled or stopped.
    @discardableResult
    public func every(_ interval: Duration, name: String = "every", _ handler: @escaping () throws -> Void) throws(PluginError) -> TimerID {
        try startTimer(name: name, delay: interval, repeat: interval, handler)
    }

    /// Runs `handler` once after `delay`.
    @discardableResult
    public func after(_ delay: Duration, name: String = "after", _ handler: @escaping () throws -> Void) throws(PluginError) -> TimerID {
        try startTimer(name: name, delay: delay, repeat: nil, handler)
    }

    /// Cancels a timer; false if it had already fired (one-shot) or was cancelled.
    @discardableResult
    public func cancel(_ timer: TimerID) -> Bool {
        guard lock.withLock({ timers.removeValue(forKey: timer.rawValue) }) != nil else { return false }
        let t = host.pointee
        return t.timer_cancel!(t.context, timer.rawValue) == Int32(SWIFTPLEX_OK)
    }

    private func startTimer(name: String, delay: Duration, repeat every: Duration?, _ handler: @escaping () throws -> Void) throws(PluginError) -> TimerID {
        try ensureRunning()
        let t = host.pointee
        let id = name.withCString { t.timer_start!(t.context, $0, Self.milliseconds(delay), every.map(Self.milliseconds) ?? 0) }
        guard id != 0 else { throw PluginError(.host, "the host refused timer \(name)") }
        let oneShot = every == nil
        lock.withLock {
            timers[id] = oneShot ? { [weak self] in self?.lock.withLock { _ = self?.timers.removeValue(forKey: id) }; try handler() } : handler
        }
        return TimerID(rawValue: id)
    }

    /// Runs the handler of a `swiftplex.timer` event; false if the timer is unknown (cancelled).
    func fireTimer(_ id: UInt64) throws -> Bool {
        guard let handler = lock.withLock({ timers[id] }) else { return false }
        try handler()
        return true
    }

    // MARK: Command menu

    /// Publishes this instance's entries of the bot command menu.
    func setCommands(_ commands: [BotCommand]) throws(PluginError) {
        let t = host.pointee
        let json = JSONValue.array(commands.map(\.json)).text
        guard json.withCString({ t.set_commands!(t.context, $0) }) == Int32(SWIFTPLEX_OK) else {
            throw PluginError(.host, "the host refused the command menu")
        }
    }

    /// Drops timer handlers (they may hold the plugin), so stop frees everything.
    func close() {
        lock.withLock {
            stopped = true
            timers.removeAll()
        }
    }

    // MARK: Helpers

    /// The host's table is invalid once stop returns; a plugin thread that outlives the instance
    /// gets an error instead of calling through a dangling pointer.
    private func ensureRunning() throws(PluginError) {
        if lock.withLock({ stopped }) { throw PluginError(.host, "the instance is stopped; no host callbacks after stop") }
    }

    static func milliseconds(_ d: Duration) -> UInt64 {
        let c = d.components
        let ms = c.seconds * 1000 + c.attoseconds / 1_000_000_000_000_000
        return UInt64(max(ms, 1))
    }

    static func keyword(_ command: String) -> String {
        String(command.prefix { !$0.isWhitespace })
    }

    /// `errorStore/userContactLinkNotFound`-style summary of a ChatError.
    static func errorSummary(_ error: JSONValue?) -> String {
        guard let error else { return "error" }
        var parts: [String] = []
        var node: JSONValue? = error
        while let n = node, let type = n["type"]?.stringValue {
            parts.append(type)
            node = n.objectValue?.first { $0.0 != "type" && $0.1["type"] != nil }?.1
        }
        if let text = error["errorType"]?["message"]?.stringValue ?? error["errorType"]?["commandError"]?.stringValue {
            parts.append(text)
        }
        return parts.isEmpty ? error.text : parts.joined(separator: "/")
    }
}

/// A timer made by `every` or `after`.
public struct TimerID: Hashable, Sendable {
    public let rawValue: UInt64
}

/// The host's log for one instance. Keep message contents and secrets out of it.
public struct PluginLog: @unchecked Sendable {
    // @unchecked: an immutable pointer the host keeps valid until stop.
    let host: UnsafePointer<swiftplex_host_api>

    public func trace(_ message: String) { write(Int32(SWIFTPLEX_LOG_TRACE), message) }
    public func debug(_ message: String) { write(Int32(SWIFTPLEX_LOG_DEBUG), message) }
    public func info(_ message: String) { write(Int32(SWIFTPLEX_LOG_INFO), message) }
    public func notice(_ message: String) { write(Int32(SWIFTPLEX_LOG_NOTICE), message) }
    public func warning(_ message: String) { write(Int32(SWIFTPLEX_LOG_WARNING), message) }
    public func error(_ message: String) { write(Int32(SWIFTPLEX_LOG_ERROR), message) }

    func write(_ level: Int32, _ message: String) {
        let t = host.pointee
        message.withCString { t.log!(t.context, level, $0) }
    }
}
