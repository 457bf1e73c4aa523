import Testing
import SwiftplexBase

/// The one JSON writer: compact, RFC 8259, never anything a reader refuses.
@Suite struct JSONWriterTests {
    @Test func escapesWhatJSONRequiresAndLineSeparators() throws {
        let s = "q\" b\\ n\n r\r t\t b\u{08} f\u{0C} nul\u{0} us\u{1F} del\u{7F} ls\u{2028} ps\u{2029} é 😀 /"
        let text = JSONWriter.quote(s)
        #expect(text == #""q\" b\\ n\n r\r t\t b\b f\f nul\u0000 us\u001f del\u007f ls\u2028 ps\u2029 é 😀 /""#)
        #expect(try JSONValue.parse(text) == .string(s))
    }

    @Test func theWriterNeverPrintsInfOrNaN() throws {
        for n in [Double.infinity, -.infinity, .nan] {
            let text = JSONValue.array([.double(n)]).description
            #expect(text == "[null]")
            #expect(try JSONValue.parse(text) == .array([.null]))
            #expect(JSONWriter.number(n) == "null")
        }
        #expect(JSONValue.double(1.5).description == "1.5" && JSONValue.double(-0.001).description == "-0.001")
        #expect(try JSONValue.parse("1e308") == .double(1e308))
    }

    /// Each double prints in a form that reads back as the same double, and as a double.
    @Test(arguments: [0.0, -0.0, 1.0, 2.5, 0.1, 1e-7, 1e16, 1.7976931348623157e308, .leastNonzeroMagnitude, 123456789.125, -3.0])
    func doublesRoundTrip(d: Double) throws {
        let text = JSONValue.double(d).description
        guard case let .double(back) = try JSONValue.parse(text) else { Issue.record("\(text) is no double"); return }
        #expect(back == d && back.sign == d.sign)
    }

    @Test(arguments: [Int64.min, -1, 0, 7, 10, 9_007_199_254_740_993, .max])
    func integersRoundTrip(i: Int64) throws {
        #expect(JSONValue.int(i).description == String(i))
        #expect(try JSONValue.parse(String(i)) == .int(i))
    }

    @Test func literalsBuildValuesInOrder() {
        let v: JSONValue = ["z": 1, "a": [true, .null, "s", 2.5], "m": [:]]
        #expect(v.text == #"{"z":1,"a":[true,null,"s",2.5],"m":{}}"#)
        #expect(JSONWriter.bytes(v) == Array(v.text.utf8))
    }
}
