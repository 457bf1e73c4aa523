import BotHost
import ChatAPI
import ChatCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import PluginHost
import RelayProtocol
import SwiftplexBase

/// A test harness for plugin authors: a real bot host (engine, in-process relay on loopback TLS,
/// real SQLite files in a temporary directory) running your plugin, and scripted contacts that
/// connect to the bot and talk to it.
///
/// ```swift
/// try await PluginTestBench.withBench(plugins: [
///     .init(name: "echo", path: PluginTestBench.product("libauto-reply.so"), config: #"{"echo": true}"#),
/// ]) { bench in
///     let alice = try await bench.connect("alice")
///     try await alice.send("hello")
///     #expect(try await alice.nextMessage() == "hello")
/// }   // the bench is shut down (awaited) here, also when the body throws
/// ```
public final class PluginTestBench: Sendable {
    /// A plugin instance to run: the shared object, its config JSON, how it runs.
    public struct Plugin: Sendable {
        public var name: String
        public var path: String
        public var config: String
        public var isolation: PluginSpec.Isolation

        public init(name: String, path: String, config: String = "{}", isolation: PluginSpec.Isolation = .inProcess) {
            self.name = name
            self.path = path
            self.config = config
            self.isolation = isolation
        }

        var spec: PluginSpec {
            let config = config
            return PluginSpec(name: name, path: path, isolation: isolation, timeout: .seconds(10),
                              backoff: .init(initial: .milliseconds(100), max: .seconds(2)),
                              configFingerprint: config, configure: { _ in .success(config) })
        }
    }

    public let host: BotHost
    public let directory: URL
    private let hostTask: Task<Void, Never>
    private let contacts = NIOLockedValueBox<[ScriptedContact]>([])
    private let logger: Logger
    /// A foreign engine's relay (and process), when the bot runs on one.
    private let foreign: ForeignEngine?

    /// A built product (plugin or runner) next to the running test binary, or in `SWIFTPLEX_BIN_DIR`.
    public static func product(_ file: String) -> String {
        binDirectory.appendingPathComponent(file).path
    }

    static var binDirectory: URL {
        if let dir = ProcessInfo.processInfo.environment["SWIFTPLEX_BIN_DIR"] { return URL(fileURLWithPath: dir) }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    }

    /// The bot's log level unless a test gives one: `SWIFTPLEX_TEST_LOG` (`debug`, `info`, …) when
    /// set — to see what the bot did in a failing test — else `critical`.
    public static var defaultLogLevel: Logger.Level {
        ProcessInfo.processInfo.environment["SWIFTPLEX_TEST_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
    }

    /// The chat engine the bench's bot runs on.
    public enum Engine: Sendable, CaseIterable, CustomStringConvertible {
        /// Swiftplex's engine in the host (the default).
        case embedded
        /// `libsimplex.so` from the build directory, loaded by path (as SimpleX's would be).
        case libsimplex
        /// A `swiftplex-chat -p 0` process the bench starts, over SimpleX's WebSocket API (as a
        /// `simplex-chat -p` process would be).
        case webSocket

        public var description: String { self == .embedded ? "embedded" : kind }

        /// The kind of engine the host reports for this choice (`BotEngine.kind`).
        public var kind: String {
            switch self {
            case .embedded: "swiftplex"
            case .libsimplex: "libsimplex"
            case .webSocket: "websocket"
            }
        }
    }

    /// Runs `body` with a bench started as ``start(plugins:botName:logLevel:engine:)`` does, and shuts the
    /// bench down when `body` returns or throws — awaited, so that the next test begins with
    /// nothing of this one still running.
    public static func withBench<T>(plugins: [Plugin], botName: String = "test-bot", logLevel: Logger.Level = defaultLogLevel,
                                    engine: Engine = .embedded, configure: (inout BotHostOptions) -> Void = { _ in },
                                    _ body: (PluginTestBench) async throws -> T) async throws -> T {
        let bench = try await start(plugins: plugins, botName: botName, logLevel: logLevel, engine: engine, configure: configure)
        let result: T
        do {
            result = try await body(bench)
        } catch {
            await bench.shutdown()
            throw error
        }
        await bench.shutdown()
        return result
    }

    /// Starts a bot named `botName` with `plugins`, a relay, and a contact address; the caller
    /// shuts it down with ``shutdown()`` (``withBench(plugins:botName:logLevel:engine:_:)`` does it
    /// for you). On Swiftplex's engine the relay is the host's embedded one; on a foreign engine it
    /// is a relay of the bench's own in this process, which the engine and the contacts use.
    /// `configure` may change the host's options last (an admin API, a WebSocket API, …).
    public static func start(plugins: [Plugin], botName: String = "test-bot", logLevel: Logger.Level = defaultLogLevel,
                             engine: Engine = .embedded, configure: (inout BotHostOptions) -> Void = { _ in }) async throws -> PluginTestBench {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-plugin-test-\(UUID().uuidString)")
        var logger = Logger(label: "plugin-test")
        logger.logLevel = logLevel
        var options = BotHostOptions(dataDirectory: directory.appendingPathComponent("bot"),
                                     profile: .init(displayName: botName),
                                     relays: .embedded(host: "127.0.0.1", port: 0, publicHost: nil),
                                     plugins: plugins.map(\.spec),
                                     runnerExecutable: binDirectory.appendingPathComponent("swiftplex-plugin-runner"))
        let foreign = try await ForeignEngine.start(engine, botName: botName, directory: directory, logger: logger)
        if let foreign {
            options.relays = .external([foreign.relay.address])
            options.engine = foreign.choice
        }
        configure(&options)
        let host: BotHost
        do {
            host = try await BotHost.start(options, logger: logger)
        } catch {
            await foreign?.stop()
            throw error
        }
        for status in plugins where !host.plugins.statuses().contains(where: { $0.name == status.name }) {
            await host.shutdown()
            await foreign?.stop()
            throw HarnessError("plugin \(status.name) did not start (see the log; run with logLevel: .info)")
        }
        let task = Task { await host.run() }
        return PluginTestBench(host: host, directory: directory, hostTask: task, logger: logger, foreign: foreign)
    }

    private init(host: BotHost, directory: URL, hostTask: Task<Void, Never>, logger: Logger, foreign: ForeignEngine?) {
        self.host = host
        self.directory = directory
        self.hostTask = hostTask
        self.logger = logger
        self.foreign = foreign
    }

    /// The relay the bot's contacts use: the host's embedded one, or the bench's own.
    private var relay: RelayAddress? { foreign?.relay.address ?? host.relayAddress }

    /// A new person named `name` who connects to the bot's contact address and waits until connected.
    /// Several people may share a name (each has its own engine).
    public func connect(_ name: String, timeout: Duration = .seconds(20)) async throws -> ScriptedContact {
        guard let address = host.address, let relay else { throw HarnessError("the bot has no address") }
        let contact = try await ScriptedContact.start(name: name, directory: contactDirectory(name),
                                                      relay: relay, logger: logger)
        contacts.withLockedValue { $0.append(contact) }
        try await contact.connect(to: address, timeout: timeout)
        return contact
    }

    /// A new person with an engine of their own who is not connected to the bot (connect people
    /// with ``ScriptedContact/connect(with:timeout:)``, for example to put them in a group with the bot).
    public func person(_ name: String) async throws -> ScriptedContact {
        guard let relay else { throw HarnessError("the bot has no relay") }
        let contact = try await ScriptedContact.start(name: name, directory: contactDirectory(name), relay: relay, logger: logger)
        contacts.withLockedValue { $0.append(contact) }
        return contact
    }

    /// Sends a contact request to the bot and returns without waiting for acceptance (for
    /// plugins that may reject it).
    public func request(_ name: String) async throws -> ScriptedContact {
        guard let address = host.address, let relay else { throw HarnessError("the bot has no address") }
        let contact = try await ScriptedContact.start(name: name, directory: contactDirectory(name),
                                                      relay: relay, logger: logger)
        contacts.withLockedValue { $0.append(contact) }
        try await contact.request(address)
        return contact
    }

    private func contactDirectory(_ name: String) -> URL {
        let n = contacts.withLockedValue { $0.count }
        return directory.appendingPathComponent("contact-\(n)-\(name.filter { $0.isLetter || $0.isNumber })")
    }

    /// Stops everything (the contacts' engines, the host and its plugins, all awaited) and
    /// removes the temporary directory.
    public func shutdown() async {
        for c in contacts.withLockedValue({ $0 }) { await c.stop() }
        await host.shutdown()
        await hostTask.value
        await foreign?.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// A person talking to the bot through their own engine.
public final class ScriptedContact: Sendable {
    public let name: String
    public let api: ChatAPI
    private let inbox: EventInbox
    private let engine: Task<Void, Never>
    /// The bot as this person's contact, once connected.
    private let botContact = NIOLockedValueBox<Int?>(nil)
    private let stopped = NIOLockedValueBox(false)

    /// A person with their own engine in `directory`, using `relay` (for bots running elsewhere,
    /// e.g. a `swiftplex` process; a `PluginTestBench` makes its contacts itself).
    public static func start(name: String, directory: URL, relay: RelayAddress, logger: Logger = Logger(label: "scripted-contact", factory: { _ in SwiftLogNoOpLogHandler() })) async throws -> ScriptedContact {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let controller = try await ChatController.open(prefix: directory.appendingPathComponent("chat").path, defaultRelays: [relay], logger: logger)
        let engine = Task<Void, Never> { _ = try? await controller.run() }
        let api = ChatAPI(controller: controller)
        let contact = ScriptedContact(name: name, api: api, engine: engine)
        let user: JSONValue = .object([("profile", .object([("displayName", .string(name)), ("fullName", .string(""))])),
                                       ("pastTimestamp", .bool(false)), ("userChatRelay", .bool(false)), ("clientService", .bool(false))])
        try await contact.expect("/_create user \(user.description)", "activeUser")
        try await contact.expect("/_start", "chatStarted")
        return contact
    }

    private init(name: String, api: ChatAPI, engine: Task<Void, Never>) {
        self.name = name
        self.api = api
        self.engine = engine
        inbox = EventInbox(api.events, owner: name)
    }

    func request(_ address: String) async throws {
        try await expect("/connect \(address)", "sentInvitation", "sentConfirmation")
    }

    /// Connects to a bot's contact address and waits until connected.
    public func connect(to address: String, timeout: Duration = .seconds(20)) async throws {
        try await request(address)
        let connected = try await inbox.next("contactConnected", timeout: timeout)
        botContact.withLockedValue { $0 = connected["contact"]?["contactId"]?.intValue }
    }

    /// Sends a text message to the bot.
    public func send(_ text: String) async throws {
        guard let id = botContact.withLockedValue({ $0 }) else { throw HarnessError("\(name) is not connected to the bot") }
        let message: JSONValue = .array([.object([("msgContent", .object([("type", .string("text")), ("text", .string(text))])), ("mentions", .object([]))])])
        try await expect("/_send @\(id) json \(message.description)", "newChatItems")
    }

    /// The text of the next message the bot sends this person.
    public func nextMessage(timeout: Duration = .seconds(20)) async throws -> String {
        let event = try await inbox.next("newChatItems", timeout: timeout) { e in
            e["chatItems"]?.items?.contains { $0["chatItem"]?["chatDir"]?["type"]?.stringValue == "directRcv" } == true
        }
        let items = event["chatItems"]?.items ?? []
        let texts = items.compactMap { $0["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue }
        return texts.joined(separator: "\n")
    }

    /// Waits for the next event of `type` (e.g. `contactDeletedByContact`, `contactRequestRejected`).
    public func nextEvent(_ type: String, timeout: Duration = .seconds(20)) async throws -> JSONValue {
        try await inbox.next(type, timeout: timeout)
    }

    /// Waits for the next event of `type` that `predicate` accepts (others stay for later waits).
    public func nextEvent(_ type: String, timeout: Duration = .seconds(20), where predicate: @escaping @Sendable (JSONValue) -> Bool) async throws -> JSONValue {
        try await inbox.next(type, timeout: timeout, where: predicate)
    }

    /// The bot's contact id in this person's database, once connected.
    public var botContactId: Int64? { botContact.withLockedValue { $0 }.map(Int64.init) }

    // MARK: Groups

    /// A message in a group, as this person received it.
    public struct GroupMessage: Sendable {
        public let text: String
        /// The item's id in this person's database.
        public let itemId: Int64
        /// The sender's display name.
        public let sender: String
        /// The text of the message it quotes (a reply), if any.
        public let quotedText: String?
    }

    /// Connects this person and `other` directly (a one-time invitation); returns this person's
    /// contact id of `other` and `other`'s contact id of this person.
    public func connect(with other: ScriptedContact, timeout: Duration = .seconds(20)) async throws -> (other: Int64, me: Int64) {
        let created = try await expect("/_connect 1", "invitation")
        guard let link = created["connLinkInvitation"]?["connFullLink"]?.stringValue else { throw HarnessError("\(name): no invitation link") }
        try await other.expect("/_connect 1 \(link)", "sentConfirmation", "sentInvitation")
        let mine = try await inbox.next("contactConnected", timeout: timeout)
        let theirs = try await other.inbox.next("contactConnected", timeout: timeout)
        guard let a = mine["contact"]?["contactId"]?.int64Value, let b = theirs["contact"]?["contactId"]?.int64Value else {
            throw HarnessError("\(name): contactConnected without a contact id")
        }
        return (a, b)
    }

    /// Creates a group with this person as its owner; returns its id.
    public func createGroup(_ displayName: String) async throws -> Int64 {
        let profile: JSONValue = .object([("displayName", .string(displayName)), ("fullName", .string(""))])
        let r = try await expect("/_group 1 \(profile.description)", "groupCreated")
        guard let id = r["groupInfo"]?["groupId"]?.int64Value else { throw HarnessError("\(name): groupCreated without a group id") }
        return id
    }

    /// Invites a contact (`contactId` in this person's database) into a group with `role`.
    public func invite(contactId: Int64, to groupId: Int64, role: String = "member") async throws {
        try await expect("/_add #\(groupId) \(contactId) \(role)", "sentGroupInvitation")
    }

    /// Waits for a group invitation, joins, and waits until joined; returns the group's id here.
    public func joinNextInvitation(timeout: Duration = .seconds(20)) async throws -> Int64 {
        let invitation = try await inbox.next("receivedGroupInvitation", timeout: timeout)
        guard let id = invitation["groupInfo"]?["groupId"]?.int64Value else { throw HarnessError("\(name): invitation without a group id") }
        try await expect("/_join #\(id)", "userAcceptedGroupSent")
        _ = try await inbox.next("userJoinedGroup", timeout: timeout) { $0["groupInfo"]?["groupId"]?.int64Value == id }
        return id
    }

    /// Sends a text to a group; returns the sent item's id.
    @discardableResult
    public func send(_ text: String, toGroup groupId: Int64) async throws -> Int64 {
        let message: JSONValue = .array([.object([("msgContent", .object([("type", .string("text")), ("text", .string(text))])), ("mentions", .object([]))])])
        let r = try await expect("/_send #\(groupId) json \(message.description)", "newChatItems")
        guard let id = r["chatItems"]?.items?.first?["chatItem"]?["meta"]?["itemId"]?.int64Value else { throw HarnessError("\(name): no sent item") }
        return id
    }

    /// The next message another member posts in the group (from `sender`, by display name, if given).
    public func nextGroupMessage(in groupId: Int64, from sender: String? = nil, timeout: Duration = .seconds(20)) async throws -> GroupMessage {
        let event = try await inbox.next("newChatItems", timeout: timeout) { e in
            e["chatItems"]?.items?.contains { ScriptedContact.groupMessage($0, groupId: groupId, sender: sender) != nil } == true
        }
        guard let m = (event["chatItems"]?.items ?? []).lazy.compactMap({ ScriptedContact.groupMessage($0, groupId: groupId, sender: sender) }).first else {
            throw HarnessError("\(name): no group message")
        }
        return m
    }

    static func groupMessage(_ item: JSONValue, groupId: Int64, sender: String?) -> GroupMessage? {
        guard item["chatInfo"]?["groupInfo"]?["groupId"]?.int64Value == groupId,
              item["chatItem"]?["chatDir"]?["type"]?.stringValue == "groupRcv",
              let text = item["chatItem"]?["content"]?["msgContent"]?["text"]?.stringValue,
              let id = item["chatItem"]?["meta"]?["itemId"]?.int64Value else { return nil }
        let from = item["chatItem"]?["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue ?? ""
        if let sender, from != sender { return nil }
        return GroupMessage(text: text, itemId: id, sender: from,
                            quotedText: item["chatItem"]?["quotedItem"]?["content"]?["text"]?.stringValue)
    }

    /// True if no message from the bot arrives within `duration`.
    public func receivesNothing(for duration: Duration) async -> Bool {
        (try? await nextMessage(timeout: duration)) == nil
    }

    /// Stops this person's engine and closes its databases (waiting for both); once.
    public func stop() async {
        guard !stopped.withLockedValue({ s in defer { s = true }; return s }) else { return }
        _ = await api.execute("/_stop")
        engine.cancel()
        await engine.value
        await api.controller.close()
    }

    @discardableResult
    func expect(_ command: String, _ types: String...) async throws -> JSONValue {
        let r = await api.execute(command)
        guard let t = r["type"]?.stringValue, types.contains(t) else {
            throw HarnessError("\(name): \(command.prefix(40))… answered \(r)")
        }
        return r
    }
}

/// Events of one engine, taken by type. A waiter is resumed by the event it waits for
/// (continuations, no polling); events nobody waits for yet stay buffered in arrival order.
final class EventInbox: Sendable {
    private struct Waiter {
        let id: UInt64
        let matches: @Sendable (JSONValue) -> Bool
        let continuation: CheckedContinuation<JSONValue, Error>
    }

    private struct State {
        var buffer: [JSONValue] = []
        var waiters: [Waiter] = []
        var nextId: UInt64 = 0
        var ended = false
    }

    private let state: NIOLockedValueBox<State>
    private let task: Task<Void, Never>
    /// Whose events these are, for the timeout's message.
    private let owner: String

    init(_ events: AsyncStream<JSONValue>, owner: String) {
        self.owner = owner
        let state = NIOLockedValueBox(State())
        self.state = state
        task = Task {
            for await e in events {
                state.withLockedValue { s in
                    if let i = s.waiters.firstIndex(where: { $0.matches(e) }) {
                        s.waiters.remove(at: i).continuation.resume(returning: e)
                    } else {
                        s.buffer.append(e)
                    }
                }
            }
            let waiting = state.withLockedValue { s in
                s.ended = true
                defer { s.waiters = [] }
                return s.waiters
            }
            for w in waiting { w.continuation.resume(throwing: HarnessError("the engine's events ended")) }
        }
    }

    deinit { task.cancel() }

    func next(_ type: String, timeout: Duration, where predicate: @escaping @Sendable (JSONValue) -> Bool = { _ in true }) async throws -> JSONValue {
        let matches: @Sendable (JSONValue) -> Bool = { $0["type"]?.stringValue == type && predicate($0) }
        let id = state.withLockedValue { s in s.nextId += 1; return s.nextId }
        let state = state
        let expire: @Sendable (Error) -> Void = { error in
            let waiter = state.withLockedValue { s -> Waiter? in
                guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: i)
            }
            waiter?.continuation.resume(throwing: error)
        }
        let owner = owner
        let deadline = DispatchWorkItem {
            let seen = state.withLockedValue { $0.buffer.map(EventInbox.summary) }
            expire(HarnessError("\(owner): timed out after \(timeout) waiting for \(type); unconsumed events: \(seen)"))
        }
        defer { deadline.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<JSONValue, Error>) in
                state.withLockedValue { s in
                    if let i = s.buffer.firstIndex(where: matches) {
                        c.resume(returning: s.buffer.remove(at: i))
                    } else if s.ended {
                        c.resume(throwing: HarnessError("waited for \(type), but the engine's events ended"))
                    } else if Task.isCancelled {
                        c.resume(throwing: CancellationError())
                    } else {
                        s.waiters.append(Waiter(id: id, matches: matches, continuation: c))
                        let (sec, atto) = timeout.components
                        let nanos = max(0, sec) * 1_000_000_000 + max(0, atto) / 1_000_000_000
                        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanos)), execute: deadline)
                    }
                }
            }
        } onCancel: {
            expire(CancellationError())
        }
    }
}

extension EventInbox {
    /// An event's type, and for new items each item's direction, sender and text (cut short).
    static func summary(_ e: JSONValue) -> String {
        let type = e["type"]?.stringValue ?? "?"
        guard type == "newChatItems", let items = e["chatItems"]?.items else { return type }
        let described = items.map { item -> String in
            let ci = item["chatItem"]
            let dir = ci?["chatDir"]?["type"]?.stringValue ?? "?"
            let from = ci?["chatDir"]?["groupMember"]?["memberProfile"]?["displayName"]?.stringValue.map { " " + $0 } ?? ""
            let text = ci?["content"]?["msgContent"]?["text"]?.stringValue.map { " \"" + String($0.prefix(40)) + "\"" } ?? ""
            return dir + from + text
        }
        return "newChatItems(" + described.joined(separator: "; ") + ")"
    }
}

public struct HarnessError: CodedError {
    public enum Code: Sendable, Hashable { case failed }
    public var code: Code { .failed }
    public let message: String
    init(_ message: String) { self.message = message }
}

extension JSONValue {
    fileprivate var items: [JSONValue]? { if case let .array(a) = self { a } else { nil } }
}
