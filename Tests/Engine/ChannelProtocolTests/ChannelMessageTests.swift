import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto
import Testing
@testable import ChannelProtocol

@Suite struct ChannelMessageTests {
    static let owner = MemberId("b3duZXI")!
    static let relay = MemberId("cmVsYXk")!
    static let key = Ed25519.PrivateKey()

    static let all: [ChannelMessage] = [
        .relayInvitation(GroupRelayInvitation(fromMember: MemberIdRole(owner, .owner), fromMemberProfile: MemberProfile(displayName: "alice"),
                                              relayMemberId: relay, groupLink: "https://smp.example/c#abc")),
        .relayAccept(relayLink: "https://relay.example/g#xyz", relayCap: nil),
        .relayAccept(relayLink: "https://relay.example/g#xyz", relayCap: RelayCapabilities(webDomain: "relay.example")),
        .relayReject(.rejoinRejected),
        .relayReject(.unknown("full")),
        .relayTest(challenge: Array(0 ..< 32), signature: nil),
        .relayTest(challenge: [1, 2, 3], signature: Array(repeating: 7, count: 64)),
        .relayNew(relayLink: "https://relay.example/g#new"),
        .member(MemberJoin(profile: MemberProfile(displayName: "sam"), newMemberId: MemberId("c2Ft")!, newMemberKey: MemberKey(key.publicKey))),
        .member(MemberJoin(profile: MemberProfile(displayName: "sam"), newMemberId: MemberId("c2Ft")!, newMemberKey: MemberKey(key.publicKey), viaRelay: relay)),
    ]

    @Test(arguments: all) func roundTrip(_ m: ChannelMessage) throws {
        let env = m.envelope(msgId: "abc")
        let bytes = try GroupMessage.encode(env, asConnInfo: true)
        let back = try GroupMessage.decodeEnvelope(bytes, asConnInfo: true)
        #expect(try back.channelMessage() == m)
        #expect(try back.groupMessage() == nil, "channel events are not group events")
    }

    @Test func fieldNamesAreSimpleXs() {
        let inv = Self.all[0].params
        #expect(inv["groupRelayInvitation"]?["fromMember"]?["memberRole"] == "owner")
        #expect(inv["groupRelayInvitation"]?["relayMemberId"]?.stringValue == Self.relay.text)
        #expect(inv["groupRelayInvitation"]?["groupLink"] != nil && inv["groupRelayInvitation"]?["fromMemberProfile"] != nil)
        #expect(Self.all[1].params["relayLink"] != nil)
        let member = Self.all[8].params
        #expect(member["newMemberId"] != nil && member["newMemberKey"] != nil && member["profile"] != nil && member["viaRelay"] == nil)
        #expect(Self.all[3].params["reason"] == "rejoin_rejected")
        // The member key: base64url of the 44-byte X.509 SubjectPublicKeyInfo.
        let keyText = member["newMemberKey"]!.stringValue!
        #expect(Base64URL.decode(keyText)?.count == 44)
        #expect(MemberKey(text: keyText) == MemberKey(Self.key.publicKey))
    }

    static let refused: [(String, JSONValue, GroupMessageError.Code)] = [
        ("x.grp.relay.inv", [:], .missingField),
        ("x.grp.relay.inv", ["groupRelayInvitation": ["fromMember": ["memberId": "b3duZXI", "memberRole": "owner"], "fromMemberProfile": ["displayName": "a"],
                                                     "relayMemberId": "cmVsYXk", "groupLink": "https://smp.example/r#abc"]], .invalidValue),
        ("x.grp.relay.inv", ["groupRelayInvitation": ["fromMember": ["memberId": "b3duZXI", "memberRole": "owner"], "fromMemberProfile": ["displayName": "a"],
                                                     "relayMemberId": "b3duZXI", "groupLink": "https://smp.example/c#abc"]], .invalidValue),
        ("x.grp.relay.inv", ["groupRelayInvitation": ["fromMember": ["memberId": "b3duZXI", "memberRole": "owner"], "fromMemberProfile": ["displayName": ""],
                                                     "relayMemberId": "cmVsYXk", "groupLink": "https://smp.example/c#abc"]], .invalidValue),
        ("x.grp.relay.acpt", ["relayLink": "https://relay.example/c#xyz"], .invalidValue),
        ("x.grp.relay.acpt", ["relayLink": 5], .wrongType),
        ("x.grp.relay.acpt", [:], .missingField),
        ("x.grp.relay.reject", ["reason": 1], .wrongType),
        ("x.grp.relay.test", ["challenge": "!!"], .invalidValue),
        ("x.grp.relay.test", ["challenge": "AAEC", "signature": "AAEC"], .invalidValue),
        ("x.grp.relay.new", ["relayLink": "simplex:/contact#/?v=1"], .invalidValue),
        ("x.member", ["profile": ["displayName": "s"], "newMemberId": "c2Ft", "newMemberKey": "AAAA"], .invalidValue),
        ("x.member", ["profile": ["displayName": "s"], "newMemberId": "", "newMemberKey": "AAAA"], .invalidValue),
        ("x.member", ["profile": ["displayName": "s"], "newMemberId": "c2Ft"], .missingField),
        ("x.member", "params", .wrongType),
    ]

    @Test func strictDecoding() throws {
        for (event, params, code) in Self.refused {
            #expect(throws: GroupMessageError(code, "")) { try ChannelMessage.decode(event: event, params: params) }
        }
        // An empty `x.grp.relay.reject` (the first relays') is an unknown reason, not an error.
        #expect(try ChannelMessage.decode(event: "x.grp.relay.reject", params: [:]) == .relayReject(.unknown("")))
        #expect(try ChannelMessage.decode(event: "x.msg.new", params: [:]) == nil)
    }

    @Test func links() throws {
        let cases: [(String, SimplexLinkType?)] = [
            ("https://smp4.simplex.im/r#abcDEF", .relay), ("https://smp4.simplex.im/c#abc", .channel), ("https://smp.example:5223/g#abc", .group),
            ("https://h.example/a#key", .contact), ("https://h.example/i#id/key", .invitation), ("simplex:/r#abc", .relay),
            ("https://h.example/r?c=fp#abc", .relay), ("  https://h.example/r#abc\n", .relay),
            ("simplex:/contact#/?v=1&smp=x", .contact), ("simplex:/invitation#/?v=1", .invitation),
            ("https://h.example/x#abc", nil), ("https://h.example/r#", nil), ("https://h.example/rr#abc", nil), ("http://h.example/r#abc", nil),
            ("https:///r#abc", nil), ("hello", nil), ("", nil),
        ]
        for (text, type) in cases { #expect(SimplexLink.recognize(text)?.type == type, "\(text)") }
        let err = #expect(throws: ChannelError.self) { try ChannelLinks.checkConnectable("https://smp4.simplex.im/r#abc") }
        #expect(err?.code == .relayAddress)
        #expect(err?.message == "This is a chat relay address, it cannot be used to connect.")
        try ChannelLinks.checkConnectable("https://smp4.simplex.im/c#abc")
        try ChannelLinks.checkConnectable("not a link")
    }

    @Test func relayStatusMachine() {
        #expect(RelayStatus.new.next(on: .invitationSent) == .invited)
        #expect(RelayStatus.invited.next(on: .acceptedAndVerified) == .accepted)
        #expect(RelayStatus.invited.next(on: .rejectedByRelay) == .rejected)
        #expect(RelayStatus.accepted.next(on: .rosterAcknowledged) == .acknowledgedRoster)
        #expect(RelayStatus.accepted.next(on: .rosterRefused) == .rejected)
        #expect(RelayStatus.accepted.next(on: .linkDataPublished(containsRelay: true)) == .active)
        #expect(RelayStatus.acknowledgedRoster.next(on: .linkDataPublished(containsRelay: true)) == .active)
        #expect(RelayStatus.active.next(on: .linkDataPublished(containsRelay: false)) == .inactive)
        #expect(RelayStatus.active.next(on: .removed) == .inactive)
        // Out of order or repeated: no move.
        #expect(RelayStatus.new.next(on: .acceptedAndVerified) == nil)
        #expect(RelayStatus.active.next(on: .linkDataPublished(containsRelay: true)) == nil)
        #expect(RelayStatus.rejected.next(on: .removed) == nil)
        #expect(RelayStatus.inactive.next(on: .linkDataPublished(containsRelay: true)) == nil)
        for s in RelayStatus.allCases { #expect(RelayStatus(storeText: s.storeText) == s) }
        #expect(RelayStatus.acknowledgedRoster.storeText == "acknowledged_roster")
        #expect(RelayStatus(rawValue: "acknowledgedRoster") == .acknowledgedRoster)
    }

    @Test func signedElementsBatchesAndForwards() throws {
        let pg = Array(repeating: UInt8(3), count: 32)
        let env = GroupEnvelope(msgId: "m1", event: "x.msg.new", params: ["content": ["type": "text", "text": "hi"]])
        let signed = try ChannelElement.sign(env, binding: .group, publicGroupId: pg, author: Self.owner, key: Self.key)
        let mk = MemberKey(Self.key.publicKey)
        #expect(ChannelSigning.verify(signed, publicGroupId: pg, author: Self.owner, key: mk))
        // Bound to the channel and to the author.
        #expect(!ChannelSigning.verify(signed, publicGroupId: Array(repeating: 4, count: 32), author: Self.owner, key: mk))
        #expect(!ChannelSigning.verify(signed, publicGroupId: pg, author: Self.relay, key: mk))
        #expect(!ChannelSigning.verify(try .plain(env), publicGroupId: pg, author: Self.owner, key: mk))
        // Wire: '/' 'G' 1 'M' 64 sig body.
        let bytes = signed.bytes
        #expect(Array(bytes.prefix(5)) == [0x2F, 0x47, 1, 0x4D, 64])
        #expect(try ChannelElement(decoding: bytes) == signed)
        var altered = bytes
        altered[altered.count - 5] ^= 1
        #expect(!ChannelSigning.verify(try ChannelElement(decoding: altered), publicGroupId: pg, author: Self.owner, key: mk))

        let fwd = ForwardedElement(sender: .member(Self.owner, name: "alice"), brokerTs: 1_795_000_000, element: signed)
        let fwd2 = ForwardedElement(sender: .channel, brokerTs: 0, element: try .plain(env))
        #expect(try ForwardedElement(decoding: fwd.bytes) == fwd)
        #expect(try ForwardedElement(decoding: fwd2.bytes) == fwd2)
        // The forwarded element is the author's, byte for byte.
        #expect(Array(fwd.bytes.suffix(bytes.count)) == bytes)

        let batch = try ChannelBatch.encode([.element(signed), .forward(fwd), .forward(fwd2)])
        #expect(try ChannelBatch.decode(batch) == [.element(signed), .forward(fwd), .forward(fwd2)])

        // Refused: nested forward, cut input, junk after the last element, bad prefixes, short signatures.
        #expect(throws: GroupMessageError(.notForwardable, "")) { try ForwardedElement(decoding: [0x3E, 0x43] + Array(repeating: 0, count: 8) + fwd2.bytes) }
        #expect(throws: GroupMessageError.self) { try ChannelBatch.decode(Array(batch.dropLast())) }
        #expect(throws: GroupMessageError.self) { try ChannelBatch.decode(batch + [0]) }
        #expect(throws: GroupMessageError.self) { try ChannelBatch.decode([0x3D, 0]) }
        #expect(throws: GroupMessageError.self) { try ChannelElement(decoding: [0x2F, 0x47, 1, 0x4D, 63] + Array(repeating: 0, count: 63) + Array("{}".utf8)) }
        #expect(throws: GroupMessageError.self) { try ChannelElement(decoding: [0x2F, 0x58, 1]) }
        #expect(throws: GroupMessageError.self) { try ChannelElement(decoding: [0x2F, 0x47, 0] + Array("{}".utf8)) }
        #expect(throws: GroupMessageError.self) { try ChannelElement(decoding: Array("hello".utf8)) }
        #expect(throws: GroupMessageError.self) { try ChannelElement(decoding: []) }
    }
}
