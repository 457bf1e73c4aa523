import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

/// An owner as the channel's link data lists it (SimpleX `OwnerAuth`: member id and signing key;
/// the root-key signature over it is not modelled yet — see docs/channels.md).
public struct OwnerKey: Sendable, Hashable {
    public var memberId: MemberId
    public var key: MemberKey
    public var profile: MemberProfile

    public init(memberId: MemberId, key: MemberKey, profile: MemberProfile) {
        self.memberId = memberId
        self.key = key
        self.profile = profile
    }
}

/// What a channel's short link (`/c#`) carries (INT `groupLinkData`: `UserContactData {direct =
/// False, owners, relays, userData = GroupShortLinkData {groupProfile, publicGroupData}}`), as the
/// engine reads it from the link (the agent's `getConnShortLink`): the channel's entity id
/// (`linkEntityId`, = `publicGroupId`), its profile, owners and relay links, and the subscriber count.
public struct ChannelLinkData: Sendable, Hashable {
    public var publicGroupId: [UInt8]
    public var profile: GroupProfile
    public var owners: [OwnerKey]
    public var relays: [String]
    public var publicMemberCount: Int

    public init(publicGroupId: [UInt8], profile: GroupProfile, owners: [OwnerKey], relays: [String], publicMemberCount: Int) {
        self.publicGroupId = publicGroupId
        self.profile = profile
        self.owners = owners
        self.relays = relays
        self.publicMemberCount = publicMemberCount
    }
}

/// A channel's profile's `publicGroup` (`PublicGroupProfile`: `groupType`, `groupLink`,
/// `publicGroupId`).
public enum ChannelProfiles {
    /// A channel's group profile: `publicGroup = {groupType: "channel", groupLink, publicGroupId}`.
    public static func channelProfile(displayName: String, fullName: String = "", channelLink: String, publicGroupId: [UInt8]) -> GroupProfile {
        let json: JSONValue = .object([
            ("displayName", .string(displayName)), ("fullName", .string(fullName)),
            ("publicGroup", .object([("groupType", "channel"), ("groupLink", .string(channelLink)), ("publicGroupId", .string(Base64URL.encode(publicGroupId)))])),
        ])
        return try! GroupProfile(json: json)
    }

    /// The profile's `publicGroup.publicGroupId` bytes, nil when absent or not base64url.
    public static func publicGroupId(of profile: GroupProfile) -> [UInt8]? {
        guard let s = profile.json["publicGroup"]?["publicGroupId"]?.stringValue, s.utf8.count <= 128 else { return nil }
        return Base64URL.decode(s)
    }

    public static func isChannel(_ profile: GroupProfile) -> Bool {
        profile.json["publicGroup"]?["groupType"]?.stringValue == "channel"
    }
}

/// Who content is from, as a subscriber shows it: the channel (`chatDir: channelRcv`) or an owner.
public enum ContentSender: Sendable, Hashable {
    case channel
    case member(MemberId)
}

/// The signature status a subscriber records with a message (SimpleX `MsgSigStatus`, item
/// `meta.msgVerified`): verified, or (only where unsigned messages are allowed) missing.
public enum MessageVerification: String, Sendable, Hashable {
    case verified
    case sigMissing
}

/// Channel events, named after the SimpleX bot API events the engine builds from them.
public enum ChannelEvent: Sendable, Hashable {
    // Owner.
    /// `groupRelayUpdated {member, groupRelay}`.
    case groupRelayUpdated(relay: MemberId, status: RelayStatus)
    /// `groupLinkDataUpdated {groupRelays, relaysChanged}`.
    case groupLinkDataUpdated(relays: [String], relaysChanged: Bool)
    /// The relay refused (terminal event `relayRejected`).
    case relayRejected(relay: MemberId, reason: RelayRejectionReason)
    /// `joinedGroupMemberConnecting {hostMember, member}`: a relay announced a subscriber.
    case joinedGroupMemberConnecting(relay: MemberId, member: MemberId)
    // Relay.
    /// `userJoinedGroup {hostMember}` — relay: the owner's connection is up; subscriber: one per relay.
    case userJoinedGroup(host: MemberId)
    /// `joinedGroupMember`: a subscriber connected to the relay.
    case joinedGroupMember(MemberId)
    /// `leftMember`.
    case leftMember(MemberId)
    /// `deletedMemberUser`: the owner removed this relay (or subscriber).
    case deletedMemberUser(by: MemberId)
    /// `leftMemberUser`: the user left.
    case leftMemberUser
    // Subscriber.
    /// `groupLinkConnecting {hostMember}`.
    case groupLinkConnecting(relay: MemberId)
    /// `groupUpdated {fromGroup, toGroup}` (subscriber and relay).
    case groupUpdated(from: GroupProfile, to: GroupProfile)
    /// `groupDeleted {member}`: the owner deleted the channel (subscriber and relay).
    case groupDeleted(by: MemberId)
    /// A relay is gone for this subscriber (removed by the owner, or it left).
    case relayGone(MemberId)
    /// A message from a relay was refused (bad or missing signature, authored by the relay, …):
    /// SimpleX shows `rcvGroupEvent msgBadSignature` for signature failures.
    case messageRejected(relay: MemberId, reason: ChannelError)
}

/// The effects of one `handle` call, being collected.
struct ChannelRun<Effect> {
    let newMessageId: () -> String
    var effects: [Effect] = []
    func envelope(_ m: GroupMessage) -> GroupEnvelope { m.envelope(msgId: newMessageId()) }
    func envelope(_ m: ChannelMessage) -> GroupEnvelope { m.envelope(msgId: newMessageId()) }
}

/// SimpleX `requiresSignature`: in relay groups these events must carry a valid signature
/// (`x.grp.relay.new` too, CPROTO).
public enum ChannelSignaturePolicy {
    public static let requiredEvents: Set<String> = [
        "x.grp.del", "x.grp.info", "x.grp.prefs", "x.grp.mem.del", "x.grp.mem.role", "x.grp.mem.restrict",
        "x.grp.leave", "x.info", "x.grp.relay.new",
    ]
    /// Owner events relays forward to subscribers (`isForwardedGroupMsg`, and `x.grp.relay.new`).
    public static func isForwarded(_ env: GroupEnvelope) -> Bool { env.isForwardable || env.event == "x.grp.relay.new" }
}

func decodeElement(_ e: ChannelElement) throws(ChannelError) -> GroupEnvelope {
    do { return try e.envelope() } catch { throw ChannelError.malformed(error) }
}
