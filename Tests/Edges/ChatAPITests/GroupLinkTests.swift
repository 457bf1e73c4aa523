import Agent
import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI
@testable import ChatCore

/// Group links and admission review end to end: engines on a live relay (TLS on loopback, SQLite
/// files), driven by the bot API's command strings, waiting for the events they expect.
@Suite(.timeLimit(.minutes(4))) struct GroupLinkTests: LiveRelaySuite {
    let g = GroupTests()


    func member(_ api: ChatAPI, group: Int, _ name: String) async -> JSONValue? {
        let members = await api.execute("/_members #\(group)")
        guard case let .array(list)? = members["group"]?["members"] else { return nil }
        return list.first { $0["memberProfile"]?["displayName"]?.stringValue == name }
    }

    @Test func aRequestThroughTheLinkWaitsWhileTheHostIsAwayAndIsTakenWhenItIsBack() async throws {
        try await withLiveRelay { dir, relay in
            let (gid, short) = try await withEngine(dir, "anna", relays: [relay.address]) { anna, _ -> (Int, String) in
                await startUser(anna, "anna")
                let gid = try await g.createGroup(anna, "club")
                let created = await anna.execute("/_create link #\(gid) member")
                return (gid, try #require(created["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue))
            }
            try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                await startUser(ben, "ben")
                // The host's engine is not running: the request waits in its queue on the relay.
                let sent = await ben.execute("/_connect 1 \(short)")
                #expect(sent["type"]?.stringValue == "sentInvitation", "\(sent)")
                let waiting = await ben.execute("/_connect plan 1 \(short)")
                #expect(waiting["connectionPlan"]?["groupLinkPlan"]?["type"]?.stringValue == "connectingConfirmReconnect", "\(waiting)")
                #expect(await ben.execute("/connect \(short)")["type"]?.stringValue == "sentInvitation")
                // Back: the host takes the request, once.
                try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                    #expect(await anna.execute("/_start")["type"]?.stringValue == "chatStarted")
                    let joined = try await benIn.next("userJoinedGroup")
                    #expect(joined["groupInfo"]?["membership"]?["memberRole"]?.stringValue == "member")
                    _ = try await annaIn.next("joinedGroupMember")
                    let known = await ben.execute("/_connect plan 1 \(short)")
                    #expect(known["connectionPlan"]?["groupLinkPlan"]?["type"]?.stringValue == "known", "\(known)")
                    let members = await anna.execute("/_members #\(gid)")
                    #expect(members["group"]?["members"]?.arrayCount == 1, "\(members)")
                }
            }
        }
    }

    @Test func joinersComeThroughTheLinkWithItsRoleUntilItIsDeleted() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        try await withEngine(dir, "dan", relays: [relay.address]) { dan, _ in
                            for (api, name) in [(anna, "anna"), (ben, "ben"), (cara, "cara"), (dan, "dan")] { await startUser(api, name) }
                            let gid = try await g.createGroup(anna, "club")

                            // Wrong roles are typed errors, and nothing is made.
                            let tooHigh = await anna.execute("/_create link #\(gid) admin")
                            #expect(errorType(tooHigh) == "groupMemberInitialRole", "\(tooHigh)")
                            let noLink = await anna.execute("/_get link #\(gid)")
                            #expect(errorType(noLink) == "groupLinkNotFound", "\(noLink)")
                            #expect(await anna.execute("/_create link #\(gid) relay")["type"]?.stringValue == "chatCmdError")
                            #expect(errorType(await anna.execute("/_create link #999 member")) == "groupNotFound")

                            let created = await anna.execute("/_create link #\(gid) member")
                            g.expectShape(created, "groupLinkCreated")
                            let short = try #require(created["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue)
                            let full = try #require(created["groupLink"]?["connLinkContact"]?["connFullLink"]?.stringValue)
                            #expect(short.hasPrefix("https://") && short.contains("/g?"), "\(short)")
                            #expect(full.hasPrefix("simplex:/contact#/?v=1&smp=") && full.contains("&data="), "\(full)")
                            #expect(created["groupLink"]?["acceptMemberRole"]?.stringValue == "member")
                            #expect(errorType(await anna.execute("/_create link #\(gid) member")) == "duplicateGroupLink")
                            let got = await anna.execute("/_get link #\(gid)")
                            g.expectShape(got, "groupLink")
                            #expect(got["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue == short)

                            // Plans: the owner's own link, a stranger's ok.
                            let ownPlan = await anna.execute("/_connect plan 1 \(short)")
                            #expect(ownPlan["connectionPlan"]?["type"]?.stringValue == "groupLink")
                            #expect(ownPlan["connectionPlan"]?["groupLinkPlan"]?["type"]?.stringValue == "ownLink")
                            let plan = await ben.execute("/_connect plan 1 \(short)")
                            g.expectShape(plan, "connectionPlan")
                            #expect(plan["connectionPlan"]?["groupLinkPlan"]?["type"]?.stringValue == "ok", "\(plan)")
                            #expect(plan["connLink"]?["connFullLink"]?.stringValue == full)

                            // Ben joins by the short link, as a member.
                            let sent = await ben.execute("/_connect 1 \(short)")
                            #expect(sent["type"]?.stringValue == "sentInvitation", "\(sent)")
                            // Connecting again sends nothing new (the plan of a request that waits is checked
                            // with the host away: aRequestThroughTheLinkWaitsWhileTheHostIsAway…).
                            #expect(await ben.execute("/connect \(short)")["type"]?.stringValue == "sentInvitation")
                            let connecting = try await benIn.next("groupLinkConnecting")
                            g.expectShape(connecting, "groupLinkConnecting")
                            #expect(connecting["hostMember"]?["memberProfile"]?["displayName"]?.stringValue == "anna")
                            let benJoined = try await benIn.next("userJoinedGroup")
                            g.expectShape(benJoined, "userJoinedGroup")
                            #expect(benJoined["groupInfo"]?["membership"]?["memberRole"]?.stringValue == "member")
                            #expect(benJoined["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "connected")
                            let bg = try #require(benJoined["groupInfo"]?["groupId"]?.intValue)
                            let annaSeesBen = try await annaIn.next("joinedGroupMember")
                            g.expectShape(annaSeesBen, "joinedGroupMember")
                            #expect(annaSeesBen["member"]?["memberRole"]?.stringValue == "member")
                            #expect(annaSeesBen["member"]?["memberProfile"]?["displayName"]?.stringValue == "ben")
                            #expect(await ben.execute("/_connect plan 1 \(short)")["connectionPlan"]?["groupLinkPlan"]?["type"]?.stringValue == "known")

                            // Ben's request sent again (same contactReqId, as after a crash) is not a second member:
                            // counted below, after cara's request, which the host takes after it.
                            let benRequestId = try #require(try await anna.controller.dbRead { db in
                                try String.fetchOne(db, sql: "SELECT x_contact_id FROM group_member WHERE x_contact_id IS NOT NULL")
                            })
                            let again = ChatMessage(event: "x.contact", params: .object([
                                ("profile", .object([("displayName", "ben"), ("fullName", "")])), ("contactReqId", .string(benRequestId)),
                            ])).encoded
                            _ = try await ben.controller.agent.joinAddress(try ContactAddressLink(parsing: full), info: again)

                            // The link's role changes: cara joins by the full link as an observer.
                            let changed = await anna.execute("/_set link role #\(gid) observer")
                            g.expectShape(changed, "groupLink")
                            #expect(changed["groupLink"]?["acceptMemberRole"]?.stringValue == "observer")
                            #expect(errorType(await anna.execute("/_set link role #\(gid) moderator")) == "groupMemberInitialRole")
                            #expect(await cara.execute("/connect \(full)")["type"]?.stringValue == "sentInvitation")
                            let caraJoined = try await caraIn.next("userJoinedGroup")
                            #expect(caraJoined["groupInfo"]?["membership"]?["memberRole"]?.stringValue == "observer")
                            let cg = try #require(caraJoined["groupInfo"]?["groupId"]?.intValue)
                            // Introduced to ben: the mesh closes, and messages flow.
                            let benSeesCara = try await benIn.next("connectedToGroupMember")
                            #expect(benSeesCara["member"]?["memberProfile"]?["displayName"]?.stringValue == "cara")
                            #expect(benSeesCara["member"]?["memberRole"]?.stringValue == "observer")
                            _ = try await caraIn.next("connectedToGroupMember")
                            _ = await g.send(ben, group: bg, "hello club")
                            try await g.received(annaIn, "hello club", from: "ben")
                            try await g.received(caraIn, "hello club", from: "ben")
                            // An observer may not send.
                            #expect(errorType(await g.send(cara, group: cg, "may I?")) == "groupUserRole")

                            // Exactly one member per joiner, with the host's profile learnt (x.grp.link.mem).
                            let members = await anna.execute("/_members #\(gid)")
                            #expect(members["group"]?["members"]?.arrayCount == 2, "\(members)")
                            #expect(await member(ben, group: bg, "anna")?["memberCategory"]?.stringValue == "host")

                            // Deleted: the link takes no more joiners, with typed errors.
                            let deleted = await anna.execute("/_delete link #\(gid)")
                            g.expectShape(deleted, "groupLinkDeleted")
                            #expect(errorType(await anna.execute("/_get link #\(gid)")) == "groupLinkNotFound")
                            let gonePlan = await dan.execute("/_connect plan 1 \(short)")
                            #expect(gonePlan["type"]?.stringValue == "chatCmdError", "\(gonePlan)")
                            let goneJoin = await dan.execute("/_connect 1 \(full)")
                            #expect(goneJoin["type"]?.stringValue == "chatCmdError", "\(goneJoin)")
                            // Malformed links are typed errors too.
                            for bad in [full.replacingOccurrences(of: "data=", with: "data=%7B"), "https://localhost/g?c=AAAA#AAAA/AAAA", "simplex:/group#/?v=1"] {
                                let r = await dan.execute("/_connect 1 \(bad)")
                                #expect(r["type"]?.stringValue == "chatCmdError", "\(bad): \(r)")
                            }
                        }
                    }
                }
            }
        }
    }

    @Test func withReviewJoinersWaitForAModeratorAcrossRestarts() async throws {
        try await withLiveRelay { dir, relay in
            try await withEngine(dir, "ben", relays: [relay.address]) { ben, benIn in
                await startUser(ben, "ben")
                // Phase 1: anna's engine the first time; cara's request waits for review.
                let (gid, link, bg, cg) = try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                    await startUser(anna, "anna")
                    let gid = try await g.createGroup(anna, "vetted")
                    let link = try #require(await anna.execute("/_create link #\(gid) member")["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue)
                    // Ben joins before review is switched on.
                    _ = await ben.execute("/_connect 1 \(link)")
                    let bg = try #require(try await benIn.next("userJoinedGroup")["groupInfo"]?["groupId"]?.intValue)
                    _ = try await annaIn.next("joinedGroupMember")
                    let updated = await anna.execute(#"/_group_profile #\#(gid) {"displayName": "vetted", "fullName": "", "memberAdmission": {"review": "all"}}"#)
                    #expect(updated["type"]?.stringValue == "groupUpdated", "\(updated)")
                    _ = try await benIn.next("groupUpdated")

                    // Cara's request waits for review: she meets no one but the host.
                    let cg = try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        await startUser(cara, "cara")
                        _ = await cara.execute("/_connect 1 \(link)")
                        let connecting = try await caraIn.next("groupLinkConnecting")
                        #expect(connecting["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "pending_review", "\(connecting)")
                        let joined = try await caraIn.next("userJoinedGroup")
                        #expect(joined["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "pending_review")
                        let waiting = try await annaIn.next("joinedGroupMember", where: { $0["member"]?["memberProfile"]?["displayName"]?.stringValue == "cara" })
                        #expect(waiting["member"]?["memberStatus"]?.stringValue == "pending_review", "\(waiting)")
                        // A waiting member may not send, and the others do not know her yet.
                        let cg = try #require(joined["groupInfo"]?["groupId"]?.intValue)
                        #expect(await g.send(cara, group: cg, "let me in")["type"]?.stringValue == "chatCmdError")
                        let caraInBen = await member(ben, group: bg, "cara")
                        #expect(caraInBen == nil, "ben must not know cara yet: \(String(describing: caraInBen))")
                        return cg
                    }
                    return (gid, link, bg, cg)
                }

                // Phase 2: both closed meanwhile; anna's engine reopened admits cara (a member not waiting cannot be).
                try await withEngine(dir, "anna", relays: [relay.address]) { anna, annaIn in
                    #expect(await anna.execute("/_start")["type"]?.stringValue == "chatStarted")
                    let waiting = await member(anna, group: gid, "cara")
                    #expect(waiting?["memberStatus"]?.stringValue == "pending_review", "\(String(describing: waiting))")
                    let caraId = try #require(waiting?["groupMemberId"]?.intValue)
                    let benId = try #require(await member(anna, group: gid, "ben")?["groupMemberId"]?.intValue)
                    #expect(errorType(await anna.execute("/_accept member #\(gid) \(benId) member")) == "groupMemberNotActive")
                    #expect(errorType(await anna.execute("/_accept member #\(gid) 9999 member")) == "groupMemberNotFound")
                    let accepted = await anna.execute("/_accept member #\(gid) \(caraId) member")
                    g.expectShape(accepted, "memberAccepted")
                    #expect(accepted["member"]?["memberStatus"]?.stringValue == "connected", "\(accepted)")
                    #expect(accepted["member"]?["memberRole"]?.stringValue == "member")
                    let announced = try await benIn.next("joinedGroupMemberConnecting")
                    #expect(announced["member"]?["memberProfile"]?["displayName"]?.stringValue == "cara")

                    // Cara's engine reopened on the same files: admitted, introduced, talking.
                    try await withEngine(dir, "cara", relays: [relay.address]) { cara, caraIn in
                        #expect(await cara.execute("/_start")["type"]?.stringValue == "chatStarted")
                        let admitted = try await caraIn.next("userJoinedGroup")
                        #expect(admitted["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "connected", "\(admitted)")
                        #expect(admitted["groupInfo"]?["membership"]?["memberRole"]?.stringValue == "member")
                        let caraSeesBen = try await caraIn.next("connectedToGroupMember")
                        #expect(caraSeesBen["member"]?["memberProfile"]?["displayName"]?.stringValue == "ben")
                        _ = try await benIn.next("connectedToGroupMember")
                        _ = await g.send(cara, group: cg, "thanks for letting me in")
                        try await g.received(benIn, "thanks for letting me in", from: "cara")
                        try await g.received(annaIn, "thanks for letting me in", from: "cara")
                    }

                    // The group deleted: its link goes with it.
                    #expect(await anna.execute("/_delete #\(gid) full")["type"]?.stringValue == "groupDeletedUser")
                    let after = await ben.execute("/_connect plan 1 \(link)")
                    #expect(after["type"]?.stringValue == "chatCmdError", "\(after)")
                    _ = bg
                }
            }
        }
    }
}
