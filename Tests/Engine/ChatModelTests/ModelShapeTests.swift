import Foundation
import SwiftplexBase
import Testing
@testable import ChatModel

/// Each type encodes to the shape `docs/simplex-bot-api.md` gives (field names, `type` tags,
/// absent optionals omitted), and reads that shape back.
@Suite struct ModelShapeTests {
    static let t0 = ChatTimestamp(parsing: "2026-01-02T03:04:05.678Z")!

    func expectShape<T: Codable & Equatable>(_ value: T, _ json: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let difference = try encoded(value).difference(from: try JSONTree(text: json))
        #expect(difference == nil, "\(difference ?? "")", sourceLocation: sourceLocation)
        #expect(try decoded(T.self, json) == value, sourceLocation: sourceLocation)
    }

    static let profileJSON = #"{"profileId":1,"displayName":"bot","fullName":"","localAlias":""}"#
    static let fullPreferencesJSON = #"""
        {"timedMessages":{"allow":"yes"},"fullDelete":{"allow":"yes"},"reactions":{"allow":"yes"},"voice":{"allow":"no"},
         "files":{"allow":"yes"},"calls":{"allow":"yes"},"sessions":{"allow":"yes"},"commands":[{"type":"command","keyword":"help","label":"Help"}]}
        """#
    static let user: User = {
        let yes = SimplePreference(allow: .yes)
        return User(userId: 1, agentUserId: 1, userContactId: 1, localDisplayName: "bot",
                    profile: LocalProfile(profileId: 1, profile: Profile(displayName: "bot")),
                    fullPreferences: FullPreferences(timedMessages: TimedMessagesPreference(allow: .yes), fullDelete: yes, reactions: yes,
                                                     voice: SimplePreference(allow: .no), files: yes, calls: yes, sessions: yes,
                                                     commands: [.command(keyword: "help", label: "Help", params: nil)]),
                    activeUser: true, activeOrder: 1)
    }()
    static let userJSON = #"""
        {"userId":1,"agentUserId":1,"userContactId":1,"localDisplayName":"bot","profile":\#(profileJSON),
         "fullPreferences":\#(fullPreferencesJSON),"activeUser":true,"activeOrder":1,"showNtfs":true,"sendRcptsContacts":true,
         "sendRcptsSmallGroups":true,"autoAcceptMemberContacts":false,"userChatRelay":false,"clientService":false}
        """#

    @Test func aUserHasEveryRequiredFieldAndNoAbsentOptional() throws {
        try expectShape(Self.user, Self.userJSON)
    }

    @Test func aLocalProfileIsTheProfileFlattenedWithItsIdAndAliasAndKeepsUnknownFields() throws {
        let json = #"{"profileId":7,"displayName":"ann","fullName":"Ann","peerType":"bot","contactLink":"https://x","preferences":{"voice":{"allow":"no"},"commands":[{"type":"menu","label":"More","commands":[{"type":"command","keyword":"a","label":"A","params":"<n>"}]}]},"localAlias":"","futureField":{"x":[1,2.5,true,null]}}"#
        let value = try decoded(LocalProfile.self, json)
        #expect(value.profile.peerType == .bot)
        #expect(value.profile.otherFields["futureField"] == .object([("x", .array([.int(1), .double(2.5), .bool(true), .null]))]))
        try expectShape(value, json)
    }

    static func connection(status: ConnStatus = .ready) -> Connection {
        Connection(connId: 3, agentConnId: "9", customUserProfileId: 3_000_003, connStatus: status, contactConnInitiated: true, entityId: 3, createdAt: t0)
    }
    static let connectionJSON = #"""
        {"connId":3,"agentConnId":"9","connChatVersion":1,"peerChatVRange":{"minVersion":1,"maxVersion":1},"connLevel":0,"viaGroupLink":false,
         "customUserProfileId":3000003,"connType":"contact","connStatus":{"type":"ready"},"contactConnInitiated":true,"localAlias":"","entityId":3,
         "pqSupport":false,"pqEncryption":false,"authErrCounter":0,"quotaErrCounter":0,"createdAt":"2026-01-02T03:04:05.678Z"}
        """#

    @Test func aConnectionAndItsStatusUnion() throws {
        try expectShape(Self.connection(), Self.connectionJSON)
        try expectShape(ConnStatus.failed(connError: "gone"), #"{"type":"failed","connError":"gone"}"#)
        try expectShape(ConnType.userContact, #""user_contact""#)
    }

    static let contact: Contact = {
        let pref = ContactUserPreference(enabled: PrefEnabled(forUser: true, forContact: true), userPreference: .user(preference: SimplePreference(allow: .yes)),
                                         contactPreference: SimplePreference(allow: .yes))
        let timed = ContactUserPreference(enabled: PrefEnabled(forUser: true, forContact: true),
                                          userPreference: .contact(preference: TimedMessagesPreference(allow: .yes, ttl: 60)),
                                          contactPreference: TimedMessagesPreference(allow: .yes))
        return Contact(contactId: 3, localDisplayName: "ann", profile: LocalProfile(profileId: 1_000_003, profile: Profile(displayName: "ann")),
                       activeConn: connection(), contactStatus: .active,
                       mergedPreferences: ContactUserPreferences(timedMessages: timed, fullDelete: pref, reactions: pref, voice: pref, files: pref,
                                                                 calls: pref, sessions: pref),
                       createdAt: t0, updatedAt: t0, chatTs: t0, customData: ["n": .int(9_007_199_254_740_993)])
    }()
    static let contactJSON: String = {
        let pref = #"{"enabled":{"forUser":true,"forContact":true},"userPreference":{"type":"user","preference":{"allow":"yes"}},"contactPreference":{"allow":"yes"}}"#
        return #"""
            {"contactId":3,"localDisplayName":"ann","profile":{"profileId":1000003,"displayName":"ann","fullName":"","localAlias":""},
             "activeConn":\#(connectionJSON),"contactUsed":true,"contactStatus":"active","chatSettings":{"enableNtfs":"all","favorite":false},
             "userPreferences":{},"mergedPreferences":{"timedMessages":{"enabled":{"forUser":true,"forContact":true},"userPreference":{"type":"contact","preference":{"allow":"yes","ttl":60}},"contactPreference":{"allow":"yes"}},
             "fullDelete":\#(pref),"reactions":\#(pref),"voice":\#(pref),"files":\#(pref),"calls":\#(pref),"sessions":\#(pref)},
             "createdAt":"2026-01-02T03:04:05.678Z","updatedAt":"2026-01-02T03:04:05.678Z","chatTs":"2026-01-02T03:04:05.678Z",
             "contactGrpInvSent":false,"chatTags":[],"chatDeleted":false,"customData":{"n":9007199254740993}}
            """#
    }()

    @Test func aContactWithMergedPreferencesAndCustomDataKeepingLargeIntegers() throws {
        try expectShape(Self.contact, Self.contactJSON)
    }

    @Test func requestsPendingConnectionsAndAddresses() throws {
        let request = UserContactRequest(contactRequestId: 4, agentInvitationId: "4", localDisplayName: "carl", profileId: 2_000_004,
                                         profile: LocalProfile(profileId: 2_000_004, profile: Profile(displayName: "carl")), createdAt: Self.t0, updatedAt: Self.t0)
        try expectShape(request, #"""
            {"contactRequestId":4,"agentInvitationId":"4","cReqChatVRange":{"minVersion":1,"maxVersion":1},"localDisplayName":"carl","profileId":2000004,
             "profile":{"profileId":2000004,"displayName":"carl","fullName":"","localAlias":""},"createdAt":"2026-01-02T03:04:05.678Z",
             "updatedAt":"2026-01-02T03:04:05.678Z","pqSupport":false}
            """#)
        var withContact = request
        withContact.contactId = 9
        #expect(try encoded(withContact).difference(from: try encoded(request)) == "$.contactId_: 9 here, missing there")

        let pending = PendingContactConnection(pccConnId: 5, pccAgentConnId: "11", pccConnStatus: .new, viaContactUri: false,
                                               connLinkInv: CreatedConnLink(connFullLink: "simplex:/invitation#x", connShortLink: "https://r/i#y"),
                                               createdAt: Self.t0, updatedAt: Self.t0)
        try expectShape(pending, #"""
            {"pccConnId":5,"pccAgentConnId":"11","pccConnStatus":{"type":"new"},"viaContactUri":false,
             "connLinkInv":{"connFullLink":"simplex:/invitation#x","connShortLink":"https://r/i#y"},"localAlias":"",
             "createdAt":"2026-01-02T03:04:05.678Z","updatedAt":"2026-01-02T03:04:05.678Z"}
            """#)

        let address = UserContactLink(userContactLinkId: 1, connLinkContact: CreatedConnLink(connFullLink: "simplex:/contact#x"), shortLinkDataSet: false,
                                      addressSettings: AddressSettings(autoAccept: AutoAccept(acceptIncognito: false), autoReply: .text("hi")))
        try expectShape(address, #"""
            {"userContactLinkId":1,"connLinkContact":{"connFullLink":"simplex:/contact#x"},"shortLinkDataSet":false,"shortLinkLargeDataSet":false,
             "addressSettings":{"businessAddress":false,"autoAccept":{"acceptIncognito":false},"autoReply":{"type":"text","text":"hi"}}}
            """#)
    }

    @Test func messageContentKnownKindsAndEverythingElseKeptWhole() throws {
        try expectShape(MsgContent.text("hi"), #"{"type":"text","text":"hi"}"#)
        try expectShape(MsgContent.image(text: "", image: "data:image/png;base64,AA"), #"{"type":"image","text":"","image":"data:image/png;base64,AA"}"#)
        try expectShape(MsgContent.voice(text: "", duration: 3), #"{"type":"voice","text":"","duration":3}"#)
        try expectShape(MsgContent.link(text: "see", preview: LinkPreview(uri: "https://a", title: "A", description: "", image: "")),
                        #"{"type":"link","text":"see","preview":{"uri":"https://a","title":"A","description":"","image":""}}"#)
        try expectShape(MsgContent.report(text: "", reason: .spam), #"{"type":"report","text":"","reason":"spam"}"#)
        // An unknown kind, and a known kind with a field this model does not know: kept whole.
        let poll = #"{"type":"poll","text":"which?","options":["a","b"]}"#
        #expect(try decoded(MsgContent.self, poll).tag == "poll")
        #expect(try decoded(MsgContent.self, poll).text == "which?")
        #expect(try roundTripDifference(MsgContent.self, poll) == nil)
        let formatted = #"{"type":"text","text":"hi","format":[{"bold":true}]}"#
        #expect(try decoded(MsgContent.self, formatted) == .unknown(tag: "text", json: try decoded(JSONValue.self, formatted)))
        #expect(try roundTripDifference(MsgContent.self, formatted) == nil)
        try expectShape(MsgReaction.emoji("👍"), #"{"type":"emoji","emoji":"👍"}"#)
        #expect(try roundTripDifference(MsgReaction.self, #"{"type":"sticker","id":5}"#) == nil)
    }

    static let itemJSON = #"""
        {"chatDir":{"type":"directSnd"},"meta":{"itemId":8,"itemTs":"2026-01-02T03:04:05.678Z","itemText":"hi","itemStatus":{"type":"sndRcvd","msgRcptStatus":"ok","sndProgress":"complete"},
         "itemSharedMsgId":"abc","itemEdited":false,"userMention":false,"hasLink":false,"deletable":true,"editable":true,"showGroupAsSender":false,
         "createdAt":"2026-01-02T03:04:05.678Z","updatedAt":"2026-01-02T03:04:05.678Z"},
         "content":{"type":"sndMsgContent","msgContent":{"type":"text","text":"hi"}},"mentions":{},
         "quotedItem":{"chatDir":{"type":"directRcv"},"itemId":7,"sharedMsgId":"xyz","sentAt":"2026-01-02T03:04:05.678Z","content":{"type":"text","text":"q"}},
         "reactions":[{"reaction":{"type":"emoji","emoji":"👍"},"userReacted":false,"totalReacted":1}]}
        """#
    static let item = ChatItem(
        chatDir: .directSnd,
        meta: CIMeta(itemId: 8, itemTs: t0, itemText: "hi", itemStatus: .sndRcvd(msgRcptStatus: .ok, sndProgress: .complete), itemSharedMsgId: "abc",
                     deletable: true, editable: true, createdAt: t0, updatedAt: t0),
        content: .sndMsgContent(.text("hi")),
        quotedItem: CIQuote(chatDir: .directRcv, itemId: 7, sharedMsgId: "xyz", sentAt: t0, content: .text("q")),
        reactions: [CIReactionCount(reaction: .emoji("👍"), userReacted: false, totalReacted: 1)])

    @Test func aChatItemWithMetaStatusQuoteAndReactions() throws {
        try expectShape(Self.item, Self.itemJSON)
        try expectShape(CIContent.rcvDeleted(deleteMode: .broadcast), #"{"type":"rcvDeleted","deleteMode":"broadcast"}"#)
        try expectShape(CIStatus.sndSent(sndProgress: .complete), #"{"type":"sndSent","sndProgress":"complete"}"#)
        try expectShape(CIStatus.rcvNew, #"{"type":"rcvNew"}"#)
        try expectShape(CIStatus.sndErrorAuth, #"{"type":"sndErrorAuth"}"#)
        try expectShape(CIDirection.directRcv, #"{"type":"directRcv"}"#)
    }

    @Test func chatsAndItemsInTheirChats() throws {
        let info = ChatInfo.direct(contact: Self.contact)
        let infoJSON = #"{"type":"direct","contact":\#(Self.contactJSON)}"#
        try expectShape(info, infoJSON)
        try expectShape(AChatItem(chatInfo: info, chatItem: Self.item), #"{"chatInfo":\#(infoJSON),"chatItem":\#(Self.itemJSON)}"#)
        try expectShape(AChat(chatInfo: info, chatItems: [Self.item], chatStats: ChatStats(unreadCount: 2, minUnreadItemId: 5)),
                        #"{"chatInfo":\#(infoJSON),"chatItems":[\#(Self.itemJSON)],"chatStats":{"unreadCount":2,"unreadMentions":0,"reportsCount":0,"minUnreadItemId":5,"unreadChat":false}}"#)
        try expectShape(ConnectionPlan.invitationLink(.ownLink), #"{"type":"invitationLink","invitationLinkPlan":{"type":"ownLink"}}"#)
        try expectShape(ConnectionPlan.contactAddress(.ok), #"{"type":"contactAddress","contactAddressPlan":{"type":"ok"}}"#)
    }

    @Test func errorsOfTheEngineTheStoreAndTheAgent() throws {
        try expectShape(ChatError.error(.commandError(message: "no")), #"{"type":"error","errorType":{"type":"commandError","message":"no"}}"#)
        try expectShape(ChatError.store(.contactNotFound(contactId: 3)), #"{"type":"errorStore","storeError":{"type":"contactNotFound","contactId":3}}"#)
        try expectShape(ChatError.store(.dbError(resultCode: "SQLITE_FULL", message: "full")),
                        #"{"type":"errorStore","storeError":{"type":"dbError","resultCode":"SQLITE_FULL","message":"full"}}"#)
        try expectShape(ChatError.agent(AgentErrorType(code: .timeout, message: "slow")),
                        #"{"type":"errorAgent","agentError":{"type":"timeout","message":"slow"},"agentConnId":""}"#)
        try expectShape(ChatError(.error(.invalidConnReq), contactRequestId: 4), #"{"type":"error","errorType":{"type":"invalidConnReq"},"contactRequestId":4}"#)
    }

    @Test func responsesAndEventsCarryTheirTypeAndFields() throws {
        try expectShape(ChatResponse.activeUser(user: Self.user), #"{"type":"activeUser","user":\#(Self.userJSON)}"#)
        try expectShape(ChatResponse.cmdOk(user: nil), #"{"type":"cmdOk"}"#)
        try expectShape(ChatResponse.cmdOk(user: Self.user), #"{"type":"cmdOk","user_":\#(Self.userJSON)}"#)
        try expectShape(ChatResponse.chatStarted, #"{"type":"chatStarted"}"#)
        try expectShape(ChatResponse.usersList(users: [UserInfo(user: Self.user, unreadCount: 0)]), #"{"type":"usersList","users":[{"user":\#(Self.userJSON),"unreadCount":0}]}"#)
        try expectShape(ChatResponse.chatCmdError(.error(.noActiveUser)), #"{"type":"chatCmdError","chatError":{"type":"error","errorType":{"type":"noActiveUser"}}}"#)
        try expectShape(ChatResponse.chatHelp(helpSection: "main"), #"{"type":"chatHelp","helpSection":"main"}"#)
        try expectShape(ChatEvent.hostConnected(protocol: "smp", transportHost: "127.0.0.1"), #"{"type":"hostConnected","protocol":"smp","transportHost":"127.0.0.1"}"#)
        try expectShape(ChatEvent.hostDisconnected(protocol: "smp", transportHost: "127.0.0.1"), #"{"type":"hostDisconnected","protocol":"smp","transportHost":"127.0.0.1"}"#)
        try expectShape(ChatEvent.subscriptionStatus(server: "smp://k@127.0.0.1:5223", subscriptionStatus: .active, connections: ["1", "2"]),
                        #"{"type":"subscriptionStatus","server":"smp://k@127.0.0.1:5223","subscriptionStatus":{"type":"active"},"connections":["1","2"]}"#)
        try expectShape(ChatEvent.subscriptionStatus(server: "s", subscriptionStatus: .removed(subError: "AUTH"), connections: ["3"]),
                        #"{"type":"subscriptionStatus","server":"s","subscriptionStatus":{"type":"removed","subError":"AUTH"},"connections":["3"]}"#)
        try expectShape(ChatEvent.chatError(.store(.dbError(resultCode: "SQLITE_BUSY", message: ""))),
                        #"{"type":"chatError","chatError":{"type":"errorStore","storeError":{"type":"dbError","resultCode":"SQLITE_BUSY","message":""}}}"#)
        try expectShape(ChatEvent.contactConnected(user: Self.user, contact: Self.contact, userCustomProfile: Profile(displayName: "QuietOtter12")),
                        #"{"type":"contactConnected","user":\#(Self.userJSON),"contact":\#(Self.contactJSON),"userCustomProfile":{"displayName":"QuietOtter12","fullName":""}}"#)
    }

    @Test func timestampsAreUTCWithMillisecondsAndReadAnyFraction() throws {
        #expect(Self.t0.description == "2026-01-02T03:04:05.678Z")
        #expect(ChatTimestamp(parsing: "2026-01-02T03:04:05Z")?.description == "2026-01-02T03:04:05.000Z")
        #expect(ChatTimestamp(parsing: "2025-01-31T12:00:00.123456Z")?.description == "2025-01-31T12:00:00.123456Z")
        #expect(ChatTimestamp(parsing: "1969-12-31T23:59:59.500Z")?.seconds == -1)
        #expect(ChatTimestamp(parsing: "2024-02-29T00:00:00Z") != nil)
        for bad in ["2023-02-29T00:00:00Z", "2026-01-02 03:04:05Z", "2026-01-02T03:04:05+01:00", "2026-01-02T03:04:05.Z", "2026-13-01T00:00:00Z", ""] {
            #expect(ChatTimestamp(parsing: bad) == nil, "\(bad)")
        }
        let now = Date()
        let stamp = ChatTimestamp(now)
        #expect(abs(stamp.date.timeIntervalSince(now)) < 0.001)
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        #expect(ChatTimestamp(parsing: f.string(from: now))?.description == f.string(from: now))
    }
}
