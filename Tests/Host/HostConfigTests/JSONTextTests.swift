import Foundation
import SwiftplexBase
import Testing
@testable import HostConfig

/// The config's JSON (SwiftplexBase's reader and writer since HostConfig's own `JSONText` was
/// retired): strict on input through the schema reader, never invalid on output.
@Suite struct JSONTextTests {
    @Test(arguments: ["1e999", "-1e999", #"{"minimum":1e400}"#])
    func numbersOutOfRangeAreRefused(text: String) {
        #expect { try PluginConfigSchema(json: text) } throws: { ($0 as? PluginSchemaError)?.code == .syntax && ($0 as? PluginSchemaError)?.message.contains("out of range") == true }
    }

    @Test(arguments: [#"{"a":1,"a":2}"#, #"{"properties":{"x":{},"x":{}}}"#])
    func duplicateKeysAreRefused(text: String) {
        #expect { try PluginConfigSchema(json: text) } throws: { ($0 as? PluginSchemaError)?.code == .syntax && ($0 as? PluginSchemaError)?.message.contains("duplicate key") == true }
    }

    /// Writing a non-finite number gave `inf` / `nan`, which is not JSON.
    @Test func theWriterNeverPrintsInfOrNaN() throws {
        for n in [Double.infinity, -.infinity, .nan] {
            #expect(JSONWriter.number(n) == "null")
            let text = JSONValue.object([("x", .double(n))]).text
            #expect(text == #"{"x":null}"#)
            #expect(try JSONValue.parse(text) == .object([("x", .null)]))
        }
        #expect(SchemaNode.shown(2.5) == "2.5" && SchemaNode.shown(3) == "3")
    }
}
