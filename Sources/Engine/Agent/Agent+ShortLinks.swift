import Foundation
import SwiftplexSQL
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import RelayClient
import RelayProtocol
import SwiftplexCrypto
import SwiftplexStorage

// MARK: - Short links: a full link stored encrypted on a relay, found by a short one
extension Agent {
    /// Stores an invitation's full link, encrypted, on the relay of the connection's own queue
    /// (`LSET`); returns the short link that finds and decrypts it.
    public func shortLink(forConnection id: Int64, link: InvitationLink) async throws -> ShortLink {
        guard let r = try await store.db.read({ db in try AgentStore.connection(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no connection \(id)")
        }
        return try await setLinkData(try r.receivingQueue, kind: .invitation, link: link.description)
    }

    /// The same for a contact address (on the address's own queue); `kind` is `.relay` for a chat
    /// relay's address (`/r`), else `.contact`.
    public func shortLink(forAddress id: Int64, link: ContactAddressLink, kind: ShortLink.Kind = .contact) async throws -> ShortLink {
        guard kind != .invitation, kind != .channel else {
            throw AgentError(.badLink, "an address's short link without data is /a, /g or /r (a channel link carries data: createShortLink)")
        }
        guard let a = try await store.db.read({ db in try AgentStore.address(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no address \(id)")
        }
        return try await setLinkData(try a.receivingQueue, kind: link.groupLinkId == nil ? kind : .group, link: link.description)
    }

    func setLinkData(_ q: RecipientQueue, kind: ShortLink.Kind, link: String) async throws -> ShortLink {
        let key = XChaChaPoly.randomKey()
        let data = try ShortLink.seal(link, kind: kind, key: key)
        let linkId: [UInt8]
        do {
            linkId = try await relayConnection(q.relay).setLinkData(q, data: data)
        } catch let e as AgentError {
            throw e
        } catch {
            throw AgentError(.relay, "cannot store the short link's data: \(error)")
        }
        return ShortLink(kind: kind, relay: q.relay, linkId: linkId, key: key)
    }

    /// Stores an address's full link with `data` (version 2 link data, signed by a fresh root key
    /// that the link's key commits to) on the address's own queue; returns the short link and the
    /// root key, which the caller keeps to update the data (``updateShortLink(forAddress:link:owned:data:)``).
    /// `kind` is `.contact`, `.group`, `.relay` or `.channel`. `rootKey` is the caller's when it
    /// must know it first (a channel's owners are authorised by it, ``LinkOwner/authorized(ownerId:key:senderId:by:authorizerId:)``;
    /// SimpleX derives `publicGroupId` from it). Data over the relay's limit is `linkDataTooLarge`,
    /// before anything is sent.
    public func createShortLink(forAddress id: Int64, link: ContactAddressLink, kind: ShortLink.Kind, data: ShortLinkData,
                                rootKey root: Ed25519.PrivateKey = Ed25519.PrivateKey()) async throws -> OwnedShortLink {
        switch (kind, link.groupLinkId) {
        case (.invitation, _): throw AgentError(.badLink, "an address's short link is /a, /g, /c or /r")
        case (.group, nil): throw AgentError(.badLink, "a group link (/g) is an address with a groupLinkId")
        case (.contact, _?), (.relay, _?): throw AgentError(.badLink, "an address with a groupLinkId is a group link (/g)")
        default: break
        }
        let (key, sealed) = try LinkDataCodec.seal(link: link.description, data: data, kind: kind, root: root)
        let q = try await addressQueue(id)
        let linkId = try await storeLinkData(q, sealed)
        return OwnedShortLink(link: ShortLink(kind: kind, relay: q.relay, linkId: linkId, key: key), rootKey: root)
    }

    /// Replaces the data of a short link made by ``createShortLink(forAddress:link:kind:data:)``:
    /// the same link id and key, new data signed by the same root key. Only the address's owner
    /// can: the relay takes `LSET` only signed by the queue's recipient key, and a root key that
    /// is not the link's is refused here (`badLink`) before anything is sent.
    public func updateShortLink(forAddress id: Int64, link: ContactAddressLink, owned: OwnedShortLink, data: ShortLinkData) async throws {
        let (key, sealed) = try LinkDataCodec.seal(link: link.description, data: data, kind: owned.link.kind, root: owned.rootKey)
        guard key == owned.link.key else { throw AgentError(.badLink, "this root key is not the short link's") }
        let q = try await addressQueue(id)
        guard q.relay == owned.link.relay else { throw AgentError(.badLink, "the short link is on another relay than the address") }
        let linkId = try await storeLinkData(q, sealed)
        guard linkId == owned.link.linkId else { throw AgentError(.badLink, "the address's queue holds another short link") }
    }

    private func addressQueue(_ id: Int64) async throws -> RecipientQueue {
        guard let a = try await store.db.read({ db in try AgentStore.address(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no address \(id)")
        }
        return try a.receivingQueue
    }

    private func storeLinkData(_ q: RecipientQueue, _ sealed: [UInt8]) async throws -> [UInt8] {
        do {
            return try await relayConnection(q.relay).setLinkData(q, data: sealed)
        } catch let e as AgentError {
            throw e
        } catch {
            throw AgentError(.relay, "cannot store the short link's data: \(error)")
        }
    }

    /// Reads a short link's data from its relay (`LGET`) and decrypts it into the full link.
    public func resolve(_ short: ShortLink) async throws -> AgentLink {
        try await resolveWithData(short).link
    }

    /// Reads a short link from its relay (`LGET`): the full link and, for a link written with
    /// data, the data and the root key that signed it (checked against the link's key). An unknown
    /// link id is `linkNotFound`; data that does not decrypt or verify, or is a link of another
    /// kind, is `badLink`; a channel link (`/c`) without data is `badLink` too.
    public func resolveWithData(_ short: ShortLink) async throws -> ResolvedShortLink {
        let data = try await withDeadline(options.peerRelayTimeout, "reading a short link from relay \(short.relay.host):\(short.relay.port)") {
            let connection = try await self.relayConnection(short.relay, peer: true)
            do {
                return try await connection.linkData(linkId: short.linkId)
            } catch {
                throw AgentError(.linkNotFound, "the relay has no data for this short link")
            }
        }
        let text: String
        var rootKey: Ed25519.PublicKey?
        var linkData: ShortLinkData?
        if data.first == LinkDataCodec.version {
            let opened = try LinkDataCodec.open(data, short: short)
            (text, rootKey, linkData) = (opened.link, opened.rootKey, opened.data)
        } else {
            text = try short.open(data)
        }
        let link: AgentLink
        do { link = try AgentLink(parsing: text) } catch {
            throw AgentError(.badLink, "the short link's data is not a link: \(error)")
        }
        switch (short.kind, link) {
        case (.invitation, .invitation): break
        case let (.relay, .contact(a)) where a.groupLinkId == nil: break
        case let (.contact, .contact(a)) where a.groupLinkId == nil: break
        case let (.group, .contact(a)) where a.groupLinkId != nil: break
        case (.channel, .contact) where linkData != nil: break
        default: throw AgentError(.badLink, "the short link's data is a link of another kind")
        }
        return ResolvedShortLink(link: link, rootKey: rootKey, data: linkData)
    }
}
