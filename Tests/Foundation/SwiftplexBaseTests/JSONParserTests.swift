import Testing
import SwiftplexBase

/// The one JSON reader: strict RFC 8259, integers apart from doubles, typed errors with offsets.
@Suite struct JSONParserTests {
    @Test func parsesAndPrintsPreservingKeyOrder() throws {
        let text = #"{"type":"text","text":"héllo \"q\" \n\u00e9 😀","n":3,"f":1.5,"ok":true,"none":null,"list":[1,{"b":2,"a":1}]}"#
        let v = try JSONValue.parse(text)
        #expect(v["type"]?.stringValue == "text")
        #expect(v["text"]?.stringValue == "héllo \"q\" \né 😀")
        #expect(v["n"] == .int(3) && v["f"] == .double(1.5))
        #expect(v.description == #"{"type":"text","text":"héllo \"q\" \né 😀","n":3,"f":1.5,"ok":true,"none":null,"list":[1,{"b":2,"a":1}]}"#)
        #expect(try JSONValue.parse(v.description) == v)
    }

    /// Integers that fit Int64 stay exact (they were doubles: 2^53 + 1 came back as 2^53).
    @Test func integersStayExactAndDoublesStayDoubles() throws {
        let v = try JSONValue.parse(#"[9007199254740993,-9223372036854775808,9223372036854775807,1.0,1e3,-0,-0.0,0.1,5e-324]"#)
        #expect(v.arrayValue == [.int(9_007_199_254_740_993), .int(.min), .int(.max), .double(1), .double(1000), .int(0), .double(-0.0), .double(0.1), .double(.leastNonzeroMagnitude)])
        #expect(v.description == "[9007199254740993,-9223372036854775808,9223372036854775807,1.0,1000.0,0,-0.0,0.1,5e-324]")
        // The writer's form reads back as the same kind.
        guard case .double = try JSONValue.parse("1.0") else { Issue.record("1.0 is no longer a double"); return }
        guard case .int = try JSONValue.parse("7") else { Issue.record("7 is no longer an integer"); return }
    }

    /// Beyond Int64 an integer literal is a double (as Python's float or any double-only reader
    /// would read it): rounded, never wrapped, never refused.
    @Test func integersBeyondInt64AreDoubles() throws {
        #expect(try JSONValue.parse("9223372036854775808") == .double(9_223_372_036_854_775_808))
        #expect(try JSONValue.parse("-9223372036854775809") == .double(-9_223_372_036_854_775_808))  // -2^63 - 1 rounds to -2^63
        #expect(try JSONValue.parse("12345678901234567890").int64Value == nil)
        #expect(try JSONValue.parse("100000000000000000000000") == .double(1e23))
    }

    @Test func escapesAndSurrogates() throws {
        #expect(try JSONValue.parse(#""\"\\\/\b\f\n\r\t\u0000\u001f\u00e9\u2028""#) == .string("\"\\/\u{08}\u{0C}\n\r\t\u{0}\u{1F}é\u{2028}"))
        #expect(try JSONValue.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSONValue.parse(#""\uD83D\uDE00x""#) == .string("😀x"))
        for bad in [#""\ud800""#, #""\ud800x""#, #""\udc00""#, #""\ud800\u0041""#, #""\u12g4""#, #""\x""#, "\"a\u{01}b\"", #""abc"#] {
            #expect(throws: JSONError.self, "\(bad)") { try JSONValue.parse(bad) }
        }
    }

    @Test(arguments: ["", " ", "{", #"{"a":}"#, "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, "tru", "nul", "1 2", "[1 2]", #"{1:2}"#, "'a'", "NaN", "Infinity", "[1]]", "/*c*/1"])
    func refusesMalformedJSON(text: String) {
        #expect { try JSONValue.parse(text) } throws: { ($0 as? JSONError)?.code == .syntax }
    }

    @Test(arguments: ["+1", "01", "-01", ".5", "1.", "1e", "-", "1e+", "--1", "0x10", "1.e5"])
    func refusesNumbersOutsideTheGrammar(text: String) {
        #expect { try JSONValue.parse(text) } throws: { ($0 as? JSONError)?.code == .syntax }
    }

    @Test(arguments: ["1e999", "-1e999", #"{"n":1e400}"#, "[1E+999]"])
    func refusesNumbersOutOfRange(text: String) {
        #expect { try JSONValue.parse(text) } throws: { ($0 as? JSONError)?.code == .nonFiniteNumber && ($0 as? JSONError)?.reason.contains("out of range") == true }
    }

    @Test(arguments: [#"{"a":1,"a":2}"#, #"{"x":{"type":"text","type":"link"}}"#, #"[{"k":null,"k":null}]"#])
    func refusesDuplicateKeys(text: String) {
        #expect { try JSONValue.parse(text) } throws: { ($0 as? JSONError)?.code == .duplicateKey && ($0 as? JSONError)?.reason.contains("duplicate key") == true }
    }

    @Test func errorsCarryTheByteOffset() {
        #expect { try JSONValue.parse(#"{"a":1,"a":2}"#) } throws: { ($0 as? JSONError)?.offset == 7 }
        #expect { try JSONValue.parse("[1,]") } throws: { ($0 as? JSONError)?.offset == 3 }
        #expect { try JSONValue.parse("[01]") } throws: { ($0 as? JSONError)?.offset == 1 }
        #expect { try JSONValue.parse(#"{"é":1e999}"#) } throws: { ($0 as? JSONError)?.offset == 6 }
        #expect(JSONError(.syntax, offset: 4, reason: "x").description == "invalid JSON at byte 4: x")
    }

    @Test func depthAndSizeLimits() throws {
        let deep = { (n: Int) in String(repeating: "[", count: n) + String(repeating: "]", count: n) }
        #expect(try JSONValue.parse(deep(128)) != .null)
        #expect { try JSONValue.parse(deep(129)) } throws: { ($0 as? JSONError)?.code == .tooDeep }
        #expect(try JSONValue.parse(deep(100), maxDepth: 100) != .null)
        #expect { try JSONValue.parse(deep(101), maxDepth: 100) } throws: { ($0 as? JSONError)?.code == .tooDeep }
        #expect { try JSONValue.parse(String(repeating: "[", count: 100_000)) } throws: { ($0 as? JSONError)?.code == .tooDeep }
        #expect { try JSONValue.parse("[1,2,3]", maxBytes: 6) } throws: { ($0 as? JSONError)?.code == .tooLong }
        #expect(try JSONValue.parse("[1,2,3]", maxBytes: 7) == [1, 2, 3])
    }

    @Test func equalityIsJSONs() throws {
        #expect(try JSONValue.parse(#"{"a":1,"b":[true]}"#) == JSONValue.parse(#"{"b":[true],"a":1.0}"#))
        #expect(JSONValue.int(1) == .double(1.0) && JSONValue.int(1).hashValue == JSONValue.double(1.0).hashValue)
        #expect(JSONValue.int(9_007_199_254_740_993) != .double(9_007_199_254_740_992))
        #expect(JSONValue.object([("a", 1), ("b", 2)]).hashValue == JSONValue.object([("b", 2), ("a", 1)]).hashValue)
        #expect(JSONValue.object([("a", 1)]) != .object([("a", 1), ("b", 2)]))
        #expect(JSONValue.string("1") != .int(1))
    }

    @Test func accessors() throws {
        var v = try JSONValue.parse(#"{"i":3,"d":3.0,"h":2.5,"s":"x","a":[1,2],"n":null}"#)
        #expect(v["i"]?.intValue == 3 && v["d"]?.int64Value == 3 && v["h"]?.intValue == nil && v["h"]?.doubleValue == 2.5)
        #expect(v["a"]?[1] == 2 && v["a"]?[2] == nil && v["s"]?.stringValue == "x" && v["n"]?.isNull == true && v["zz"] == nil)
        v.set("s", "y")
        v.set("new", [1.5])
        v.remove("i")
        #expect(v.description == #"{"d":3.0,"h":2.5,"s":"y","a":[1,2],"n":null,"new":[1.5]}"#)
    }
}
