import Foundation
import RelayClient
import RelayProtocol
import SwiftplexCrypto
import Testing
@testable import Agent

/// Short links with data (version 2): channel links (`/c`) carrying a profile, owners and relay
/// links, written and updated by their owner, read back by anyone with the link.
@Suite(.timeLimit(.minutes(2))) struct ShortLinkDataTests {
    let relay = RelayAddress(fingerprint: Sodium.randomBytes(32), host: "relay.example.org", port: 5224)

    /// A channel's link data: one owner authorised by `root` for the queue with `senderId`.
    func channelData(name: String, root: Ed25519.PrivateKey, senderId: [UInt8], relays: [ShortLink] = [], userData: [UInt8]? = nil) -> ShortLinkData {
        let profile = #"{"groupProfile":{"displayName":"\#(name)","fullName":"","publicGroup":{"groupType":"channel"}}}"#
        let owner = LinkOwner.authorized(ownerId: Sodium.randomBytes(12), key: Ed25519.PrivateKey(), senderId: senderId, by: root)
        return ShortLinkData(direct: false, owners: [owner], relays: relays, userData: userData ?? Array(profile.utf8))
    }

    @Test func channelShortLinksParseAndMalformedOnesGiveTypedErrors() throws {
        let link = ShortLink(kind: .channel, relay: relay, linkId: [1, 2, 3], key: XChaChaPoly.randomKey())
        #expect(link.description.hasPrefix("https://relay.example.org:5224/c?c="))
        #expect(try ShortLink(parsing: link.description) == link)
        let good = link.description
        let cases: [(String, LinkError.Code)] = [
            (good.replacingOccurrences(of: "/c?", with: "/cc?"), .kind),
            (good.replacingOccurrences(of: "/c?", with: "/C?"), .kind),
            (good.replacingOccurrences(of: "?c=", with: "?x="), .parameters),
            (String(good.prefix(while: { $0 != "#" })), .parameters),
            (good + "AA", .keys),
            (good.replacingOccurrences(of: "#", with: "#/"), .keys),
            (good.replacingOccurrences(of: "https://", with: "http://"), .scheme),
        ]
        for (text, code) in cases {
            #expect(throws: LinkError(code, "")) { try ShortLink(parsing: text) }
        }
    }

    @Test func linkDataRoundTripsAndOpensOnlyWhenSignedByTheCommittedRootKey() throws {
        let root = Ed25519.PrivateKey()
        let relayLink = ShortLink(kind: .group, relay: relay, linkId: [7], key: XChaChaPoly.randomKey())
        let senderId = Sodium.randomBytes(24)
        let data = channelData(name: "news", root: root, senderId: senderId, relays: [relayLink])
        let full = ContactAddressLink(queue: QueueURI(relay: relay, senderId: senderId, recipientDhKey: X25519.PrivateKey().publicKey)).description
        let (key, sealed) = try LinkDataCodec.seal(link: full, data: data, kind: .channel, root: root)
        let short = ShortLink(kind: .channel, relay: relay, linkId: [1], key: key)
        let opened = try LinkDataCodec.open(sealed, short: short)
        #expect(opened.link == full && opened.data == data && opened.rootKey == root.publicKey)
        #expect(!String(decoding: sealed, as: UTF8.self).contains("news"))
        // The same root key gives the same link key: the owner can update.
        #expect(try LinkDataCodec.seal(link: full, data: channelData(name: "other", root: root, senderId: senderId), kind: .channel, root: root).key == key)
        // Another kind does not open it.
        var group = short
        group.kind = .group
        #expect(throws: AgentError(.badLink, "")) { try LinkDataCodec.open(sealed, short: group) }
        // Someone with the link (so its key) but another root key: encrypts fine, does not verify.
        let forged = try forge(link: full, senderId: senderId, kind: .channel, key: key)
        #expect(throws: AgentError(.badLink, "")) { try LinkDataCodec.open(forged, short: short) }
        // Nothing a reader would refuse is written: owners authorised by another key, or a
        // signer that is neither the root key nor a listed owner (found by the links fuzz target).
        #expect(throws: AgentError(.badLink, "")) {
            try LinkDataCodec.seal(link: full, data: channelData(name: "news", root: Ed25519.PrivateKey(), senderId: senderId), kind: .channel, root: root)
        }
        #expect(throws: AgentError(.badLink, "")) {
            try LinkDataCodec.seal(link: full, data: data, kind: .channel, rootKey: root.publicKey, salt: LinkDataCodec.salt(root), signer: Ed25519.PrivateKey())
        }
        var tampered = sealed
        tampered[tampered.count - 1] ^= 1
        #expect(throws: AgentError(.badLink, "")) { try LinkDataCodec.open(tampered, short: short) }
        // Over the relay's limit: typed, before anything is sent.
        #expect(throws: AgentError(.linkDataTooLarge, "")) {
            try LinkDataCodec.seal(link: full, data: channelData(name: "big", root: root, senderId: senderId, userData: Array(repeating: 65, count: RelayLimits.maxLinkDataLength)),
                                   kind: .channel, root: root)
        }
        #expect(throws: AgentError(.linkDataTooLarge, "")) {
            var d = data
            d.relays = Array(repeating: relayLink, count: ShortLinkData.maxRelays + 1)
            return try LinkDataCodec.seal(link: full, data: d, kind: .channel, root: root)
        }
        #expect(throws: AgentError(.badLink, "")) {
            var d = data
            d.owners.append(d.owners[0])
            return try LinkDataCodec.seal(link: full, data: d, kind: .channel, root: root)
        }
    }

    /// SimpleX `validateLinkOwners` and `decryptLinkData`: owners authorised by the root key or an
    /// earlier owner, each having signed the queue's sender ID; data signed by the root key or a
    /// listed owner. Anything else does not open.
    @Test func ownersMustBeAuthorisedInOrderAndSignTheSenderId() throws {
        let root = Ed25519.PrivateKey()
        let senderId = Sodium.randomBytes(24)
        let full = ContactAddressLink(queue: QueueURI(relay: relay, senderId: senderId, recipientDhKey: X25519.PrivateKey().publicKey)).description
        let (k1, k2) = (Ed25519.PrivateKey(), Ed25519.PrivateKey())
        let first = LinkOwner.authorized(ownerId: [1], key: k1, senderId: senderId, by: root)
        let second = LinkOwner.authorized(ownerId: [2], key: k2, senderId: senderId, by: k1, authorizerId: [1])
        let key = LinkDataCodec.linkKey(rootKey: root.publicKey, salt: LinkDataCodec.salt(root))
        let short = ShortLink(kind: .channel, relay: relay, linkId: [1], key: key)
        func sealed(_ owners: [LinkOwner], signer: Ed25519.PrivateKey? = nil) throws -> [UInt8] {
            try LinkDataCodec.seal(link: full, data: ShortLinkData(direct: false, owners: owners), kind: .channel, rootKey: root.publicKey,
                                   salt: LinkDataCodec.salt(root), signer: signer ?? root).sealed
        }
        #expect(try LinkDataCodec.open(sealed([first, second]), short: short).data.owners == [first, second])
        // An owner listed (and authorised) may sign the data; a key that is not listed may not.
        #expect(try LinkDataCodec.open(sealed([first, second], signer: k2), short: short).data.owners.count == 2)
        #expect(throws: AgentError(.badLink, "")) { try LinkDataCodec.open(sealed([first], signer: k2), short: short) }
        // Authorised by an owner listed after it (or by nobody listed): refused, so no loops.
        #expect(throws: AgentError(.badLink, "")) { try LinkDataCodec.open(sealed([second, first]), short: short) }
        #expect(throws: AgentError(.badLink, "")) { try LinkDataCodec.open(sealed([second]), short: short) }
        // Authorised by a key that is not the root key.
        let stray = LinkOwner.authorized(ownerId: [3], key: Ed25519.PrivateKey(), senderId: senderId, by: Ed25519.PrivateKey())
        #expect(throws: AgentError(.badLink, "")) { try LinkDataCodec.open(sealed([first, stray]), short: short) }
        // An owner that signed another queue's sender ID.
        let elsewhere = LinkOwner.authorized(ownerId: [4], key: Ed25519.PrivateKey(), senderId: Sodium.randomBytes(24), by: root)
        #expect(throws: AgentError(.badLink, "")) { try LinkDataCodec.open(sealed([elsewhere]), short: short) }
    }

    /// Data encrypted under a link's key `key`, consistent in itself: signed by a root key of the
    /// forger's own, which also authorises the owner listed. Only the link key's commitment to
    /// the real root key tells it apart.
    func forge(link: String, senderId: [UInt8], kind: ShortLink.Kind, key: [UInt8]) throws -> [UInt8] {
        let fake = Ed25519.PrivateKey()
        let data = channelData(name: "forged", root: fake, senderId: senderId)
        let body = try LinkDataCodec.encodeBody(link: link, data: data)
        let plain = fake.publicKey.bytes + Sodium.randomBytes(32) + fake.signature(for: LinkDataCodec.signed(body, kind: kind)) + body
        let nonce = XChaChaPoly.randomNonce()
        return [LinkDataCodec.version] + nonce + (try XChaChaPoly.seal(plain, key: key, nonce: nonce, associatedData: ShortLink.associatedData(kind)))
    }

    /// The owner creates a channel link with data on a live relay; another agent resolves it and
    /// gets the same data; the owner's update is seen through the same link; a wrong root key, a
    /// stranger's `LSET` and oversized data are refused and change nothing; a forger holding the
    /// link's key cannot make data that resolves.
    @Test func channelLinkDataIsWrittenUpdatedByTheOwnerOnlyAndResolved() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            try await withAgent(dir.url.appendingPathComponent("owner_agent.db"), relay: relay.address) { owner, _ in
                try await withAgent(dir.url.appendingPathComponent("reader_agent.db"), relay: relay.address) { reader, _ in
                    let (address, link) = try await owner.createAddress()
                    let (relayAddress, relayFull) = try await reader.createAddress(groupLinkId: "relayLink1")
                    let relayLink = try await reader.shortLink(forAddress: relayAddress, link: relayFull)
                    #expect(relayLink.kind == .group)
                    let root = Ed25519.PrivateKey()
                    func channelData(name: String, relays: [ShortLink] = [], userData: [UInt8]? = nil) -> ShortLinkData {
                        self.channelData(name: name, root: root, senderId: link.queue.senderId, relays: relays, userData: userData)
                    }
                    let data = channelData(name: "news", relays: [relayLink])
                    let owned = try await owner.createShortLink(forAddress: address, link: link, kind: .channel, data: data, rootKey: root)
                    #expect(owned.link.kind == .channel && owned.link.description.contains("/c?c="))

                    // Another agent resolves the link text and gets the same data back.
                    let resolved = try await reader.resolveWithData(try ShortLink(parsing: owned.link.description))
                    #expect(resolved.link == .contact(link))
                    #expect(resolved.data == data)
                    #expect(resolved.rootKey == owned.rootKey.publicKey)
                    #expect(try await reader.resolve(owned.link) == .contact(link))

                    // The owner updates: same link, new data.
                    let updated = channelData(name: "news 2", relays: [relayLink, relayLink])
                    try await owner.updateShortLink(forAddress: address, link: link, owned: owned, data: updated)
                    #expect(try await reader.resolveWithData(owned.link).data == updated)

                    // A root key that is not the link's is refused before anything is sent.
                    await #expect(throws: AgentError(.badLink, "")) {
                        try await owner.updateShortLink(forAddress: address, link: link, owned: OwnedShortLink(link: owned.link, rootKey: Ed25519.PrivateKey()),
                                                        data: channelData(name: "hijacked"))
                    }
                    // Oversized data is refused and the stored data stays.
                    await #expect(throws: AgentError(.linkDataTooLarge, "")) {
                        try await owner.updateShortLink(forAddress: address, link: link, owned: owned,
                                                        data: channelData(name: "big", userData: Array(repeating: 65, count: 20_000)))
                    }
                    // A stranger who learned the queue's recipient id cannot LSET it: the relay
                    // takes it only signed by the recipient key.
                    let ownerQueue = try #require(try await owner.store.db.read { db in try AgentStore.address(db, id: address) }).receivingQueue
                    var strangers = ownerQueue
                    strangers.recipientKey = .newEd25519()
                    let stranger = try await RelayConnection.connect(to: relay.address)
                    let forged = try forge(link: link.description, senderId: link.queue.senderId, kind: .channel, key: owned.link.key)
                    await #expect(throws: RelayClientError.relay(.auth)) { _ = try await stranger.setLinkData(strangers, data: forged) }
                    #expect(try await reader.resolveWithData(owned.link).data == updated)

                    // A forger with the link's key stores forged data on a queue of its own: it
                    // does not resolve (the link's key commits to the owner's root key).
                    let (forgerAddress, _) = try await reader.createAddress()
                    let forgerQueue = try #require(try await reader.store.db.read { db in try AgentStore.address(db, id: forgerAddress) }).receivingQueue
                    let forgedId = try await stranger.setLinkData(forgerQueue, data: forged)
                    await #expect(throws: AgentError(.badLink, "")) {
                        _ = try await reader.resolveWithData(ShortLink(kind: .channel, relay: owned.link.relay, linkId: forgedId, key: owned.link.key))
                    }
                    await stranger.close()

                    // The kind must fit the address (a /g link names a group link's address).
                    await #expect(throws: AgentError(.badLink, "")) {
                        _ = try await owner.createShortLink(forAddress: address, link: link, kind: .group, data: data, rootKey: root)
                    }
                    await #expect(throws: AgentError(.badLink, "")) {
                        _ = try await reader.createShortLink(forAddress: relayAddress, link: relayFull, kind: .contact, data: ShortLinkData())
                    }
                    #expect(try await reader.resolveWithData(owned.link).data == updated)
                    // A channel link is only made with data; an unknown link id is linkNotFound.
                    await #expect(throws: AgentError(.badLink, "")) { _ = try await owner.shortLink(forAddress: address, link: link, kind: .channel) }
                    var unknown = owned.link
                    unknown.linkId = Sodium.randomBytes(24)
                    await #expect(throws: AgentError(.linkNotFound, "")) { _ = try await reader.resolveWithData(unknown) }
                }
            }
        }
    }
}
