import Agent
import Foundation
import GRDB
import SwiftplexBase

extension ChatController {
    // MARK: - Requests

    public func acceptRequest(_ requestId: Int64, incognito: Bool = false) async throws -> JSONValue {
        guard let (userId, agentRequest, profile, localName) = try dbRead({ db in
            try Row.fetchOne(db, sql: "SELECT * FROM contact_request WHERE id = ?", arguments: [requestId]).map {
                ($0["user_id"] as Int64, $0["agent_request_id"] as Int64, (try? JSONValue.parse($0["profile"] as String)) ?? .object([]),
                 $0["local_display_name"] as String?)
            }
        }) else { throw ChatFailure(ChatJSON.storeError("contactRequestNotFound", [("contactRequestId", .int(Int64(requestId)))])) }
        let u = try user(userId)
        return try await accept(user: u, requestId: requestId, agentRequest: agentRequest, profile: profile, incognito: incognito, localName: localName)
    }

    /// Accepts a request; the new contact keeps the local name the request had.
    func accept(user u: UserRow, requestId: Int64, agentRequest: Int64, profile: JSONValue, incognito: Bool, localName: String?) async throws -> JSONValue {
        let custom = incognito ? Self.randomProfile() : nil
        let info = profileInfo(custom ?? u.profile)
        let id = try await trackingJoin {
            let conn = try await agentCall { try await agent.acceptRequest(agentRequest, info: info) }
            return (try insertContact(userId: u.id, agentConnId: conn, profile: profile, viaAddress: true, invitation: nil, incognito: custom, accepted: true,
                                      localName: localName), conn)
        }
        try dbWrite { db in try db.execute(sql: "DELETE FROM contact_request WHERE id = ?", arguments: [requestId]) }
        return response("acceptingContactRequest", u, [("contact", contactJSON(try contact(id).1, user: u))])
    }

    public func rejectRequest(_ requestId: Int64) async throws -> JSONValue {
        guard let (userId, agentRequest, profile, createdAt, localName) = try dbRead({ db in
            try Row.fetchOne(db, sql: "SELECT * FROM contact_request WHERE id = ?", arguments: [requestId]).map {
                ($0["user_id"] as Int64, $0["agent_request_id"] as Int64, (try? JSONValue.parse($0["profile"] as String)) ?? .object([]), $0["created_at"] as String,
                 $0["local_display_name"] as String?)
            }
        }) else { throw ChatFailure(ChatJSON.storeError("contactRequestNotFound", [("contactRequestId", .int(Int64(requestId)))])) }
        let u = try user(userId)
        try? await agent.rejectRequest(agentRequest)
        try dbWrite { db in
            try db.execute(sql: "DELETE FROM contact_request WHERE id = ?", arguments: [requestId])
            try LocalNames.release(db, userId: userId, name: localName)
        }
        return response("contactRequestRejected", u, [("contactRequest", ChatJSON.contactRequest(id: requestId, profile: profile, createdAt: createdAt, localName: localName))])
    }

    func contactRequest(addressId: Int64, request: Int64, info: [UInt8]) async throws {
        guard let userId = try dbRead({ db in try Int64.fetchOne(db, sql: "SELECT user_id FROM address WHERE agent_address_id = ?", arguments: [addressId]) }) else { return }
        let u = try user(userId)
        await expireContactRequests()
        guard try admitContactRequest(addressId: addressId, userId: userId) else {
            refusedContactRequests += 1
            try? await agent.rejectRequest(request)
            return
        }
        let profile = Self.profile(fromInfo: info) ?? .object([("displayName", .string("unknown")), ("fullName", .string(""))])
        let now = Timestamp.now()
        let (requestId, localName) = try dbWrite { db in
            let local = try LocalNames.reserve(db, userId: userId, displayName: LocalNames.base(of: profile) ?? "unknown")
            try db.execute(sql: "INSERT INTO contact_request (user_id, agent_request_id, profile, local_display_name, created_at) VALUES (?, ?, ?, ?, ?)",
                           arguments: [userId, request, profile.description, local, now])
            return (db.lastInsertedRowID, local)
        }
        if let auto = try address(userId: userId)?.settings["autoAccept"] {
            // Accepting joins the requester's invitation on a relay it chose: in a task, so a
            // relay that does not answer holds up nothing else (the request stays, and can be
            // accepted again, when the join fails).
            autoAccept(user: u, requestId: requestId, agentRequest: request, profile: profile, incognito: auto["acceptIncognito"]?.boolValue ?? false,
                       localName: localName)
        } else {
            sink.yield(response("receivedContactRequest", u, [("contactRequest", ChatJSON.contactRequest(id: requestId, profile: profile, createdAt: now, localName: localName))]))
        }
    }

    /// Whether a new request to an address fits the limits: at most `contactRequestsPerWindow`
    /// per address in the window, and fewer than `maxPendingContactRequests` waiting.
    private func admitContactRequest(addressId: Int64, userId: Int64) throws -> Bool {
        let now = ContinuousClock.now
        var recent = (requestArrivals[addressId] ?? []).filter { now - $0 < limits.contactRequestWindow }
        defer { requestArrivals[addressId] = recent.isEmpty ? nil : recent }
        guard recent.count < limits.contactRequestsPerWindow else {
            logger.info("a contact request was refused: too many to this address", metadata: ["window": "\(limits.contactRequestWindow)"])
            return false
        }
        let pending = try dbRead { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM contact_request WHERE user_id = ?", arguments: [userId]) ?? 0 }
        guard pending < limits.maxPendingContactRequests else {
            logger.info("a contact request was refused: too many waiting", metadata: ["pending": "\(pending)"])
            return false
        }
        recent.append(now)
        return true
    }

    /// Rejects and forgets contact requests older than `contactRequestTTL` (as of `now`), freeing
    /// their names; returns how many.
    @discardableResult
    public func expireContactRequests(now: Date = Date()) async -> Int {
        let ttl = limits.contactRequestTTL.components
        let age: TimeInterval = Double(ttl.seconds) + Double(ttl.attoseconds) / 1e18
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let cutoff = f.string(from: now.addingTimeInterval(-age))
        let expired: [(id: Int64, userId: Int64, agentRequest: Int64, name: String?)]
        do {
            expired = try dbRead { db in
                try Row.fetchAll(db, sql: "SELECT id, user_id, agent_request_id, local_display_name FROM contact_request WHERE created_at < ? ORDER BY id",
                                 arguments: [cutoff]).map { ($0["id"], $0["user_id"], $0["agent_request_id"], $0["local_display_name"]) }
            }
        } catch {
            logger.warning("could not look for expired contact requests", metadata: ["error": "\(error)"])
            return 0
        }
        var count = 0
        for r in expired {
            try? await agent.rejectRequest(r.agentRequest)
            do {
                try dbWrite { db in
                    try db.execute(sql: "DELETE FROM contact_request WHERE id = ?", arguments: [r.id])
                    try LocalNames.release(db, userId: r.userId, name: r.name)
                }
                count += 1
            } catch {
                logger.warning("could not delete an expired contact request", metadata: ["error": "\(error)"])
            }
        }
        if count > 0 { logger.info("expired unanswered contact requests", metadata: ["count": "\(count)"]) }
        expiredContactRequests += count
        return count
    }

    /// Accepts a request in a task of its own, reporting `acceptingContactRequest` or a
    /// `chatError` with the `contactRequestId` (the request stays: `/_accept` tries again, and so
    /// does the next start).
    func autoAccept(user u: UserRow, requestId: Int64, agentRequest: Int64, profile: JSONValue, incognito: Bool, localName: String?) {
        guard !autoAccepting.contains(requestId) else { return }
        autoAccepting.insert(requestId)
        inBackground {
            do {
                let accepted = try await self.accept(user: u, requestId: requestId, agentRequest: agentRequest, profile: profile, incognito: incognito, localName: localName)
                await self.autoAcceptDone(requestId)
                self.sink.yield(accepted)
            } catch let failure as ChatFailure {
                await self.autoAcceptDone(requestId)
                guard case let .object(fields) = failure.chatError else { throw failure }
                throw ChatFailure(.object(fields + [("contactRequestId", .int(Int64(requestId)))]))
            } catch {
                await self.autoAcceptDone(requestId)
                throw error
            }
        }
    }

    private func autoAcceptDone(_ requestId: Int64) { autoAccepting.remove(requestId) }

    /// Requests an auto-accepting address received but did not get to accept — the process
    /// stopped during the join, or the requester's relay failed — are accepted again when the
    /// chat starts.
    func resumeAutoAccepts() {
        let pending = (try? dbRead { db in
            try Row.fetchAll(db, sql: """
                SELECT r.id, r.user_id, r.agent_request_id, r.profile, r.local_display_name, a.settings FROM contact_request r
                JOIN address a ON a.user_id = r.user_id ORDER BY r.id
                """)
        }) ?? []
        for row in pending {
            guard let settings = try? JSONValue.parse(row["settings"] as String), let auto = settings["autoAccept"],
                  let u = try? user(row["user_id"]) else { continue }
            let profile = (try? JSONValue.parse(row["profile"] as String)) ?? .object([])
            autoAccept(user: u, requestId: row["id"], agentRequest: row["agent_request_id"], profile: profile,
                       incognito: auto["acceptIncognito"]?.boolValue ?? false, localName: row["local_display_name"])
        }
    }
}
