import ChatTestSupport
import Foundation
import SwiftplexBase
import TestSupport
import Testing
@testable import ChatAPI

/// The terminal's commands run end to end: two engines on a live relay, driven only by `/ad`,
/// `/c`, `/ac`, `@name`, `/g`, `/a`, `/j`, `#group`, … as a bot sends them over the WebSocket
/// API, each answered with SimpleX's response type.
@Suite(.timeLimit(.minutes(3))) struct CLICommandTests: LiveRelaySuite {
    func type(_ r: JSONValue) -> String? { r["type"]?.stringValue }

    @Test func contactsAddressesGroupsAndMessagesByName() async throws {
        try await withAnnaAndBen { _, _, anna, annaIn, ben, benIn in
            #expect(type(await anna.execute("/u")) == "activeUser")
            let created = await anna.execute("/ad")
            #expect(type(created) == "userContactLinkCreated")
            let address = try #require(created["connLinkContact"]?["connFullLink"]?.stringValue)
            #expect(type(await anna.execute("/sa")) == "userContactLink")

            // A request by address, accepted by name.
            #expect(type(await ben.execute("/c \(address)")) == "sentInvitation")
            _ = try await annaIn.next("receivedContactRequest")
            #expect(await anna.execute("/ac nobody")["chatError"]?["storeError"]?["type"]?.stringValue == "contactRequestNotFoundByName")
            #expect(type(await anna.execute("/ac ben")) == "acceptingContactRequest")
            _ = try await annaIn.next("contactConnected")
            _ = try await benIn.next("contactConnected")

            // A message by name, both ways.
            #expect(type(await anna.execute("@ben hello ben")) == "newChatItems")
            _ = try await benIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "hello ben" })
            #expect(type(await ben.execute("@anna hi anna")) == "newChatItems")
            _ = try await annaIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "hi anna" })
            let contacts = await anna.execute("/contacts")
            #expect(type(contacts) == "contactsList" && contacts["contacts"]?.arrayFirst?["localDisplayName"]?.stringValue == "ben")

            // A group by name: created, a contact invited, joined, a message, the members, left.
            #expect(type(await anna.execute("/g team")) == "groupCreated")
            #expect(type(await anna.execute("/a team ben")) == "sentGroupInvitation")
            _ = try await benIn.next("receivedGroupInvitation")
            #expect(type(await ben.execute("/j team")) == "userAcceptedGroupSent")
            _ = try await benIn.next("userJoinedGroup")
            _ = try await annaIn.next("joinedGroupMember")
            #expect(type(await anna.execute("#team hello team")) == "newChatItems")
            _ = try await benIn.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "hello team" })
            let members = await anna.execute("/ms team")
            #expect(type(members) == "groupMembers")
            #expect(members["group"]?["members"]?.arrayCount == 1)
            let groups = await ben.execute("/groups")
            #expect(type(groups) == "groupsList" && groups["groups"]?.arrayCount == 1)
            #expect(type(await ben.execute("/l team")) == "leftMemberUser")
            #expect(await anna.execute("#nothing hi")["chatError"]?["storeError"]?["type"]?.stringValue == "groupNotFoundByName")

            // The profile and the address settings.
            let renamed = await anna.execute("/p annie Anna Smith")
            #expect(type(renamed) == "userProfileUpdated")
            #expect(renamed["toProfile"]?["displayName"]?.stringValue == "annie" && renamed["toProfile"]?["fullName"]?.stringValue == "Anna Smith")
            #expect(["userProfileUpdated", "userProfileNoChange"].contains(type(await anna.execute("/pa on")) ?? ""))
            let auto = await anna.execute("/auto_accept on incognito")
            #expect(type(auto) == "userContactLinkUpdated" && auto["contactLink"]?["addressSettings"]?["autoAccept"]?["acceptIncognito"]?.boolValue == true)
            let off = await anna.execute("/auto_accept off")
            #expect(type(off) == "userContactLinkUpdated" && off["contactLink"]?["addressSettings"]?["autoAccept"] == nil)

            // A new invitation, a contact deleted by name, the address deleted.
            #expect(type(await anna.execute("/c")) == "invitation")
            #expect(type(await anna.execute("/d ben")) == "contactDeleted")
            #expect(type(await anna.execute("/da")) == "userContactLinkDeleted")
            #expect(type(await anna.execute("/help")) == "chatHelp")
        }
    }
}
