import Foundation
import RelayProtocol
import SwiftplexBase
import SwiftplexCrypto

/// Why a link was refused.
public struct LinkError: CodedError {
    public enum Code: String, Sendable {
        case scheme, kind, parameters, queue, keys, version
    }
    public let code: Code
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// Percent-encoding of link parameters (everything but RFC 3986 unreserved characters).
enum PercentEncoding {
    static func encode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                out += "%" + String(b, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    static func decode(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        var i = s.utf8.startIndex
        let u = s.utf8
        while i < u.endIndex {
            let c = u[i]
            if c == UInt8(ascii: "%") {
                let h = u.index(after: i)
                guard h < u.endIndex, u.index(after: h) < u.endIndex,
                      let v = UInt8(String(decoding: u[h...u.index(after: h)], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(v)
                i = u.index(h, offsetBy: 2)
            } else {
                bytes.append(c)
                i = u.index(after: i)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Splits `a=1&b=2` into pairs; nil on a malformed pair.
    static func parameters(_ s: Substring) -> [(Substring, Substring)]? {
        var out: [(Substring, Substring)] = []
        for pair in s.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { return nil }
            out.append((kv[0], kv[1]))
        }
        return out
    }
}

extension String {
    func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}

/// A one-time invitation: `simplex:/invitation#/?v=1&smp=<queue URI>&e2e=v%3D1%26x3dh%3D<key1>%2C<key2>`.
///
/// The queue URI names the inviter's queue (relay, sender ID, DH key for the envelope); the two
/// X3DH keys start the double ratchet.
public struct InvitationLink: Sendable, Hashable, CustomStringConvertible {
    public var queue: QueueURI
    public var keys: X3DH.PublicKeys
    public var version: UInt16 = 1

    public init(queue: QueueURI, keys: X3DH.PublicKeys) {
        self.queue = queue
        self.keys = keys
    }

    public init(parsing text: String) throws {
        let (kind, params) = try Self.split(text)
        guard kind == "invitation" else {
            throw LinkError(.kind, "this is a simplex:/\(kind) link, not an invitation")
        }
        var queue: QueueURI?
        var keys: X3DH.PublicKeys?
        for (k, v) in params {
            switch k {
            case "v":
                guard v.split(separator: "-").allSatisfy({ UInt16($0) != nil }) else { throw LinkError(.version, "bad link version") }
            case "smp":
                guard let decoded = PercentEncoding.decode(v) else { throw LinkError(.queue, "the smp parameter is not valid percent-encoding") }
                do { queue = try QueueURI(parsing: decoded) } catch { throw LinkError(.queue, "the queue in the link is invalid: \(error)") }
            case "e2e":
                guard let decoded = PercentEncoding.decode(v) else { throw LinkError(.keys, "the e2e parameter is not valid percent-encoding") }
                keys = try Self.parseE2E(decoded)
            default:
                continue
            }
        }
        guard let queue else { throw LinkError(.parameters, "the link has no smp queue") }
        guard let keys else { throw LinkError(.parameters, "the link has no e2e keys") }
        self.init(queue: queue, keys: keys)
    }

    static func split(_ text: String) throws -> (String, [(Substring, Substring)]) {
        guard text.hasPrefix("simplex:/") else { throw LinkError(.scheme, "a link starts with simplex:/") }
        let rest = text.dropFirst("simplex:/".count)
        guard let hash = rest.firstIndex(of: "#") else { throw LinkError(.parameters, "the link has no #/?parameters") }
        let kind = String(rest[..<hash])
        var fragment = rest[rest.index(after: hash)...]
        if fragment.hasPrefix("/") { fragment = fragment.dropFirst() }
        guard fragment.hasPrefix("?"), let params = PercentEncoding.parameters(fragment.dropFirst()) else {
            throw LinkError(.parameters, "malformed link parameters")
        }
        return (kind, params)
    }

    static func parseE2E(_ text: String) throws -> X3DH.PublicKeys {
        guard let params = PercentEncoding.parameters(Substring(text)),
              let x3dh = params.first(where: { $0.0 == "x3dh" })?.1 else {
            throw LinkError(.keys, "the e2e parameter has no x3dh keys")
        }
        let parts = x3dh.split(separator: ",")
        guard parts.count == 2, let k1 = Base64URL.decode(parts[0]), let k2 = Base64URL.decode(parts[1]),
              let p1 = try? X25519.PublicKey(bytes: k1), let p2 = try? X25519.PublicKey(bytes: k2) else {
            throw LinkError(.keys, "the x3dh keys must be two base64url X25519 public keys")
        }
        return X3DH.PublicKeys(key1: p1, key2: p2)
    }

    public var description: String {
        let e2e = "v=1&x3dh=\(Base64URL.encode(keys.key1)),\(Base64URL.encode(keys.key2))"
        return "simplex:/invitation#/?v=\(version)&smp=\(PercentEncoding.encode(queue.description))&e2e=\(PercentEncoding.encode(e2e))"
    }
}

/// A reusable contact address: `simplex:/contact#/?v=1&smp=<queue URI>`. Anyone holding it can
/// send a contact request; each request carries a fresh invitation from the requester.
///
/// A group link is a contact address owned by a group: as in SimpleX, its full form carries the
/// client data `data={"type":"group","groupLinkId":"<base64url>"}` (percent-encoded), which tells
/// the joiner the requests go to a group.
public struct ContactAddressLink: Sendable, Hashable, CustomStringConvertible {
    public var queue: QueueURI
    /// The group link's id (base64url, 1…64 characters) when this address is a group link.
    public var groupLinkId: String?

    public init(queue: QueueURI, groupLinkId: String? = nil) {
        self.queue = queue
        self.groupLinkId = groupLinkId
    }

    public init(parsing text: String) throws {
        let (kind, params) = try InvitationLink.split(text)
        guard kind == "contact" else { throw LinkError(.kind, "this is a simplex:/\(kind) link, not a contact address") }
        guard let smp = params.first(where: { $0.0 == "smp" })?.1 else { throw LinkError(.parameters, "the address has no smp queue") }
        guard let decoded = PercentEncoding.decode(smp) else { throw LinkError(.queue, "the smp parameter is not valid percent-encoding") }
        do { queue = try QueueURI(parsing: decoded) } catch { throw LinkError(.queue, "the queue in the address is invalid: \(error)") }
        if let data = params.first(where: { $0.0 == "data" })?.1 {
            groupLinkId = try Self.groupLinkId(fromData: data)
        }
    }

    /// The `data` parameter: `{"type":"group","groupLinkId":…}`; any other client data is refused.
    static func groupLinkId(fromData raw: Substring) throws -> String {
        guard raw.utf8.count <= 1024, let text = PercentEncoding.decode(raw) else {
            throw LinkError(.parameters, "the data parameter is not valid percent-encoding")
        }
        guard let json = try? JSONValue.parse(text, maxDepth: 4, maxBytes: 1024), json["type"]?.stringValue == "group",
              let id = json["groupLinkId"]?.stringValue else {
            throw LinkError(.parameters, "the data parameter must be {\"type\":\"group\",\"groupLinkId\":…}")
        }
        guard Self.isGroupLinkId(id) else { throw LinkError(.parameters, "the groupLinkId must be 1-64 base64url characters") }
        return id
    }

    /// 1…64 characters of base64url (with optional `=` padding).
    public static func isGroupLinkId(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= 64 else { return false }
        return s.utf8.allSatisfy { b in
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "="): true
            default: false
            }
        }
    }

    public var description: String {
        var s = "simplex:/contact#/?v=1&smp=\(PercentEncoding.encode(queue.description))"
        if let groupLinkId { s += "&data=" + PercentEncoding.encode("{\"type\":\"group\",\"groupLinkId\":\"\(groupLinkId)\"}") }
        return s
    }
}

/// Any link the agent understands.
public enum AgentLink: Sendable, Hashable, CustomStringConvertible {
    case invitation(InvitationLink)
    case contact(ContactAddressLink)

    public init(parsing text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("simplex:/invitation") {
            self = .invitation(try InvitationLink(parsing: trimmed))
        } else if trimmed.hasPrefix("simplex:/contact") {
            self = .contact(try ContactAddressLink(parsing: trimmed))
        } else if trimmed.hasPrefix("simplex:/") {
            throw LinkError(.kind, "unsupported link type")
        } else {
            throw LinkError(.scheme, "a link starts with simplex:/")
        }
    }

    public var description: String {
        switch self {
        case let .invitation(l): l.description
        case let .contact(l): l.description
        }
    }
}

/// A short link: `https://<relay host>[:port]/<i|a>?c=<relay fingerprint>#<link ID>/<key>`.
///
/// The full link (invitation or contact address) is stored on the relay, encrypted with `key`,
/// under `link ID` (`LSET` on the owner's receiving queue); whoever holds the short link reads it
/// with `LGET` and decrypts it. The key travels only in the fragment, which is never sent to the
/// relay; the relay fingerprint in the query pins the relay as `smp://` addresses do.
public struct ShortLink: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case invitation = "i"
        case contact = "a"
        /// A chat relay's address: a contact address that only channel owners use (`x.grp.relay.inv`).
        case relay = "r"
        /// A group link (SimpleX `CCTGroup`, `/g#`).
        case group = "g"
        /// A channel link (SimpleX `CCTChannel`, `/c#`): the owner's contact address, with the
        /// channel's profile, owners and relay links in its data (``ShortLinkData``).
        case channel = "c"
    }

    public var kind: Kind
    public var relay: RelayAddress
    public var linkId: [UInt8]
    public var key: [UInt8]

    public init(kind: Kind, relay: RelayAddress, linkId: [UInt8], key: [UInt8]) {
        self.kind = kind
        self.relay = relay
        self.linkId = linkId
        self.key = key
    }

    public init(parsing text: String) throws {
        let t = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard t.hasPrefix("https://") else { throw LinkError(.scheme, "a short link starts with https://") }
        let rest = t.dropFirst("https://".count)
        guard let hash = rest.firstIndex(of: "#") else { throw LinkError(.parameters, "the short link has no #<link id>/<key>") }
        let beforeFragment = rest[..<hash]
        let fragment = rest[rest.index(after: hash)...]
        guard let slash = beforeFragment.firstIndex(of: "/") else { throw LinkError(.kind, "the short link has no /i, /a, /g, /c or /r path") }
        let hostPort = beforeFragment[..<slash]
        var path = beforeFragment[beforeFragment.index(after: slash)...]
        var fingerprint: Substring?
        if let q = path.firstIndex(of: "?") {
            guard let params = PercentEncoding.parameters(path[path.index(after: q)...]) else { throw LinkError(.parameters, "malformed short link query") }
            fingerprint = params.first(where: { $0.0 == "c" })?.1
            path = path[..<q]
        }
        guard let kind = Kind(rawValue: String(path)) else {
            throw LinkError(.kind, "a short link's path is /i (invitation), /a (address), /g (group), /c (channel) or /r (chat relay address)")
        }
        guard let fingerprint else { throw LinkError(.parameters, "the short link has no relay fingerprint (?c=)") }
        let relay: RelayAddress
        do { relay = try RelayAddress(parsing: "smp://\(fingerprint)@\(hostPort)") } catch {
            throw LinkError(.queue, "the short link's relay is invalid: \(error)")
        }
        let parts = fragment.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let id = Base64URL.decode(parts[0]), !id.isEmpty, let key = Base64URL.decode(parts[1]),
              key.count == XChaChaPoly.keyLength else {
            throw LinkError(.keys, "the short link's fragment must be <link id>/<32-byte key> in base64url")
        }
        self.init(kind: kind, relay: relay, linkId: id, key: key)
    }

    public var description: String {
        let h = relay.host.contains(":") ? "[\(relay.host)]" : relay.host
        let hostPort = relay.port == RelayAddress.defaultPort ? h : "\(h):\(relay.port)"
        return "https://\(hostPort)/\(kind.rawValue)?c=\(Base64URL.encode(relay.fingerprint))#\(Base64URL.encode(linkId))/\(Base64URL.encode(key))"
    }

    /// The relay's `LSET` data for a full link: `[1][nonce][XChaCha20-Poly1305(link)]`, bound to the link kind.
    static func seal(_ link: String, kind: Kind, key: [UInt8]) throws -> [UInt8] {
        let nonce = XChaChaPoly.randomNonce()
        return [1] + nonce + (try XChaChaPoly.seal(Array(link.utf8), key: key, nonce: nonce, associatedData: associatedData(kind)))
    }

    /// Decrypts `LGET` data into the full link's text.
    func open(_ data: [UInt8]) throws -> String {
        let n = XChaChaPoly.nonceLength
        guard data.count > 1 + n, data[0] == 1 else { throw AgentError(.badLink, "the short link's data is not version 1 link data") }
        guard let plain = try? XChaChaPoly.open(Array(data[(1 + n)...]), key: key, nonce: Array(data[1..<1 + n]), associatedData: Self.associatedData(kind)),
              let text = String(validating: plain, as: UTF8.self) else {
            throw AgentError(.badLink, "the short link's data does not decrypt with its key")
        }
        return text
    }

    static func associatedData(_ kind: Kind) -> [UInt8] { Array("swiftplex short link \(kind.rawValue)".utf8) }
}
