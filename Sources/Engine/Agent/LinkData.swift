import RelayProtocol
import SwiftplexBase
import SwiftplexCrypto

/// An owner named in a short link's data (SimpleX `OwnerAuth`): its id and Ed25519 key, its own
/// signature over the link queue's sender ID (the owner accepts being one; the sender ID never
/// changes for the queue), and its authorisation: `authOwnerSig` over `ownerId ‖ ownerKey` by the
/// link's root key (`authOwnerId` empty) or by an owner listed before it. A reader checks all of
/// it (``LinkDataCodec``): an owner that does not verify makes the whole data `badLink`.
public struct LinkOwner: Sendable, Hashable {
    /// Application-specific and unique in the list (a channel's owners: the member id), 1…64 bytes.
    public var ownerId: [UInt8]
    public var key: Ed25519.PublicKey
    public var ownerSig: [UInt8]
    /// Empty when the root key authorised this owner.
    public var authOwnerId: [UInt8]
    public var authOwnerSig: [UInt8]

    public init(ownerId: [UInt8], key: Ed25519.PublicKey, ownerSig: [UInt8], authOwnerId: [UInt8], authOwnerSig: [UInt8]) {
        self.ownerId = ownerId
        self.key = key
        self.ownerSig = ownerSig
        self.authOwnerId = authOwnerId
        self.authOwnerSig = authOwnerSig
    }

    /// An owner entry for the address whose queue has `senderId`, signed by the owner's key and
    /// authorised by `authorizer`: the link's root key (`authorizerId` empty) or a listed owner's key.
    public static func authorized(ownerId: [UInt8], key: Ed25519.PrivateKey, senderId: [UInt8],
                                  by authorizer: Ed25519.PrivateKey, authorizerId: [UInt8] = []) -> LinkOwner {
        LinkOwner(ownerId: ownerId, key: key.publicKey, ownerSig: key.signature(for: senderId), authOwnerId: authorizerId,
                  authOwnerSig: authorizer.signature(for: ownerId + key.publicKey.bytes))
    }

    /// SimpleX `validateLinkOwners`: each owner signed the sender ID with its key and is
    /// authorised by the root key or by an owner before it in the list (so no loops), ids unique.
    static func validate(_ owners: [LinkOwner], rootKey: Ed25519.PublicKey, senderId: [UInt8]) throws {
        var earlier: [[UInt8]: Ed25519.PublicKey] = [:]
        for (i, o) in owners.enumerated() {
            guard earlier[o.ownerId] == nil else { throw AgentError(.badLink, "the short link's data names owner \(i) twice") }
            guard o.key.isValidSignature(o.ownerSig, for: senderId) else {
                throw AgentError(.badLink, "owner \(i) in the short link's data did not sign the link's sender ID")
            }
            let authorizer: Ed25519.PublicKey
            if o.authOwnerId.isEmpty {
                authorizer = rootKey
            } else {
                guard let k = earlier[o.authOwnerId] else {
                    throw AgentError(.badLink, "owner \(i) in the short link's data is authorised by no owner before it")
                }
                authorizer = k
            }
            guard authorizer.isValidSignature(o.authOwnerSig, for: o.ownerId + o.key.bytes) else {
                throw AgentError(.badLink, "owner \(i)'s authorisation in the short link's data does not verify")
            }
            earlier[o.ownerId] = o.key
        }
    }
}

/// The part of a short link's data its owner may change (SimpleX `UserContactData`: `direct`,
/// `owners`, `relays`, `userData`). The agent does not read `userData`; the chat layer puts its
/// JSON there (a channel's: the group profile).
public struct ShortLinkData: Sendable, Hashable {
    /// Whether requests may go to the link's own queue (false for a channel: joiners go to relays).
    public var direct: Bool
    public var owners: [LinkOwner]
    /// The relays' links (a channel's chat relays' per-channel group links).
    public var relays: [ShortLink]
    public var userData: [UInt8]

    public init(direct: Bool = true, owners: [LinkOwner] = [], relays: [ShortLink] = [], userData: [UInt8] = []) {
        self.direct = direct
        self.owners = owners
        self.relays = relays
        self.userData = userData
    }

    public static let maxOwners = 64
    public static let maxRelays = 32
    public static let maxOwnerIdLength = 64
}

/// A short link read back with its data: the full link, the root key that signed the data (the
/// link's key commits to it) and the data.
public struct ResolvedShortLink: Sendable, Hashable {
    public var link: AgentLink
    /// Nil for a link written without data.
    public var rootKey: Ed25519.PublicKey?
    /// Nil for a link written without data (version 1: the full link only).
    public var data: ShortLinkData?
}

/// What the owner of a short link with data keeps to update it: the short link and its root
/// signing key. Whoever holds `rootKey` can sign new data; the link's key is derived from it.
public struct OwnedShortLink: Sendable {
    public var link: ShortLink
    public var rootKey: Ed25519.PrivateKey

    public init(link: ShortLink, rootKey: Ed25519.PrivateKey) {
        self.link = link
        self.rootKey = rootKey
    }
}

/// Version 2 of the relay's `LSET` data: `[2][nonce][XChaCha20-Poly1305(plain)]`, the link kind as
/// associated data, where
///
///     plain = [root key 32][salt 32][signature 64][body]
///     body  = [u16 n][full link] [direct u8]
///             [u8 owners]{[u8 n][owner id][key 32][owner sig 64][u8 n][auth owner id][auth sig 64]}
///             [u8 relays]{[u16 n][short link]} [u16 n][user data]
///
/// The signature is the root key's — or a listed owner's (SimpleX `decryptLinkData` takes either;
/// no signer id is carried) — over `"swiftplex link data " ‖ kind letter ‖ body`. The
/// link's key is `SHA-256(root key ‖ salt)`, so it commits to the root key: someone holding the
/// short link (every subscriber of a channel, or the relay operator with one) can encrypt data
/// under its key but cannot sign it with the committed root key — opening checks both (SimpleX
/// commits the root key the same way, hashing its fixed link data into the link). The salt is
/// derived from the root private key, so the owner needs only that key to update the data.
enum LinkDataCodec {
    static let version: UInt8 = 2
    static let headerLength = 32 + 32 + Ed25519.signatureLength

    static func salt(_ root: Ed25519.PrivateKey) -> [UInt8] {
        Digest.sha256(Array("swiftplex short link salt".utf8) + root.secretBytes)
    }

    static func linkKey(rootKey: Ed25519.PublicKey, salt: [UInt8]) -> [UInt8] {
        Digest.sha256(rootKey.bytes + salt)
    }

    static func signed(_ body: [UInt8], kind: ShortLink.Kind) -> [UInt8] {
        Array("swiftplex link data \(kind.rawValue)".utf8) + body
    }

    static func encodeBody(link: String, data: ShortLinkData) throws -> [UInt8] {
        func tooLarge(_ what: String) -> AgentError { AgentError(.linkDataTooLarge, what) }
        guard data.owners.count <= ShortLinkData.maxOwners else { throw tooLarge("a short link lists at most \(ShortLinkData.maxOwners) owners") }
        guard data.relays.count <= ShortLinkData.maxRelays else { throw tooLarge("a short link lists at most \(ShortLinkData.maxRelays) relays") }
        guard data.userData.count <= Int(UInt16.max) else { throw tooLarge("the link's user data is over 65,535 bytes") }
        var out: [UInt8] = []
        try appendU16(Array(link.utf8), to: &out)
        out.append(data.direct ? 1 : 0)
        out.append(UInt8(data.owners.count))
        for o in data.owners {
            guard !o.ownerId.isEmpty, o.ownerId.count <= ShortLinkData.maxOwnerIdLength else {
                throw AgentError(.badLink, "an owner id has 1-\(ShortLinkData.maxOwnerIdLength) bytes")
            }
            guard o.authOwnerId.count <= ShortLinkData.maxOwnerIdLength, o.ownerSig.count == Ed25519.signatureLength,
                  o.authOwnerSig.count == Ed25519.signatureLength else {
                throw AgentError(.badLink, "an owner's signatures have \(Ed25519.signatureLength) bytes, its authorising owner id at most \(ShortLinkData.maxOwnerIdLength)")
            }
            out.append(UInt8(o.ownerId.count))
            out += o.ownerId
            out += o.key.bytes
            out += o.ownerSig
            out.append(UInt8(o.authOwnerId.count))
            out += o.authOwnerId
            out += o.authOwnerSig
        }
        guard Set(data.owners.map(\.ownerId)).count == data.owners.count else { throw AgentError(.badLink, "owner ids must be unique") }
        out.append(UInt8(data.relays.count))
        for r in data.relays { try appendU16(Array(r.description.utf8), to: &out) }
        try appendU16(data.userData, to: &out)
        return out
    }

    private static func appendU16(_ bytes: [UInt8], to out: inout [UInt8]) throws {
        guard bytes.count <= Int(UInt16.max) else { throw AgentError(.linkDataTooLarge, "a field of the link data is over 65,535 bytes") }
        out.append(UInt8(bytes.count >> 8))
        out.append(UInt8(bytes.count & 0xFF))
        out += bytes
    }

    /// Seals `link` and `data` for `kind`, signed by `root`, under the link key `root` derives.
    static func seal(link: String, data: ShortLinkData, kind: ShortLink.Kind, root: Ed25519.PrivateKey) throws -> (key: [UInt8], sealed: [UInt8]) {
        try seal(link: link, data: data, kind: kind, rootKey: root.publicKey, salt: salt(root), signer: root)
    }

    /// The same with the root key's public half and salt (as a reader learns them) and any signer
    /// (an owner's key: readers accept it when the owner is listed and verifies).
    static func seal(link: String, data: ShortLinkData, kind: ShortLink.Kind, rootKey: Ed25519.PublicKey, salt: [UInt8],
                     signer: Ed25519.PrivateKey) throws -> (key: [UInt8], sealed: [UInt8]) {
        // Nothing is written that a reader would refuse: the owners must validate (as `open`
        // checks them), and the signer must be the root key or one of them.
        if !data.owners.isEmpty {
            guard case let .contact(address)? = try? AgentLink(parsing: link) else {
                throw AgentError(.badLink, "a short link with owners is a contact address's")
            }
            try LinkOwner.validate(data.owners, rootKey: rootKey, senderId: address.queue.senderId)
        }
        guard signer.publicKey.bytes == rootKey.bytes || data.owners.contains(where: { $0.key.bytes == signer.publicKey.bytes }) else {
            throw AgentError(.badLink, "link data must be signed by its root key or by a listed owner")
        }
        let body = try encodeBody(link: link, data: data)
        let key = linkKey(rootKey: rootKey, salt: salt)
        let plain = rootKey.bytes + salt + signer.signature(for: signed(body, kind: kind)) + body
        let nonce = XChaChaPoly.randomNonce()
        let sealed = [version] + nonce + (try XChaChaPoly.seal(plain, key: key, nonce: nonce, associatedData: ShortLink.associatedData(kind)))
        // The relay's limit (its `LSET` refuses more): said here, before anything is sent.
        guard sealed.count <= RelayLimits.maxLinkDataLength else {
            throw AgentError(.linkDataTooLarge, "the short link's data is \(sealed.count) bytes sealed; a relay keeps at most \(RelayLimits.maxLinkDataLength)")
        }
        return (key, sealed)
    }

    /// Opens version 2 data with the short link's key: decrypts, checks the key commits to the
    /// root key, parses the body, validates the owners and checks the signature (root or owner).
    static func open(_ data: [UInt8], short: ShortLink) throws -> (link: String, rootKey: Ed25519.PublicKey, data: ShortLinkData) {
        let n = XChaChaPoly.nonceLength
        guard data.count > 1 + n, data[0] == version else { throw AgentError(.badLink, "the short link's data is not version 2 link data") }
        guard let plain = try? XChaChaPoly.open(Array(data[(1 + n)...]), key: short.key, nonce: Array(data[1..<1 + n]),
                                                associatedData: ShortLink.associatedData(short.kind)),
              plain.count >= headerLength else {
            throw AgentError(.badLink, "the short link's data does not decrypt with its key")
        }
        guard let root = try? Ed25519.PublicKey(bytes: Array(plain[0..<32])) else { throw AgentError(.badLink, "the link data's root key is invalid") }
        let salt = Array(plain[32..<64])
        guard linkKey(rootKey: root, salt: salt) == short.key else {
            throw AgentError(.badLink, "the short link's key does not commit to the data's root key")
        }
        let signature = Array(plain[64..<headerLength])
        let body = Array(plain[headerLength...])
        let (link, linkData) = try decodeBody(body)
        if !linkData.owners.isEmpty {
            guard case let .contact(address)? = try? AgentLink(parsing: link) else {
                throw AgentError(.badLink, "a short link with owners is a contact address's")
            }
            try LinkOwner.validate(linkData.owners, rootKey: root, senderId: address.queue.senderId)
        }
        let message = signed(body, kind: short.kind)
        guard root.isValidSignature(signature, for: message) || linkData.owners.contains(where: { $0.key.isValidSignature(signature, for: message) }) else {
            throw AgentError(.badLink, "the short link's data is signed neither by its root key nor by a listed owner")
        }
        return (link, root, linkData)
    }

    /// Parses a signed body (the inverse of ``encodeBody(link:data:)``); `badLink` when malformed.
    static func decodeBody(_ body: [UInt8]) throws -> (link: String, data: ShortLinkData) {
        var r = ByteReader(body)
        guard let linkBytes = r.u16Bytes(), let link = String(validating: linkBytes, as: UTF8.self), let direct = r.byte(), direct <= 1,
              let ownerCount = r.byte(), Int(ownerCount) <= ShortLinkData.maxOwners else {
            throw AgentError(.badLink, "the short link's data is malformed")
        }
        var owners: [LinkOwner] = []
        for _ in 0..<ownerCount {
            let sig = Ed25519.signatureLength
            guard let idLength = r.byte(), idLength > 0, Int(idLength) <= ShortLinkData.maxOwnerIdLength, let id = r.bytes(Int(idLength)),
                  let keyBytes = r.bytes(32), let key = try? Ed25519.PublicKey(bytes: keyBytes), let ownerSig = r.bytes(sig),
                  let authLength = r.byte(), Int(authLength) <= ShortLinkData.maxOwnerIdLength, let authId = r.bytes(Int(authLength)),
                  let authSig = r.bytes(sig) else {
                throw AgentError(.badLink, "an owner in the short link's data is malformed")
            }
            owners.append(LinkOwner(ownerId: id, key: key, ownerSig: ownerSig, authOwnerId: authId, authOwnerSig: authSig))
        }
        guard Set(owners.map(\.ownerId)).count == owners.count else { throw AgentError(.badLink, "the short link's data names an owner twice") }
        guard let relayCount = r.byte(), Int(relayCount) <= ShortLinkData.maxRelays else { throw AgentError(.badLink, "the short link's relay list is malformed") }
        var relays: [ShortLink] = []
        for _ in 0..<relayCount {
            guard let bytes = r.u16Bytes(), let text = String(validating: bytes, as: UTF8.self), let relay = try? ShortLink(parsing: text) else {
                throw AgentError(.badLink, "a relay link in the short link's data is malformed")
            }
            relays.append(relay)
        }
        guard let userData = r.u16Bytes(), r.atEnd else { throw AgentError(.badLink, "the short link's user data is malformed") }
        return (link, ShortLinkData(direct: direct == 1, owners: owners, relays: relays, userData: userData))
    }
}

private struct ByteReader {
    let bytes: [UInt8]
    var at = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    var atEnd: Bool { at == bytes.count }
    mutating func byte() -> UInt8? {
        guard at < bytes.count else { return nil }
        defer { at += 1 }
        return bytes[at]
    }
    mutating func bytes(_ n: Int) -> [UInt8]? {
        guard n >= 0, bytes.count - at >= n else { return nil }
        defer { at += n }
        return Array(bytes[at..<at + n])
    }
    mutating func u16Bytes() -> [UInt8]? {
        guard let hi = byte(), let lo = byte() else { return nil }
        return bytes(Int(hi) << 8 | Int(lo))
    }
}
