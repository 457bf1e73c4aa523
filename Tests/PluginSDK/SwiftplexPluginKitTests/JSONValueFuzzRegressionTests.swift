import Testing
@testable import SwiftplexPluginKit

/// Inputs the fuzzer found (`make fuzz`, target json-pluginkit; docs/security.md "Fuzzing").
@Suite struct JSONValueFuzzRegressionTests {
    /// An integer above Int64.max came back from JSONSerialization unsigned and was read with
    /// `int64Value`, wrapping 12345678901234567890 to -6101065172474983726: a plugin read a
    /// different (negative) number. It is now a double, as any JSON reader outside Int64 range does.
    @Test func integersAboveInt64MaxAreNotWrapped() throws {
        let v = try JSONValue.parse("12345678901234567890")
        #expect(v == .double(Double(UInt64(12_345_678_901_234_567_890))))
        #expect(v.int64Value == nil)
        #expect(try JSONValue.parse(v.text) == v)
        #expect(try JSONValue.parse("[18446744073709551615]") == .array([.double(Double(UInt64.max))]))
        // Int64.max still reads as an integer.
        #expect(try JSONValue.parse("9223372036854775807") == .int(.max))
    }
}
