import Testing
import SwiftplexBase

/// The Codable bridge: any Encodable to a JSONValue in CodingKeys order, and back, strictly.
@Suite struct JSONCodableTests {
    struct Meta: Codable, Equatable {
        var itemId: Int64
        var itemTs: String
        var edited: Bool
        var ratio: Double
        var note: String?
    }

    enum Direction: Codable, Equatable {
        case directSnd, directRcv
        enum CodingKeys: String, CodingKey { case type }
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            switch try c.decode(String.self, forKey: .type) {
            case "directSnd": self = .directSnd
            case "directRcv": self = .directRcv
            case let other: throw DecodingError.dataCorruptedError(forKey: .type, in: c, debugDescription: "unknown \(other)")
            }
        }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(self == .directSnd ? "directSnd" : "directRcv", forKey: .type)
        }
    }

    struct Item: Codable, Equatable {
        var chatDir: Direction
        var meta: Meta
        var tags: [String]
        var counts: [Int]
        var extra: JSONValue
        var big: UInt64
        var small: Int8
        var nested: [[Int64]]
        var maybe: [String?]
    }

    let item = Item(chatDir: .directRcv, meta: Meta(itemId: 9_007_199_254_740_993, itemTs: "2026-11-23T07:00:00Z", edited: false, ratio: 1.0, note: nil),
                    tags: ["a", "b"], counts: [1, 2], extra: ["k": [1.5, "x"]], big: 42, small: -3, nested: [[1], []], maybe: ["x", nil])

    @Test func encodesInCodingKeysOrderWithIntegersExactAndNilKeysOmitted() throws {
        let v = try JSONValue(encoding: item)
        #expect(v.text == #"{"chatDir":{"type":"directRcv"},"meta":{"itemId":9007199254740993,"itemTs":"2026-11-23T07:00:00Z","edited":false,"ratio":1.0},"tags":["a","b"],"counts":[1,2],"extra":{"k":[1.5,"x"]},"big":42,"small":-3,"nested":[[1],[]],"maybe":["x",null]}"#)
        #expect(try v.decode(Item.self) == item)
        #expect(try JSONValue.text(encoding: item) == v.text)
    }

    @Test func encodeNilWritesNullAndRepeatedKeysKeepTheirPlace() throws {
        struct S: Encodable {
            enum K: String, CodingKey { case a, b }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: K.self)
                try c.encode(1, forKey: .a)
                try c.encodeNil(forKey: .b)
                try c.encodeIfPresent(nil as Int?, forKey: .b)
                try c.encode(2, forKey: .a)
            }
        }
        #expect(try JSONValue(encoding: S()).text == #"{"a":2,"b":null}"#)
    }

    /// Nested containers and super encoders are filled after they were placed.
    @Test func nestedContainersAndSuperEncoders() throws {
        class Base: Encodable {
            var id = 1
            enum K: String, CodingKey { case id }
            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: K.self)
                try c.encode(id, forKey: .id)
            }
        }
        final class Derived: Base, @unchecked Sendable {
            enum DK: String, CodingKey { case name, inner, list, parent }
            override func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: DK.self)
                var inner = c.nestedContainer(keyedBy: DK.self, forKey: .inner)
                var list = c.nestedUnkeyedContainer(forKey: .list)
                try c.encode("d", forKey: .name)
                try inner.encode("in", forKey: .name)
                try list.encode(true)
                var deeper = list.nestedContainer(keyedBy: DK.self)
                try deeper.encode("deep", forKey: .name)
                try super.encode(to: c.superEncoder())
                try super.encode(to: c.superEncoder(forKey: .parent))
                try super.encode(to: encoder)
            }
        }
        #expect(try JSONValue(encoding: Derived()).text == #"{"inner":{"name":"in"},"list":[true,{"name":"deep"}],"name":"d","super":{"id":1},"parent":{"id":1},"id":1}"#)
    }

    @Test func refusesWhatJSONCannotCarry() {
        #expect(throws: EncodingError.self) { try JSONValue(encoding: [Double.infinity]) }
        #expect(throws: EncodingError.self) { try JSONValue(encoding: ["n": UInt64.max]) }
        #expect(throws: Never.self) { try JSONValue(encoding: UInt64(Int64.max)) }
    }

    @Test func typeMismatchesAreTypedErrorsWithThePath() throws {
        let bad = try JSONValue.parse(#"{"chatDir":{"type":"directRcv"},"meta":{"itemId":"7","itemTs":"t","edited":false,"ratio":1}}"#)
        #expect {
            try bad.decode(Item.self)
        } throws: { error in
            guard case let .typeMismatch(_, ctx) = error as? DecodingError else { return false }
            return ctx.codingPath.map(\.stringValue) == ["meta", "itemId"]
        }
        let missing = try JSONValue.parse(#"{"itemId":1,"itemTs":"t","ratio":1}"#)
        #expect { try missing.decode(Meta.self) } throws: { error in
            guard case let .keyNotFound(key, _) = error as? DecodingError else { return false }
            return key.stringValue == "edited"
        }
        let null = try JSONValue.parse(#"{"itemId":1,"itemTs":null,"edited":true,"ratio":1}"#)
        #expect { try null.decode(Meta.self) } throws: { error in
            guard case let .valueNotFound(_, ctx) = error as? DecodingError else { return false }
            return ctx.codingPath.map(\.stringValue) == ["itemTs"]
        }
        let element = try JSONValue.parse(#"[1,2,"three"]"#)
        #expect { try element.decode([Int].self) } throws: { error in
            guard case let .typeMismatch(_, ctx) = error as? DecodingError else { return false }
            return ctx.codingPath.last?.intValue == 2
        }
    }

    /// Numbers convert only without loss.
    @Test func numbersDecodeWithoutLoss() throws {
        #expect(try JSONValue.double(3.0).decode(Int.self) == 3)
        #expect(try JSONValue.int(3).decode(Double.self) == 3.0)
        #expect(try JSONValue.int(255).decode(UInt8.self) == 255)
        #expect(throws: DecodingError.self) { try JSONValue.double(3.5).decode(Int.self) }
        #expect(throws: DecodingError.self) { try JSONValue.int(256).decode(UInt8.self) }
        #expect(throws: DecodingError.self) { try JSONValue.int(-1).decode(UInt64.self) }
        #expect(throws: DecodingError.self) { try JSONValue.bool(true).decode(Int.self) }
        #expect(throws: DecodingError.self) { try JSONValue.int(1).decode(Bool.self) }
        #expect(try JSONValue.null.decode(Int?.self) == nil)
        #expect(try JSONValue.parse(#"{"note":null,"itemId":1,"itemTs":"t","edited":true,"ratio":0.5}"#).decode(Meta.self).note == nil)
    }
}
