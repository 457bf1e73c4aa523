import Foundation
import SwiftplexBase
import Testing
@testable import ChatModel

/// The model written straight to text (`JSONTextEncoder`, as the API edge writes responses and
/// events) gives the very bytes of the tree encoder's JSON, for each model fixture — the group
/// types included, which the engine does not produce yet.
@Suite struct TextWriterTests {
    func expectSame<T: Encodable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let direct = String(decoding: try JSONTextEncoder().encode(value), as: UTF8.self)
        #expect(direct == (try JSONValueEncoder().encode(value)).description, sourceLocation: sourceLocation)
    }

    func expectSame<T: Codable>(_ type: T.Type, _ json: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectSame(try decoded(T.self, json), sourceLocation: sourceLocation)
    }

    @Test func modelFixturesAreWrittenAsTheTreeWritesThem() throws {
        try expectSame(ModelShapeTests.user)
        try expectSame(ModelShapeTests.contact)
        try expectSame(ModelShapeTests.item)
        try expectSame(ModelShapeTests.connection())
        try expectSame(User.self, ModelShapeTests.userJSON)
        try expectSame(Contact.self, ModelShapeTests.contactJSON)
        try expectSame(ChatItem.self, ModelShapeTests.itemJSON)
        try expectSame(Connection.self, ModelShapeTests.connectionJSON)
        try expectSame(MsgContent.self, #"{"type":"poll","text":"which?","options":["a","b"]}"#)
        try expectSame(MsgContent.self, #"{"type":"text","text":"hi","format":[{"bold":true}]}"#)
        try expectSame(MsgReaction.self, #"{"type":"sticker","id":5}"#)
        try expectSame(ChatResponse.chatCmdError(.error(.noActiveUser)))
        try expectSame(ChatEvent.hostConnected(protocol: "smp", transportHost: "127.0.0.1"))
        try expectSame(ChatTimestamp(seconds: -1, nanoseconds: 5))
    }

    @Test func groupFixturesAreWrittenAsTheTreeWritesThem() throws {
        try expectSame(GroupInfo.self, GroupShapeTests.group)
        try expectSame(GroupMember.self, GroupShapeTests.member)
    }

    /// Timestamps are written from their bytes: the same text as piece by piece, for ms, µs and ns.
    @Test func timestampsWrittenFromTheirBytes() {
        for (s, n) in [(0, 0), (1_767_323_045, 678_000_000), (1_767_323_045, 678_001_000), (1_767_323_045, 678_000_001), (253_402_300_799, 999_999_999),
                       (-1, 0), (-62_135_596_800, 0)] as [(Int64, Int32)] {
            let t = ChatTimestamp(seconds: s, nanoseconds: n)
            #expect(t.description == t.spelledOut)
            #expect(ChatTimestamp(parsing: t.description) == t)
        }
        #expect(ChatTimestamp(seconds: 1_767_323_045, nanoseconds: 678_000_000).description == "2026-01-02T03:04:05.678Z")
    }
}
