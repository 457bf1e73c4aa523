import Agent
import ChannelProtocol
import ChatModel
import Foundation
import SwiftplexSQL
import SwiftplexBase

/// One chat relay in `/relays name=<name> <address> …`.
public struct ChatRelayEntry: Sendable, Hashable {
    public var name: String
    public var address: String
    public init(name: String, address: String) {
        self.name = name
        self.address = address
    }
}

extension ChatFailure {
    /// A channel layer refusal as the API reports it (`channelError {code, message}`).
    init(_ e: ChannelError) { self.init(ChatError.error(.channelError(code: e.code.rawValue, message: e.message))) }
}

extension ChatController {
    // MARK: - Chat relays an owner uses

    /// The user's current chat relays (not deleted), in the order registered.
    func chatRelays(userId: Int64) async throws -> [ChatRelayRecord] {
        try await dbRead { db in
            try ChatRelayRecord.filter(ChatRelayRecord.Columns.userId == userId && ChatRelayRecord.Columns.deleted == false)
                .order(ChatRelayRecord.Columns.id).fetchAll(db)
        }
    }

    /// `/relays`: the active user's chat relays (`userChatRelays`).
    public func listChatRelays() async throws -> ChatResponse {
        let u = try await activeUser()
        return .channel(.userChatRelays(UserChatRelays(user: userModel(u), chatRelays: try await chatRelays(userId: u.id).map(\.model))))
    }

    /// `/relays name=<name> <address> …`: replaces the active user's chat relays with these (as
    /// SimpleX's CLI does). Each address must be a chat relay's address (a `/r` short link); names
    /// and addresses must differ (`chatRelayExists`). A relay kept by address keeps its id (and is
    /// renamed); one dropped is marked deleted; one dropped before comes back. Nothing changes
    /// when any entry is refused.
    public func setChatRelays(_ entries: [ChatRelayEntry]) async throws -> ChatResponse {
        let u = try await activeUser()
        guard !entries.isEmpty else { throw ChatFailure.command("/relays needs name=<name> <address> for each relay") }
        var normalized: [ChatRelayEntry] = []
        for e in entries {
            let name = e.name.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !name.isEmpty, !name.contains(where: { $0.isWhitespace }) else {
                throw ChatFailure.command("a chat relay's name must be one word")
            }
            do { try ChannelLinks.checkRelayAddress(e.address) } catch { throw ChatFailure(error) }
            let short: ShortLink
            do { short = try ShortLink(parsing: e.address) } catch {
                throw ChatFailure(ChannelError(.invalidLink, "the chat relay address cannot be read: \(error)"))
            }
            guard short.kind == .relay else { throw ChatFailure(ChannelError(.notRelayAddress, "not a chat relay address (…/r#…)")) }
            normalized.append(ChatRelayEntry(name: name, address: short.description))
        }
        guard Set(normalized.map(\.name)).count == normalized.count, Set(normalized.map(\.address)).count == normalized.count else {
            throw ChatFailure.chat(.chatRelayExists)
        }
        let userId = u.id
        let now = Timestamp.now()
        let wanted = normalized
        try await dbWrite { db in
            let existing = try ChatRelayRecord.filter(ChatRelayRecord.Columns.userId == userId).fetchAll(db)
            let kept = Set(wanted.map(\.address))
            for var r in existing where !kept.contains(r.address) && !r.deleted {
                r.deleted = true
                try r.update(db)
            }
            for e in wanted {
                let profile = try Stored.text(RelayProfile(displayName: e.name))
                if var r = existing.first(where: { $0.address == e.address }) {
                    r.name = e.name
                    r.deleted = false
                    if Stored.decode(RelayProfile.self, r.relayProfile)?.displayName != e.name { r.relayProfile = profile }
                    try r.update(db)
                } else {
                    var r = ChatRelayRecord(userId: userId, name: e.name, address: e.address, relayProfile: profile, createdAt: now)
                    try r.insert(db)
                }
            }
        }
        return try await listChatRelays()
    }
}
