import ChatModel
import ChatTestSupport
import SwiftplexBase
import Testing
@testable import ChatAPI
@testable import ChatCore

/// The JSON of each response and event the core produces, without a network: model values built
/// by the core from stored rows (as the engine builds them), written by the API edge, and
/// checked against the shapes in docs/simplex-bot-api.md — every required field there, no field
/// the document does not list, in each response, event and record type.
@Suite struct ResponseShapeTests {
    static let doc = try! BotAPIDoc.load()
    static let t = "2026-11-23T10:00:00.123Z"

    static let userRow = UserRow(UserRecord(id: 1, displayName: "bot", profile: #"{"displayName":"bot","fullName":"","preferences":{"reactions":{"allow":"no"}}}"#,
                                            active: true, createdAt: t, localDisplayName: "bot"))
    static func contactRecord(profile: String) -> ContactRecord {
        ContactRecord(
        id: 7, userId: 1, agentConnId: 3, profile: profile, status: .ready,
        viaAddress: true, accepted: true, invitation: nil, createdAt: t, updatedAt: t, customData: #"{"n":9007199254740993,"d":1.5}"#,
        userPrefs: #"{"voice":{"allow":"no"}}"#, incognitoProfile: #"{"displayName":"QuietOtter12","fullName":""}"#, chatTs: t, localDisplayName: "alice")
    }
    static let contactRow = ContactRow(contactRecord(profile: #"{"displayName":"alice","fullName":"Alice"}"#))
    static let pendingRow = ContactRow(ContactRecord(id: 8, userId: 1, agentConnId: 4, profile: nil, status: .pending, viaAddress: false, accepted: false,
                                                     invitation: "simplex:/invitation#/?v=1", createdAt: t, updatedAt: t, shortLink: "https://r.example/i#x"))
    static let itemRow = ItemRow(ChatItemRecord(
        id: 5, userId: 1, contactId: 7, sent: false, content: #"{"type":"text","text":"hi"}"#, sharedMsgId: "abc", agentSeq: 2, status: .rcvNew,
        createdAt: t, quoted: #"{"chatDir":{"type":"directSnd"},"itemId":4,"sharedMsgId":"xyz","sentAt":"\#(t)","content":{"type":"text","text":"q"}}"#))
    static let requestRow = RequestRow(ContactRequestRecord(id: 2, userId: 1, agentRequestId: 9, profile: #"{"displayName":"carl","fullName":""}"#,
                                                            createdAt: t, localDisplayName: "carl"))

    static var user: User { ModelOf.user(userRow) }
    static var contact: Contact { ModelOf.contact(contactRow, userProfile: userRow.profile) }
    static var item: AChatItem {
        AChatItem(chatInfo: .direct(contact: contact),
                  chatItem: ModelOf.chatItem(itemRow, reactions: [CIReactionCount(reaction: .emoji("👍"), userReacted: true, totalReacted: 2)]))
    }
    static var link: CreatedConnLink { CreatedConnLink(connFullLink: "simplex:/contact#/?v=1", connShortLink: "https://r.example/a#y") }

    /// One value of every response the engine gives.
    static var responses: [ChatResponse] {
        let u = user
        return [
            .activeUser(user: u), .usersList(users: [UserInfo(user: u, unreadCount: 0)]), .userProfileNoChange(user: u), .chatHelp(helpSection: "main"),
            .userProfileUpdated(user: u, fromProfile: userRow.profile, toProfile: Profile(displayName: "bot2"),
                                updateSummary: UserProfileUpdateSummary(updateSuccesses: 1, updateFailures: 0, changedContacts: [contact])),
            .cmdOk(user: u), .cmdOk(user: nil), .chatStarted, .chatRunning, .chatStopped,
            .archiveExported(archiveErrors: []),
            .archiveImported(archiveErrors: [.fileError(file: "plugins.db", fileError: "not imported"), .import(importError: "x")]),
            .userContactLinkCreated(user: u, connLinkContact: link),
            .userContactLink(user: u, contactLink: ModelOf.address(AddressRow(AddressRecord(userId: 1, agentAddressId: 1, link: link.connFullLink,
                settings: #"{"businessAddress":false,"autoAccept":{"acceptIncognito":false},"autoReply":{"type":"text","text":"hello"}}"#,
                shortLink: link.connShortLink)), userId: 1)),
            .userContactLinkUpdated(user: u, contactLink: ModelOf.address(AddressRow(AddressRecord(userId: 1, agentAddressId: 1, link: link.connFullLink,
                settings: #"{"businessAddress":true}"#, shortLink: nil)), userId: 1)),
            .userContactLinkDeleted(user: u),
            .userRelays(user: u, relays: ["smp://k@relay.example:5223"]),
            .chatCleared(user: u, chatInfo: .direct(contact: contact)),
            .apiChat(user: u, chat: AChat(chatInfo: .direct(contact: contact), chatItems: [item.chatItem], chatStats: ChatStats())),
            .invitation(user: u, connLinkInvitation: link, connection: ModelOf.pendingConnection(pendingRow, link: "simplex:/invitation#/?v=1")),
            .connectionPlan(user: u, connLink: link, connectionPlan: .invitationLink(.ownLink)),
            .sentConfirmation(user: u, connection: ModelOf.pendingConnection(pendingRow, link: nil), customUserProfile: Profile(displayName: "BraveFox10")),
            .sentInvitation(user: u, connection: ModelOf.pendingConnection(pendingRow, link: nil), customUserProfile: nil),
            .acceptingContactRequest(user: u, contact: contact),
            .contactRequestRejected(user: u, contactRequest: ModelOf.contactRequest(requestRow), contact: nil),
            .contactsList(user: u, contacts: [contact]),
            .contactPrefsUpdated(user: u, fromContact: contact, toContact: contact),
            .contactDeleted(user: u, contact: contact),
            .contactConnectionDeleted(user: u, connection: ModelOf.pendingConnection(pendingRow, link: pendingRow.invitation)),
            .apiChats(user: u, chats: [AChat(chatInfo: .direct(contact: contact), chatItems: [item.chatItem], chatStats: ModelOf.chatStats(unread: 1, minUnreadItemId: 5)),
                                       AChat(chatInfo: .contactRequest(contactRequest: ModelOf.contactRequest(requestRow)), chatItems: [], chatStats: ChatStats())]),
            .newChatItems(user: u, chatItems: [item]),
            .chatItemUpdated(user: u, chatItem: item),
            .chatItemNotChanged(user: u, chatItem: item),
            .chatItemsDeleted(user: u, chatItemDeletions: [ChatItemDeletion(deletedChatItem: item, toChatItem: item)], byUser: true, timed: false),
            .chatItemReaction(user: u, added: true, reaction: ACIReaction(chatInfo: .direct(contact: contact),
                              chatReaction: CIReaction(chatDir: .directRcv, chatItem: item.chatItem, sentAt: Stored.timestamp(t), reaction: .emoji("👍")))),
            .chatCmdError(.error(.commandError(message: "no"))),
        ]
    }

    static var events: [ChatEvent] {
        let u = user
        return [
            .contactConnected(user: u, contact: contact, userCustomProfile: contactRow.incognitoProfile),
            .contactUpdated(user: u, fromContact: contact, toContact: contact),
            .contactDeletedByContact(user: u, contact: contact),
            .receivedContactRequest(user: u, contactRequest: ModelOf.contactRequest(requestRow), chat: nil),
            .newChatItems(user: u, chatItems: [item]),
            .chatItemUpdated(user: u, chatItem: item),
            .chatItemsDeleted(user: u, chatItemDeletions: [ChatItemDeletion(deletedChatItem: item)], byUser: false, timed: false),
            .chatItemsStatusesUpdated(user: u, chatItems: [item]),
            .chatItemReaction(user: u, added: false, reaction: ACIReaction(chatInfo: .direct(contact: contact),
                              chatReaction: CIReaction(chatDir: .directSnd, chatItem: item.chatItem, sentAt: Stored.timestamp(t), reaction: .emoji("👍")))),
            .acceptingContactRequest(user: u, contact: contact),
            .hostConnected(protocol: "smp", transportHost: "relay.example"),
            .hostDisconnected(protocol: "smp", transportHost: "relay.example"),
            .subscriptionStatus(server: "smp://k@relay.example:5223", subscriptionStatus: .active, connections: ["1", "2"]),
            .subscriptionStatus(server: "smp://k@relay.example:5223", subscriptionStatus: .removed(subError: "AUTH"), connections: ["3"]),
            .chatError(ChatError(.errorStore(.dbError(resultCode: "SQLITE_FULL", message: "full")))),
            .chatError(ChatError(.errorAgent(AgentErrorType(code: .store, message: "x"), agentConnId: "3"))),
            .chatError(ChatError(.error(.commandError(message: "x")), contactRequestId: 2)),
        ]
    }

    /// Record types inside a response, checked wherever they occur.
    static func recordProblems(_ json: JSONValue, at path: String) -> [String] {
        var out: [String] = []
        func check(_ value: JSONValue?, _ type: String, _ where_: String) {
            guard let value else { return }
            out += BotAPIDoc.problems(value, doc.records[type], "\(where_) (\(type))")
        }
        check(json["user"], "User", path + ".user")
        check(json["user"]?["profile"], "LocalProfile", path + ".user.profile")
        for key in ["contact", "fromContact", "toContact"] {
            check(json[key], "Contact", "\(path).\(key)")
            check(json[key]?["activeConn"], "Connection", "\(path).\(key).activeConn")
            check(json[key]?["profile"], "LocalProfile", "\(path).\(key).profile")
        }
        check(json["connection"], "PendingContactConnection", path + ".connection")
        check(json["contactRequest"], "UserContactRequest", path + ".contactRequest")
        check(json["contactLink"], "UserContactLink", path + ".contactLink")
        for (i, ai) in (json["chatItems"]?.arrayValue ?? []).enumerated() where ai["chatItem"] != nil {
            check(ai, "AChatItem", "\(path).chatItems[\(i)]")
            check(ai["chatItem"], "ChatItem", "\(path).chatItems[\(i)].chatItem")
            check(ai["chatItem"]?["meta"], "CIMeta", "\(path).chatItems[\(i)].chatItem.meta")
            check(ai["chatItem"]?["quotedItem"], "CIQuote", "\(path).chatItems[\(i)].chatItem.quotedItem")
        }
        for (i, chat) in (json["chats"]?.arrayValue ?? []).enumerated() {
            check(chat, "AChat", "\(path).chats[\(i)]")
            check(chat["chatStats"], "ChatStats", "\(path).chats[\(i)].chatStats")
        }
        return out
    }

    /// Responses the Python package's generated types do not have (its document lists none of
    /// them): Swiftplex's `/_relays`, SimpleX's `/_get chat` and `/_delete … messages` answers, and
    /// the terminal's `/help` (`chatHelp`).
    static let notInDocument: Set<String> = ["userRelays", "apiChat", "chatCleared", "archiveExported", "archiveImported", "chatHelp"]

    @Test func everyResponseHasTheDocumentedShape() {
        for response in Self.responses {
            let json = ChatAPI.encode(response)
            #expect(json["type"]?.stringValue == response.tag)
            var problems = Self.recordProblems(json, at: response.tag)
            if Self.notInDocument.contains(response.tag) {
                #expect(Self.doc.messages[response.tag] == nil, "\(response.tag) is in the document now")
            } else {
                problems += BotAPIDoc.problems(json, Self.doc.messages[response.tag], response.tag)
            }
            #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        }
        // Every response type of the model is in the list above.
        #expect(Set(Self.responses.map(\.tag)) == Set(ChatResponse.allTags))
    }

    @Test func everyEventHasTheDocumentedShape() {
        for event in Self.events {
            let json = ChatAPI.encode(event)
            #expect(json["type"]?.stringValue == event.tag)
            let problems = BotAPIDoc.problems(json, Self.doc.messages[event.tag], event.tag) + Self.recordProblems(json, at: event.tag)
            #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        }
        #expect(Set(Self.events.map(\.tag)) == Set(ChatEvent.allTags))
    }

    /// Stored JSON comes back exactly: integers beyond 2^53 and doubles apart (a
    /// `/_set custom` example), unknown profile fields kept.
    @Test func storedJSONKeepsNumbersAndUnknownFields() {
        let row = ContactRow(Self.contactRecord(profile: #"{"displayName":"alice","futureField":{"x":[1,2.5]}}"#))
        let json = ChatAPI.encode(ChatResponse.contactsList(user: Self.user, contacts: [ModelOf.contact(row, userProfile: Self.userRow.profile)]))
        let contact = json["contacts"]?[0]
        #expect(contact?["customData"]?["n"] == .int(9_007_199_254_740_993))
        #expect(contact?["customData"]?["d"] == .double(1.5))
        #expect(contact?["customData"]?.description == #"{"n":9007199254740993,"d":1.5}"#)
        #expect(contact?["profile"]?["futureField"]?.description == #"{"x":[1,2.5]}"#)
        #expect(contact?["profile"]?["profileId"] == .int(1_000_007))
        #expect(contact?["profile"]?["fullName"] == .string(""))
        // Preferences: this user's for the contact win over the profile's; the contact's own are its profile's.
        #expect(contact?["mergedPreferences"]?["voice"]?["userPreference"]?["type"]?.stringValue == "contact")
        #expect(contact?["mergedPreferences"]?["voice"]?["enabled"]?["forUser"] == .bool(false))
        #expect(contact?["mergedPreferences"]?["reactions"]?["userPreference"]?["type"]?.stringValue == "user")
        // Incognito: the connection names the random profile.
        #expect(contact?["activeConn"]?["customUserProfileId"] == .int(3_000_007))
        #expect(json["user"]?["fullPreferences"]?["reactions"]?["allow"]?.stringValue == "no")
    }

    /// Items: direction, status details, quotes and reactions as SimpleX writes them.
    @Test func itemsCarryStatusQuoteAndReactions() {
        var sent = Self.itemRow
        sent.sent = true
        sent.status = .sndRcvd
        let item = ChatAPI.encode(ChatResponse.newChatItems(user: Self.user, chatItems: [AChatItem(chatInfo: .direct(contact: Self.contact),
                                                                                                  chatItem: ModelOf.chatItem(sent, reactions: []))]))["chatItems"]?[0]?["chatItem"]
        #expect(item?["chatDir"]?.description == #"{"type":"directSnd"}"#)
        #expect(item?["meta"]?["itemStatus"]?.description == #"{"type":"sndRcvd","msgRcptStatus":"ok","sndProgress":"complete"}"#)
        #expect(item?["meta"]?["editable"] == .bool(true))
        #expect(item?["content"]?.description == #"{"type":"sndMsgContent","msgContent":{"type":"text","text":"hi"}}"#)
        #expect(item?["quotedItem"]?["itemId"] == .int(4))
        #expect(item?["mentions"]?.description == "{}")
        var deleted = Self.itemRow
        deleted.deleted = true
        let gone = ChatAPI.encode(ChatEvent.chatItemUpdated(user: Self.user, chatItem: AChatItem(chatInfo: .direct(contact: Self.contact),
                                                                                                chatItem: ModelOf.chatItem(deleted, reactions: []))))
        #expect(gone["chatItem"]?["chatItem"]?["content"]?.description == #"{"type":"rcvDeleted","deleteMode":"broadcast"}"#)
        #expect(ChatAPI.encode(ChatResponse.newChatItems(user: Self.user, chatItems: [Self.item]))["chatItems"]?[0]?["chatItem"]?["reactions"]?.description
            == #"[{"reaction":{"type":"emoji","emoji":"👍"},"userReacted":true,"totalReacted":2}]"#)
    }
}
