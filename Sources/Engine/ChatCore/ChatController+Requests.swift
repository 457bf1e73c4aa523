import Agent
import ChatModel
import Foundation
import SwiftplexSQL
import SwiftplexBase

extension ChatController {
    // MARK: - Requests

    func request(_ requestId: Int64) async throws -> RequestRow {
        guard let r = try await dbRead({ db in try ContactRequestRecord.fetchOne(db, key: requestId) }) else {
            throw ChatFailure.store(.contactRequestNotFound(contactRequestId: requestId))
        }
        return RequestRow(r)
    }

    public func acceptRequest(_ requestId: Int64, incognito: Bool = false) async throws -> ChatResponse {
        let r = try await request(requestId)
        let u = try await user(r.userId)
        return .acceptingContactRequest(user: userModel(u), contact: try await accept(user: u, request: r, incognito: incognito))
    }

    /// Accepts a request; the new contact keeps the local name the request had.
    func accept(user u: UserRow, request r: RequestRow, incognito: Bool) async throws -> Contact {
        let custom = incognito ? Self.randomProfile() : nil
        let info = try profileInfo(custom ?? u.profile)
        let id = try await trackingJoin {
            let conn = try await agentCall { try await agent.acceptRequest(r.agentRequestId, info: info) }
            return (try await insertContact(userId: u.id, agentConnId: conn, profile: r.profile, viaAddress: true, invitation: nil, incognito: custom,
                                            accepted: true, localName: r.localName), conn)
        }
        let requestId = r.id
        _ = try await dbWrite { db in try ContactRequestRecord.deleteOne(db, key: requestId) }
        return contactModel(try await contact(id).1, user: u)
    }

    public func rejectRequest(_ requestId: Int64) async throws -> ChatResponse {
        let r = try await request(requestId)
        let u = try await user(r.userId)
        try? await agent.rejectRequest(r.agentRequestId)
        try await dbWrite { db in
            _ = try ContactRequestRecord.deleteOne(db, key: requestId)
            try LocalNames.release(db, userId: r.userId, name: r.localName)
        }
        return .contactRequestRejected(user: userModel(u), contactRequest: ModelOf.contactRequest(r), contact: nil)
    }

    func contactRequest(addressId: Int64, request: Int64, info: [UInt8]) async throws {
        if try await channelLinkRequest(addressId: addressId, request: request, info: info) { return } // a relay's channel link (+ChannelMembers)
        if try await groupLinkRequest(addressId: addressId, request: request, info: info) { return } // a group link's (+GroupLinks)
        guard let userId = try await dbRead({ db in
            try AddressRecord.filter(AddressRecord.Columns.agentAddressId == addressId).fetchOne(db)?.userId
        }) else { return }
        let u = try await user(userId)
        if u.chatRelay {
            // A relay address serves channel owners only (`x.grp.relay.inv`): anyone else's
            // request is refused unseen (+Channels).
            try await relayAddressRequest(user: u, request: request, info: info)
            return
        }
        await expireContactRequests()
        guard try await admitContactRequest(addressId: addressId, userId: userId) else {
            refusedContactRequests += 1
            try? await agent.rejectRequest(request)
            return
        }
        let profile = PeerInput.profile(fromInfo: info) ?? Profile(displayName: "unknown")
        let (text, now) = (try Stored.text(profile), Timestamp.now())
        let record = try await dbWrite { db in
            var record = ContactRequestRecord(userId: userId, agentRequestId: request, profile: text, createdAt: now,
                                              localDisplayName: try LocalNames.reserve(db, userId: userId, displayName: profile.displayName))
            try record.insert(db)
            return record
        }
        let r = RequestRow(record)
        if let auto = try await address(userId: userId)?.settings.autoAccept {
            // Accepting joins the requester's invitation on a relay it chose: in a task, so a
            // relay that does not answer holds up nothing else (the request stays, and can be
            // accepted again, when the join fails).
            autoAccept(user: u, request: r, incognito: auto.acceptIncognito)
        } else {
            sink.yield(.receivedContactRequest(user: userModel(u), contactRequest: ModelOf.contactRequest(r), chat: nil))
        }
    }

    /// Whether a new request to an address fits the limits: at most `contactRequestsPerWindow`
    /// per address in the window, and fewer than `maxPendingContactRequests` waiting.
    func admitContactRequest(addressId: Int64, userId: Int64) async throws -> Bool {
        let now = ContinuousClock.now
        var recent = (requestArrivals[addressId] ?? []).filter { now - $0 < limits.contactRequestWindow }
        guard recent.count < limits.contactRequestsPerWindow else {
            requestArrivals[addressId] = recent.isEmpty ? nil : recent
            logger.info("a contact request was refused: too many to this address", metadata: ["window": "\(limits.contactRequestWindow)"])
            return false
        }
        // Counted as arrived before the store is asked, so that requests handled meanwhile see it.
        recent.append(now)
        requestArrivals[addressId] = recent
        let pending = try await dbRead { db in try ContactRequestRecord.filter(ContactRequestRecord.Columns.userId == userId).fetchCount(db) }
        guard pending < limits.maxPendingContactRequests else {
            logger.info("a contact request was refused: too many waiting", metadata: ["pending": "\(pending)"])
            if var arrivals = requestArrivals[addressId], let i = arrivals.lastIndex(of: now) {
                arrivals.remove(at: i)
                requestArrivals[addressId] = arrivals.isEmpty ? nil : arrivals
            }
            return false
        }
        return true
    }

    /// Rejects and forgets contact requests older than `contactRequestTTL` (as of `now`), freeing
    /// their names; returns how many.
    @discardableResult
    public func expireContactRequests(now: Date = Date()) async -> Int {
        let cutoff = Timestamp.before(limits.contactRequestTTL, now: now)
        let expired: [ContactRequestRecord]
        do {
            expired = try await dbRead { db in
                try ContactRequestRecord.filter(ContactRequestRecord.Columns.createdAt < cutoff).order(ContactRequestRecord.Columns.id).fetchAll(db)
            }
        } catch {
            logger.warning("could not look for expired contact requests", metadata: ["error": "\(error)"])
            return 0
        }
        var count = 0
        for r in expired {
            try? await agent.rejectRequest(r.agentRequestId)
            do {
                try await dbWrite { db in
                    _ = try ContactRequestRecord.deleteOne(db, key: r.id)
                    try LocalNames.release(db, userId: r.userId, name: r.localDisplayName)
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
    func autoAccept(user u: UserRow, request r: RequestRow, incognito: Bool) {
        guard !autoAccepting.contains(r.id) else { return }
        autoAccepting.insert(r.id)
        inBackground {
            do {
                let contact = try await self.accept(user: u, request: r, incognito: incognito)
                await self.autoAcceptDone(r.id)
                self.sink.yield(.acceptingContactRequest(user: ModelOf.user(u), contact: contact))
            } catch {
                await self.autoAcceptDone(r.id)
                var failure = Self.chatError(error)
                failure.contactRequestId = r.id
                throw ChatFailure(failure)
            }
        }
    }

    private func autoAcceptDone(_ requestId: Int64) { autoAccepting.remove(requestId) }

    /// Requests an auto-accepting address received but did not get to accept — the process
    /// stopped during the join, or the requester's relay failed — are accepted again when the
    /// chat starts.
    func resumeAutoAccepts() async {
        let pending = (try? await dbRead { db in
            try ContactRequestRecord.order(ContactRequestRecord.Columns.id).fetchAll(db).compactMap { r -> (ContactRequestRecord, AddressRecord)? in
                try AddressRecord.fetchOne(db, key: r.userId).map { (r, $0) }
            }
        }) ?? []
        for (record, address) in pending {
            guard let auto = AddressRow(address).settings.autoAccept, let u = try? await user(record.userId) else { continue }
            autoAccept(user: u, request: RequestRow(record), incognito: auto.acceptIncognito)
        }
    }
}
