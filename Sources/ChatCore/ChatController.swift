import Agent
import Foundation
import GRDB
import Logging
import RelayProtocol
import SwiftplexBase
import SwiftplexStorage

/// A failed chat operation, carrying the `chatError` JSON the API reports.
public struct ChatFailure: Error, Sendable {
    public let chatError: JSONValue
    init(_ chatError: JSONValue) { self.chatError = chatError }
    /// A `commandError` with a message.
    public init(commandError message: String) { self.chatError = ChatJSON.chatError("commandError", [("message", .string(message))]) }
    static func command(_ message: String) -> ChatFailure { ChatFailure(ChatJSON.chatError("commandError", [("message", .string(message))])) }
}

/// The chat engine: users, contacts, addresses and messages over the agent, persisted in
/// `<prefix>_chat.db`, reporting what happens as API events (`newChatItems`, `contactConnected`, …).
public actor ChatController {
    public nonisolated let events: AsyncStream<JSONValue>
    let sink: AsyncStream<JSONValue>.Continuation
    let store: ChatStore
    let agent: Agent
    private let defaultRelays: [RelayAddress]
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
    /// Contact requests being accepted automatically (so that one is never joined twice at once).
    var autoAccepting: Set<Int64> = []

    /// Opens (creating and migrating) `<prefix>_chat.db` and `<prefix>_agent.db`.
    /// - Parameter defaultRelays: used for users with no relays of their own (`SWIFTPLEX_SERVERS`).
    /// - Parameter limits: what peers may send (requests, reactions).
    /// - Parameter agentOptions: which relays peers' links may name and how long to wait for them.
    public init(prefix: String, defaultRelays: [RelayAddress], logger: Logger, confirmation: MigrationConfirmation = .yesUp,
                limits: ChatLimits = ChatLimits(), agentOptions: AgentOptions = AgentOptions()) throws {
        if confirmation == .error {
            for (file, pending) in [(prefix + "_chat.db", try PrivateDatabase.pendingMigrations(ChatStore.migrator, at: URL(fileURLWithPath: prefix + "_chat.db"))),
                                    (prefix + "_agent.db", try Agent.pendingMigrations(databasePath: URL(fileURLWithPath: prefix + "_agent.db")))]
            where !pending.isEmpty {
                throw MigrationPending(dbFile: file, migrations: pending)
            }
        }
        store = try ChatStore(path: URL(fileURLWithPath: prefix + "_chat.db"))
        agent = try Agent(databasePath: URL(fileURLWithPath: prefix + "_agent.db"), relays: defaultRelays, logger: logger, options: agentOptions)
        self.defaultRelays = defaultRelays
        self.logger = logger
        self.limits = limits
        (events, sink) = AsyncStream.makeStream(of: JSONValue.self)
    }

    /// Runs the agent and turns its events into chat events, until cancelled.
    public func run() async throws {
        inBackground { await self.resumeConnectionDeletions() }
        try await withThrowingTaskGroup(of: Void.self) { group in
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

    /// Rejects old unanswered contact requests now and then (they are also swept as requests arrive).
    private func sweepContactRequests() async throws {
        while !Task.isCancelled {
            await expireContactRequests()
            try await Task.sleep(for: limits.contactRequestSweepInterval)
        }
    }

    /// Short synchronous database work on the actor.
    func dbRead<T>(_ body: (Database) throws -> T) throws -> T { try store.queue.read(body) }
    func dbWrite<T>(_ body: (Database) throws -> T) throws -> T { try store.queue.write(body) }

    // MARK: - Users

    struct UserRow {
        var id: Int64; var profile: JSONValue; var active: Bool; var relays: [String]; var sendReceipts: Bool
        /// The user's own name among its local names (`bot`, or `bot_1` if it renamed itself to a contact's name).
        var localName: String?
    }

    func activeUser() throws -> UserRow {
        guard let u = try dbRead({ db in try Self.fetchUser(db, sql: "SELECT * FROM user WHERE active = 1") }) else {
            throw ChatFailure(ChatJSON.chatError("noActiveUser"))
        }
        return u
    }

    func user(_ id: Int64) throws -> UserRow {
        guard let u = try dbRead({ db in try Self.fetchUser(db, sql: "SELECT * FROM user WHERE id = ?", [id]) }) else {
            throw ChatFailure(ChatJSON.storeError("userNotFound", [("userId", .int(Int64(id)))]))
        }
        return u
    }

    static func fetchUser(_ db: Database, sql: String, _ args: StatementArguments = []) throws -> UserRow? {
        try Row.fetchOne(db, sql: sql, arguments: args).map {
            UserRow(id: $0["id"], profile: (try? JSONValue.parse($0["profile"])) ?? .object([]), active: $0["active"],
                    relays: ($0["relays"] as String).split(separator: ",").map(String.init), sendReceipts: $0["send_receipts"],
                    localName: $0["local_display_name"])
        }
    }

    func userJSON(_ u: UserRow) -> JSONValue { ChatJSON.user(id: u.id, profile: u.profile, active: u.active, sendReceipts: u.sendReceipts, localName: u.localName) }

    func response(_ type: String, _ user: UserRow?, _ fields: [(String, JSONValue)] = []) -> JSONValue {
        var pairs: [(String, JSONValue)] = [("type", .string(type))]
        if let user { pairs.append(("user", userJSON(user))) }
        return .object(pairs + fields)
    }

    public func showActiveUser() throws -> JSONValue { response("activeUser", try activeUser()) }

    /// Creates a user from a NewUser object and makes it active. Display names are trimmed and
    /// must be non-empty, must not start with `@` or `#`, and must be unique.
    public func createActiveUser(_ newUser: JSONValue) throws -> JSONValue {
        guard case var .object(profile) = newUser["profile"] ?? .object([("displayName", .string(""))]) else {
            throw ChatFailure.command("profile must be an object")
        }
        let raw = newUser["profile"]?["displayName"]?.stringValue ?? ""
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, !name.hasPrefix("@"), !name.hasPrefix("#"), !name.contains(where: { $0.isNewline }) else {
            let valid = String(name.drop(while: { $0 == "@" || $0 == "#" || $0 == " " }))
            throw ChatFailure(ChatJSON.chatError("invalidDisplayName", [("displayName", .string(raw)), ("validName", .string(valid))]))
        }
        profile = profile.map { $0.0 == "displayName" ? ($0.0, .string(name)) : $0 }
        if !profile.contains(where: { $0.0 == "fullName" }) { profile.insert(("fullName", .string("")), at: 1) }
        let stored = JSONValue.object(profile)
        let id: Int64 = try dbWrite { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM user WHERE display_name = ?", arguments: [name]) == true {
                throw ChatFailure(ChatJSON.chatError("userExists", [("contactName", .string(name))]))
            }
            try db.execute(sql: "UPDATE user SET active = 0")
            try db.execute(sql: "INSERT INTO user (display_name, profile, active, created_at) VALUES (?, ?, 1, ?)",
                           arguments: [name, stored.description, Timestamp.now()])
            let id = db.lastInsertedRowID
            let local = try LocalNames.reserve(db, userId: id, displayName: name)
            try db.execute(sql: "UPDATE user SET local_display_name = ? WHERE id = ?", arguments: [local, id])
            return id
        }
        return response("activeUser", try user(id))
    }

    public func listUsers() throws -> JSONValue {
        let users = try dbRead { db in
            try Row.fetchAll(db, sql: "SELECT id FROM user ORDER BY id").map { $0["id"] as Int64 }
        }
        let infos = try users.map { id -> JSONValue in .object([("user", userJSON(try user(id))), ("unreadCount", .int(0))]) }
        return .object([("type", .string("usersList")), ("users", .array(infos))])
    }

    /// Replaces a user's profile and sends it (`x.info`) to every connected contact that knows
    /// this user by it (not to incognito contacts); they report `contactUpdated`.
    public func updateProfile(userId: Int64, profile: JSONValue) async throws -> JSONValue {
        let u = try user(userId)
        guard let name = profile["displayName"]?.stringValue?.trimmingCharacters(in: .whitespacesAndNewlines), !name.isEmpty,
              !name.hasPrefix("@"), !name.hasPrefix("#") else {
            let raw = profile["displayName"]?.stringValue ?? ""
            throw ChatFailure(ChatJSON.chatError("invalidDisplayName", [("displayName", .string(raw)),
                                                                        ("validName", .string(String(raw.drop(while: { $0 == "@" || $0 == "#" || $0 == " " }))))]))
        }
        if u.profile == profile { return response("userProfileNoChange", u) }
        try dbWrite { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM user WHERE display_name = ? AND id != ?", arguments: [name, userId]) == true {
                throw ChatFailure(ChatJSON.chatError("userExists", [("contactName", .string(name))]))
            }
            // The user's own local name follows the new name, unique among its contacts' names.
            let local = try LocalNames.rename(db, userId: userId, current: u.localName, displayName: name)
            try db.execute(sql: "UPDATE user SET profile = ?, display_name = ?, local_display_name = ? WHERE id = ?",
                           arguments: [profile.description, name, local, userId])
        }
        let updated = try user(userId)
        var successes = 0, failures = 0
        var changed: [JSONValue] = []
        for c in try contacts(userId: userId, where: "status = 'ready' AND incognito_profile IS NULL") {
            do {
                try await sendChatMessage(c, ChatMessage(event: "x.info", params: .object([("profile", ownProfile(for: c, user: updated))])))
                successes += 1
                changed.append(contactJSON(c, user: updated))
            } catch {
                failures += 1
            }
        }
        return response("userProfileUpdated", updated, [
            ("fromProfile", u.profile), ("toProfile", profile),
            ("updateSummary", .object([("updateSuccesses", .int(Int64(successes))), ("updateFailures", .int(Int64(failures))),
                                       ("changedContacts", .array(changed))])),
        ])
    }

    /// Makes a user the active one (new connections use its relays).
    public func setActiveUser(userId: Int64) async throws -> JSONValue {
        let u = try user(userId)
        try dbWrite { db in
            try db.execute(sql: "UPDATE user SET active = 0")
            try db.execute(sql: "UPDATE user SET active = 1 WHERE id = ?", arguments: [userId])
        }
        await agent.setRelays(try relays(for: u))
        return response("activeUser", try user(userId))
    }

    /// Deletes a user that is neither the active nor the last one, with its contacts (their
    /// connections, and their queues on the relays when `deleteQueues`), address, requests and items.
    public func deleteUser(userId: Int64, deleteQueues: Bool) async throws -> JSONValue {
        let u = try user(userId)
        let count = try dbRead { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM user") ?? 0 }
        if count <= 1 { throw ChatFailure(ChatJSON.chatError("cantDeleteLastUser", [("userId", .int(Int64(userId)))])) }
        if u.active { throw ChatFailure(ChatJSON.chatError("cantDeleteActiveUser", [("userId", .int(Int64(userId)))])) }
        let (connections, agentAddress, requests) = try dbRead { db in
            (try Int64.fetchAll(db, sql: "SELECT agent_conn_id FROM contact WHERE user_id = ?", arguments: [userId]),
             try Int64.fetchOne(db, sql: "SELECT agent_address_id FROM address WHERE user_id = ?", arguments: [userId]),
             try Int64.fetchAll(db, sql: "SELECT agent_request_id FROM contact_request WHERE user_id = ?", arguments: [userId]))
        }
        for conn in connections { try? await agent.deleteConnection(conn, deleteQueue: deleteQueues) }
        if let agentAddress { try? await agent.deleteAddress(agentAddress, deleteQueue: deleteQueues) }
        for r in requests { try? await agent.rejectRequest(r) }
        // Contacts, items, reactions, address and requests go with the user (ON DELETE CASCADE).
        try dbWrite { db in try db.execute(sql: "DELETE FROM user WHERE id = ?", arguments: [userId]) }
        return cmdOk(nil)
    }

    /// Turns delivery receipts for a user's contacts on or off (`/_set receipts contacts <userId> on|off`).
    public func setContactReceipts(userId: Int64, enabled: Bool) throws -> JSONValue {
        let u = try user(userId)
        try dbWrite { db in try db.execute(sql: "UPDATE user SET send_receipts = ? WHERE id = ?", arguments: [enabled, userId]) }
        return cmdOk(try user(u.id))
    }

    // MARK: - Lifecycle and relays

    public func start() async throws -> JSONValue {
        let u = try activeUser()
        if started { return .object([("type", .string("chatRunning"))]) }
        let rs = try relays(for: u)
        await agent.setRelays(rs)
        started = true
        resumeAutoAccepts()
        return .object([("type", .string("chatStarted"))])
    }

    /// Closes the databases (after `run()` was cancelled); the controller is unusable afterwards.
    public func close() async {
        started = false
        closing = true
        for task in background.values { task.cancel() }
        for task in background.values { await task.value }
        await agent.close()
        try? store.queue.close()
    }

    public func stop() -> JSONValue {
        started = false
        return .object([("type", .string("chatStopped"))])
    }

    func relays(for u: UserRow) throws -> [RelayAddress] {
        if !u.relays.isEmpty { return try u.relays.map { try RelayAddress(parsing: $0) } }
        return defaultRelays
    }

    public func setRelays(userId: Int64, relays: [String]) async throws -> JSONValue {
        let u = try user(userId)
        for r in relays {
            do { _ = try RelayAddress(parsing: r) } catch { throw ChatFailure.command("invalid relay address \(r): \(error)") }
        }
        try dbWrite { db in try db.execute(sql: "UPDATE user SET relays = ? WHERE id = ?", arguments: [relays.joined(separator: ","), userId]) }
        if u.active {
            let rs = try self.relays(for: try user(userId))
            await agent.setRelays(rs)
        }
        return response("userRelays", try user(userId), [("relays", .array(relays.map { .string($0) }))])
    }

    public func getRelays(userId: Int64) throws -> JSONValue {
        let u = try user(userId)
        return response("userRelays", u, [("relays", .array(try relays(for: u).map { .string($0.description) }))])
    }

    func requireStarted() throws {
        guard started else { throw ChatFailure(ChatJSON.chatError("chatNotStarted")) }
    }

    func agentCall<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let e as AgentError {
            throw Self.failure(e)
        }
    }

    /// The `chatError` an agent error is reported as.
    nonisolated static func failure(_ e: AgentError) -> ChatFailure {
        switch e.code {
        case .noRelay: ChatFailure.command("no relays: set them with /_relays <userId> smp://… or the SWIFTPLEX_SERVERS environment variable")
        default: ChatFailure(.object([("type", .string("errorAgent")), ("agentError", .object([("type", .string(e.code.rawValue)), ("message", .string(e.message))])), ("agentConnId", .string(""))]))
        }
    }
}
