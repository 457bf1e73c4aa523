import Agent
import ChatModel
import Foundation
import SwiftplexSQL
import SwiftplexBase
import SwiftplexCrypto

extension ChatController {
    // MARK: - Address

    func address(userId: Int64) async throws -> AddressRow? {
        try await dbRead { db in try AddressRecord.fetchOne(db, key: userId) }.map(AddressRow.init)
    }

    /// Creates the user's contact address; with `short`, also a short link to it (its full link
    /// stored encrypted on the address's relay). A chat relay user's address is its relay address:
    /// always with a short link, of kind `/r` (docs/channels.md).
    public func createAddress(userId: Int64, short: Bool = false) async throws -> ChatResponse {
        let u = try await user(userId)
        try requireStarted()
        if try await address(userId: userId) != nil { throw ChatFailure.chat(.userContactLinkExists) }
        let (agentId, link) = try await agentCall { try await agent.createAddress() }
        var shortLink: String?
        var relayKey: Ed25519.PrivateKey?
        if short || u.chatRelay {
            do {
                if u.chatRelay {
                    // SimpleX `RelayAddressLinkData {relayProfile}` as the link's user data.
                    let data = ShortLinkData(direct: true, userData: try Self.relayAddressLinkData(u.profile))
                    let owned = try await agentCall { try await agent.createShortLink(forAddress: agentId, link: link, kind: .relay, data: data) }
                    shortLink = owned.link.description
                    relayKey = owned.rootKey // kept to answer `/relay test` (+RelayTest)
                } else {
                    shortLink = try await agentCall { try await agent.shortLink(forAddress: agentId, link: link, kind: .contact) }.description
                }
            } catch {
                try? await agent.deleteAddress(agentId)
                throw error
            }
        }
        let record = AddressRecord(userId: userId, agentAddressId: agentId, link: link.description,
                                   settings: try Stored.text(AddressSettings(businessAddress: false)), shortLink: shortLink)
        let keep = relayKey
        try await dbWrite { db in
            try record.insert(db)
            if let keep { try Self.saveRelayAddressKey(db, userId: userId, keep) }
        }
        return .userContactLinkCreated(user: userModel(u), connLinkContact: CreatedConnLink(connFullLink: link.description, connShortLink: shortLink))
    }

    /// A relay address's link user data: `{"relayProfile": RelayProfile}` (SimpleX
    /// `RelayAddressLinkData`), the relay user's name, full name, short description and image.
    nonisolated static func relayAddressLinkData(_ profile: Profile) throws -> [UInt8] {
        let relayProfile = RelayProfile(displayName: profile.displayName, fullName: profile.fullName, shortDescr: profile.shortDescr, image: profile.image)
        return Array(JSONValue.object([("relayProfile", try JSONValueEncoder().encode(relayProfile))]).text.utf8)
    }

    public func showAddress(userId: Int64) async throws -> ChatResponse {
        let u = try await user(userId)
        guard let a = try await address(userId: userId) else { throw ChatFailure.store(.userContactLinkNotFound) }
        return .userContactLink(user: userModel(u), contactLink: ModelOf.address(a, userId: userId))
    }

    /// Puts the user's address into their profile as `contactLink` (or takes it out) and sends
    /// the profile to their contacts, as `/_profile` does.
    public func setProfileAddress(userId: Int64, enabled: Bool) async throws -> ChatResponse {
        let u = try await user(userId)
        var profile = u.profile
        profile.contactLink = nil
        if enabled {
            guard let a = try await address(userId: userId) else { throw ChatFailure.store(.userContactLinkNotFound) }
            profile.contactLink = a.shortLink ?? a.link
        }
        return try await updateProfile(userId: userId, profile: try JSONValueEncoder().encode(profile))
    }

    /// Replaces the address's settings (an AddressSettings object: `businessAddress`, and
    /// optionally `autoAccept` and an `autoReply` message content).
    public func setAddressSettings(userId: Int64, settings: JSONValue) async throws -> ChatResponse {
        let u = try await user(userId)
        guard settings["businessAddress"]?.boolValue != nil else { throw ChatFailure.command("AddressSettings needs businessAddress") }
        if let auto = settings["autoAccept"] {
            guard case .object = auto, auto["acceptIncognito"]?.boolValue != nil else {
                throw ChatFailure.command("autoAccept must be {\"acceptIncognito\": true|false}")
            }
        }
        let typed: AddressSettings
        do {
            if let reply = settings["autoReply"] { _ = try PeerInput.content(reply) }
            typed = try JSONValueDecoder().decode(AddressSettings.self, from: settings)
        } catch {
            throw ChatFailure.command("malformed AddressSettings: \(error)")
        }
        guard var a = try await address(userId: userId) else { throw ChatFailure.store(.userContactLinkNotFound) }
        a.settings = typed
        let text = try Stored.text(typed)
        try await dbWrite { db in _ = try AddressRecord.filter(key: userId).updateAll(db, AddressRecord.Columns.settings.set(to: text)) }
        return .userContactLinkUpdated(user: userModel(u), contactLink: ModelOf.address(a, userId: userId))
    }

    public func deleteAddress(userId: Int64) async throws -> ChatResponse {
        let u = try await user(userId)
        guard let a = try await address(userId: userId) else { throw ChatFailure.store(.userContactLinkNotFound) }
        try await agentCall { try await agent.deleteAddress(a.agentId) }
        try await dbWrite { db in
            _ = try AddressRecord.deleteOne(db, key: userId)
            try db.execute(sql: "DELETE FROM relay_address_key WHERE user_id = ?", arguments: [userId])
        }
        return .userContactLinkDeleted(user: userModel(u))
    }
}
