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
