import Foundation
import NIOPosix
import RelayProtocol

/// Decides, before any socket is opened, whether a relay named by a peer may be dialled, and
/// with which address (see ``AgentOptions/allowedHosts`` and ``AgentOptions/refusePrivateAddresses``).
enum RelayPolicy {
    /// The address to dial for `relay`: the relay itself, or — when private addresses are
    /// refused — the relay with its host replaced by the checked IP address, so that a name
    /// cannot resolve to a public address for the check and to a private one for the dial.
    static func dialAddress(for relay: RelayAddress, options: AgentOptions) async throws -> RelayAddress {
        let host = relay.host.lowercased()
        if let allowed = options.allowedHosts, !allowed.contains(host), !allowed.contains("\(host):\(relay.port)") {
            throw AgentError(.relayRefused, "relay \(relay.host):\(relay.port) is not in the allowed list")
        }
        guard options.refusePrivateAddresses else { return relay }
        let addresses = try await resolve(relay.host)
        guard let first = addresses.first else {
            throw AgentError(.relayRefused, "relay host \(relay.host) does not resolve")
        }
        if let bad = addresses.first(where: isNonPublic) {
            throw AgentError(.relayRefused, "relay \(relay.host):\(relay.port) is at a non-public address (\(bad.text))")
        }
        var dial = relay
        dial.host = first.text
        return dial
    }

    struct IPAddress: Sendable {
        var bytes: [UInt8] // 4 or 16
        var text: String
    }

    /// The host's addresses: an IP literal as it is, a name through the system resolver (on
    /// NIO's thread pool, off the cooperative threads).
    static func resolve(_ host: String) async throws -> [IPAddress] {
        if let literal = parseLiteral(host) { return [literal] }
        return try await NIOThreadPool.singleton.runIfActive {
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var list: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return [] }
            defer { freeaddrinfo(first) }
            var out: [IPAddress] = []
            var p: UnsafeMutablePointer<addrinfo>? = first
            while let a = p {
                if a.pointee.ai_family == AF_INET, let sa = a.pointee.ai_addr {
                    var sin = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
                    let bytes = withUnsafeBytes(of: &sin) { Array($0) }
                    out.append(IPAddress(bytes: bytes, text: bytes.map(String.init).joined(separator: ".")))
                } else if a.pointee.ai_family == AF_INET6, let sa = a.pointee.ai_addr {
                    var sin6 = sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                    let bytes = withUnsafeBytes(of: &sin6) { Array($0) }
                    out.append(IPAddress(bytes: bytes, text: ipv6Text(&sin6)))
                }
                p = a.pointee.ai_next
            }
            return out
        }
    }

    static func parseLiteral(_ host: String) -> IPAddress? {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var v4 = in_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 {
            return IPAddress(bytes: withUnsafeBytes(of: &v4) { Array($0) }, text: bare)
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, bare, &v6) == 1 {
            return IPAddress(bytes: withUnsafeBytes(of: &v6) { Array($0) }, text: bare)
        }
        return nil
    }

    static func ipv6Text(_ a: inout in6_addr) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        _ = inet_ntop(AF_INET6, &a, &buffer, socklen_t(buffer.count))
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// True for addresses a relay on the public internet does not have: IPv4 0/8, 10/8,
    /// 100.64/10, 127/8, 169.254/16, 172.16/12, 192.0.0/24, 192.168/16, 198.18/15, 224/4 and
    /// above; IPv6 ::, ::1, fc00::/7, fe80::/10, ff00::/8, and IPv4-mapped or -compatible
    /// forms of the IPv4 ranges.
    static func isNonPublic(_ a: IPAddress) -> Bool {
        let b = a.bytes
        if b.count == 4 { return isNonPublicV4(b) }
        guard b.count == 16 else { return true }
        if b.allSatisfy({ $0 == 0 }) { return true }                                   // ::
        if b[0..<15].allSatisfy({ $0 == 0 }) && b[15] == 1 { return true }              // ::1
        if b[0] & 0xFE == 0xFC { return true }                                          // fc00::/7
        if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { return true }                          // fe80::/10
        if b[0] == 0xFF { return true }                                                 // multicast
        if b[0..<10].allSatisfy({ $0 == 0 }) && ((b[10] == 0xFF && b[11] == 0xFF) || (b[10] == 0 && b[11] == 0)) {
            return isNonPublicV4(Array(b[12..<16]))                                     // ::ffff:a.b.c.d, ::a.b.c.d
        }
        if b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xFF && b[3] == 0x9B {               // 64:ff9b::/96 (NAT64)
            return isNonPublicV4(Array(b[12..<16]))
        }
        return false
    }

    static func isNonPublicV4(_ b: [UInt8]) -> Bool {
        switch (b[0], b[1]) {
        case (0, _), (10, _), (127, _): return true
        case (100, 64...127): return true
        case (169, 254): return true
        case (172, 16...31): return true
        case (192, 168): return true
        case (192, 0) where b[2] == 0: return true
        case (198, 18...19): return true
        case (224..., _): return true
        default: return false
        }
    }
}
