import SwiftplexBase

/// One chat-protocol message as it travels: `{"v"?,"msgId"?,"event","params"}` (SimpleX
/// `AppMessageJson`). The engine's `ChatCore.ChatMessage` is the same shape; this module keeps its
/// own so that it depends on SwiftplexBase only. `msgId` is the shared message id (base64url) that
/// edits, deletions, quotes and forwarding dedup refer to.
public struct GroupEnvelope: Sendable, Hashable {
    public var v: String?
    public var msgId: String?
    public var event: String
    public var params: JSONValue

    public init(v: String? = "1", msgId: String?, event: String, params: JSONValue) {
        self.v = v
        self.msgId = msgId
        self.event = event
        self.params = params
    }

    public init(msgId: String?, _ message: GroupMessage) {
        self.init(msgId: msgId, event: message.event, params: message.params)
    }

    /// Reads an envelope (as inside `x.grp.msg.forward`): `event` must be an `x.*` name, `params`
    /// an object; `v` and `msgId` are optional strings.
    public init(json: JSONValue) throws(GroupMessageError) {
        try self.init(json: json, context: "envelope", path: "msg")
    }

    init(json: JSONValue, context: String, path: String) throws(GroupMessageError) {
        let r = try ParamsReader(event: context, path: path, json)
        v = try r.optionalString("v", maxLength: 32)
        msgId = try r.optionalString("msgId", maxLength: 256)
        event = try r.string("event", maxLength: 128)
        guard event.hasPrefix("x.") else { throw r.invalid("event", "is not an x.* event") }
        guard let p = json["params"], case .object = p else {
            throw GroupMessageError(json["params"] == nil ? .missingField : .wrongType, "\(context): \(path).params must be an object")
        }
        params = p
    }

    public var json: JSONValue {
        var w = ParamsWriter()
        w.set("v", v)
        w.set("msgId", msgId)
        w.set("event", event)
        w.set("params", params)
        return w.json
    }

    /// The typed group message, nil when the event is not one of ``GroupMessage``'s (content and
    /// other events); throws when it is one but its params are malformed.
    public func groupMessage() throws(GroupMessageError) -> GroupMessage? {
        try GroupMessage.decode(event: event, params: params)
    }

    /// SimpleX `isForwardedGroupMsg`: the events a host forwards to members not yet connected to
    /// the sender — content (`x.msg.new` unless its file is sent inline, `x.msg.file.descr`,
    /// `x.msg.update`, `x.msg.del`, `x.msg.react`, `x.file.cancel`), profile updates (`x.info`)
    /// and membership/group changes (`x.grp.mem.new`, `.role`, `.restrict`, `.del`, `x.grp.leave`,
    /// `x.grp.del`, `x.grp.info`, `x.grp.prefs`).
    public var isForwardable: Bool {
        switch event {
        case "x.msg.new":
            if let inline = params["file"]?["fileInline"], !inline.isNull { return false }
            return true
        case "x.msg.file.descr", "x.msg.update", "x.msg.del", "x.msg.react", "x.file.cancel", "x.info",
             "x.grp.mem.new", "x.grp.mem.role", "x.grp.mem.restrict", "x.grp.mem.del", "x.grp.leave",
             "x.grp.del", "x.grp.info", "x.grp.prefs":
            return true
        default:
            return false
        }
    }
}

/// `x.grp.msg.forward`: a message from `memberId` (named `memberName`, possibly shortened) that a
/// host forwards to members not yet connected to its author, with the time the host received it
/// (`msgTs`, RFC 3339 UTC). Without `memberId` the message is from the channel itself.
public struct GroupForward: Sendable, Hashable {
    public var memberId: MemberId?
    public var memberName: String
    public var msgTs: String
    public var msg: GroupEnvelope

    public init(memberId: MemberId?, memberName: String = "", msgTs: String, msg: GroupEnvelope) {
        self.memberId = memberId
        self.memberName = memberName
        self.msgTs = msgTs
        self.msg = msg
    }

    init(reading r: ParamsReader) throws(GroupMessageError) {
        memberId = try r.optionalMemberId("memberId")
        // A channel's forward has no sender, so no name (SimpleX `FwdChannel`).
        let name = try r.optionalString("memberName", maxLength: 1024) ?? ""
        memberName = memberId == nil ? "" : name
        msgTs = try r.string("msgTs", maxLength: 64)
        guard Timestamp.isValid(msgTs) else { throw r.invalid("msgTs", "is not an RFC 3339 time") }
        let inner = try r.object("msg")
        msg = try GroupEnvelope(json: inner.value, context: r.event, path: inner.path)
        guard msg.event != GroupMessage.Event.forward.rawValue else {
            throw GroupMessageError(.notForwardable, "x.grp.msg.forward: a forward cannot carry a forward")
        }
    }

    var json: JSONValue {
        var w = ParamsWriter()
        if let memberId {
            w.set("memberId", memberId.text)
            w.set("memberName", memberName)
        }
        w.set("msgTs", msgTs)
        w.set("msg", msg.json)
        return w.json
    }
}

/// The group events of the chat protocol, typed. Each case encodes to and strictly decodes from
/// `(event, params)` with SimpleX's field names (`Protocol.hs` `appJsonToCM` / `chatToAppMessage`).
/// Unknown fields are ignored, as SimpleX ignores them; profiles keep every field.
public enum GroupMessage: Sendable, Hashable {
    /// `x.grp.inv {groupInvitation}` — over the direct contact connection.
    case invitation(GroupInvitation)
    /// `x.grp.acpt {memberId}` — the invitee's connection info when joining the invitation.
    case accept(memberId: MemberId)
    /// `x.grp.link.inv {groupLinkInvitation}` — the host's connection info to a link joiner.
    case linkInvitation(GroupLinkInvitation)
    /// `x.grp.link.reject {groupLinkRejection}` — the host refuses a link joiner.
    case linkRejection(GroupLinkRejection)
    /// `x.grp.link.mem {profile}` — the host's full profile, once, after a link join.
    case linkMember(profile: MemberProfile)
    /// `x.grp.link.acpt {acceptance, role, memberId}` — a moderator admits a reviewed member.
    case linkAccept(acceptance: GroupAcceptance, role: GroupMemberRole, memberId: MemberId)
    /// `x.grp.mem.new {memberInfo, scope?}` — the host announces a new member to the others.
    case memberNew(MemberInfo, scope: MessageScope?)
    /// `x.grp.mem.intro {memberInfo, memberRestrictions?}` — the host introduces an existing member
    /// to the new one.
    case memberIntro(MemberInfo, restrictions: MemberRestriction?)
    /// `x.grp.mem.inv {memberId, memberIntro}` — the new member's invitation for an existing member,
    /// to the host.
    case memberInvitation(memberId: MemberId, IntroInvitation)
    /// `x.grp.mem.fwd {memberInfo, memberIntro}` — the host passes that invitation on.
    case memberForward(MemberInfo, IntroInvitation)
    /// `x.grp.mem.info {memberId, profile}` — connection info between two introduced members.
    case memberInfo(memberId: MemberId, profile: MemberProfile)
    /// `x.grp.mem.con {memberId}` — to the host: now connected to that member directly.
    case memberConnected(memberId: MemberId)
    /// `x.grp.mem.role {memberId, role}`.
    case memberRole(memberId: MemberId, role: GroupMemberRole)
    /// `x.grp.mem.restrict {memberId, memberRestrictions: {restriction}}` — block for all.
    case memberRestrict(memberId: MemberId, restriction: MemberRestriction)
    /// `x.grp.mem.del {memberId, messages?}` — remove a member (and its messages with `messages`).
    case memberDelete(memberId: MemberId, messages: Bool)
    /// `x.grp.leave {}`.
    case leave
    /// `x.grp.del {}`.
    case delete
    /// `x.grp.info {groupProfile}`.
    case info(GroupProfile)
    /// `x.grp.prefs {groupPreferences}` — the owner changes the group's preferences only (kept whole).
    case preferences(JSONValue)
    /// `x.grp.msg.forward {memberId?, memberName?, msgTs, msg}`.
    case forward(GroupForward)

    public enum Event: String, Sendable, CaseIterable {
        case invitation = "x.grp.inv"
        case accept = "x.grp.acpt"
        case linkInvitation = "x.grp.link.inv"
        case linkRejection = "x.grp.link.reject"
        case linkMember = "x.grp.link.mem"
        case linkAccept = "x.grp.link.acpt"
        case memberNew = "x.grp.mem.new"
        case memberIntro = "x.grp.mem.intro"
        case memberInvitation = "x.grp.mem.inv"
        case memberForward = "x.grp.mem.fwd"
        case memberInfo = "x.grp.mem.info"
        case memberConnected = "x.grp.mem.con"
        case memberRole = "x.grp.mem.role"
        case memberRestrict = "x.grp.mem.restrict"
        case memberDelete = "x.grp.mem.del"
        case leave = "x.grp.leave"
        case delete = "x.grp.del"
        case info = "x.grp.info"
        case preferences = "x.grp.prefs"
        case forward = "x.grp.msg.forward"
    }

    public var kind: Event {
        switch self {
        case .invitation: .invitation
        case .accept: .accept
        case .linkInvitation: .linkInvitation
        case .linkRejection: .linkRejection
        case .linkMember: .linkMember
        case .linkAccept: .linkAccept
        case .memberNew: .memberNew
        case .memberIntro: .memberIntro
        case .memberInvitation: .memberInvitation
        case .memberForward: .memberForward
        case .memberInfo: .memberInfo
        case .memberConnected: .memberConnected
        case .memberRole: .memberRole
        case .memberRestrict: .memberRestrict
        case .memberDelete: .memberDelete
        case .leave: .leave
        case .delete: .delete
        case .info: .info
        case .preferences: .preferences
        case .forward: .forward
        }
    }

    public var event: String { kind.rawValue }

    public var params: JSONValue {
        var w = ParamsWriter()
        switch self {
        case let .invitation(inv): w.set("groupInvitation", inv.json)
        case let .accept(id): w.set("memberId", id.text)
        case let .linkInvitation(inv): w.set("groupLinkInvitation", inv.json)
        case let .linkRejection(rej): w.set("groupLinkRejection", rej.json)
        case let .linkMember(profile): w.set("profile", profile.json)
        case let .linkAccept(acceptance, role, id):
            w.set("acceptance", acceptance.rawValue)
            w.set("role", role.name)
            w.set("memberId", id.text)
        case let .memberNew(info, scope):
            w.set("memberInfo", info.json)
            w.set("scope", scope?.json)
        case let .memberIntro(info, restriction):
            w.set("memberInfo", info.json)
            if let restriction { w.set("memberRestrictions", .object([("restriction", .string(restriction.name))])) }
        case let .memberInvitation(id, intro):
            w.set("memberId", id.text)
            w.set("memberIntro", intro.json)
        case let .memberForward(info, intro):
            w.set("memberInfo", info.json)
            w.set("memberIntro", intro.json)
        case let .memberInfo(id, profile):
            w.set("memberId", id.text)
            w.set("profile", profile.json)
        case let .memberConnected(id): w.set("memberId", id.text)
        case let .memberRole(id, role):
            w.set("memberId", id.text)
            w.set("role", role.name)
        case let .memberRestrict(id, restriction):
            w.set("memberId", id.text)
            w.set("memberRestrictions", .object([("restriction", .string(restriction.name))]))
        case let .memberDelete(id, messages):
            w.set("memberId", id.text)
            // SimpleX writes `messages` only when true.
            if messages { w.set("messages", .bool(true)) }
        case .leave, .delete: break
        case let .info(profile): w.set("groupProfile", profile.json)
        case let .preferences(prefs): w.set("groupPreferences", prefs)
        case let .forward(fwd): return fwd.json
        }
        return w.json
    }

    /// The message as an envelope with shared message id `msgId`.
    public func envelope(msgId: String?) -> GroupEnvelope { GroupEnvelope(msgId: msgId, self) }

    /// Decodes `params` of `event`: nil when `event` is not a group event of this enum (the caller
    /// handles it as content or another protocol's); a ``GroupMessageError`` when it is one and the
    /// params are malformed — nothing of a malformed message is used.
    public static func decode(event: String, params: JSONValue) throws(GroupMessageError) -> GroupMessage? {
        guard let kind = Event(rawValue: event) else { return nil }
        let r = try ParamsReader(event: event, params)
        switch kind {
        case .invitation: return .invitation(try GroupInvitation(reading: r.object("groupInvitation")))
        case .accept: return .accept(memberId: try r.memberId("memberId"))
        case .linkInvitation: return .linkInvitation(try GroupLinkInvitation(reading: r.object("groupLinkInvitation")))
        case .linkRejection: return .linkRejection(try GroupLinkRejection(reading: r.object("groupLinkRejection")))
        case .linkMember: return .linkMember(profile: try r.profile("profile"))
        case .linkAccept:
            let a = try r.string("acceptance", maxLength: 64)
            guard let acceptance = GroupAcceptance(rawValue: a) else { throw r.invalid("acceptance", "is not a group acceptance") }
            return .linkAccept(acceptance: acceptance, role: try r.role("role"), memberId: try r.memberId("memberId"))
        case .memberNew:
            return .memberNew(try MemberInfo(reading: r.object("memberInfo")), scope: try r.optionalObject("scope").map { (o) throws(GroupMessageError) in try MessageScope(reading: o) })
        case .memberIntro:
            let info = try MemberInfo(reading: r.object("memberInfo"))
            let restriction = try r.optionalObject("memberRestrictions").map { (o) throws(GroupMessageError) in MemberRestriction(name: try o.string("restriction", maxLength: 64)) }
            return .memberIntro(info, restrictions: restriction)
        case .memberInvitation:
            return .memberInvitation(memberId: try r.memberId("memberId"), try IntroInvitation(reading: r.object("memberIntro")))
        case .memberForward:
            return .memberForward(try MemberInfo(reading: r.object("memberInfo")), try IntroInvitation(reading: r.object("memberIntro")))
        case .memberInfo: return .memberInfo(memberId: try r.memberId("memberId"), profile: try r.profile("profile"))
        case .memberConnected: return .memberConnected(memberId: try r.memberId("memberId"))
        case .memberRole: return .memberRole(memberId: try r.memberId("memberId"), role: try r.role("role"))
        case .memberRestrict:
            let id = try r.memberId("memberId")
            let restriction = MemberRestriction(name: try r.object("memberRestrictions").string("restriction", maxLength: 64))
            return .memberRestrict(memberId: id, restriction: restriction)
        case .memberDelete:
            // SimpleX reads `messages` leniently (`fromRight False`): absent or not a boolean is false.
            return .memberDelete(memberId: try r.memberId("memberId"), messages: r.value["messages"]?.boolValue ?? false)
        case .leave: return .leave
        case .delete: return .delete
        case .info: return .info(try r.groupProfile("groupProfile"))
        case .preferences: return .preferences(try r.object("groupPreferences").value)
        case .forward: return .forward(try GroupForward(reading: r))
        }
    }

    /// Decodes a whole envelope's bytes as received from a peer, enforcing the size limit
    /// (`asConnInfo`: the handshake's smaller limit).
    public static func decodeEnvelope(_ bytes: [UInt8], asConnInfo: Bool = false) throws(GroupMessageError) -> GroupEnvelope {
        let limit = asConnInfo ? GroupLimits.maxConnInfoBytes : GroupLimits.maxEncodedMessageBytes
        guard bytes.count <= limit else {
            throw GroupMessageError(.tooLarge, "message of \(bytes.count) bytes is over the limit of \(limit)")
        }
        let json: JSONValue
        do {
            json = try JSONValue.parse(String(decoding: bytes, as: UTF8.self))
        } catch {
            throw GroupMessageError(.wrongType, "message is not JSON: \(error.code)")
        }
        return try GroupEnvelope(json: json)
    }

    /// The encoded envelope, refusing one over the limit (SimpleX does not send it either).
    public static func encode(_ envelope: GroupEnvelope, asConnInfo: Bool = false) throws(GroupMessageError) -> [UInt8] {
        let bytes = Array(envelope.json.text.utf8)
        let limit = asConnInfo ? GroupLimits.maxConnInfoBytes : GroupLimits.maxEncodedMessageBytes
        guard bytes.count <= limit else {
            throw GroupMessageError(.tooLarge, "\(envelope.event): \(bytes.count) bytes is over the limit of \(limit)")
        }
        return bytes
    }
}

/// RFC 3339 times as aeson writes `UTCTime`: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
enum Timestamp {
    static func isValid(_ s: String) -> Bool {
        let b = Array(s.utf8)
        func digits(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var n = 0
            for i in from ..< from + count {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                n = n * 10 + Int(b[i] - 48)
            }
            return n
        }
        guard b.count >= 20, let _ = digits(0, 4), b[4] == UInt8(ascii: "-"), let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
              let day = digits(8, 2), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: " "),
              let hour = digits(11, 2), b[13] == UInt8(ascii: ":"), let minute = digits(14, 2), b[16] == UInt8(ascii: ":"),
              let second = digits(17, 2)
        else { return false }
        guard (1 ... 12).contains(month), (1 ... 31).contains(day), hour < 24, minute < 60, second < 61 else { return false }
        var i = 19
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < b.count, b[i] >= 48, b[i] <= 57 { i += 1 }
            guard i > start, i - start <= 12 else { return false }
        }
        guard i < b.count else { return false }
        if b[i] == UInt8(ascii: "Z") { return i + 1 == b.count }
        guard b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-"), i + 6 == b.count,
              let oh = digits(i + 1, 2), b[i + 3] == UInt8(ascii: ":"), let om = digits(i + 4, 2)
        else { return false }
        return oh < 24 && om < 60
    }
}
