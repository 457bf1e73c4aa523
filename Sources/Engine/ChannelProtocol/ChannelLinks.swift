import SwiftplexBase

/// The kinds of SimpleX links (PY 7.0.2 `SimplexLinkType`), named by the letter of a short link's
/// path (simplexmq `ConnShortLink` `ctTypeChar`, lower-cased in links): `i` one-time invitation,
/// `a` contact address, `g` group link (also a chat relay's own per-channel link), `c` channel
/// link (a group with `useRelays`), `r` a chat relay's address.
public enum SimplexLinkType: String, Sendable, Hashable, CaseIterable {
    case invitation
    case contact
    case group
    case channel
    case relay

    init?(letter: UInt8) {
        switch letter {
        case UInt8(ascii: "i"): self = .invitation
        case UInt8(ascii: "a"): self = .contact
        case UInt8(ascii: "g"): self = .group
        case UInt8(ascii: "c"): self = .channel
        case UInt8(ascii: "r"): self = .relay
        default: return nil
        }
    }

    public var letter: String {
        switch self {
        case .invitation: "i"
        case .contact: "a"
        case .group: "g"
        case .channel: "c"
        case .relay: "r"
        }
    }
}

/// A recognised SimpleX link: its kind, and whether it is a short link (`https://<host>/<x>#…` or
/// `simplex:/<x>#…`) or a full one (`simplex:/contact#/?v=…`, `simplex:/invitation#/?v=…`).
/// Recognition looks at the shape only; the engine's link parser (Agent `ShortLink`,
/// `ConnectionLink`) reads the rest.
public struct SimplexLink: Sendable, Hashable {
    public let type: SimplexLinkType
    public let isShort: Bool

    /// Nil unless `text` has a SimpleX link's shape: a short link — scheme `https://` and a host,
    /// or `simplex:` — whose path is one letter of ``SimplexLinkType`` followed by `#` (or `?…#`)
    /// and a non-empty fragment; or a full `simplex:/contact#/?` / `simplex:/invitation#/?` link.
    public static func recognize(_ text: String) -> SimplexLink? {
        let t = text.trimmingSpaces
        guard t.utf8.count <= ChannelLimits.maxLinkBytes else { return nil }
        if t.hasPrefix("simplex:/contact#/?") { return SimplexLink(type: .contact, isShort: false) }
        if t.hasPrefix("simplex:/invitation#/?") { return SimplexLink(type: .invitation, isShort: false) }
        var rest: Substring
        if t.hasPrefix("https://") {
            rest = t.dropFirst("https://".count)
            guard let slash = rest.firstIndex(of: "/") else { return nil }
            let host = rest[..<slash]
            guard !host.isEmpty, host.utf8.allSatisfy(Self.isHostByte) else { return nil }
            rest = rest[rest.index(after: slash)...]
        } else if t.hasPrefix("simplex:/") {
            rest = t.dropFirst("simplex:/".count)
        } else {
            return nil
        }
        let bytes = Array(rest.utf8)
        guard bytes.count >= 3, let type = SimplexLinkType(letter: bytes[0]) else { return nil }
        // `/<x>#fragment` or `/<x>?query#fragment`.
        guard let hash = bytes.firstIndex(of: UInt8(ascii: "#")), hash + 1 < bytes.count else { return nil }
        guard hash == 1 || bytes[1] == UInt8(ascii: "?") else { return nil }
        return SimplexLink(type: type, isShort: true)
    }

    private static func isHostByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "]"):
            true
        default:
            false
        }
    }
}

/// What the engine checks before connecting to a link a user gave (`/connect`, `/_connect`,
/// `/_connect plan`, the terminal client's `/c`).
public enum ChannelLinks {
    /// Throws ``ChannelError/Code/relayAddress`` ("This is a chat relay address, it cannot be used to
    /// connect.") for a chat relay's address — nothing may be attempted with it: the relay answers
    /// only `x.grp.relay.inv` (and `x.grp.relay.test`) there. Other links pass (unrecognised text
    /// too: the engine's own parser reports it).
    public static func checkConnectable(_ link: String) throws(ChannelError) {
        if SimplexLink.recognize(link)?.type == .relay {
            throw ChannelError(.relayAddress, ChannelError.relayAddressText)
        }
    }

    /// Checks that `link` is a chat relay's address (a `/r` short link), as an owner registers it:
    /// ``ChannelError/Code/invalidLink`` for text that is no SimpleX link, and
    /// ``ChannelError/Code/notRelayAddress`` for a link of another kind.
    public static func checkRelayAddress(_ link: String) throws(ChannelError) {
        guard let l = SimplexLink.recognize(link) else { throw ChannelError(.invalidLink, "not a SimpleX link") }
        guard l.type == .relay, l.isShort else {
            throw ChannelError(.notRelayAddress, "this is a \(l.type.rawValue) link, not a chat relay address (…/r#…)")
        }
    }

    /// The link's kind, or ``ChannelError/Code/invalidLink``.
    public static func kind(of link: String) throws(ChannelError) -> SimplexLinkType {
        guard let l = SimplexLink.recognize(link) else { throw ChannelError(.invalidLink, "not a SimpleX link") }
        return l.type
    }
}

extension String {
    var trimmingSpaces: Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\n" || f == "\t" || f == "\r" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\n" || l == "\t" || l == "\r" { s = s.dropLast() }
        return s
    }
}
