import Agent
import ChatModel
import Foundation
import SwiftplexSQL
import Logging
import RelayProtocol
import SwiftplexBase
import SwiftplexStorage

/// A failed chat operation, carrying the typed ``ChatError`` the API reports.
public struct ChatFailure: Error, Sendable {
    public let error: ChatError
    public init(_ error: ChatError) { self.error = error }
    init(_ kind: ChatError.Kind) { self.error = ChatError(kind) }
    /// A `commandError` with a message.
    public init(commandError message: String) { self.error = .error(.commandError(message: message)) }
    static func command(_ message: String) -> ChatFailure { ChatFailure(commandError: message) }
}

/// The chat engine: users, contacts, addresses and messages over the agent, persisted in
/// `<prefix>_chat.db`, reporting what happens as typed API events (``ChatEvent``: `newChatItems`,
/// `contactConnected`, …). Commands return typed ``ChatResponse``s; the Chat API writes both as JSON.
public actor ChatController {
    public nonisolated let events: AsyncStream<ChatEvent>
    let sink: AsyncStream<ChatEvent>.Continuation
    let store: ChatStore
    let agent: Agent
    private let defaultRelays: [RelayAddress]
    /// Where the chat and agent databases are (`/_db export`, `/_db import`, `/_db delete` on SQLite).
    let database: EngineDatabase
    /// Set when the databases were replaced or deleted (``storeChanged``).
    nonisolated let storeChange = StoreChange()
    let logger: Logger
    private(set) var started = false
    /// `<agent connection>:<seq>` of messages whose `sent` event came before their item was stored.
    var sentBeforeStored: Set<String> = []
    /// Items being sent per agent connection: only while one is, an early `sent` is remembered.
    var itemSendsInFlight: [Int64: Int] = [:]
    /// Limits on what peers send (requests, reactions).
    public nonisolated let limits: ChatLimits
    /// When each address's recent contact requests arrived (for `contactRequestsPerWindow`).
    var requestArrivals: [Int64: [ContinuousClock.Instant]] = [:]
    /// Contact requests refused by the limits since the controller started.
    public internal(set) var refusedContactRequests = 0
    /// Contact requests rejected unanswered after `contactRequestTTL` since the controller started.
    public internal(set) var expiredContactRequests = 0
    /// Contact requests refused on a chat relay user's relay address since the controller started.
    public internal(set) var refusedRelayAddressRequests = 0

    /// Joins (accepting a request, connecting through a link) whose connection is not yet a contact.
    var joinsInFlight = 0
    /// Events of connections that are not yet contacts while joins are in flight, in order:
    /// handled when the join records its contact (or when no join is left).
    var parked: [Int64: [AgentEvent]] = [:]
    var draining: Set<Int64> = []
    /// Tasks that accept requests and allow joiners outside the event loop; `close()` waits for them.
    var background: [Int: Task<Void, Never>] = [:]
    var nextBackground = 0
    var closing = false
    /// Set while `run()` runs: yielding to it ends the run (``stopRunning()``).
    var runStop: AsyncStream<Void>.Continuation?
    /// Callers of ``stopRunning()`` waiting for `run()` to end.
    var runEnded: [CheckedContinuation<Void, Never>] = []
    /// Contact requests being accepted automatically (so that one is never joined twice at once).
    var autoAccepting: Set<Int64> = []
    /// Groups: machines in memory, member connections, per-group order (``GroupRuntime``).
    var groupRuntime = GroupRuntime()
    /// Channels: machines in memory, channel connections, per-channel order (``ChannelRuntime``).
    var channelRuntime = ChannelRuntime()
    /// A chat relay's operator policy (+RelayPolicy).
    var relayPolicy = RelayPolicyState()
    /// Every user, decoded, in id order: read once, dropped whenever the user table is written
    /// (``userWrite(_:)``). Most commands and every received message name a user; this spares them
    /// a database round trip and a profile decode.
    var userCache: [UserRow]?
    /// Bumped by each drop of ``userCache``: a read that started before a write does not fill it.
    var userCacheGeneration = 0

    /// Opens (creating and migrating) `<prefix>_chat.db` and `<prefix>_agent.db`.
    public init(prefix: String, defaultRelays: [RelayAddress], logger: Logger, confirmation: MigrationConfirmation = .yesUp,
                limits: ChatLimits = ChatLimits(), agentOptions: AgentOptions = AgentOptions()) throws {
        try self.init(database: .sqlite(prefix: prefix), defaultRelays: defaultRelays, logger: logger, confirmation: confirmation,
                      limits: limits, agentOptions: agentOptions)
    }

    /// Opens (creating and migrating) the engine's chat and agent databases, on a thread of its
    /// own: what async callers use (the synchronous initialisers block their thread while files are
    /// migrated or a PostgreSQL server answers — for threads that are not the concurrency pool's,
    /// such as a C caller's).
    public static func open(database: EngineDatabase, defaultRelays: [RelayAddress], logger: Logger, confirmation: MigrationConfirmation = .yesUp,
                            limits: ChatLimits = ChatLimits(), agentOptions: AgentOptions = AgentOptions()) async throws -> ChatController {
        try await Blocking.run("chat-open") {
            try ChatController(database: database, defaultRelays: defaultRelays, logger: logger, confirmation: confirmation,
                               limits: limits, agentOptions: agentOptions)
        }
    }

    /// The same for the SQLite files `<prefix>_chat.db` and `<prefix>_agent.db`.
    public static func open(prefix: String, defaultRelays: [RelayAddress], logger: Logger, confirmation: MigrationConfirmation = .yesUp,
                            limits: ChatLimits = ChatLimits(), agentOptions: AgentOptions = AgentOptions()) async throws -> ChatController {
        try await open(database: .sqlite(prefix: prefix), defaultRelays: defaultRelays, logger: logger, confirmation: confirmation,
                       limits: limits, agentOptions: agentOptions)
    }

    /// Opens (creating and migrating) the engine's chat and agent databases, blocking the calling
    /// thread (``open(database:defaultRelays:logger:confirmation:limits:agentOptions:)`` from async code).
    /// - Parameter defaultRelays: used for users with no relays of their own (`SWIFTPLEX_SERVERS`).
    /// - Parameter limits: what peers may send (requests, reactions).
    /// - Parameter agentOptions: which relays peers' links may name and how long to wait for them.
    public init(database: EngineDatabase, defaultRelays: [RelayAddress], logger: Logger, confirmation: MigrationConfirmation = .yesUp,
                limits: ChatLimits = ChatLimits(), agentOptions: AgentOptions = AgentOptions()) throws {
        let (chat, agentDB) = (try database.chat, try database.agent)
        if confirmation == .error {
            for (location, migrations) in [(chat, ChatStore.migrations), (agentDB, Agent.databaseMigrations)] {
                let pending = try EngineDatabase.pending(migrations, at: location)
                if !pending.isEmpty { throw MigrationPending(dbFile: "\(location)", migrations: pending) }
            }
        }
        self.database = database
        store = try ChatStore(location: chat)
        agent = try Agent(database: agentDB, relays: defaultRelays, logger: logger, options: agentOptions)
        self.defaultRelays = defaultRelays
        self.logger = logger
        self.limits = limits
        (events, sink) = AsyncStream.makeStream(of: ChatEvent.self)
    }

    /// Runs the agent and turns its events into chat events, until cancelled.
    public func run() async throws {
        let (stopRequests, stop) = AsyncStream<Void>.makeStream()
        runStop = stop
        defer {
            runStop = nil
            let waiting = runEnded
            runEnded = []
            for w in waiting { w.resume() }
        }
        inBackground { await self.resumeConnectionDeletions() }
        inBackground { await self.resumeGroupActions() }
        inBackground { await self.resumeChannelDeliveries() }
        inBackground { await self.resumeChannelActions() } // (+ChannelActions)
        try await withThrowingTaskGroup(of: Void.self) { group in
            // `stopRunning()` (before the databases are replaced) ends the run as a cancel would.
            group.addTask { for await _ in stopRequests { return } }
            group.addTask { try await self.sweepContactRequests() }

            group.addTask { try await self.agent.run() }
            group.addTask {
                // One event at a time, in the agent's order; what waits on a peer's relay
                // (accepting a request, allowing a joiner) runs in tasks of its own.
                for await event in self.agent.events { await self.dispatch(event) }
            }
            try await group.next()
            group.cancelAll()
        }
    }

    /// Ends a `run()` under way and waits until it has (the agent's loops no longer touch the
    /// databases); returns at once when none runs.
    func stopRunning() async {
        guard let stop = runStop else { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            runEnded.append(c)
            stop.yield()
            stop.finish()
        }
    }

    /// Rejects old unanswered contact requests now and then (they are also swept as requests arrive).
    private func sweepContactRequests() async throws {
        while !Task.isCancelled {
            await expireContactRequests()
            await forgetStaleRelaySubscribers(olderThan: limits.relaySubscriberCleanupAfter)
            try await Task.sleep(for: limits.contactRequestSweepInterval)
        }
    }

    /// Database work, off the actor: the store runs it on its own thread and the actor awaits it.
    func dbRead<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T { try await store.db.read(body) }
    @discardableResult
    func dbWrite<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T { try await store.db.write(body) }

    // MARK: - Users

    /// Every user, in id order (from ``userCache``, read when it is empty).
    func users() async throws -> [UserRow] {
        if let userCache { return userCache }
        let generation = userCacheGeneration
        let rows = try await dbRead { db in try UserRecord.order(UserRecord.Columns.id).fetchAll(db) }.map(UserRow.init)
        if generation == userCacheGeneration { userCache = rows }
        return rows
    }

    /// A write that touches the user table: the cached users are dropped once it is done (or failed).
    func userWrite<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        defer {
            userCache = nil
            userCacheGeneration &+= 1
        }
        return try await dbWrite(body)
    }

    func activeUser() async throws -> UserRow {
        guard let u = try await users().first(where: \.active) else { throw ChatFailure.chat(.noActiveUser) }
        return u
    }

    func user(_ id: Int64) async throws -> UserRow {
        guard let u = try await users().first(where: { $0.id == id }) else { throw ChatFailure.store(.userNotFound(userId: id)) }
        return u
    }

    func userModel(_ u: UserRow) -> User { ModelOf.user(u) }

    public func showActiveUser() async throws -> ChatResponse { .activeUser(user: userModel(try await activeUser())) }

    /// A display name as given: trimmed, non-empty, not starting with `@` or `#`, on one line.
    static func checkedName(_ raw: String) throws -> String {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, !name.hasPrefix("@"), !name.hasPrefix("#"), !name.contains(where: { $0.isNewline }) else {
            let valid = String(name.drop(while: { $0 == "@" || $0 == "#" || $0 == " " }))
            throw ChatFailure.chat(.invalidDisplayName(displayName: raw, validName: valid))
        }
        return name
    }

    /// A profile given in a command, as a model value (a commandError when malformed).
    static func commandProfile(_ value: JSONValue) throws -> Profile {
        do { return try PeerInput.profile(value) } catch { throw ChatFailure.command(error.message) }
    }

    /// Creates a user from a NewUser object and makes it active. Display names are trimmed and
    /// must be non-empty, must not start with `@` or `#`, and must be unique. `userChatRelay: true`
    /// makes a chat relay user (its address is a relay address, docs/channels.md).
    public func createActiveUser(_ newUser: JSONValue) async throws -> ChatResponse {
        let given = newUser["profile"] ?? .object([("displayName", .string(""))])
        guard case .object = given else { throw ChatFailure.command("profile must be an object") }
        let name = try Self.checkedName(given["displayName"]?.stringValue ?? "")
        let chatRelay: Bool
        switch newUser["userChatRelay"] {
        case nil, .null?: chatRelay = false
        case let v?:
            guard let b = v.boolValue else { throw ChatFailure.command("userChatRelay must be true or false") }
            chatRelay = b
        }
        var stored = given
        stored.set("displayName", .string(name))
        var profile = try Self.commandProfile(stored)
        profile.displayName = name
        let text = try Stored.text(profile)
        let id: Int64 = try await userWrite { db in
            if try UserRecord.filter(UserRecord.Columns.displayName == name).isEmpty(db) == false {
                throw ChatFailure.chat(.userExists(contactName: name))
            }
            try UserRecord.updateAll(db, UserRecord.Columns.active.set(to: false))
            var record = UserRecord(displayName: name, profile: text, active: true, createdAt: Timestamp.now(), chatRelay: chatRelay)
            try record.insert(db)
            let id = record.id!
            record.localDisplayName = try LocalNames.reserve(db, userId: id, displayName: name)
            try record.update(db)
            return id
        }
        return .activeUser(user: userModel(try await user(id)))
    }

    public func listUsers() async throws -> ChatResponse {
        return .usersList(users: try await users().map { UserInfo(user: userModel($0), unreadCount: 0) })
    }

    /// Replaces a user's profile and sends it (`x.info`) to every connected contact that knows
    /// this user by it (not to incognito contacts); they report `contactUpdated`.
    public func updateProfile(userId: Int64, profile given: JSONValue) async throws -> ChatResponse {
        let u = try await user(userId)
        guard let raw = given["displayName"]?.stringValue else {
            throw ChatFailure.chat(.invalidDisplayName(displayName: "", validName: ""))
        }
        let name = try Self.checkedName(raw)
        var profile = try Self.commandProfile(given)
        profile.displayName = name
        if u.profile == profile { return .userProfileNoChange(user: userModel(u)) }
        let text = try Stored.text(profile)
        try await userWrite { db in
            if try UserRecord.filter(UserRecord.Columns.displayName == name && UserRecord.Columns.id != userId).isEmpty(db) == false {
                throw ChatFailure.chat(.userExists(contactName: name))
            }
            // The user's own local name follows the new name, unique among its contacts' names.
            guard var record = try UserRecord.fetchOne(db, key: userId) else { return }
            record.localDisplayName = try LocalNames.rename(db, userId: userId, current: u.localName, displayName: name)
            record.profile = text
            record.displayName = name
            try record.update(db)
        }
        let updated = try await user(userId)
        var successes = 0, failures = 0
        var changed: [Contact] = []
        for c in try await contacts(userId: userId, ContactRecord.Columns.status == ContactState.ready && ContactRecord.Columns.incognitoProfile == nil) {
            do {
                try await sendChatMessage(c, ChatMessage(event: "x.info", params: .object([("profile", try ownProfileJSON(for: c, user: updated))])))
                successes += 1
                changed.append(contactModel(c, user: updated))
            } catch {
                failures += 1
            }
        }
        await sendProfileToGroups(userId: userId, profile: profile)
        return .userProfileUpdated(user: userModel(updated), fromProfile: u.profile, toProfile: profile,
                                   updateSummary: UserProfileUpdateSummary(updateSuccesses: successes, updateFailures: failures, changedContacts: changed))
    }

    /// Makes a user the active one (new connections use its relays).
    public func setActiveUser(userId: Int64) async throws -> ChatResponse {
        let u = try await user(userId)
        try await userWrite { db in
            try UserRecord.updateAll(db, UserRecord.Columns.active.set(to: false))
            try UserRecord.filter(key: userId).updateAll(db, UserRecord.Columns.active.set(to: true))
        }
        await agent.setRelays(try relays(for: u))
        return .activeUser(user: userModel(try await user(userId)))
    }

    /// Deletes a user that is neither the active nor the last one, with its contacts (their
    /// connections, and their queues on the relays when `deleteQueues`), address, requests and items.
    public func deleteUser(userId: Int64, deleteQueues: Bool) async throws -> ChatResponse {
        let u = try await user(userId)
        let count = try await users().count
        if count <= 1 { throw ChatFailure.chat(.cantDeleteLastUser(userId: userId)) }
        if u.active { throw ChatFailure.chat(.cantDeleteActiveUser(userId: userId)) }
        let (connections, agentAddress, requests) = try await dbRead { db in
            (try ContactRecord.filter(ContactRecord.Columns.userId == userId).fetchAll(db).map(\.agentConnId),
             try AddressRecord.fetchOne(db, key: userId)?.agentAddressId,
             try ContactRequestRecord.filter(ContactRequestRecord.Columns.userId == userId).fetchAll(db).map(\.agentRequestId))
        }
        for conn in connections + (try await groupConnections(userId: userId)) { try? await agent.deleteConnection(conn, deleteQueue: deleteQueues) }
        if let agentAddress { try? await agent.deleteAddress(agentAddress, deleteQueue: deleteQueues) }
        for r in requests { try? await agent.rejectRequest(r) }
        // Contacts, items, reactions, address and requests go with the user (ON DELETE CASCADE).
        _ = try await userWrite { db in try UserRecord.deleteOne(db, key: userId) }
        return .cmdOk(user: nil)
    }

    /// Turns delivery receipts for a user's contacts on or off (`/_set receipts contacts <userId> on|off`).
    public func setContactReceipts(userId: Int64, enabled: Bool) async throws -> ChatResponse {
        let u = try await user(userId)
        try await userWrite { db in _ = try UserRecord.filter(key: userId).updateAll(db, UserRecord.Columns.sendReceipts.set(to: enabled)) }
        return .cmdOk(user: userModel(try await user(u.id)))
    }

    // MARK: - Lifecycle and relays

    public func start() async throws -> ChatResponse {
        let u = try await activeUser()
        if started { return .chatRunning }
        let rs = try relays(for: u)
        await agent.setRelays(rs)
        started = true
        await resumeAutoAccepts()
        inBackground { await self.resyncSubscribedChannels() } // (+ChannelMembers)
        return .chatStarted
    }

    /// Closes the databases (after `run()` was cancelled); the controller is unusable afterwards.
    public func close() async {
        started = false
        closing = true
        for task in background.values { task.cancel() }
        for task in background.values { await task.value }
        await agent.close()
        let db = store.db
        await Blocking.run("chat-close") { try? db.close() }
    }

    public func stop() -> ChatResponse {
        started = false
        return .chatStopped
    }

    func relays(for u: UserRow) throws -> [RelayAddress] {
        if !u.relays.isEmpty { return try u.relays.map { try RelayAddress(parsing: $0) } }
        return defaultRelays
    }

    public func setRelays(userId: Int64, relays: [String]) async throws -> ChatResponse {
        let u = try await user(userId)
        for r in relays {
            do { _ = try RelayAddress(parsing: r) } catch { throw ChatFailure.command("invalid relay address \(r): \(error)") }
        }
        let joined = relays.joined(separator: ",")
        try await userWrite { db in _ = try UserRecord.filter(key: userId).updateAll(db, UserRecord.Columns.relays.set(to: joined)) }
        if u.active {
            let rs = try self.relays(for: try await user(userId))
            await agent.setRelays(rs)
        }
        return .userRelays(user: userModel(try await user(userId)), relays: relays)
    }

    public func getRelays(userId: Int64) async throws -> ChatResponse {
        let u = try await user(userId)
        return .userRelays(user: userModel(u), relays: try relays(for: u).map(\.description))
    }

    func requireStarted() throws {
        guard started else { throw ChatFailure.chat(.chatNotStarted) }
    }

    func agentCall<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let e as AgentError {
            throw Self.failure(e)
        }
    }

    /// The `chatError` an agent error is reported as.
    nonisolated static func failure(_ e: AgentError, connection: String = "") -> ChatFailure {
        switch e.code {
        case .noRelay: ChatFailure.command("no relays: set them with /_relays <userId> smp://… or the SWIFTPLEX_SERVERS environment variable")
        default: ChatFailure(.errorAgent(agentError(e.code, e.message), agentConnId: connection))
        }
    }

    nonisolated static func agentError(_ code: AgentError.Code, _ message: String) -> AgentErrorType {
        // The model lists the agent's codes (a test keeps the two lists equal).
        AgentErrorType(code: AgentErrorType.Code(rawValue: code.rawValue) ?? .store, message: message)
    }
}
