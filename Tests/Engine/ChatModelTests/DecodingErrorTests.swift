import Foundation
import Testing
@testable import ChatModel

/// What a reader of the API (the terminal client, SimplexLib) gets from input the model does not fit.
@Suite struct DecodingErrorTests {
    func modelError<T: Decodable>(_ type: T.Type, _ json: String) -> ModelDecodingError? {
        do {
            _ = try decoded(T.self, json)
            return nil
        } catch let e as ModelDecodingError {
            return e
        } catch {
            return nil
        }
    }

    @Test func anUnknownTypeTagIsAnUnknownTagErrorNamingTheTypeTheTagAndWhere() throws {
        let e = try #require(modelError(ChatResponse.self, #"{"type":"remoteHostList","user":{}}"#))
        #expect(e.code == .unknownTag && e.type == "ChatResponse" && e.value == "remoteHostList" && e.path == ["type"])
        let nested = try #require(modelError(ChatEvent.self, #"{"type":"chatError","chatError":{"type":"error","errorType":{"type":"somethingNew"}}}"#))
        #expect(nested.code == .unknownTag && nested.type == "ChatErrorType" && nested.path == ["chatError", "errorType", "type"])
        let status = try #require(modelError(CIStatus.self, #"{"type":"sndLost"}"#))
        #expect(status.type == "CIStatus")
        let agent = try #require(modelError(AgentErrorType.self, #"{"type":"CMD","message":""}"#))
        #expect(agent.type == "AgentErrorType" && agent.value == "CMD")
    }

    @Test func anUnknownEnumStringIsAnUnknownTagError() throws {
        let e = try #require(modelError(SimplePreference.self, #"{"allow":"maybe"}"#))
        #expect(e.code == .unknownTag && e.type == "FeatureAllowed" && e.value == "maybe" && e.path == ["allow"])
    }

    @Test func aMalformedTimestampIsABadTimestampError() throws {
        let e = try #require(modelError(CIQuote.self, #"{"sentAt":"yesterday","content":{"type":"text","text":""}}"#))
        #expect(e.code == .badTimestamp && e.value == "yesterday" && e.path == ["sentAt"])
    }

    @Test func missingFieldsAndWrongTypesAreTheDecoderErrors() {
        #expect {
            _ = try decoded(ChatResponse.self, #"{"type":"activeUser"}"#)
        } throws: { error in
            guard case let DecodingError.keyNotFound(key, _) = error else { return false }
            return key.stringValue == "user"
        }
        #expect {
            _ = try decoded(ChatStats.self, #"{"unreadCount":"2","unreadMentions":0,"reportsCount":0,"minUnreadItemId":0,"unreadChat":false}"#)
        } throws: { error in
            guard case DecodingError.typeMismatch = error else { return false }
            return true
        }
        #expect {
            _ = try decoded(ChatResponse.self, #"{"user":1}"#)
        } throws: { error in
            guard case let DecodingError.keyNotFound(key, _) = error else { return false }
            return key.stringValue == "type"
        }
        #expect(throws: DecodingError.self) { _ = try decoded(ChatEvent.self, #"{"type":"newChatItems","#) }
    }

    /// `allTags` is what the coverage test checks the engine against: each listed tag must really
    /// be decoded (a missing field, not an unknown tag), and an unlisted one must not.
    @Test func everyListedTagIsDecodedAndNoOtherIs() {
        func check<T: Decodable>(_ type: T.Type, _ tags: [String]) {
            for tag in tags {
                #expect(modelError(T.self, #"{"type":"\#(tag)"}"#)?.code != .unknownTag, "\(T.self) \(tag)")
            }
            #expect(modelError(T.self, #"{"type":"notATag"}"#)?.code == .unknownTag, "\(T.self)")
        }
        check(ChatResponse.self, ChatResponse.allTags)
        check(ChatEvent.self, ChatEvent.allTags)
        check(ChatError.self, ChatError.allTags)
        check(ChatErrorType.self, ChatErrorType.allTags)
        check(StoreError.self, StoreError.allTags)
        check(ChatInfo.self, ChatInfo.allTags)
        check(ConnectionPlan.self, ConnectionPlan.allTags)
        check(CIStatus.self, CIStatus.allTags)
        check(CIContent.self, CIContent.allTags)
        check(MsgVerified.self, MsgVerified.allTags)
        #expect(Set(ChatResponse.allTags).count == ChatResponse.allTags.count && Set(ChatEvent.allTags).count == ChatEvent.allTags.count)
    }
}
