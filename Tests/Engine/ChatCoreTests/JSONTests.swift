import Testing
@testable import ChatCore
import SwiftplexBase

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

    /// `1e999` is no double: a typed error, not infinity (which was then printed as bare `inf`).
    @Test(arguments: ["1e999", "-1e999", #"{"n":1e400}"#, "[1E+999]"])
    func refusesNumbersOutOfRange(text: String) {
        #expect { try JSONValue.parse(text) } throws: { ($0 as? JSONError)?.code == .nonFiniteNumber }
    }

    /// Readers disagree on which of two equal keys wins (lookup here took the first, Python the
    /// last), so an object naming a key twice is refused, at any depth.
    @Test(arguments: [#"{"a":1,"a":2}"#, #"{"x":{"type":"text","type":"link"}}"#, #"[{"k":null,"k":null}]"#])
    func refusesDuplicateKeys(text: String) {
        #expect { try JSONValue.parse(text) } throws: { ($0 as? JSONError)?.code == .duplicateKey }
    }

    /// Only JSON's number grammar: no `+`, leading zeros, bare `.` or exponent without digits.
    @Test(arguments: ["+1", "01", ".5", "1.", "1e", "-", "1e+", "--1", "0x10"])
    func refusesNumbersOutsideTheGrammar(text: String) {
        #expect { try JSONValue.parse(text) } throws: { ($0 as? JSONError)?.code == .syntax }
    }

    @Test func theWriterNeverPrintsInfOrNaN() throws {
        for n in [Double.infinity, -.infinity, .nan] {
            let text = JSONValue.array([.double(n)]).description
            #expect(text == "[null]")
            #expect(try JSONValue.parse(text) == .array([.null]))
        }
        #expect(JSONValue.double(1.5).description == "1.5" && JSONValue.double(-0.001).description == "-0.001")
        #expect(try JSONValue.parse("1e308") == .double(1e308))
        #expect(try JSONValue.parse(#"{"a":1,"b":{"a":2}}"#)["b"]?["a"]?.intValue == 2)
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
