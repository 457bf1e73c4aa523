import Testing
@testable import SwiftplexPluginKit

@Suite struct CommandParsingTests {
    @Test func splitsKeywordAndArguments() throws {
        let c = try #require(CommandInvocation.parse("/roll 20  d6"))
        #expect(c.keyword == "roll" && c.arguments == ["20", "d6"] && c.argumentText == "20  d6")
        let bare = try #require(CommandInvocation.parse("  /help  "))
        #expect(bare.keyword == "help" && bare.arguments.isEmpty && bare.argumentText.isEmpty)
    }

    @Test func quotedArgumentsKeepSpacesAndEscapes() throws {
        let c = try #require(CommandInvocation.parse(#"/say "hello world" 'a b' c "" "say \"hi\"""#))
        #expect(c.arguments == ["hello world", "a b", "c", "", #"say "hi""#])
        // An unterminated quote takes the rest of the line.
        #expect(CommandInvocation.parse(#"/note "buy milk"#)?.arguments == ["buy milk"])
    }

    @Test func plainTextIsNotACommand() {
        #expect(CommandInvocation.parse("hello /help") == nil)
        #expect(CommandInvocation.parse("/") == nil)
        #expect(CommandInvocation.parse("/ help") == nil)
        #expect(CommandInvocation.parse("") == nil)
    }
}

@Suite struct SchemaAndJSONTests {
    @Test func theDSLWritesTheSchemaSubset() throws {
        let schema = JSONSchema.object([
            "welcome": .string("Hi text"),
            "max": .integer(minimum: 0, maximum: 10, default: 0),
            "allow": .array(of: .string(), default: ["*"]),
            "mode": .string(enum: ["a", "b"]),
        ], required: ["welcome"])
        #expect(schema.json.text == #"{"additionalProperties":false,"properties":{"allow":{"default":["*"],"items":{"type":"string"},"type":"array"},"max":{"default":0,"maximum":10,"minimum":0,"type":"integer"},"mode":{"enum":["a","b"],"type":"string"},"welcome":{"description":"Hi text","type":"string"}},"required":["welcome"],"type":"object"}"#)
        #expect(try JSONSchema(literal: #"{"type":"object"}"#).json == ["type": "object"])
        #expect(throws: PluginError(.config, "")) { try JSONSchema(literal: "[1]") }
    }

    @Test func jsonRoundTripsAndEscapes() throws {
        let v = try JSONValue.parse(#"{"a":[1,2.5,true,null,"x\n\"y\"\u0001é"],"b":{}}"#)
        #expect(v["a"]?[0]?.int64Value == 1 && v["a"]?[1] == .double(2.5) && v["a"]?[2]?.boolValue == true)
        #expect(v.text == #"{"a":[1,2.5,true,null,"x\n\"y\"\u0001é"],"b":{}}"#)
        #expect(throws: PluginError(.event, "")) { try JSONValue.parse("{nope", as: .event) }
        // Booleans and the integers 0 and 1 stay apart; big integers stay exact.
        let kinds = try JSONValue.parse(#"[true,false,1,0,-7,9007199254740993,1e3,0.5,"1",null]"#)
        #expect(kinds == [.bool(true), .bool(false), .int(1), .int(0), .int(-7), .int(9_007_199_254_740_993), .double(1000), .double(0.5), "1", .null])
    }
}
