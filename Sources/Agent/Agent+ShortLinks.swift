import Foundation
import GRDB
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
        guard let r = try await store.queue.read({ db in try AgentStore.connection(db, id: id) }) else {
            throw AgentError(.unknownConnection, "no connection \(id)")
        }
        return try await setLinkData(try r.receivingQueue, kind: .invitation, link: link.description)
    }

    /// The same for a contact address (on the address's own queue); `kind` is `.relay` for a chat
    /// relay's address (`/r`), else `.contact`.
    public func shortLink(forAddress id: Int64, link: ContactAddressLink, kind: ShortLink.Kind = .contact) async throws -> ShortLink {
        guard kind != .invitation else { throw AgentError(.badLink, "an address's short link is /a or /r") }
        guard let a = try await store.queue.read({ db in try AgentStore.address(db, id: id) }) else {
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

    /// Reads a short link's data from its relay (`LGET`) and decrypts it into the full link.
    public func resolve(_ short: ShortLink) async throws -> AgentLink {
        let data = try await withDeadline(options.peerRelayTimeout, "reading a short link from relay \(short.relay.host):\(short.relay.port)") {
            let connection = try await self.relayConnection(short.relay, peer: true)
            do {
                return try await connection.linkData(linkId: short.linkId)
            } catch {
                throw AgentError(.linkNotFound, "the relay has no data for this short link")
            }
        }
        let link: AgentLink
        do { link = try AgentLink(parsing: try short.open(data)) } catch let e as AgentError { throw e } catch {
            throw AgentError(.badLink, "the short link's data is not a link: \(error)")
        }
        switch (short.kind, link) {
        case (.invitation, .invitation): return link
        case let (.relay, .contact(a)) where a.groupLinkId == nil: return link
        case let (.contact, .contact(a)) where a.groupLinkId == nil: return link
        case let (.group, .contact(a)) where a.groupLinkId != nil: return link
        default: throw AgentError(.badLink, "the short link's data is a link of another kind")
        }
    }
}
