import Foundation
import Testing
@testable import ChatModel

/// Every error code of the model, with its fields as the package names them, reads and writes back unchanged.
@Suite struct ErrorShapeTests {
    static let chatErrorTypes: [String] = [
        #"{"type":"noActiveUser"}"#, #"{"type":"userUnknown"}"#, #"{"type":"userExists","contactName":"ann"}"#,
        #"{"type":"cantDeleteActiveUser","userId":1}"#, #"{"type":"cantDeleteLastUser","userId":1}"#,
        #"{"type":"invalidDisplayName","displayName":"@x","validName":"x"}"#, #"{"type":"chatNotStarted"}"#, #"{"type":"chatNotStopped"}"#, #"{"type":"chatStoreChanged"}"#,
        #"{"type":"invalidConnReq"}"#, #"{"type":"unsupportedConnReq"}"#, #"{"type":"userContactLinkExists"}"#,
        #"{"type":"contactNotReady","contact":\#(ModelShapeTests.contactJSON)}"#, #"{"type":"contactNotActive","contact":\#(ModelShapeTests.contactJSON)}"#,
        #"{"type":"invalidChatItemUpdate"}"#, #"{"type":"invalidChatItemDelete"}"#, #"{"type":"commandError","message":"m"}"#,
        #"{"type":"internalError","message":"m"}"#, #"{"type":"exception","message":"m"}"#,
        #"{"type":"groupUserRole","groupInfo":\#(GroupShapeTests.group),"requiredRole":"admin"}"#,
        #"{"type":"groupNotJoined","groupInfo":\#(GroupShapeTests.group)}"#, #"{"type":"groupDuplicateMember","contactName":"ann"}"#,
        #"{"type":"groupMemberNotActive"}"#, #"{"type":"groupMemberUserRemoved"}"#, #"{"type":"groupInternal","message":"m"}"#,
        #"{"type":"groupMemberInitialRole","groupInfo":\#(GroupShapeTests.group),"initialRole":"member"}"#,
        #"{"type":"chatRelayExists"}"#, #"{"type":"channelError","code":"relayAddress","message":"m"}"#,
    ]
    static let storeErrors: [String] = [
        #"{"type":"duplicateName"}"#, #"{"type":"userNotFound","userId":2}"#, #"{"type":"contactNotFound","contactId":3}"#,
        #"{"type":"duplicateContactLink"}"#, #"{"type":"userContactLinkNotFound"}"#, #"{"type":"contactRequestNotFound","contactRequestId":4}"#,
        #"{"type":"chatItemNotFound","itemId":5}"#, #"{"type":"invalidQuote"}"#, #"{"type":"dbError","resultCode":"SQLITE_FULL","message":"m"}"#,
        #"{"type":"groupNotFound","groupId":6}"#, #"{"type":"groupMemberNotFound","groupMemberId":7}"#,
        #"{"type":"groupLinkNotFound","groupInfo":\#(GroupShapeTests.group)}"#, #"{"type":"duplicateGroupLink","groupInfo":\#(GroupShapeTests.group)}"#,
        #"{"type":"userChatRelayNotFound","chatRelayId":8}"#,
        #"{"type":"memberContactGroupMemberNotFound","contactId":9}"#,
        #"{"type":"contactNotFoundByName","contactName":"ann"}"#, #"{"type":"groupNotFoundByName","groupName":"team"}"#,
        #"{"type":"contactRequestNotFoundByName","contactName":"bob"}"#,
    ]

    func tag(_ json: String) throws -> String {
        guard case let .object(o) = try JSONTree(text: json), case let .string(t)? = o["type"] else { return "" }
        return t
    }

    @Test func everyChatErrorTypeAndStoreErrorRoundTrips() throws {
        #expect(try Set(Self.chatErrorTypes.map(tag)) == Set(ChatErrorType.allTags))
        #expect(try Set(Self.storeErrors.map(tag)) == Set(StoreError.allTags))
        for json in Self.chatErrorTypes + Self.storeErrors.map({ #"{"type":"errorStore","storeError":\#($0)}"# }) {
            let wrapped = json.hasPrefix(#"{"type":"errorStore""#) ? json : #"{"type":"error","errorType":\#(json)}"#
            #expect(try roundTripDifference(ChatError.self, wrapped) == nil, "\(wrapped)")
        }
        for code in AgentErrorType.Code.allCases {
            let json = #"{"type":"errorAgent","agentError":{"type":"\#(code.rawValue)","message":"m"},"agentConnId":"7","contactRequestId":2}"#
            #expect(try roundTripDifference(ChatError.self, json) == nil, "\(json)")
        }
    }
}
