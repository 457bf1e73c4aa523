import Foundation
import Testing
@testable import HostConfig

/// The module's own JSON reader and writer: strict on input, never invalid on output.
@Suite struct JSONTextTests {
    @Test(arguments: ["1e999", "-1e999", #"{"minimum":1e400}"#])
    func numbersOutOfRangeAreRefused(text: String) {
        #expect { try JSONText.parse(text) } throws: { ($0 as? JSONText.SyntaxError)?.reason.contains("out of range") == true }
    }

    @Test(arguments: [#"{"a":1,"a":2}"#, #"{"properties":{"x":{},"x":{}}}"#])
    func duplicateKeysAreRefused(text: String) {
        #expect { try JSONText.parse(text) } throws: { ($0 as? JSONText.SyntaxError)?.reason.contains("duplicate key") == true }
    }

    /// Writing a non-finite number gave `inf` / `nan`, which is not JSON.
    @Test func theWriterNeverPrintsInfOrNaN() throws {
        for n in [Double.infinity, -.infinity, .nan] {
            #expect(JSONText.number(n) == "null")
            let text = JSON.object([("x", .number(n))]).text
            #expect(text == #"{"x":null}"#)
            #expect(try JSONText.parse(text) == .object([("x", .null)]))
        }
        #expect(JSONText.number(2.5) == "2.5" && JSONText.number(3) == "3")
    }
}
