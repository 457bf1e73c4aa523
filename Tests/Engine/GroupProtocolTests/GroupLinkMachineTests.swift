import SwiftplexBase
import Testing
@testable import GroupProtocol

/// The group machine's link paths, without a network: the host admitting a joiner (with and
/// without review), the joiner's side from `x.grp.link.inv`, and `/_accept member`.
@Suite struct GroupLinkMachineTests {
    let owner = MemberId("b3duZXI")!, mod = MemberId("bW9k")!, plain = MemberId("cGxhaW4")!, joiner = MemberId("am9pbmVy")!

    func ids() -> () -> String {
        var n = 0
        return {
            n += 1
            return "m\(n)"
        }
    }

    /// An owner's group with a connected moderator and a connected member.
    func hostState(review: Bool) -> GroupState {
        var json = GroupProfile(displayName: "club").json
        if review { json.set("memberAdmission", .object([("review", "all")])) }
        let profile = try! GroupProfile(json: json)
        return GroupState(
            membership: GroupMemberState(memberId: owner, role: .owner, status: .creator, category: .user, profile: MemberProfile(displayName: "anna")),
            profile: profile,
            members: [
                GroupMemberState(memberId: mod, role: .moderator, status: .connected, category: .invitee, profile: MemberProfile(displayName: "mo")),
                GroupMemberState(memberId: plain, role: .member, status: .connected, category: .invitee, profile: MemberProfile(displayName: "pat")),
            ])
    }

    func sends(_ effects: [GroupEffect]) -> [(String, MemberId)] {
        effects.compactMap { if case let .send(env, to) = $0 { (env.event, to) } else { nil } }
    }

    @Test func aJoinerIsAdmittedWithTheLinksRoleAndIntroducedToEveryone() throws {
        var s = hostState(review: false)
        let next = ids()
        let accepted = try s.handle(.linkRequest(memberId: joiner, role: .observer, profile: MemberProfile(displayName: "jo"), request: 7, review: false),
                                    newMessageId: next)
        guard case let .acceptLinkRequest(for: m, request: 7, info: env)? = accepted.first(where: { if case .acceptLinkRequest = $0 { true } else { false } }) else {
            Issue.record("no acceptLinkRequest in \(accepted)")
            return
        }
        #expect(m == joiner)
        guard case let .linkInvitation(inv)? = try env.groupMessage() else { Issue.record("not x.grp.link.inv"); return }
        #expect(inv.invitedMember == MemberIdRole(joiner, .observer) && inv.fromMember == MemberIdRole(owner, .owner) && inv.fromMemberName == "anna")
        #expect(inv.accepted == .accepted && inv.groupSize == 3)
        #expect(s.member(joiner)?.status == .accepted && s.member(joiner)?.viaLink == true)
        // The same member id again is a duplicate.
        #expect(throws: GroupError.self) {
            try s.handle(.linkRequest(memberId: joiner, role: .member, profile: MemberProfile(displayName: "jo"), request: 8, review: false), newMessageId: next)
        }

        let up = try s.handle(.connected(joiner), newMessageId: next)
        let out = sends(up)
        #expect(out.first.map { $0.0 } == "x.grp.link.mem" && out.first?.1 == joiner, "\(out)")
        #expect(out.filter { $0.0 == "x.grp.mem.new" }.map(\.1).sorted() == [mod, plain].sorted())
        #expect(out.filter { $0.0 == "x.grp.mem.intro" && $0.1 == joiner }.count == 2)
        #expect(up.contains(.emit(.joinedGroupMember(joiner))))
        #expect(s.member(joiner)?.status == .connected)
        // Nobody waits for review: nothing to accept.
        #expect(throws: GroupError.self) { try s.handle(.acceptMember(joiner, role: .member), newMessageId: next) }
    }

    @Test func underReviewAJoinerMeetsOnlyTheModeratorsUntilAccepted() throws {
        var s = hostState(review: true)
        let next = ids()
        _ = try s.handle(.linkRequest(memberId: joiner, role: .member, profile: MemberProfile(displayName: "jo"), request: 1, review: true), newMessageId: next)
        #expect(s.member(joiner)?.status == .pendingReview)
        let up = try s.handle(.connected(joiner), newMessageId: next)
        let out = sends(up)
        #expect(out.map(\.0).prefix(2) == ["x.grp.link.mem", "x.grp.link.acpt"], "\(out)")
        #expect(out.filter { $0.0 == "x.grp.mem.new" }.map(\.1) == [mod], "only the moderator hears of the joiner")
        #expect(out.filter { $0.0 == "x.grp.mem.intro" }.count == 1)
        #expect(!up.contains(.sendHistory(to: joiner)))
        #expect(s.member(joiner)?.status == .pendingReview && s.member(joiner)?.pendingConnected == true)
        // The announcement to moderators carries the member's support scope.
        let announce = up.compactMap { e -> GroupEnvelope? in if case let .send(env, to) = e, to == mod, env.event == "x.grp.mem.new" { env } else { nil } }.first
        if case let .memberNew(_, scope)? = try announce?.groupMessage() { #expect(scope == .member(joiner)) } else { Issue.record("no x.grp.mem.new") }

        // A member may not admit.
        var asMember = GroupState(membership: GroupMemberState(memberId: plain, role: .member, status: .connected, category: .user), profile: s.profile,
                              members: [s.member(joiner)!])
        #expect(throws: GroupError.self) { try asMember.handle(.acceptMember(joiner, role: .member), newMessageId: next) }

        let accepted = try s.handle(.acceptMember(joiner, role: .author), newMessageId: next)
        let after = sends(accepted)
        #expect(after.filter { $0.0 == "x.grp.link.acpt" }.map(\.1).sorted() == [joiner, mod].sorted(), "\(after)")
        #expect(after.filter { $0.0 == "x.grp.mem.new" }.map(\.1) == [plain], "the rest meet the joiner now")
        #expect(after.filter { $0.0 == "x.grp.mem.intro" }.count == 1)
        #expect(accepted.contains(.emit(.memberAccepted(joiner))) && accepted.contains(.sendHistory(to: joiner)))
        #expect(s.member(joiner)?.status == .connected && s.member(joiner)?.role == .author)
    }

    @Test func aJoinerAcceptedBeforeItsConnectionIsUpIsToldOnConnect() throws {
        var s = hostState(review: true)
        let next = ids()
        _ = try s.handle(.linkRequest(memberId: joiner, role: .member, profile: MemberProfile(displayName: "jo"), request: 1, review: true), newMessageId: next)
        let early = try s.handle(.acceptMember(joiner, role: .member), newMessageId: next)
        #expect(sends(early).isEmpty, "nothing can reach it yet")
        #expect(s.member(joiner)?.status == .accepted)
        let up = sends(try s.handle(.connected(joiner), newMessageId: next))
        #expect(up.map(\.0).prefix(2) == ["x.grp.link.mem", "x.grp.link.acpt"], "\(up)")
        #expect(up.filter { $0.0 == "x.grp.mem.new" }.map(\.1).sorted() == [mod, plain].sorted())
    }

    @Test func theJoinerWaitsForReviewThenJoins() throws {
        var json = GroupProfile(displayName: "club").json
        json.set("memberAdmission", .object([("review", "all")]))
        let inv = GroupLinkInvitation(fromMember: MemberIdRole(owner, .owner), fromMemberName: "anna", invitedMember: MemberIdRole(joiner, .member),
                                      groupProfile: try GroupProfile(json: json), accepted: .accepted, groupSize: 3)
        var (s, effects) = try GroupState.joinedViaLink(inv, ownProfile: MemberProfile(displayName: "jo"))
        #expect(s.membership.status == .pendingReview && s.host?.memberId == owner && s.host?.profile?.displayName == "anna")
        #expect(effects.contains(.emit(.groupLinkConnecting(host: owner))))
        guard case let .allowConnection(for: h, info: info?)? = effects.first(where: { if case .allowConnection = $0 { true } else { false } }) else {
            Issue.record("no allow in \(effects)")
            return
        }
        #expect(h == owner && info.event == "x.info" && info.params["profile"]?["displayName"]?.stringValue == "jo")
        let next = ids()
        let up = try s.handle(.connected(owner), newMessageId: next)
        #expect(up.contains(.emit(.userJoinedGroup(host: owner))))
        #expect(s.membership.status == .pendingReview, "still waiting after the connection is up")
        #expect(throws: GroupError.self) {
            try s.handle(.sendContent(event: "x.msg.new", params: .object([("content", .object([("type", "text"), ("text", "hi")]))])), newMessageId: next)
        }
        // The host's profile, then its word.
        let mem = GroupEnvelope(msgId: "a1", .linkMember(profile: MemberProfile(displayName: "Anna", fullName: "A")))
        _ = try s.handle(.received(from: owner, mem, brokerTs: "2026-11-24T00:00:00Z"), newMessageId: next)
        #expect(s.host?.profile?.fullName == "A")
        let acpt = GroupEnvelope(msgId: "a2", .linkAccept(acceptance: .accepted, role: .author, memberId: joiner))
        let joined = try s.handle(.received(from: owner, acpt, brokerTs: "2026-11-24T00:00:00Z"), newMessageId: next)
        #expect(joined.contains(.emit(.userJoinedGroup(host: owner))))
        #expect(s.membership.status == .connected && s.membership.role == .author)
        // Once in, another x.grp.link.acpt about the user changes nothing.
        let again = GroupEnvelope(msgId: "a3", .linkAccept(acceptance: .accepted, role: .observer, memberId: joiner))
        #expect(try s.handle(.received(from: owner, again, brokerTs: "2026-11-24T00:00:00Z"), newMessageId: next).isEmpty)
        #expect(s.membership.role == .author)
    }

    @Test func aLinkInvitationFromTooLowARoleOrForAChannelIsRefused() throws {
        let low = GroupLinkInvitation(fromMember: MemberIdRole(owner, .member), fromMemberName: "x", invitedMember: MemberIdRole(joiner, .member),
                                      groupProfile: GroupProfile(displayName: "club"))
        #expect(throws: GroupError.self) { try GroupState.joinedViaLink(low, ownProfile: MemberProfile(displayName: "jo")) }
        let same = GroupLinkInvitation(fromMember: MemberIdRole(owner, .owner), fromMemberName: "x", invitedMember: MemberIdRole(owner, .member),
                                       groupProfile: GroupProfile(displayName: "club"))
        #expect(throws: GroupError.self) { try GroupState.joinedViaLink(same, ownProfile: MemberProfile(displayName: "jo")) }
        var json = GroupProfile(displayName: "chan").json
        json.set("publicGroup", .object([("groupType", "channel")]))
        let channel = GroupLinkInvitation(fromMember: MemberIdRole(owner, .owner), fromMemberName: "x", invitedMember: MemberIdRole(joiner, .member),
                                          groupProfile: try GroupProfile(json: json))
        #expect(throws: GroupError.self) { try GroupState.joinedViaLink(channel, ownProfile: MemberProfile(displayName: "jo")) }
    }
}
