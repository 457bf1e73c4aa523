import Foundation
import Testing
@testable import SwiftplexPluginKit

/// The SDK's JSON reader is strict and its writer never prints what is not JSON.
@Suite struct JSONValueTests {
    @Test(arguments: ["1e999", "-1e999", #"{"n":1e400}"#, "[2E+999]"])
    func numbersOutOfRangeAreRefused(text: String) {
        #expect { try JSONValue.parse(text, as: .event) } throws: { ($0 as? PluginError)?.message.contains("out of range") == true }
    }

    /// JSONSerialization kept one of two equal keys silently; now the text is refused.
    @Test(arguments: [#"{"type":"newChatItems","type":"contactConnected"}"#, #"{"a":{"b":1,"b":2}}"#, #"[{"k":1,"k":1}]"#])
    func duplicateKeysAreRefused(text: String) {
        #expect { try JSONValue.parse(text, as: .event) } throws: { ($0 as? PluginError)?.message.contains("duplicate key") == true }
    }

    @Test(arguments: ["", "{", "[1,]", "+1", "01", ".5", "1.", "tru", #""\x""#, #""\ud800""#, "1 2", String(repeating: "[", count: 200)])
    func malformedTextIsRefused(text: String) {
        #expect(throws: PluginError.self) { try JSONValue.parse(text, as: .event) }
    }

    @Test func valuesReadAsBefore() throws {
        let v = try JSONValue.parse(#" {"i": -42, "big": 12345678901234567890, "d": 1.5, "e": 1e3, "s": "é\n\u00e9 \ud83d\ude00", "b": true, "n": null, "a": [1, "x"]} "#)
        #expect(v["i"] == .int(-42))
        #expect(v["big"] == .double(Double("12345678901234567890")!))
        #expect(v["d"] == .double(1.5) && v["e"] == .double(1000))
        #expect(v["s"] == .string("é\né 😀"))
        #expect(v["b"] == .bool(true) && v["n"] == .null && v["a"] == .array([.int(1), .string("x")]))
        #expect(try JSONValue.parse(v.text) == v)
    }

    @Test func theWriterNeverPrintsInfOrNaN() throws {
        for d in [Double.infinity, -.infinity, .nan] {
            let text = JSONValue.array([.double(d)]).text
            #expect(text == "[null]")
            #expect(try JSONValue.parse(text) == .array([.null]))
        }
    }
}
