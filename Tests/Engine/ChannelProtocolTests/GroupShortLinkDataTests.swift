import GroupProtocol
import SwiftplexBase
import Testing
@testable import ChannelProtocol

/// A channel link's user data: SimpleX's `GroupShortLinkData` JSON.
@Suite struct GroupShortLinkDataTests {
    let profile = ChannelProfiles.channelProfile(displayName: "news", channelLink: "https://relay.example/c#a2V5", publicGroupId: Array(repeating: 9, count: 32))

    @Test func roundTripsWithAndWithoutTheMemberCount() throws {
        for count in [nil, 0, 1234] as [Int?] {
            let data = GroupShortLinkData(groupProfile: profile, publicMemberCount: count)
            let again = try GroupShortLinkData(bytes: data.bytes)
            #expect(again == data)
            #expect(ChannelProfiles.isChannel(again.groupProfile))
            #expect(ChannelProfiles.publicGroupId(of: again.groupProfile) == Array(repeating: 9, count: 32))
        }
        let text = String(decoding: GroupShortLinkData(groupProfile: profile, publicMemberCount: 5).bytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"groupProfile":{"displayName":"news""#) && text.hasSuffix(#""publicGroupData":{"publicMemberCount":5}}"#), "\(text)")
        #expect(!String(decoding: GroupShortLinkData(groupProfile: profile).bytes, as: UTF8.self).contains("publicGroupData"))
        // SimpleX's own shape, unknown fields ignored, null count.
        let simplex = #"{"groupProfile":{"displayName":"g","fullName":"","extra":1},"publicGroupData":{"publicMemberCount":null},"linkDataVersion":3}"#
        let read = try GroupShortLinkData(bytes: Array(simplex.utf8))
        #expect(read.groupProfile.displayName == "g" && read.publicMemberCount == nil)
    }

    @Test func malformedDataIsATypedError() {
        let cases = [
            "", "not json", "[]", #"{"publicGroupData":{"publicMemberCount":1}}"#, #"{"groupProfile":{"displayName":""}}"#,
            #"{"groupProfile":{"fullName":"x"}}"#, #"{"groupProfile":{"displayName":"g"},"publicGroupData":{"publicMemberCount":-1}}"#,
            #"{"groupProfile":{"displayName":"g"},"publicGroupData":{"publicMemberCount":"5"}}"#,
            #"{"groupProfile":{"displayName":"g"},"publicGroupData":7}"#,
            #"{"groupProfile":{"displayName":"g","fullName":""#,
        ]
        for text in cases {
            #expect(throws: ChannelError(.malformedMessage, ""), "\(text)") { try GroupShortLinkData(bytes: Array(text.utf8)) }
        }
        let big = #"{"groupProfile":{"displayName":"g","description":""# + String(repeating: "a", count: GroupShortLinkData.maxBytes) + #""}}"#
        #expect(throws: ChannelError(.malformedMessage, "")) { try GroupShortLinkData(bytes: Array(big.utf8)) }
    }
}
