import SwiftplexBase
import Testing
@testable import GroupProtocol

/// Params in SimpleX's shapes (`Protocol.hs` `chatToAppMessage`, `Types.hs` records), one or more
/// per group event; every event of ``GroupMessage`` must appear.
let simplexFixtures: [(event: String, params: String)] = [
    ("x.grp.inv", #"{"groupInvitation":{"fromMember":{"memberId":"AQIDBAUGBwgJCgsM","memberRole":"owner"},"invitedMember":{"memberId":"DQ4PEBESExQVFhcY","memberRole":"member"},"connRequest":"simplex:/invitation#/?v=2-7&smp=smp%3A%2F%2Fabc%40relay.example%2Fq1","groupProfile":{"displayName":"team","fullName":"The team","description":"welcome","groupPreferences":{"history":{"enable":"on"},"directMessages":{"enable":"off"}}},"groupSize":3}}"#),
    ("x.grp.inv", #"{"groupInvitation":{"fromMember":{"memberId":"AQIDBAUGBwgJCgsM","memberRole":"admin"},"invitedMember":{"memberId":"DQ4PEBESExQVFhcY","memberRole":"observer"},"connRequest":"simplex:/invitation#/?v=2-7","groupProfile":{"displayName":"biz","fullName":""},"business":{"chatType":"business","businessId":"AQIDBAUGBwgJCgsM","customerId":"DQ4PEBESExQVFhcY"},"groupLinkId":"Z2xpbms"}}"#),
    ("x.grp.acpt", #"{"memberId":"DQ4PEBESExQVFhcY"}"#),
    ("x.grp.link.inv", #"{"groupLinkInvitation":{"fromMember":{"memberId":"AQIDBAUGBwgJCgsM","memberRole":"admin"},"fromMemberName":"alice","invitedMember":{"memberId":"GRobHB0eHyAhIiMk","memberRole":"member"},"groupProfile":{"displayName":"team","fullName":"","memberAdmission":{"review":"all"}},"accepted":"pending_review","groupSize":12}}"#),
    ("x.grp.link.reject", #"{"groupLinkRejection":{"fromMember":{"memberId":"AQIDBAUGBwgJCgsM","memberRole":"admin"},"invitedMember":{"memberId":"GRobHB0eHyAhIiMk","memberRole":"member"},"groupProfile":{"displayName":"team","fullName":""},"rejectionReason":"long_name"}}"#),
    ("x.grp.link.mem", #"{"profile":{"displayName":"alice","fullName":"Alice A","image":"data:image/jpg;base64,/9j/4AAQ","contactLink":"https://simplex.chat/a#abc","preferences":{"calls":{"allow":"yes"}}}}"#),
    ("x.grp.link.acpt", #"{"acceptance":"accepted","role":"member","memberId":"GRobHB0eHyAhIiMk"}"#),
    ("x.grp.mem.new", #"{"memberInfo":{"memberId":"GRobHB0eHyAhIiMk","memberRole":"member","v":"1-18","profile":{"displayName":"carol","fullName":""}}}"#),
    ("x.grp.mem.new", #"{"memberInfo":{"memberId":"GRobHB0eHyAhIiMk","memberRole":"observer","profile":{"displayName":"carol","fullName":""}},"scope":{"type":"member","memberId":"GRobHB0eHyAhIiMk"}}"#),
    ("x.grp.mem.intro", #"{"memberInfo":{"memberId":"DQ4PEBESExQVFhcY","memberRole":"moderator","v":"9-18","profile":{"displayName":"bob","fullName":"Bob"}}}"#),
    ("x.grp.mem.intro", #"{"memberInfo":{"memberId":"DQ4PEBESExQVFhcY","memberRole":"member","v":"18","profile":{"displayName":"bob","fullName":""},"memberKey":"MCowBQYDK2VwAyEA"},"memberRestrictions":{"restriction":"blocked"}}"#),
    ("x.grp.mem.inv", #"{"memberId":"DQ4PEBESExQVFhcY","memberIntro":{"groupConnReq":"simplex:/invitation#/?v=2-7&smp=q2"}}"#),
    ("x.grp.mem.inv", #"{"memberId":"DQ4PEBESExQVFhcY","memberIntro":{"groupConnReq":"simplex:/invitation#/?v=1&smp=q2","directConnReq":"simplex:/invitation#/?v=1&smp=q3"}}"#),
    ("x.grp.mem.fwd", #"{"memberInfo":{"memberId":"GRobHB0eHyAhIiMk","memberRole":"member","v":"1-18","profile":{"displayName":"carol","fullName":""}},"memberIntro":{"groupConnReq":"simplex:/invitation#/?v=2-7&smp=q2"}}"#),
    ("x.grp.mem.info", #"{"memberId":"DQ4PEBESExQVFhcY","profile":{"displayName":"bob","fullName":"","shortDescr":"bot"}}"#),
    ("x.grp.mem.con", #"{"memberId":"GRobHB0eHyAhIiMk"}"#),
    ("x.grp.mem.role", #"{"memberId":"GRobHB0eHyAhIiMk","role":"moderator"}"#),
    ("x.grp.mem.restrict", #"{"memberId":"GRobHB0eHyAhIiMk","memberRestrictions":{"restriction":"blocked"}}"#),
    ("x.grp.mem.restrict", #"{"memberId":"GRobHB0eHyAhIiMk","memberRestrictions":{"restriction":"unrestricted"}}"#),
    ("x.grp.mem.del", #"{"memberId":"GRobHB0eHyAhIiMk"}"#),
    ("x.grp.mem.del", #"{"memberId":"GRobHB0eHyAhIiMk","messages":true}"#),
    ("x.grp.leave", #"{}"#),
    ("x.grp.del", #"{}"#),
    ("x.grp.info", #"{"groupProfile":{"displayName":"team2","fullName":"","image":"data:image/png;base64,iVBOR","groupPreferences":{"reactions":{"enable":"on"}}}}"#),
    ("x.grp.msg.forward", #"{"memberId":"GRobHB0eHyAhIiMk","memberName":"carol","msgTs":"2026-11-23T17:43:42.123456Z","msg":{"v":"1-18","msgId":"YWJjZGVmZ2hpamts","event":"x.msg.new","params":{"content":{"type":"text","text":"hi"}}}}"#),
    ("x.grp.msg.forward", #"{"memberId":"GRobHB0eHyAhIiMk","memberName":"carol","msgTs":"2026-11-23T17:43:42Z","msg":{"msgId":"YWJjZGVmZ2hpamts","event":"x.grp.leave","params":{}}}"#),
    ("x.grp.prefs", #"{"groupPreferences":{"history":{"enable":"off"},"reactions":{"enable":"on"},"fullDelete":{"enable":"on"}}}"#),
]

@Suite struct GroupMessageTests {
    @Test func fixturesCoverEveryEvent() {
        let covered = Set(simplexFixtures.map(\.event))
        for e in GroupMessage.Event.allCases { #expect(covered.contains(e.rawValue), "no fixture for \(e.rawValue)") }
    }

    /// Decoding a SimpleX-shaped message and encoding it again gives the same params (as JSON:
    /// key order aside), and the message knows its event.
    @Test(arguments: simplexFixtures.indices)
    func roundTrip(index: Int) throws {
        let (event, text) = simplexFixtures[index]
        let params = try JSONValue.parse(text)
        let message = try #require(try GroupMessage.decode(event: event, params: params))
        #expect(message.event == event)
        #expect(message.params == params, "\(event): \(message.params.text) != \(text)")
        // Through a whole envelope's bytes, too.
        let bytes = try GroupMessage.encode(message.envelope(msgId: "bXNnLWlk"))
        let back = try GroupMessage.decodeEnvelope(bytes)
        #expect(back.msgId == "bXNnLWlk")
        #expect(try back.groupMessage() == message)
    }

    @Test func typedFieldsAreRead() throws {
        let inv = try #require(try GroupMessage.decode(event: "x.grp.inv", params: JSONValue.parse(simplexFixtures[0].params)))
        guard case let .invitation(i) = inv else { Issue.record("not an invitation"); return }
        #expect(i.fromMember.memberRole == .owner)
        #expect(i.invitedMember.memberId.text == "DQ4PEBESExQVFhcY")
        #expect(i.groupProfile.displayName == "team")
        #expect(i.groupSize == 3)
        #expect(!i.groupProfile.isPublicGroup)

        let fwd = try #require(try GroupMessage.decode(event: "x.grp.msg.forward", params: JSONValue.parse(simplexFixtures[24].params)))
        guard case let .forward(f) = fwd else { Issue.record("not a forward"); return }
        #expect(f.memberId?.text == "GRobHB0eHyAhIiMk")
        #expect(f.msg.event == "x.msg.new")
        #expect(f.msg.isForwardable)
        #expect(try f.msg.groupMessage() == nil, "content is not a group message")

        let intro = try #require(try GroupMessage.decode(event: "x.grp.mem.intro", params: JSONValue.parse(simplexFixtures[10].params)))
        guard case let .memberIntro(info, restriction) = intro else { Issue.record("not an intro"); return }
        #expect(restriction == .blocked)
        #expect(info.versionRange == "18")
        #expect(info.memberKey == "MCowBQYDK2VwAyEA")
    }

    /// Fields SimpleX does not read are ignored (aeson ignores them); profiles keep every field.
    @Test func unknownFieldsAreIgnoredAndProfilesKeptWhole() throws {
        let params = try JSONValue.parse(#"{"memberId":"GRobHB0eHyAhIiMk","role":"member","futureField":[1,2]}"#)
        let m = try #require(try GroupMessage.decode(event: "x.grp.mem.role", params: params))
        #expect(m == .memberRole(memberId: MemberId("GRobHB0eHyAhIiMk")!, role: .member))
        #expect(m.params["futureField"] == nil)

        let withNew = try JSONValue.parse(#"{"memberId":"DQ4PEBESExQVFhcY","profile":{"displayName":"bob","fullName":"","badge":{"kind":"new"}}}"#)
        let info = try #require(try GroupMessage.decode(event: "x.grp.mem.info", params: withNew))
        #expect(info.params == withNew)
    }

    @Test func unknownEventsAreNotGroupMessages() throws {
        #expect(try GroupMessage.decode(event: "x.msg.new", params: .object([])) == nil)
        #expect(try GroupMessage.decode(event: "x.grp.future", params: .object([])) == nil)
    }

    /// Roles and restrictions a newer client may send are kept, as SimpleX keeps them.
    @Test func unknownRoleAndRestrictionAreKept() throws {
        let m = try #require(try GroupMessage.decode(event: "x.grp.mem.role", params: JSONValue.parse(#"{"memberId":"AQID","role":"commenter"}"#)))
        #expect(m == .memberRole(memberId: MemberId("AQID")!, role: .unknown("commenter")))
        #expect(m.params["role"] == "commenter")
        let r = try #require(try GroupMessage.decode(event: "x.grp.mem.restrict", params: JSONValue.parse(#"{"memberId":"AQID","memberRestrictions":{"restriction":"muted"}}"#)))
        #expect(r == .memberRestrict(memberId: MemberId("AQID")!, restriction: .unknown("muted")))
        #expect(!MemberRestriction.unknown("muted").isBlocked)
    }

    /// `messages` of `x.grp.mem.del` is read as SimpleX reads it: anything but `true` is false,
    /// and it is written only when true.
    @Test func memberDeleteMessagesIsLenient() throws {
        for (text, expected) in [(#"{"memberId":"AQID"}"#, false), (#"{"memberId":"AQID","messages":"yes"}"#, false), (#"{"memberId":"AQID","messages":true}"#, true)] {
            let m = try #require(try GroupMessage.decode(event: "x.grp.mem.del", params: JSONValue.parse(text)))
            #expect(m == .memberDelete(memberId: MemberId("AQID")!, messages: expected))
        }
        #expect(GroupMessage.memberDelete(memberId: MemberId("AQID")!, messages: false).params == ["memberId": "AQID"])
    }

    static let malformed: [(event: String, params: String, code: GroupMessageError.Code)] = [
        ("x.grp.acpt", #"{}"#, .missingField),
        ("x.grp.acpt", #"{"memberId":5}"#, .wrongType),
        ("x.grp.acpt", #"{"memberId":"not base64!"}"#, .invalidValue),
        ("x.grp.acpt", #"{"memberId":""}"#, .invalidValue),
        ("x.grp.acpt", #"{"memberId":null}"#, .missingField),
        ("x.grp.leave", #"[]"#, .wrongType),
        ("x.grp.mem.role", #"{"memberId":"AQID","role":""}"#, .invalidValue),
        ("x.grp.mem.role", #"{"memberId":"AQID","role":7}"#, .wrongType),
        ("x.grp.inv", #"{"groupInvitation":{"invitedMember":{"memberId":"AQID","memberRole":"member"},"connRequest":"c","groupProfile":{"displayName":"g","fullName":""}}}"#, .missingField),
        ("x.grp.inv", #"{"groupInvitation":{"fromMember":{"memberId":"AQID","memberRole":"owner"},"invitedMember":{"memberId":"BQYH","memberRole":"member"},"connRequest":"","groupProfile":{"displayName":"g"}}}"#, .invalidValue),
        ("x.grp.inv", #"{"groupInvitation":{"fromMember":{"memberId":"AQID","memberRole":"owner"},"invitedMember":{"memberId":"BQYH","memberRole":"member"},"connRequest":"c","groupProfile":{"displayName":"g"},"groupSize":-1}}"#, .invalidValue),
        ("x.grp.inv", #"{"groupInvitation":"x"}"#, .wrongType),
        ("x.grp.mem.intro", #"{"memberInfo":{"memberId":"AQID","memberRole":"member","profile":{"fullName":"x"}}}"#, .missingField),
        ("x.grp.mem.intro", #"{"memberInfo":{"memberId":"AQID","memberRole":"member","profile":{"displayName":""}}}"#, .invalidValue),
        ("x.grp.mem.intro", #"{"memberInfo":{"memberId":"AQID","memberRole":"member","profile":{"displayName":"a","image":3}}}"#, .wrongType),
        ("x.grp.mem.intro", #"{"memberInfo":{"memberId":"AQID","memberRole":"member","profile":{"displayName":"a"}},"memberRestrictions":{}}"#, .missingField),
        ("x.grp.mem.new", #"{"memberInfo":{"memberId":"AQID","memberRole":"member","v":"18-1","profile":{"displayName":"a"}}}"#, .invalidValue),
        ("x.grp.mem.new", #"{"memberInfo":{"memberId":"AQID","memberRole":"member","v":"x","profile":{"displayName":"a"}}}"#, .invalidValue),
        ("x.grp.mem.new", #"{"memberInfo":{"memberId":"AQID","memberRole":"member","profile":{"displayName":"a"}},"scope":{"type":"weird"}}"#, .invalidValue),
        ("x.grp.mem.inv", #"{"memberId":"AQID","memberIntro":{}}"#, .missingField),
        ("x.grp.mem.inv", #"{"memberId":"AQID","memberIntro":{"groupConnReq":""}}"#, .invalidValue),
        ("x.grp.mem.fwd", #"{"memberInfo":{"memberId":"AQID","memberRole":"member","profile":{"displayName":"a"}}}"#, .missingField),
        ("x.grp.mem.restrict", #"{"memberId":"AQID","memberRestrictions":{"restriction":true}}"#, .wrongType),
        ("x.grp.info", #"{"groupProfile":{"displayName":""}}"#, .invalidValue),
        ("x.grp.link.acpt", #"{"acceptance":"maybe","role":"member","memberId":"AQID"}"#, .invalidValue),
        ("x.grp.link.inv", #"{"groupLinkInvitation":{"fromMember":{"memberId":"AQID","memberRole":"admin"},"fromMemberName":"a","invitedMember":{"memberId":"BQYH","memberRole":"member"},"groupProfile":{"displayName":"g"},"accepted":"soon"}}"#, .invalidValue),
        ("x.grp.msg.forward", #"{"memberId":"AQID","memberName":"c","msgTs":"yesterday","msg":{"event":"x.msg.new","params":{}}}"#, .invalidValue),
        ("x.grp.msg.forward", #"{"memberId":"AQID","msgTs":"2026-13-01T00:00:00Z","msg":{"event":"x.msg.new","params":{}}}"#, .invalidValue),
        ("x.grp.msg.forward", #"{"memberId":"AQID","msgTs":"2026-11-23T17:43:42Z","msg":{"event":"x.msg.new","params":[]}}"#, .wrongType),
        ("x.grp.msg.forward", #"{"memberId":"AQID","msgTs":"2026-11-23T17:43:42Z","msg":{"event":"x.msg.new"}}"#, .missingField),
        ("x.grp.msg.forward", #"{"memberId":"AQID","msgTs":"2026-11-23T17:43:42Z","msg":{"event":"msg.new","params":{}}}"#, .invalidValue),
        ("x.grp.msg.forward", #"{"memberId":"AQID","msgTs":"2026-11-23T17:43:42Z","msg":{"event":"x.grp.msg.forward","params":{"msgTs":"2026-11-23T17:43:42Z","msg":{"event":"x.msg.new","params":{}}}}}"#, .notForwardable),
        ("x.grp.msg.forward", #"{"memberId":"AQID","msgTs":"2026-11-23T17:43:42Z"}"#, .missingField),
    ]

    @Test(arguments: malformed.indices)
    func malformedParamsAreTypedErrors(index: Int) throws {
        let (event, text, code) = Self.malformed[index]
        let params = try JSONValue.parse(text)
        #expect { try GroupMessage.decode(event: event, params: params) } throws: { error in
            guard let e = error as? GroupMessageError else { return false }
            #expect(e.code == code, "\(event) \(text): \(e.message)")
            #expect(e.message.hasPrefix(event), "the error names the event: \(e.message)")
            return e.code == code
        }
    }

    @Test func fieldLongerThanAMessageIsTooLarge() {
        let huge = String(repeating: "a", count: GroupLimits.maxFieldBytes + 1)
        let params: JSONValue = ["groupInvitation": [
            "fromMember": ["memberId": "AQID", "memberRole": "owner"], "invitedMember": ["memberId": "BQYH", "memberRole": "member"],
            "connRequest": .string(huge), "groupProfile": ["displayName": "g"],
        ]]
        #expect { try GroupMessage.decode(event: "x.grp.inv", params: params) } throws: { ($0 as? GroupMessageError)?.code == .tooLarge }
    }

    /// SimpleX's size limits: a message over 15,602 bytes (14,694 as connection info) is refused
    /// both ways.
    @Test func envelopeSizeLimits() throws {
        func envelope(bytes: Int) throws -> [UInt8] {
            let base = GroupEnvelope(msgId: "a", event: "x.msg.new", params: ["content": ["type": "text", "text": ""]])
            let overhead = base.json.text.utf8.count
            let env = GroupEnvelope(msgId: "a", event: "x.msg.new", params: ["content": ["type": "text", "text": .string(String(repeating: "x", count: bytes - overhead))]])
            let out = Array(env.json.text.utf8)
            #expect(out.count == bytes)
            return out
        }
        let atLimit = try envelope(bytes: GroupLimits.maxEncodedMessageBytes)
        #expect(try GroupMessage.decodeEnvelope(atLimit).event == "x.msg.new")
        let over = try envelope(bytes: GroupLimits.maxEncodedMessageBytes + 1)
        #expect { try GroupMessage.decodeEnvelope(over) } throws: { ($0 as? GroupMessageError)?.code == .tooLarge }
        let infoOver = try envelope(bytes: GroupLimits.maxConnInfoBytes + 1)
        #expect { try GroupMessage.decodeEnvelope(infoOver, asConnInfo: true) } throws: { ($0 as? GroupMessageError)?.code == .tooLarge }
        #expect(try GroupMessage.decodeEnvelope(infoOver).event == "x.msg.new")
        let big = GroupEnvelope(msgId: "a", event: "x.msg.new", params: ["t": .string(String(repeating: "x", count: GroupLimits.maxEncodedMessageBytes))])
        #expect { try GroupMessage.encode(big) } throws: { ($0 as? GroupMessageError)?.code == .tooLarge }
        #expect { try GroupMessage.decodeEnvelope(Array("not json".utf8)) } throws: { ($0 as? GroupMessageError)?.code == .wrongType }
    }

    @Test(arguments: [
        ("AQIDBAUGBwgJCgsM", true), ("AQID", true), ("AQ==", true), ("AQI=", true), ("a-_b", true),
        ("A", false), ("", false), ("a+b/", false), ("AQ=", false), ("=", false), ("A===", false), ("AQ==x", false),
        (String(repeating: "A", count: 64), true), (String(repeating: "A", count: 68), false), ("AQ ID", false),
    ])
    func memberIdAlphabet(text: String, valid: Bool) {
        #expect((MemberId(text) != nil) == valid, "\(text)")
    }

    @Test(arguments: [
        ("2026-11-23T17:43:42Z", true), ("2026-11-23T17:43:42.5Z", true), ("2026-11-23T17:43:42.123456789Z", true),
        ("2026-11-23T17:43:42+01:00", true), ("2026-11-23 17:43:42Z", true),
        ("2026-11-23T17:43Z", false), ("2026-11-23T24:00:00Z", false), ("2026-00-10T10:00:00Z", false),
        ("2026-11-23T17:43:42", false), ("2026-11-23T17:43:42.Z", false), ("2026-11-23T17:43:42Zjunk", false), ("", false),
    ])
    func timestamps(text: String, valid: Bool) {
        #expect(Timestamp.isValid(text) == valid, "\(text)")
    }

    /// SimpleX `isForwardedGroupMsg`.
    @Test func forwardableEvents() {
        func env(_ event: String, _ params: JSONValue = .object([])) -> GroupEnvelope { GroupEnvelope(msgId: "a", event: event, params: params) }
        for e in ["x.msg.new", "x.msg.file.descr", "x.msg.update", "x.msg.del", "x.msg.react", "x.file.cancel", "x.info",
                  "x.grp.mem.new", "x.grp.mem.role", "x.grp.mem.restrict", "x.grp.mem.del", "x.grp.leave", "x.grp.del", "x.grp.info", "x.grp.prefs"] {
            #expect(env(e).isForwardable, "\(e)")
        }
        for e in ["x.grp.inv", "x.grp.acpt", "x.grp.mem.intro", "x.grp.mem.inv", "x.grp.mem.fwd", "x.grp.mem.info", "x.grp.mem.con",
                  "x.grp.msg.forward", "x.grp.link.inv", "x.grp.direct.inv", "x.info.probe", "x.ok", "x.call.inv"] {
            #expect(!env(e).isForwardable, "\(e)")
        }
        #expect(!env("x.msg.new", ["content": ["type": "file"], "file": ["fileName": "a", "fileSize": 1, "fileInline": "sent"]]).isForwardable)
    }

    @Test func rolesAreOrderedAsSimplexOrdersThem() {
        let order: [GroupMemberRole] = [.unknown("commenter"), .relay, .observer, .author, .member, .moderator, .admin, .owner]
        for (i, a) in order.enumerated() {
            for (j, b) in order.enumerated() {
                #expect((a < b) == (i < j), "\(a) < \(b)")
            }
            #expect(GroupMemberRole(name: a.name) == a)
        }
    }

    @Test func memberStatusNamesAreSimplexs() {
        #expect(GroupMemberStatus.allCases.map(\.rawValue) == [
            "rejected", "removed", "left", "deleted", "unknown", "invited", "pending_approval", "pending_review",
            "introduced", "intro-inv", "accepted", "announced", "connected", "complete", "creator",
        ])
    }
}

/// Every field of every fixture replaced by a value of each other JSON type, or removed: decoding
/// never traps and never accepts a required field of the wrong type silently.
@Suite struct GroupMessageMutationTests {
    static func paths(_ v: JSONValue, _ prefix: [String] = []) -> [[String]] {
        guard case let .object(pairs) = v else { return [] }
        return pairs.flatMap { k, sub in [prefix + [k]] + paths(sub, prefix + [k]) }
    }

    static func replacing(_ v: JSONValue, at path: [String], with new: JSONValue?) -> JSONValue {
        guard let first = path.first, case var .object(pairs) = v else { return v }
        guard let i = pairs.firstIndex(where: { $0.0 == first }) else { return v }
        if path.count == 1 {
            if let new { pairs[i].1 = new } else { pairs.remove(at: i) }
        } else {
            pairs[i].1 = replacing(pairs[i].1, at: Array(path.dropFirst()), with: new)
        }
        return .object(pairs)
    }

    @Test(arguments: simplexFixtures.indices)
    func mutatedFieldsDecodeOrFailTyped(index: Int) throws {
        let (event, text) = simplexFixtures[index]
        let params = try JSONValue.parse(text)
        let replacements: [JSONValue?] = [nil, .null, .int(0), .string(""), .string("x"), .array([]), .object([]), .bool(true), .double(1.5)]
        var decoded = 0, refused = 0
        for path in Self.paths(params) {
            for r in replacements {
                let mutated = Self.replacing(params, at: path, with: r)
                do {
                    if let m = try GroupMessage.decode(event: event, params: mutated) {
                        decoded += 1
                        // Whatever decodes encodes and decodes again to the same message.
                        #expect(try GroupMessage.decode(event: event, params: m.params) == m)
                    }
                } catch {
                    refused += 1
                    #expect(!error.message.isEmpty)
                }
            }
        }
        if !Self.paths(params).isEmpty { #expect(refused > 0, "\(event): some mutation must be refused") }
        _ = decoded
    }
}
