import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

/// The protocol's limits that channels add to GroupProtocol's (``GroupLimits``).
public enum ChannelLimits {
    /// A short link (the longest SimpleX writes is far below; this bounds a peer's field).
    public static let maxLinkBytes = 2_048
    /// `maxDecompressedMsgLength` (`Protocol.hs`): a whole binary batch, once decompressed.
    public static let maxBatchBytes = 65_536
    /// A batch has a one-byte element count (`smpListP`).
    public static let maxBatchElements = 255
    /// A relay-test challenge (32 random bytes in SimpleX; bounded here).
    public static let maxChallengeBytes = 256
}

/// A member's Ed25519 signing key as SimpleX sends it (`MemberKey`, `newMemberKey`, `memberKey`):
/// base64url (padded) of the key's X.509 SubjectPublicKeyInfo DER (simplexmq `encodePubKey`,
/// `StrEncoding (PublicKey a)`).
public struct MemberKey: Sendable, Hashable {
    public let publicKey: Ed25519.PublicKey

    /// `SEQUENCE { SEQUENCE { OID 1.3.101.112 } BIT STRING (0 unused bits) }` before the 32 key bytes.
    static let spkiPrefix: [UInt8] = [0x30, 0x2A, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x03, 0x21, 0x00]

    public init(_ publicKey: Ed25519.PublicKey) { self.publicKey = publicKey }

    /// Nil unless `text` is base64url of a 44-byte Ed25519 SubjectPublicKeyInfo.
    public init?(text: String) {
        guard text.utf8.count <= 128, let der = Base64URL.decode(text), der.count == 44,
              Array(der.prefix(12)) == Self.spkiPrefix, let key = try? Ed25519.PublicKey(bytes: Array(der.suffix(32)))
        else { return nil }
        publicKey = key
    }

    public var text: String {
        let s = Base64URL.encode(Self.spkiPrefix + publicKey.bytes)
        let pad = (4 - s.utf8.count % 4) % 4
        return s + String(repeating: "=", count: pad)
    }
}

/// `RelayCapabilities` (`x.grp.relay.acpt` newer field `relayCap`, `x.grp.relay.cap`): the relay's
/// web-preview domain, if it publishes one. Other fields are kept.
public struct RelayCapabilities: Sendable, Hashable {
    public let json: JSONValue
    public var webDomain: String? { json["webDomain"]?.stringValue }

    public init(webDomain: String? = nil) {
        var w = ParamsWriter()
        w.set("webDomain", webDomain)
        json = w.json
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        _ = try r.optionalString("webDomain", maxLength: 253)
        json = r.value
    }
}

/// Why a relay refuses an owner's invitation (`x.grp.relay.reject`): `rejoin_rejected` (its
/// operator left the channel) or a newer relay's reason, kept as text.
public enum RelayRejectionReason: Sendable, Hashable {
    case rejoinRejected
    case unknown(String)

    public init(text: String) { self = text == "rejoin_rejected" ? .rejoinRejected : .unknown(text) }
    public var text: String {
        switch self {
        case .rejoinRejected: "rejoin_rejected"
        case let .unknown(t): t
        }
    }
}

/// `GroupRelayInvitation` (`Types.hs`): the owner's invitation to a chat relay, sent as the
/// connection info of a contact request to the relay's address.
public struct GroupRelayInvitation: Sendable, Hashable {
    /// The inviting owner (`{memberId, memberRole}`).
    public var fromMember: MemberIdRole
    public var fromMemberProfile: MemberProfile
    /// The member id the relay will have in the channel.
    public var relayMemberId: MemberId
    /// The channel's link (`/c#`), whose data the relay checks.
    public var groupLink: String

    public init(fromMember: MemberIdRole, fromMemberProfile: MemberProfile, relayMemberId: MemberId, groupLink: String) {
        self.fromMember = fromMember
        self.fromMemberProfile = fromMemberProfile
        self.relayMemberId = relayMemberId
        self.groupLink = groupLink
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        let from = try r.object("fromMember")
        fromMember = MemberIdRole(try from.memberId("memberId"), try from.role("memberRole"))
        fromMemberProfile = try r.profile("fromMemberProfile")
        relayMemberId = try r.memberId("relayMemberId")
        groupLink = try r.link("groupLink", kinds: [.channel, .group])
        guard relayMemberId != fromMember.memberId else { throw r.invalid("relayMemberId", "is the owner's member id") }
    }

    var json: JSONValue {
        var w = ParamsWriter()
        w.set("fromMember", .object([("memberId", .string(fromMember.memberId.text)), ("memberRole", .string(fromMember.memberRole.name))]))
        w.set("fromMemberProfile", fromMemberProfile.json)
        w.set("relayMemberId", relayMemberId.text)
        w.set("groupLink", groupLink)
        return w.json
    }
}

/// `x.member`: a subscriber's join request through a relay's link (connection info of the contact
/// request): its profile, the member id and signing key it chose, and (newer SimpleX) the relay's
/// member id it joins through.
public struct MemberJoin: Sendable, Hashable {
    public var profile: MemberProfile
    public var newMemberId: MemberId
    public var newMemberKey: MemberKey
    public var viaRelay: MemberId?

    public init(profile: MemberProfile, newMemberId: MemberId, newMemberKey: MemberKey, viaRelay: MemberId? = nil) {
        self.profile = profile
        self.newMemberId = newMemberId
        self.newMemberKey = newMemberKey
        self.viaRelay = viaRelay
    }
}

/// The channel events of the chat protocol, typed, with SimpleX's field names (`Protocol.hs`
/// `appJsonToCM` / `chatToAppMessage`). Each encodes to and strictly decodes from
/// `(event, params)`; unknown fields are ignored, as SimpleX ignores them.
public enum ChannelMessage: Sendable, Hashable {
    /// `x.grp.relay.inv {groupRelayInvitation}` — owner → relay address.
    case relayInvitation(GroupRelayInvitation)
    /// `x.grp.relay.acpt {relayLink, relayCap?}` — relay → owner, accepting.
    case relayAccept(relayLink: String, relayCap: RelayCapabilities?)
    /// `x.grp.relay.reject {reason?}` — relay → owner, refusing.
    case relayReject(RelayRejectionReason)
    /// `x.grp.relay.test {challenge, signature?}` — owner ↔ relay address liveness test.
    case relayTest(challenge: [UInt8], signature: [UInt8]?)
    /// `x.grp.relay.new {relayLink}` — owner → relays → subscribers: connect to this new relay.
    case relayNew(relayLink: String)
    /// `x.member {profile, newMemberId, newMemberKey, viaRelay?}` — subscriber → relay link.
    case member(MemberJoin)

    public enum Event: String, Sendable, CaseIterable {
        case relayInvitation = "x.grp.relay.inv"
        case relayAccept = "x.grp.relay.acpt"
        case relayReject = "x.grp.relay.reject"
        case relayTest = "x.grp.relay.test"
        case relayNew = "x.grp.relay.new"
        case member = "x.member"
    }

    public var kind: Event {
        switch self {
        case .relayInvitation: .relayInvitation
        case .relayAccept: .relayAccept
        case .relayReject: .relayReject
        case .relayTest: .relayTest
        case .relayNew: .relayNew
        case .member: .member
        }
    }

    public var event: String { kind.rawValue }

    public var params: JSONValue {
        var w = ParamsWriter()
        switch self {
        case let .relayInvitation(inv): w.set("groupRelayInvitation", inv.json)
        case let .relayAccept(link, cap):
            w.set("relayLink", link)
            w.set("relayCap", cap?.json)
        case let .relayReject(reason): w.set("reason", reason.text)
        case let .relayTest(challenge, signature):
            w.set("challenge", Base64URL.encode(challenge))
            w.set("signature", signature.map { Base64URL.encode($0) })
        case let .relayNew(link): w.set("relayLink", link)
        case let .member(j):
            w.set("profile", j.profile.json)
            w.set("newMemberId", j.newMemberId.text)
            w.set("newMemberKey", j.newMemberKey.text)
            w.set("viaRelay", j.viaRelay?.text)
        }
        return w.json
    }

    public func envelope(msgId: String?) -> GroupEnvelope { GroupEnvelope(msgId: msgId, event: event, params: params) }

    /// Nil when `event` is not a channel event of this enum; a ``GroupMessageError`` when it is and
    /// its params are malformed — nothing of a malformed message is used.
    public static func decode(event: String, params: JSONValue) throws(GroupMessageError) -> ChannelMessage? {
        guard let kind = Event(rawValue: event) else { return nil }
        let r = try ParamsReader(event: event, params)
        switch kind {
        case .relayInvitation:
            return .relayInvitation(try GroupRelayInvitation(reading: r.object("groupRelayInvitation")))
        case .relayAccept:
            // SimpleX creates a relay's per-channel link as a group link (`/g#`).
            let link = try r.link("relayLink", kinds: [.group])
            return .relayAccept(relayLink: link, relayCap: try r.optionalObject("relayCap").map { (o) throws(GroupMessageError) in try RelayCapabilities(reading: o) })
        case .relayReject:
            // The reason is optional: the first SimpleX relays sent `{}` (plans), and unknown
            // reasons are kept (CPROTO "Relay rejection").
            let reason = try r.optionalString("reason", maxLength: 256)
            return .relayReject(reason.map(RelayRejectionReason.init(text:)) ?? .unknown(""))
        case .relayTest:
            let c = try r.string("challenge", maxLength: ChannelLimits.maxChallengeBytes * 2)
            guard let challenge = Base64URL.decode(c), !challenge.isEmpty, challenge.count <= ChannelLimits.maxChallengeBytes else {
                throw r.invalid("challenge", "is not base64url of 1…\(ChannelLimits.maxChallengeBytes) bytes")
            }
            var signature: [UInt8]?
            if let s = try r.optionalString("signature", maxLength: 256) {
                guard let sig = Base64URL.decode(s), sig.count == Ed25519.signatureLength else {
                    throw r.invalid("signature", "is not an Ed25519 signature")
                }
                signature = sig
            }
            return .relayTest(challenge: challenge, signature: signature)
        case .relayNew:
            return .relayNew(relayLink: try r.link("relayLink", kinds: [.group]))
        case .member:
            let profile = try r.profile("profile")
            let id = try r.memberId("newMemberId")
            let keyText = try r.string("newMemberKey", maxLength: 128)
            guard let key = MemberKey(text: keyText) else { throw r.invalid("newMemberKey", "is not an Ed25519 public key") }
            let via = try r.optionalMemberId("viaRelay")
            return .member(MemberJoin(profile: profile, newMemberId: id, newMemberKey: key, viaRelay: via))
        }
    }
}

extension GroupEnvelope {
    /// The typed channel message, nil when the event is not a channel event.
    public func channelMessage() throws(GroupMessageError) -> ChannelMessage? {
        try ChannelMessage.decode(event: event, params: params)
    }

    /// `asGroup: true` in `x.msg.new` / `x.msg.update` (SimpleX), and — **Swiftplex** — in
    /// `x.msg.del` / `x.msg.react`: the owner acts as the channel, so that deleting or reacting to
    /// a post made as the channel does not reveal which owner made it.
    public var isAsGroup: Bool {
        Self.asGroupEvents.contains(event) && params["asGroup"]?.boolValue == true
    }

    /// The events that may carry `asGroup`.
    public static let asGroupEvents: Set<String> = ["x.msg.new", "x.msg.update", "x.msg.del", "x.msg.react"]
}
