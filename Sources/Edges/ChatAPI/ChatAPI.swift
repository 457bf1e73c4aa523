import ChatCore
import ChatModel
import SwiftplexBase

/// The Chat API, the engine's wire edge: a command string is parsed into a typed ``ChatCommand``,
/// run by the chat core, and its typed ``ChatResponse`` encoded to JSON here, once; each typed
/// ``ChatEvent`` of the core is encoded once as it passes (``events``).
///
/// Every failure is a response too: `{"type":"chatCmdError","chatError":{…}}`, with a
/// `commandError` for lines that do not parse and the engine's own error otherwise.
public struct ChatAPI: Sendable {
    public let controller: ChatController

    public init(controller: ChatController) { self.controller = controller }

    /// The engine's events as JSON objects, encoded as they are taken. One consumer at a time
    /// (the core's stream hands each event out once).
    public var events: AsyncStream<JSONValue> {
        let typed = controller.events
        return AsyncStream { continuation in
            let pump = Task {
                for await event in typed { continuation.yield(Self.encode(event)) }
                continuation.finish()
            }
            continuation.onTermination = { _ in pump.cancel() }
        }
    }

    /// The engine's events, each typed and with its JSON text written once as it is taken (for
    /// readers that switch on the event and readers that pass its text on, such as the bot
    /// host). One consumer at a time, as ``events``.
    public var encodedEvents: AsyncStream<EncodedChatEvent> {
        let typed = controller.events
        return AsyncStream { continuation in
            let pump = Task {
                for await event in typed { continuation.yield(EncodedChatEvent(event)) }
                continuation.finish()
            }
            continuation.onTermination = { _ in pump.cancel() }
        }
    }

    /// Runs one command. Returns the response object, or a `chatCmdError` object.
    ///
    /// `idempotencyKey` is for the bot host only (it is not part of the command language): a
    /// `/_send` run twice with the same key sends once, and the second run returns the items of
    /// the first. Other commands ignore it.
    public func execute(_ line: String, idempotencyKey: String? = nil) async -> JSONValue {
        switch await respond(line, idempotencyKey: idempotencyKey) {
        case let .success(r): Self.encode(r)
        case let .failure(e): Self.encode(ChatResponse.chatCmdError(e.error))
        }
    }

    /// Runs one command, separating success from the `chatError` of a failure (for libsimplex's
    /// `{"result":…}` / `{"error":…}` envelopes).
    public func run(_ line: String, idempotencyKey: String? = nil) async -> Result<JSONValue, ChatFailure> {
        await respond(line, idempotencyKey: idempotencyKey).map(Self.encode)
    }

    /// Runs one command, typed: the response, or the failure.
    public func respond(_ line: String, idempotencyKey: String? = nil) async -> Result<ChatResponse, ChatFailure> {
        let command: ChatCommand
        do {
            command = try CommandParser.parse(line)
        } catch {
            return .failure(ChatFailure(commandError: error.message))
        }
        // After `/_db import` or `/_db delete` only `/_stop` still answers (a client's shutdown
        // sends it before closing the store).
        if controller.storeChanged, command != .stopChat { return .failure(ChatFailure(ChatError.error(.chatStoreChanged))) }
        do {
            return .success(try await dispatch(command, idempotencyKey: idempotencyKey))
        } catch let f as ChatFailure {
            return .failure(f)
        } catch {
            return .failure(ChatFailure(commandError: "\(error)"))
        }
    }

    // MARK: - Writing

    /// A response as its JSON object.
    public static func encode(_ response: ChatResponse) -> JSONValue { encodeModel(response) }

    /// An event as its JSON object.
    public static func encode(_ event: ChatEvent) -> JSONValue { encodeModel(event) }

    /// A ChatError as its JSON object.
    public static func encode(_ error: ChatError) -> JSONValue { encodeModel(error) }

    /// Any model value (a `Contact`, a `UserContactRequest`, …) as its JSON object, for edges
    /// that answer with part of a response (the admin API's pages).
    public static func encodeValue<T: Encodable>(_ value: T) -> JSONValue { encodeModel(value) }

    /// The model's types hold only strings, integers, booleans and JSON values, which the encoder
    /// always takes; were one refused, the caller gets an `internalError` rather than a trap.
    static func encodeModel<T: Encodable>(_ value: T) -> JSONValue {
        do {
            return try JSONValueEncoder().encode(value)
        } catch {
            let failure = ChatResponse.chatCmdError(.error(.internalError(message: "encoding failed: \(error)")))
            return (try? JSONValueEncoder().encode(failure)) ?? .null
        }
    }

    // MARK: - Writing text

    /// A response as compact JSON text (UTF-8), written straight from the model value
    /// (`JSONTextEncoder`): the same bytes as `encode(response).description`, without the tree.
    public static func text(_ response: ChatResponse) -> [UInt8] {
        var out: [UInt8] = []
        write(response, into: &out)
        return out
    }

    /// An event as compact JSON text (UTF-8); the same bytes as `encode(event).description`.
    public static func text(_ event: ChatEvent) -> [UInt8] {
        var out: [UInt8] = []
        write(event, into: &out)
        return out
    }

    /// Appends a response's JSON text to `out` (for envelopes such as libsimplex's `{"result":…}`).
    public static func write(_ response: ChatResponse, into out: inout [UInt8]) { writeModel(response, into: &out) }

    /// Appends an event's JSON text to `out`.
    public static func write(_ event: ChatEvent, into out: inout [UInt8]) { writeModel(event, into: &out) }

    /// Appends a ChatError's JSON text to `out`.
    public static func write(_ error: ChatError, into out: inout [UInt8]) { writeModel(error, into: &out) }

    /// As ``encodeModel(_:)``: a value the encoder refuses is written as an `internalError`.
    static func writeModel<T: Encodable>(_ value: T, into out: inout [UInt8]) {
        out.reserveCapacity(out.count + 1024)
        let start = out.count
        do {
            try JSONTextEncoder().encode(value, into: &out)
        } catch {
            out.removeSubrange(start...)
            JSONWriter.write(encodeModel(value), to: &out)
        }
    }

    private func dispatch(_ command: ChatCommand, idempotencyKey: String?) async throws -> ChatResponse {
        let c = controller
        switch command {
        case .showActiveUser: return try await c.showActiveUser()
        case let .createActiveUser(newUser): return try await c.createActiveUser(newUser)
        case .listUsers: return try await c.listUsers()
        case let .updateProfile(userId, profile): return try await c.updateProfile(userId: userId, profile: profile)
        case let .setActiveUser(userId, password):
            guard password == nil else { throw ChatFailure(commandError: "hidden users (view passwords) are not supported") }
            return try await c.setActiveUser(userId: userId)
        case let .deleteUser(userId, deleteQueues, password):
            guard password == nil else { throw ChatFailure(commandError: "hidden users (view passwords) are not supported") }
            return try await c.deleteUser(userId: userId, deleteQueues: deleteQueues)
        case let .setContactReceipts(userId, enabled): return try await c.setContactReceipts(userId: userId, enabled: enabled)
        case let .setContactPreferences(contactId, preferences): return try await c.setContactPreferences(contactId: contactId, preferences: preferences)
        case let .setContactCustomData(contactId, data): return try await c.setCustomData(contactId: contactId, data: data)
        case let .getChats(userId, pcc, count, query):
            return try await c.getChats(userId: userId, pendingConnections: pcc, count: count, query: query)
        case let .getChat(.direct(contactId), pagination):
            let page: ItemPage = switch pagination {
            case let .last(n): .last(n)
            case let .after(id, n): .after(id, n)
            case let .before(id, n): .before(id, n)
            }
            return try await c.getChat(contactId: contactId, page: page)
        case let .readChat(.direct(contactId)): return try await c.readChat(contactId: contactId)
        case let .deleteChat(.direct(contactId), mode):
            switch mode {
            case let .full(notify), let .entity(notify): return try await c.deleteContact(contactId: contactId, notify: notify, messagesOnly: false)
            case .messages: return try await c.deleteContact(contactId: contactId, notify: false, messagesOnly: true)
            }
        case .startChat: return try await c.start()
        case .stopChat: return await c.stop()
        case let .exportArchive(config): return try await c.exportArchive(try ArchiveConfig(config))
        case let .importArchive(config): return try await c.importArchive(try ArchiveConfig(config))
        case .deleteStorage: return try await c.deleteStorage()
        case let .createAddress(userId, short): return try await c.createAddress(userId: userId, short: short)
        case let .showAddress(userId): return try await c.showAddress(userId: userId)
        case let .deleteAddress(userId): return try await c.deleteAddress(userId: userId)
        case let .setProfileAddress(userId, enabled): return try await c.setProfileAddress(userId: userId, enabled: enabled)
        case let .setAddressSettings(userId, settings): return try await c.setAddressSettings(userId: userId, settings: settings)
        case let .addContact(userId, incognito, short): return try await c.addContact(userId: userId, incognito: incognito, short: short)
        case let .connectPlan(userId, link): return try await c.connectPlan(userId: userId, link: link)
        case let .connect(userId, incognito, fullLink, _): return try await c.connect(userId: userId, link: fullLink, incognito: incognito)
        case let .connectActiveUser(incognito, link?): return try await c.connect(userId: nil, link: link, incognito: incognito)
        case let .connectActiveUser(incognito, nil): return try await c.addContact(userId: try await c.activeUserId(), incognito: incognito)
        case let .cli(command): return try await dispatchCLI(command)
        case let .acceptContact(requestId, incognito): return try await c.acceptRequest(requestId, incognito: incognito)
        case let .rejectContact(requestId): return try await c.rejectRequest(requestId)
        case let .listContacts(userId): return try await c.listContacts(userId: userId)
        case let .sendMessages(.direct(contactId), _, _, _, messages): return try await c.send(contactId: contactId, messages: messages, idempotencyKey: idempotencyKey)
        case let .updateChatItem(.direct(contactId), itemId, _, message):
            return try await c.updateItem(contactId: contactId, itemId: itemId, message: message)
        case let .deleteChatItems(.direct(contactId), itemIds, mode):
            return try await c.deleteItems(contactId: contactId, itemIds: itemIds, broadcast: mode == .broadcast)
        case let .reaction(.direct(contactId), itemId, add, reaction):
            return try await c.react(contactId: contactId, itemId: itemId, add: add, reaction: reaction)
        case let .setUserRelays(userId, relays): return try await c.setRelays(userId: userId, relays: relays)
        case let .getUserRelays(userId): return try await c.getRelays(userId: userId)
        case .listChatRelays: return try await c.listChatRelays()
        case let .setChatRelays(relays): return try await c.setChatRelays(relays)
        case let .testChatRelay(userId, address): return try await c.testChatRelay(userId: userId, address: address)
        case let .newPublicGroup(userId, incognito, relayIds, profile):
            return try await c.createPublicGroup(userId: userId, incognito: incognito, relayIds: relayIds, profile: profile)
        case let .getGroupRelays(groupId): return try await c.getGroupRelays(groupId: groupId)
        case let .getUpdatedGroupLinkData(groupId): return try await c.refreshChannelLinkData(groupId: groupId)
        case let .addGroupRelays(groupId, relayIds): return try await c.addGroupRelays(groupId: groupId, relayIds: relayIds)
        case let .allowRelayGroup(groupId): return try await c.allowRelayGroup(groupId: groupId)
        case let .setRelayPolicy(policy): return try await c.setRelayPolicy(policy)
        default:
            if let r = try await dispatchGroup(command, idempotencyKey: idempotencyKey) { return r }
            throw ChatFailure(commandError: "this command is not supported by this engine yet")
        }
    }
}

/// A chat event beside its JSON text, written once (`ChatAPI.text(_:)`): readers
/// that act on the event switch on ``event``; readers that pass it on as text (plugins, the
/// WebSocket API, the admin API's event stream) take ``json``, with no second encoding.
///
/// From a foreign engine (SimpleX's own, through the bot host) the text is what the engine sent,
/// passed on as it came; ``event`` is its typed form when this engine knows the type and can read
/// it, and nil for a type or shape it does not know (a newer engine's).
public struct EncodedChatEvent: Sendable {
    public let event: ChatEvent?
    /// The event's `"type"`.
    public let type: String
    /// The event as compact JSON text: the same text as `ChatAPI.encode(event).description`.
    public let json: String

    public init(_ event: ChatEvent) {
        self.event = event
        type = event.tag
        json = String(decoding: ChatAPI.text(event), as: UTF8.self)
    }

    /// An event as a foreign engine sent it: `value` is the event object (its `"type"` names it).
    public init(foreign value: JSONValue) {
        type = value["type"]?.stringValue ?? ""
        json = value.description
        event = try? JSONValueDecoder().decode(ChatEvent.self, from: value)
    }
}

/// What runs bot API command lines and answers with bot API responses: the embedded engine's
/// ``ChatAPI``, or a foreign engine the bot host drives (SimpleX's library or CLI).
public protocol ChatCommandRunner: Sendable {
    /// Runs one command. Returns the response object, or a `chatCmdError` object.
    func execute(_ line: String, idempotencyKey: String?) async -> JSONValue
    /// Runs one command, typed: the response, or the failure.
    func respond(_ line: String, idempotencyKey: String?) async -> Result<ChatResponse, ChatFailure>
}

extension ChatCommandRunner {
    public func execute(_ line: String) async -> JSONValue { await execute(line, idempotencyKey: nil) }
    public func respond(_ line: String) async -> Result<ChatResponse, ChatFailure> { await respond(line, idempotencyKey: nil) }
}

extension ChatAPI: ChatCommandRunner {}

extension ChatFailure {
    /// The failure's `chatError` object.
    public var chatError: JSONValue { ChatAPI.encode(error) }
}

extension ChatController {
    /// The `newChatItems` events of received items with an id above `afterId` (see
    /// ``ChatController/receivedItems(after:limit:)``), each as its JSON object.
    public nonisolated func receivedItemEvents(after afterId: Int64, limit: Int) async throws -> [(itemId: Int64, event: JSONValue)] {
        try await receivedItems(after: afterId, limit: limit).map { ($0.itemId, ChatAPI.encode($0.event)) }
    }
}
