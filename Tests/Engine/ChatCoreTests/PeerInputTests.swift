import ChatModel
import SwiftplexBase
import Testing
@testable import ChatCore

/// What peers hand the engine is decoded into model values before it is stored: malformed input
/// is a typed `ChatProtocolError` (`malformed`), never a crash, and well-formed input loses nothing.
@Suite struct PeerInputTests {
    static func json(_ text: String) -> JSONValue { try! JSONValue.parse(text) }

    static func malformed(_ body: () throws -> Void) -> Bool {
        do { try body() } catch { return (error as? ChatProtocolError)?.code == .malformed }
        return false
    }

    @Test func aWellFormedProfileKeepsEveryField() throws {
        let p = try PeerInput.profile(Self.json(#"""
            {"displayName":"alice","image":"data:image/png;base64,AA","preferences":{"reactions":{"allow":"no"},"timedMessages":{"allow":"yes","ttl":60},
             "commands":[{"type":"command","keyword":"help","label":"Help"}]},"peerType":"bot","later":{"n":9007199254740993}}
            """#))
        #expect(p.displayName == "alice" && p.fullName == "")
        #expect(p.preferences?.reactions?.allow == .no && p.preferences?.timedMessages?.ttl == 60)
        #expect(p.preferences?.commands == [.command(keyword: "help", label: "Help", params: nil)])
        #expect(p.peerType == .bot)
        #expect(p.otherFields["later"]?["n"] == .int(9_007_199_254_740_993))
    }

    /// Local-only fields a peer has no say in are dropped, not written twice.
    @Test func localFieldsFromAPeerAreDropped() throws {
        let p = try PeerInput.profile(Self.json(#"{"displayName":"x","fullName":"","profileId":5,"localAlias":"boss"}"#))
        #expect(p.otherFields.objectValue?.isEmpty == true)
        let written = try JSONValueEncoder().encode(LocalProfile(profileId: 1, profile: p))
        #expect(written.description == #"{"profileId":1,"displayName":"x","fullName":"","localAlias":""}"#)
    }

    @Test(arguments: [
        #"[]"#, #"{"fullName":"no name"}"#, #"{"displayName":5}"#,
        #"{"displayName":"x","preferences":{"reactions":{"allow":"maybe"}}}"#,
        #"{"displayName":"x","preferences":{"voice":"yes"}}"#,
        #"{"displayName":"x","preferences":{"commands":[{"type":"command"}]}}"#,
        #"{"displayName":"x","preferences":{"commands":[{"type":"surprise","label":"?"}]}}"#,
        #"{"displayName":"x","image":5}"#, #"{"displayName":"x","fullName":null}"#, #"{"displayName":"x","peerType":"robot"}"#,
    ])
    func malformedProfilesAreRefused(text: String) {
        #expect(Self.malformed { _ = try PeerInput.profile(Self.json(text)) }, "\(text)")
    }

    @Test func contentKeepsUnknownKindsWhole() throws {
        #expect(try PeerInput.content(Self.json(#"{"type":"text","text":"hi"}"#)) == .text("hi"))
        let odd = Self.json(#"{"type":"poll","text":"?","options":["a","b"]}"#)
        #expect(try PeerInput.content(odd) == .unknown(tag: "poll", json: odd))
        // A known kind with a field of the wrong type is kept whole too (SimpleX passes content on).
        let wrong = Self.json(#"{"type":"text","text":5}"#)
        #expect(try PeerInput.content(wrong) == .unknown(tag: "text", json: wrong))
    }

    @Test(arguments: [nil, "[]", #""text""#, #"{"text":"no type"}"#, #"{"type":7}"#])
    func contentWithoutATypeIsRefused(text: String?) {
        #expect(Self.malformed { _ = try PeerInput.content(text.map(Self.json)) })
    }

    @Test func aQuoteIsReadWithItsReference() throws {
        let q = try PeerInput.quote(Self.json(#"{"msgRef":{"msgId":"abc","sentAt":"2026-01-02T03:04:05.678Z","sent":true},"content":{"type":"text","text":"q"}}"#))
        #expect(q.msgId == "abc" && q.sent == true && q.sentAt == ChatTimestamp(parsing: "2026-01-02T03:04:05.678Z") && q.content == .text("q"))
    }

    @Test(arguments: [
        #"{"content":{"type":"text","text":"q"}}"#,
        #"{"msgRef":{"msgId":"a","sentAt":"yesterday"},"content":{"type":"text","text":"q"}}"#,
        #"{"msgRef":{"msgId":1},"content":{"type":"text","text":"q"}}"#,
        #"{"msgRef":{"sent":"yes"},"content":{"type":"text","text":"q"}}"#,
        #"{"msgRef":{"msgId":"a"},"content":"q"}"#,
    ])
    func malformedQuotesAreRefused(text: String) {
        #expect(Self.malformed { _ = try PeerInput.quote(Self.json(text)) }, "\(text)")
    }

    /// A handshake's profile: a malformed one is no profile (the connection goes on without it).
    @Test func aMalformedHandshakeProfileIsNone() {
        let good = ChatMessage(event: "x.info", params: Self.json(#"{"profile":{"displayName":"ben"}}"#)).encoded
        #expect(PeerInput.profile(fromInfo: good)?.displayName == "ben")
        let bad = ChatMessage(event: "x.info", params: Self.json(#"{"profile":{"displayName":"ben","preferences":{"calls":{"allow":1}}}}"#)).encoded
        #expect(PeerInput.profile(fromInfo: bad) == nil)
        #expect(PeerInput.profile(fromInfo: Array("not json".utf8)) == nil)
    }

    /// Stored rows an older engine wrote without these checks still read: the display name is kept.
    @Test func oldStoredProfilesStillRead() {
        #expect(Stored.profile(#"{"displayName":"old","preferences":{"reactions":{"allow":"sometimes"}}}"#)?.displayName == "old")
        #expect(Stored.profile(nil) == nil)
    }
}
