import Foundation
import Testing
@testable import ChatModel

/// The group types the engine does not produce yet: they read the package's shapes and write them back.
@Suite struct GroupShapeTests {
    static let member = #"""
        {"groupMemberId":1,"groupId":2,"indexInGroup":0,"memberId":"bWVtYmVy","memberRole":"owner","memberCategory":"user","memberStatus":"intro-inv",
         "memberSettings":{"showMessages":true},"blockedByAdmin":false,"invitedBy":{"type":"contact","byContactId":5},"localDisplayName":"bot",
         "memberProfile":{"profileId":1,"displayName":"bot","fullName":"","localAlias":""},"memberContactProfileId":1,
         "memberChatVRange":{"minVersion":1,"maxVersion":16},"createdAt":"2026-01-02T03:04:05.678Z","updatedAt":"2026-01-02T03:04:05.678Z"}
        """#
    static let on = #"{"enable":"on"}"#
    static let group = #"""
        {"groupId":2,"useRelays":true,"relayOwnStatus":"active","localDisplayName":"news","localAlias":"",
         "groupProfile":{"displayName":"news","fullName":"News","publicGroup":{"groupType":"channel","groupLink":"https://r/g#x","publicGroupId":"cGc"},
           "groupPreferences":{"directMessages":{"enable":"off","role":"admin"},"history":\#(on)},"memberAdmission":{"review":"all"}},
         "fullGroupPreferences":{"timedMessages":{"enable":"off","ttl":86400},"directMessages":{"enable":"on","role":"member"},"fullDelete":\#(on),"reactions":\#(on),
           "voice":\#(on),"files":\#(on),"simplexLinks":\#(on),"reports":\#(on),"history":\#(on),"support":\#(on),"sessions":\#(on),
           "comments":{"enable":"on","duration":3600},"signMessages":\#(on),"commands":[]},
         "membership":\#(member),"chatSettings":{"enableNtfs":"all","favorite":false},"createdAt":"2026-01-02T03:04:05.678Z",
         "updatedAt":"2026-01-02T03:04:05.678Z","chatTags":[],"groupSummary":{"currentMembers":3},"membersRequireAttention":0,
         "groupKeys":{"publicGroupId":"cGc","groupRootKey":{"type":"x"},"memberPrivKey":"k"}}
        """#

    @Test func aChannelWithItsMembershipAndPreferencesReadsAndWritesThePackagesShape() throws {
        let info = try decoded(GroupInfo.self, Self.group)
        #expect(info.membership.memberStatus == .introInvited && info.membership.invitedBy == .contact(byContactId: 5))
        #expect(info.groupProfile.publicGroup?.groupType == .channel && info.relayOwnStatus == .active)
        #expect(try roundTripDifference(GroupInfo.self, Self.group) == nil)
    }

    @Test func linksRelaysAndMemberStatusesSpelledAsSimpleXDoes() throws {
        let link = #"{"userContactLinkId":3,"connLinkContact":{"connFullLink":"simplex:/contact#g"},"shortLinkDataSet":false,"shortLinkLargeDataSet":false,"groupLinkId":"bGluaw","acceptMemberRole":"member"}"#
        #expect(try roundTripDifference(GroupLink.self, link) == nil)
        let relay = #"{"groupRelayId":1,"groupMemberId":4,"userChatRelay":{"chatRelayId":1,"address":"smp://r","relayProfile":{"name":"r"},"domains":[],"preset":false,"enabled":true,"deleted":false},"relayStatus":"acknowledgedRoster","relayCap":{}}"#
        #expect(try roundTripDifference(GroupRelay.self, relay) == nil)
        #expect(try encoded(GroupMemberStatus.pendingApproval) == .string("pending_approval"))
        #expect(try decoded(InvitedBy.self, #"{"type":"user"}"#) == .user)
    }
}
