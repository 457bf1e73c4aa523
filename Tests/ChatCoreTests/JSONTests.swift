import Testing
@testable import ChatCore

@Suite struct JSONValueTests {
    @Test func parsesAndPrintsPreservingKeyOrder() throws {
        let text = #"{"type":"text","text":"héllo \"q\" \n\u00e9 😀","n":3,"f":1.5,"ok":true,"none":null,"list":[1,{"b":2,"a":1}]}"#
        let v = try JSONValue.parse(text)
        #expect(v["type"]?.stringValue == "text")
        #expect(v["text"]?.stringValue == "héllo \"q\" \né 😀")
        #expect(v["n"]?.intValue == 3)
        #expect(try JSONValue.parse(v.description) == v)
        #expect(v.description.hasPrefix(#"{"type":"text","text":"#))
        #expect(try JSONValue.parse(#"{"x":"\ud83d\ude00"}"#)["x"]?.stringValue == "😀")
    }

    @Test(arguments: ["", "{", #"{"a":}"#, "[1,]", #"{"a" 1}"#, "tru", #""unterminated"#, "1 2", #"{"a":"\x"}"#, String(repeating: "[", count: 200)])
    func refusesMalformedJSON(text: String) {
        #expect(throws: JSONError.self) { try JSONValue.parse(text) }
    }

    @Test func chatMessagesRoundTrip() throws {
        let m = ChatMessage(event: "x.msg.new", params: .object([("content", .object([("type", .string("text")), ("text", .string("hi"))]))]))
        let decoded = try ChatMessage(decoding: m.encoded)
        #expect(decoded == m)
        #expect(String(decoding: m.encoded, as: UTF8.self).hasPrefix(#"{"v":"1","msgId":""#))
        #expect(throws: ChatProtocolError(.malformed, "")) { try ChatMessage(decoding: Array("not json".utf8)) }
        #expect(throws: ChatProtocolError(.malformed, "")) { try ChatMessage(decoding: Array(#"{"event":"y.bad","params":{}}"#.utf8)) }
    }
}
