import SwiftplexBase

/// The protocol's size limits (SimpleX `Protocol.hs`).
public enum GroupLimits {
    /// `maxEncodedMsgLength`: an encoded chat message longer than this is not sent (it leaves room
    /// for the `x.grp.msg.forward` wrapper, so a forwarded message still fits).
    public static let maxEncodedMessageBytes = 15_602
    /// `maxEncodedInfoLength`: a message carried as connection info (`x.grp.acpt`,
    /// `x.grp.mem.info`, `x.grp.link.inv`) in the handshake.
    public static let maxConnInfoBytes = 14_694
    /// No single string field may be longer than a whole message.
    public static let maxFieldBytes = maxEncodedMessageBytes
}

/// A member's id in a group: random bytes (12 in SimpleX) in base64url, the same at every member.
/// Swiftplex checks the alphabet and the length and keeps the text as received.
public struct MemberId: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let maxLength = 64
    public let text: String

    /// Nil unless `text` is 1…64 characters of base64url (optionally `=`-padded) that could be
    /// the encoding of some bytes.
    public init?(_ text: String) {
        guard !text.isEmpty, text.utf8.count <= Self.maxLength else { return nil }
        var body = Substring(text)
        var padding = 0
        while body.hasSuffix("=") {
            body = body.dropLast()
            padding += 1
        }
        guard padding <= 2, !body.isEmpty else { return nil }
        for b in body.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                continue
            default:
                return nil
            }
        }
        let n = body.utf8.count
        guard n % 4 != 1 else { return nil }
        if padding > 0 { guard (n + padding) % 4 == 0 else { return nil } }
        self.text = text
    }

    public var description: String { text }
    public static func < (a: MemberId, b: MemberId) -> Bool { a.text < b.text }
}

/// A member's profile as sent in the group (`Profile`): `displayName` is required and checked;
/// every field — the known (`fullName`, `shortDescr`, `image`, `contactLink`, `preferences`) and any
/// a newer client adds — is kept exactly as received.
public struct MemberProfile: Sendable, Hashable {
    public let json: JSONValue

    public var displayName: String { json["displayName"]?.stringValue ?? "" }
    public var fullName: String { json["fullName"]?.stringValue ?? "" }

    public init(displayName: String, fullName: String = "") {
        json = .object([("displayName", .string(displayName)), ("fullName", .string(fullName))])
    }

    public init(json: JSONValue) throws(GroupMessageError) {
        try self.init(reading: ParamsReader(event: "profile", path: "profile", json))
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        let name = try r.string("displayName")
        guard !name.isEmpty else { throw r.invalid("displayName", "is empty") }
        _ = try r.optionalString("fullName")
        _ = try r.optionalString("shortDescr")
        _ = try r.optionalString("image")
        json = r.value
    }
}

/// A group's profile (`GroupProfile`): `displayName` required; everything else (`fullName`,
/// `description`, `image`, `groupPreferences`, `memberAdmission`, `publicGroup`, …) kept as received.
public struct GroupProfile: Sendable, Hashable {
    public let json: JSONValue

    public var displayName: String { json["displayName"]?.stringValue ?? "" }
    /// A channel's profile carries `publicGroup`; p2p groups must not (SimpleX `xGrpInfo`,
    /// `processGroupInvitation`).
    public var isPublicGroup: Bool {
        if let v = json["publicGroup"], !v.isNull { true } else { false }
    }
    /// `memberAdmission.review == "all"`: joiners through the link wait for a moderator.
    public var reviewsAllMembers: Bool { json["memberAdmission"]?["review"]?.stringValue == "all" }

    public init(displayName: String, fullName: String = "") {
        json = .object([("displayName", .string(displayName)), ("fullName", .string(fullName))])
    }

    public init(json: JSONValue) throws(GroupMessageError) {
        try self.init(reading: ParamsReader(event: "groupProfile", path: "groupProfile", json))
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        let name = try r.string("displayName")
        guard !name.isEmpty else { throw r.invalid("displayName", "is empty") }
        _ = try r.optionalString("fullName")
        _ = try r.optionalString("description")
        _ = try r.optionalString("image")
        json = r.value
    }
}

/// `MemberIdRole`: `{"memberId","memberRole"}`.
public struct MemberIdRole: Sendable, Hashable {
    public var memberId: MemberId
    public var memberRole: GroupMemberRole

    public init(_ memberId: MemberId, _ memberRole: GroupMemberRole) {
        self.memberId = memberId
        self.memberRole = memberRole
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        memberId = try r.memberId("memberId")
        memberRole = try r.role("memberRole")
    }

    var json: JSONValue { .object([("memberId", .string(memberId.text)), ("memberRole", .string(memberRole.name))]) }
}

/// `MemberInfo`: who a member is, as the host announces or introduces it:
/// `{"memberId","memberRole","v"?,"profile","memberKey"?}`. `v` is the member's chat version range
/// (`"1-18"`); `memberKey` its signing key in channels (kept, not interpreted here).
public struct MemberInfo: Sendable, Hashable {
    public var memberId: MemberId
    public var memberRole: GroupMemberRole
    public var versionRange: String?
    public var profile: MemberProfile
    public var memberKey: String?

    public init(memberId: MemberId, memberRole: GroupMemberRole, versionRange: String? = nil, profile: MemberProfile, memberKey: String? = nil) {
        self.memberId = memberId
        self.memberRole = memberRole
        self.versionRange = versionRange
        self.profile = profile
        self.memberKey = memberKey
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        memberId = try r.memberId("memberId")
        memberRole = try r.role("memberRole")
        versionRange = try r.optionalString("v", maxLength: 32)
        if let v = versionRange, !Self.isVersionRange(v) { throw r.invalid("v", "is not a version range") }
        profile = try r.profile("profile")
        memberKey = try r.optionalString("memberKey", maxLength: 256)
    }

    var json: JSONValue {
        var w = ParamsWriter()
        w.set("memberId", memberId.text)
        w.set("memberRole", memberRole.name)
        w.set("v", versionRange)
        w.set("profile", profile.json)
        w.set("memberKey", memberKey)
        return w.json
    }

    /// `"N"` or `"N-M"` with N ≤ M (SimpleX `ChatVersionRange`).
    static func isVersionRange(_ s: String) -> Bool {
        let parts = s.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2 else { return false }
        var numbers: [Int] = []
        for p in parts {
            guard !p.isEmpty, p.utf8.count <= 5, p.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let n = Int(p) else { return false }
            numbers.append(n)
        }
        return numbers.count == 1 || numbers[0] <= numbers[1]
    }
}

/// `IntroInvitation`: the connection requests a new member makes for an existing one
/// (`groupConnReq`, and `directConnReq` only for chat versions below 2).
public struct IntroInvitation: Sendable, Hashable {
    public var groupConnReq: String
    public var directConnReq: String?

    public init(groupConnReq: String, directConnReq: String? = nil) {
        self.groupConnReq = groupConnReq
        self.directConnReq = directConnReq
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        groupConnReq = try r.string("groupConnReq")
        guard !groupConnReq.isEmpty else { throw r.invalid("groupConnReq", "is empty") }
        directConnReq = try r.optionalString("directConnReq")
    }

    var json: JSONValue {
        var w = ParamsWriter()
        w.set("groupConnReq", groupConnReq)
        w.set("directConnReq", directConnReq)
        return w.json
    }
}

/// `MemberRestrictionStatus`: `"blocked"`, `"unrestricted"`, or a newer client's value (kept).
public enum MemberRestriction: Sendable, Hashable {
    case blocked
    case unrestricted
    case unknown(String)

    public init(name: String) {
        switch name {
        case "blocked": self = .blocked
        case "unrestricted": self = .unrestricted
        default: self = .unknown(name)
        }
    }

    public var name: String {
        switch self {
        case .blocked: "blocked"
        case .unrestricted: "unrestricted"
        case let .unknown(s): s
        }
    }

    /// SimpleX `mrsBlocked`: only `blocked` blocks.
    public var isBlocked: Bool { self == .blocked }
}

/// `GroupAcceptance` (knocking): `"accepted"`, `"pending"` (approval by the host), `"pending_review"`.
public enum GroupAcceptance: String, Sendable, Hashable, CaseIterable {
    case accepted
    case pendingApproval = "pending"
    case pendingReview = "pending_review"
}

/// `MsgScope`: `{"type":"member","memberId":…}` — a message in one member's support chat.
public enum MessageScope: Sendable, Hashable {
    case member(MemberId)

    init(reading r: ParamsReader) throws(GroupMessageError) {
        let type = try r.string("type", maxLength: 64)
        guard type == "member" else { throw r.invalid("type", "is not a known message scope") }
        self = .member(try r.memberId("memberId"))
    }

    var json: JSONValue {
        switch self {
        case let .member(id): .object([("type", "member"), ("memberId", .string(id.text))])
        }
    }
}

/// `GroupInvitation` (`x.grp.inv`): who invites (`fromMember`), with which id and role the invitee
/// joins (`invitedMember`), the connection request to join, the group's profile; `groupLinkId`,
/// `business` (a business chat's ids, kept as received) and `groupSize` are optional.
public struct GroupInvitation: Sendable, Hashable {
    public var fromMember: MemberIdRole
    public var invitedMember: MemberIdRole
    public var connRequest: String
    public var groupProfile: GroupProfile
    public var business: JSONValue?
    public var groupLinkId: String?
    public var groupSize: Int?

    public init(fromMember: MemberIdRole, invitedMember: MemberIdRole, connRequest: String, groupProfile: GroupProfile,
                business: JSONValue? = nil, groupLinkId: String? = nil, groupSize: Int? = nil) {
        self.fromMember = fromMember
        self.invitedMember = invitedMember
        self.connRequest = connRequest
        self.groupProfile = groupProfile
        self.business = business
        self.groupLinkId = groupLinkId
        self.groupSize = groupSize
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        fromMember = try MemberIdRole(reading: r.object("fromMember"))
        invitedMember = try MemberIdRole(reading: r.object("invitedMember"))
        connRequest = try r.string("connRequest")
        guard !connRequest.isEmpty else { throw r.invalid("connRequest", "is empty") }
        groupProfile = try r.groupProfile("groupProfile")
        business = try r.optionalObject("business")?.value
        groupLinkId = try r.optionalString("groupLinkId", maxLength: 256)
        groupSize = try r.optionalInt("groupSize")
        if let n = groupSize, n < 0 { throw r.invalid("groupSize", "is negative") }
    }

    var json: JSONValue {
        var w = ParamsWriter()
        w.set("fromMember", fromMember.json)
        w.set("invitedMember", invitedMember.json)
        w.set("connRequest", connRequest)
        w.set("groupProfile", groupProfile.json)
        w.set("business", business)
        w.set("groupLinkId", groupLinkId)
        if let groupSize { w.set("groupSize", .int(Int64(groupSize))) }
        return w.json
    }
}

/// `GroupLinkInvitation` (`x.grp.link.inv`): the host's answer to a joiner who came through the
/// group link, sent as connection info; `accepted` says whether the joiner waits for review.
public struct GroupLinkInvitation: Sendable, Hashable {
    public var fromMember: MemberIdRole
    public var fromMemberName: String
    public var invitedMember: MemberIdRole
    public var groupProfile: GroupProfile
    public var accepted: GroupAcceptance?
    public var business: JSONValue?
    public var groupSize: Int?

    public init(fromMember: MemberIdRole, fromMemberName: String, invitedMember: MemberIdRole, groupProfile: GroupProfile,
                accepted: GroupAcceptance? = nil, business: JSONValue? = nil, groupSize: Int? = nil) {
        self.fromMember = fromMember
        self.fromMemberName = fromMemberName
        self.invitedMember = invitedMember
        self.groupProfile = groupProfile
        self.accepted = accepted
        self.business = business
        self.groupSize = groupSize
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        fromMember = try MemberIdRole(reading: r.object("fromMember"))
        fromMemberName = try r.string("fromMemberName", maxLength: 1024)
        invitedMember = try MemberIdRole(reading: r.object("invitedMember"))
        groupProfile = try r.groupProfile("groupProfile")
        if let a = try r.optionalString("accepted", maxLength: 64) {
            guard let acceptance = GroupAcceptance(rawValue: a) else { throw r.invalid("accepted", "is not a group acceptance") }
            accepted = acceptance
        } else {
            accepted = nil
        }
        business = try r.optionalObject("business")?.value
        groupSize = try r.optionalInt("groupSize")
        if let n = groupSize, n < 0 { throw r.invalid("groupSize", "is negative") }
    }

    var json: JSONValue {
        var w = ParamsWriter()
        w.set("fromMember", fromMember.json)
        w.set("fromMemberName", fromMemberName)
        w.set("invitedMember", invitedMember.json)
        w.set("groupProfile", groupProfile.json)
        w.set("accepted", accepted?.rawValue)
        w.set("business", business)
        if let groupSize { w.set("groupSize", .int(Int64(groupSize))) }
        return w.json
    }
}

/// `GroupLinkRejection` (`x.grp.link.reject`): the host refuses a joiner; `rejectionReason` is
/// `"long_name"`, `"blocked_name"` or any other text (kept).
public struct GroupLinkRejection: Sendable, Hashable {
    public var fromMember: MemberIdRole
    public var invitedMember: MemberIdRole
    public var groupProfile: GroupProfile
    public var rejectionReason: String

    public init(fromMember: MemberIdRole, invitedMember: MemberIdRole, groupProfile: GroupProfile, rejectionReason: String) {
        self.fromMember = fromMember
        self.invitedMember = invitedMember
        self.groupProfile = groupProfile
        self.rejectionReason = rejectionReason
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        fromMember = try MemberIdRole(reading: r.object("fromMember"))
        invitedMember = try MemberIdRole(reading: r.object("invitedMember"))
        groupProfile = try r.groupProfile("groupProfile")
        rejectionReason = try r.string("rejectionReason", maxLength: 1024)
    }

    var json: JSONValue {
        .object([
            ("fromMember", fromMember.json), ("invitedMember", invitedMember.json),
            ("groupProfile", groupProfile.json), ("rejectionReason", .string(rejectionReason)),
        ])
    }
}
