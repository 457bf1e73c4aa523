/// A light syntactic check of `host:port` text (the module does not depend on the relay
/// protocol's parser; the host parses addresses fully when it uses them).
enum HostPortSyntax {
    /// `host:port` or `[ipv6]:port`; the port is required.
    static func parse(_ s: String, allowPortZero: Bool) -> (String, Int)? {
        let host: Substring
        let portText: Substring
        if s.hasPrefix("[") {
            guard let close = s.firstIndex(of: "]") else { return nil }
            host = s[s.index(after: s.startIndex)..<close]
            let after = s[s.index(after: close)...]
            guard after.hasPrefix(":") else { return nil }
            portText = after.dropFirst()
        } else {
            guard let colon = s.lastIndex(of: ":") else { return nil }
            host = s[..<colon]
            guard !host.contains(":") else { return nil } // IPv6 needs brackets
            portText = s[s.index(after: colon)...]
        }
        guard isHost(String(host)), !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
              portText.count <= 5, let port = Int(portText), (allowPortZero ? 0 : 1)...65_535 ~= port
        else { return nil }
        return (String(host), port)
    }

    /// A DNS name or an IPv4/IPv6 address, by its characters only.
    static func isHost(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 253
            && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":") }
            && !s.hasPrefix("-") && !s.hasPrefix(".")
    }
}

/// The shape of a relay address, `smp://<fingerprint>[:<password>]@host[:port]`, checked by syntax
/// only (the password of a private relay: 1–128 of `A–Z a–z 0–9 -._~!$&'()*+,;=`).
enum RelayAddressSyntax {
    /// What is wrong with the address, or nil when its shape is right.
    static func problem(_ s: String) -> String? {
        guard s.hasPrefix("smp://") else { return "a relay address starts with smp://" }
        let rest = s.dropFirst("smp://".count)
        guard let at = rest.firstIndex(of: "@") else { return "the address has no <fingerprint>@" }
        var fingerprint = rest[..<at]
        if let colon = fingerprint.firstIndex(of: ":") {
            let password = fingerprint[fingerprint.index(after: colon)...]
            let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=")
            guard (1...128).contains(password.count), password.allSatisfy({ allowed.contains($0) }) else {
                return "the relay password must be 1-128 characters of A-Z a-z 0-9 -._~!$&'()*+,;="
            }
            fingerprint = fingerprint[..<colon]
        }
        if fingerprint.hasSuffix("=") { fingerprint = fingerprint.dropLast() }
        guard fingerprint.count == 43,
              fingerprint.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else { return "the fingerprint must be 43 characters of base64url (a SHA-256 digest)" }
        let hostPort = String(rest[rest.index(after: at)...])
        let hasPort = hostPort.hasPrefix("[") ? hostPort.contains("]:") : hostPort.contains(":")
        if hasPort {
            guard HostPortSyntax.parse(hostPort, allowPortZero: false) != nil else { return "the host or port is not valid (port 1...65535)" }
        } else {
            let host = hostPort.hasPrefix("[") && hostPort.hasSuffix("]") ? String(hostPort.dropFirst().dropLast()) : hostPort
            guard HostPortSyntax.isHost(host) else { return "the host is not a host name or IP address" }
        }
        return nil
    }
}
