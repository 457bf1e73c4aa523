import Foundation
import PluginABITesting
import Testing
@testable import SwiftplexPluginKit

@Suite struct EventViewTests {
    @Test func directMessagesCarryContactAndContent() throws {
        let e = try ChatEvent(parsing: ChatFixtures.directMessage(from: 7, name: "alice", localName: "alice_1", text: "hi there", itemId: 42))
        #expect(e.type == "newChatItems")
        let m = try #require(e.messages.first)
        #expect(m.chatType == .direct && m.contactId == 7 && m.groupId == nil && m.itemId == 42)
        #expect(m.displayName == "alice" && m.localDisplayName == "alice_1")
        #expect(m.text == "hi there" && m.contentType == "text" && m.chatRef == "@7")
    }

    @Test func groupMessagesCarryGroupAndMember() throws {
        let m = try #require(try ChatEvent(parsing: ChatFixtures.groupMessage(groupId: 3, memberName: "bob", memberContactId: 9, text: "yo")).messages.first)
        #expect(m.chatType == .group && m.groupId == 3 && m.contactId == 9 && m.displayName == "bob" && m.chatRef == "#3")
        #expect(m.group?.groupId == 3 && m.group?.displayName == "team" && m.group?.userRole == .admin)
        let member = try #require(m.member)
        #expect(member.groupMemberId == 50 && member.memberId == "bWVt" && member.displayName == "bob" && member.role == .member)
        #expect(member.category == "post" && member.joinedAfterBot && member.contactId == 9 && !member.blockedByAdmin)
        #expect(member.createdAt == Date(timeIntervalSince1970: 1_767_225_600))
        #expect(!m.hasLink)
        let link = try #require(try ChatEvent(parsing: ChatFixtures.groupMessage(groupId: 3, memberName: "bob", memberContactId: nil,
                                                                                text: "see https://example.org")).messages.first)
        #expect(link.hasLink && link.member?.contactId == nil)
    }

    @Test func rolesAreOrderedAsSimpleXOrdersThem() {
        #expect(GroupRole.observer < .author && GroupRole.author < .member && GroupRole.member < .moderator)
        #expect(GroupRole.moderator < .admin && GroupRole.admin < .owner && GroupRole.unknown < .relay)
        #expect(GroupRole(name: "commenter") == .unknown && GroupRole(name: nil) == .unknown)
    }

    @Test func timestampsParseWithAndWithoutFractions() {
        #expect(GroupMemberInfo.parseTimestamp("2026-01-01T00:00:00Z") == Date(timeIntervalSince1970: 1_767_225_600))
        #expect(GroupMemberInfo.parseTimestamp("2026-01-01T00:00:01.5Z") == Date(timeIntervalSince1970: 1_767_225_601.5))
        #expect(GroupMemberInfo.parseTimestamp("2026-01-01 00:00:00") == nil)
        #expect(GroupMemberInfo.parseTimestamp("yesterday") == nil)
    }

    @Test func groupEventsAreTyped() throws {
        let bob = ChatFixtures.member(51, groupId: 4, name: "bob", memberId: "Ym9i", category: "post")
        let alice = ChatFixtures.member(52, groupId: 4, name: "alice", memberId: "YWxp", role: "owner", category: "host")

        let inv = try ChatEvent(parsing: ChatFixtures.groupInvitation(groupId: 4, from: 6, role: "admin")).groupEvent
        guard case let .invitation(i)? = inv else { Issue.record("not an invitation: \(String(describing: inv))"); return }
        #expect(i.group.groupId == 4 && i.contactId == 6 && i.role == .admin && i.fromRole == .owner)

        let connected = try ChatEvent(parsing: ChatFixtures.groupEvent("connectedToGroupMember", groupId: 4, ["member": bob])).groupEvent
        guard case let .memberConnected(g, m)? = connected else { Issue.record("not memberConnected"); return }
        #expect(g.groupId == 4 && m.displayName == "bob" && m.joinedAfterBot)

        let removed = try ChatEvent(parsing: ChatFixtures.groupEvent("deletedMember", groupId: 4,
                                                                     ["deletedMember": bob, "byMember": alice, "withMessages": false])).groupEvent
        guard case let .memberRemoved(_, who, by)? = removed else { Issue.record("not memberRemoved"); return }
        #expect(who.memberId == "Ym9i" && by.role == .owner && by.category == "host" && !by.joinedAfterBot)

        let role = try ChatEvent(parsing: ChatFixtures.groupEvent("memberRole", groupId: 4,
                                                                  ["member": bob, "byMember": alice, "fromRole": "member", "toRole": "moderator"])).groupEvent
        guard case let .roleChanged(rg, rm, from, to, rby)? = role else { Issue.record("not roleChanged"); return }
        #expect(rg.groupId == 4 && rm.displayName == "bob" && from == .member && to == .moderator && rby.displayName == "alice")
        #expect(role?.group.groupId == 4)

        // Not group events, or group events missing their member: no view.
        #expect(try ChatEvent(parsing: ChatFixtures.contactConnected(8, name: "dave")).groupEvent == nil)
        #expect(try ChatEvent(parsing: ChatFixtures.groupEvent("leftMember", groupId: 4, [:])).groupEvent == nil)
        #expect(GroupEvent.types.count == 12)
    }

    @Test func sentItemsAreNotMessages() throws {
        #expect(try ChatEvent(parsing: ChatFixtures.sentMessage(to: 7, text: "x")).messages.isEmpty)
    }

    @Test func contactRequestsAndConnections() throws {
        let r = try #require(try ChatEvent(parsing: ChatFixtures.contactRequest(5, name: "carol")).contactRequest)
        #expect(r.requestId == 5 && r.displayName == "carol")
        let c = try #require(try ChatEvent(parsing: ChatFixtures.contactConnected(8, name: "dave")).connectedContact)
        #expect(c.contactId == 8 && c.displayName == "dave")
        #expect(try ChatEvent(parsing: ChatFixtures.contactConnected(8, name: "dave")).contactRequest == nil)
    }

    @Test func anEventWithoutATypeIsRefused() {
        #expect(throws: PluginError(.event, "")) { try ChatEvent(parsing: #"{"user":{}}"#) }
    }
}
