import SwiftplexBase
import SwiftplexCrypto

/// A typed reason why a relay address or queue URI was refused.
public struct AddressError: CodedError {
    public enum Code: String, Sendable {
        case scheme, fingerprint, password, host, port, queueId, parameters
    }
    public let code: Code
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// `smp://<base64url SHA-256 of the relay's identity certificate>[:<password>]@host[:port]`.
///
/// Clients pin the fingerprint: a relay presenting any other certificate is refused. The optional
/// password (as SMP's `smp://fingerprint:password@host`) is what a private relay asks for before
/// it creates a queue (`NEW`); sending, subscribing and reading links never need it, so it is not
/// part of a relay's identity: two addresses that differ only in it are equal, and queue URIs and
/// links given to others never carry it (``withoutPassword``).
public struct RelayAddress: Sendable, Hashable, CustomStringConvertible, LosslessStringConvertible {
    public static let defaultPort = 5223

    public var fingerprint: [UInt8]
    public var host: String
    public var port: Int
    /// The relay's queue-creation password, if it has one.
    public var password: String?

    public init(fingerprint: [UInt8], host: String, port: Int = RelayAddress.defaultPort, password: String? = nil) {
        self.fingerprint = fingerprint
        self.host = host
        self.port = port
        self.password = password
    }

    public init?(_ description: String) {
        guard let a = try? RelayAddress(parsing: description) else { return nil }
        self = a
    }

    /// Parses an address, throwing an ``AddressError`` that says what is wrong.
    public init(parsing text: String) throws {
        guard text.hasPrefix("smp://") else {
            throw AddressError(.scheme, "a relay address starts with smp://")
        }
        let rest = text.dropFirst("smp://".count)
        guard let at = rest.firstIndex(of: "@") else {
            throw AddressError(.fingerprint, "a relay address needs <fingerprint>@host")
        }
        var fp = rest[..<at]
        var password: String?
        if let colon = fp.firstIndex(of: ":") {
            let p = fp[fp.index(after: colon)...]
            guard Self.isValidPassword(p) else {
                throw AddressError(.password, "a relay password is 1–\(RelayLimits.maxPasswordLength) characters of A–Z a–z 0–9 and -._~!$&'()*+,;=")
            }
            password = String(p)
            fp = fp[..<colon]
        }
        guard let fingerprint = Base64URL.decode(fp), fingerprint.count == 32 else {
            throw AddressError(.fingerprint, "the relay fingerprint must be 32 bytes of base64url")
        }
        let (host, port) = try Self.parseHostPort(rest[rest.index(after: at)...])
        self.init(fingerprint: fingerprint, host: host, port: port, password: password)
    }

    /// Characters a password may hold: URI "unreserved" and "sub-delims", so that it needs no escaping.
    public static func isValidPassword(_ p: some StringProtocol) -> Bool {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=".utf8)
        return !p.isEmpty && p.utf8.count <= RelayLimits.maxPasswordLength && p.utf8.allSatisfy { allowed.contains($0) }
    }

    /// The same relay without the password: what queue URIs and links carry.
    public var withoutPassword: RelayAddress {
        var a = self
        a.password = nil
        return a
    }

    public static func == (a: RelayAddress, b: RelayAddress) -> Bool {
        a.fingerprint == b.fingerprint && a.host == b.host && a.port == b.port
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(fingerprint)
        hasher.combine(host)
        hasher.combine(port)
    }

    static func parseHostPort(_ s: Substring) throws -> (String, Int) {
        var hostPart = s
        var port = defaultPort
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]") else { throw AddressError(.host, "unclosed [ in IPv6 host") }
            hostPart = s[s.index(after: s.startIndex)..<close]
            let after = s[s.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let p = Int(after.dropFirst()) else { throw AddressError(.port, "bad port after IPv6 host") }
                port = p
            }
        } else if let colon = s.lastIndex(of: ":") {
            hostPart = s[..<colon]
            guard let p = Int(s[s.index(after: colon)...]) else { throw AddressError(.port, "the port must be a number") }
            port = p
        }
        guard (1...65_535).contains(port) else { throw AddressError(.port, "the port must be 1–65535") }
        guard !hostPart.isEmpty, hostPart.count <= 253,
              hostPart.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":" })
        else { throw AddressError(.host, "the host must be a name or an IP address") }
        return (String(hostPart), port)
    }

    var hostPortText: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return port == Self.defaultPort ? h : "\(h):\(port)"
    }

    /// The full address, password included (for the operator and the configuration that created
    /// it; never for logs or for others: see ``withoutPassword``).
    public var description: String {
        let pw = password.map { ":\($0)" } ?? ""
        return "smp://\(Base64URL.encode(fingerprint))\(pw)@\(hostPortText)"
    }
}

/// A sender's view of a queue: where it lives, its sender ID, and the recipient's DH key for the
/// end-to-end envelope. Text form: `smp://<fp>@host[:port]/<sender ID>#/?v=1&dh=<base64url>`.
public struct QueueURI: Sendable, Hashable, CustomStringConvertible {
    public var relay: RelayAddress
    public var senderId: [UInt8]
    public var recipientDhKey: X25519.PublicKey
    public var version: UInt16

    /// A queue URI never carries the relay's password: it is given to the sender.
    public init(relay: RelayAddress, senderId: [UInt8], recipientDhKey: X25519.PublicKey, version: UInt16 = RelayLimits.currentVersion) {
        self.relay = relay.withoutPassword
        self.senderId = senderId
        self.recipientDhKey = recipientDhKey
        self.version = version
    }

    public init(parsing text: String) throws {
        guard let slash = text.dropFirst("smp://".count).firstIndex(of: "/") else {
            throw AddressError(.queueId, "a queue URI needs /<sender id> after the relay address")
        }
        let relay = try RelayAddress(parsing: String(text[..<slash]))
        let rest = text[text.index(after: slash)...]
        guard let hash = rest.firstIndex(of: "#") else {
            throw AddressError(.parameters, "a queue URI needs #/?v=…&dh=…")
        }
        guard let sid = Base64URL.decode(rest[..<hash]), sid.count == RelayLimits.entityIdLength else {
            throw AddressError(.queueId, "the sender id must be \(RelayLimits.entityIdLength) bytes of base64url")
        }
        var fragment = rest[rest.index(after: hash)...]
        if fragment.hasPrefix("/") { fragment = fragment.dropFirst() }
        guard fragment.hasPrefix("?") else { throw AddressError(.parameters, "queue URI parameters start with ?") }
        var version: UInt16?
        var dh: X25519.PublicKey?
        for pair in fragment.dropFirst().split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { throw AddressError(.parameters, "malformed queue URI parameter") }
            switch kv[0] {
            case "v":
                // Accept a single version or a range "1-3"; keep the highest.
                let parts = kv[1].split(separator: "-")
                guard let v = parts.last.flatMap({ UInt16($0) }) else { throw AddressError(.parameters, "bad version in queue URI") }
                version = v
            case "dh":
                guard let raw = Base64URL.decode(kv[1]), let key = try? X25519.PublicKey(bytes: raw) else {
                    throw AddressError(.parameters, "bad dh key in queue URI")
                }
                dh = key
            default:
                continue // unknown parameters are ignored for forward compatibility
            }
        }
        guard let version, let dh else { throw AddressError(.parameters, "a queue URI needs v and dh") }
        self.init(relay: relay, senderId: sid, recipientDhKey: dh, version: version)
    }

    public var description: String {
        "\(relay.withoutPassword)/\(Base64URL.encode(senderId))#/?v=\(version)&dh=\(Base64URL.encode(recipientDhKey.bytes))"
    }
}
