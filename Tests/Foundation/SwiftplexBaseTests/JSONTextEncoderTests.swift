import Testing
import SwiftplexBase

/// The direct writer: any Encodable straight to JSON text, byte for byte what the tree encoder and
/// the writer give — also for the ways of using the coding API it cannot stream (it falls back).
@Suite struct JSONTextEncoderTests {
    /// The text both ways; the test fails where they differ.
    func expectSame<T: Encodable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let direct = String(decoding: try JSONTextEncoder().encode(value), as: UTF8.self)
        let tree = try JSONValueEncoder().encode(value).description
        #expect(direct == tree, sourceLocation: sourceLocation)
    }

    struct Meta: Codable {
        var itemId: Int64
        var itemTs: String
        var edited: Bool
        var ratio: Double
        var small: Float
        var tiny: Int8
        var wide: UInt32
        var note: String?
        var explicitNil: String?
        var tags: [String]
        var grid: [[Int]]
        var extra: JSONValue
        var nested: [Inner]
        var optionalInner: Inner?

        enum CodingKeys: String, CodingKey { case itemId, itemTs, edited, ratio, small, tiny, wide, note, explicitNil, tags, grid, extra, nested, optionalInner }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(itemId, forKey: .itemId)
            try c.encode(itemTs, forKey: .itemTs)
            try c.encode(edited, forKey: .edited)
            try c.encode(ratio, forKey: .ratio)
            try c.encode(small, forKey: .small)
            try c.encode(tiny, forKey: .tiny)
            try c.encode(wide, forKey: .wide)
            try c.encodeIfPresent(note, forKey: .note)
            try c.encode(explicitNil, forKey: .explicitNil)  // written as null
            try c.encode(tags, forKey: .tags)
            try c.encode(grid, forKey: .grid)
            try c.encode(extra, forKey: .extra)
            try c.encode(nested, forKey: .nested)
            try c.encodeIfPresent(optionalInner, forKey: .optionalInner)
        }
    }

    struct Inner: Codable { var a: Int; var b: String? }

    /// A tagged union written as SimpleX's are: the tag, then the payload's fields in the same object.
    enum Tagged: Encodable {
        case item(Inner)
        case empty
        enum Keys: String, CodingKey { case type }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Keys.self)
            switch self {
            case let .item(inner):
                try c.encode("item", forKey: .type)
                try inner.encode(to: encoder)
            case .empty:
                try c.encode("empty", forKey: .type)
            }
        }
    }

    @Test func structsArraysOptionalsAndOpenJSON() throws {
        let meta = Meta(itemId: -9_007_199_254_740_993, itemTs: "2026-11-23T10:00:00.123Z", edited: true, ratio: 1.5, small: 0.1, tiny: -3,
                        wide: 4_000_000_000, note: nil, explicitNil: nil, tags: ["a", "quote \" back\\slash \n line \u{2028}", ""],
                        grid: [[], [1, 2], [3]], extra: .object([("n", .int(1)), ("d", .double(2.0)), ("s", .array([.null, .bool(false)]))]),
                        nested: [Inner(a: 1, b: nil), Inner(a: 2, b: "é ✓ 👍")], optionalInner: Inner(a: 3, b: "x"))
        try expectSame(meta)
        try expectSame([Tagged.item(Inner(a: 5, b: "p")), .empty])
        try expectSame(["k": 1])  // a dictionary (one key: order is fixed)
        try expectSame([Inner]())
        try expectSame(Optional<Inner>.none)
    }

    @Test func topLevelScalars() throws {
        try expectSame("text")
        try expectSame(42)
        try expectSame(true)
        try expectSame(2.5)
        try expectSame(JSONValue.object([("a", .string("b"))]))
        try expectSame([1, 2, 3])
    }

    /// A type that encodes nothing is `{}`, as the tree encoder gives.
    struct Nothing: Encodable { func encode(to encoder: any Encoder) throws {} }

    /// Nested containers filled in order stream; a key encoded twice and a nested container
    /// filled after its parent moved on fall back to the tree encoder — the text is the same.
    struct NestedInOrder: Encodable {
        enum K: String, CodingKey { case a, inner, list, after }
        enum I: String, CodingKey { case x, y }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            try c.encode(1, forKey: .a)
            var inner = c.nestedContainer(keyedBy: I.self, forKey: .inner)
            try inner.encode("x", forKey: .x)
            var deeper = inner.nestedUnkeyedContainer(forKey: .y)
            try deeper.encode(1)
            var obj = deeper.nestedContainer(keyedBy: I.self)
            try obj.encode(true, forKey: .x)
            var list = c.nestedUnkeyedContainer(forKey: .list)
            try list.encode(Nothing())
            try list.encodeNil()
            try c.encode("end", forKey: .after)
        }
    }

    struct RepeatedKey: Encodable {
        enum K: String, CodingKey { case a, b }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            try c.encode(1, forKey: .a)
            try c.encode(2, forKey: .b)
            try c.encode(3, forKey: .a)  // the tree keeps a's place and takes 3
        }
    }

    struct LateNested: Encodable {
        enum K: String, CodingKey { case a, b, c }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            var a = c.nestedContainer(keyedBy: K.self, forKey: .a)
            try c.encode(2, forKey: .b)
            try a.encode(1, forKey: .c)  // after the parent moved on
        }
    }

    struct WithSuper: Encodable {
        enum K: String, CodingKey { case a }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            try c.encode(1, forKey: .a)
            try Inner(a: 2, b: nil).encode(to: c.superEncoder())
        }
    }

    @Test func nestedContainersRepeatedKeysAndSuperEncoders() throws {
        try expectSame(Nothing())
        try expectSame([Nothing()])
        try expectSame(NestedInOrder())
        try expectSame(RepeatedKey())
        try expectSame(LateNested())
        try expectSame(WithSuper())
        try expectSame([RepeatedKey(), RepeatedKey()])
        #expect(String(decoding: try JSONTextEncoder().encode(RepeatedKey()), as: UTF8.self) == #"{"a":3,"b":2}"#)
    }

    struct Bad: Encodable {
        var value: Double
        enum K: String, CodingKey { case v }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            try c.encode(value, forKey: .v)
        }
    }

    @Test func valuesTheTreeRefusesAreRefused() throws {
        #expect(throws: EncodingError.self) { try JSONTextEncoder().encode(Bad(value: .infinity)) }
        #expect(throws: EncodingError.self) { try JSONTextEncoder().encode([UInt64.max]) }
        try expectSame([UInt64(Int64.max)])
    }

    @Test func appendsToWhatIsThere() throws {
        var out = Array(#"{"result":"#.utf8)
        try JSONTextEncoder().encode(Inner(a: 1, b: "x"), into: &out)
        out.append(UInt8(ascii: "}"))
        #expect(String(decoding: out, as: UTF8.self) == #"{"result":{"a":1,"b":"x"}}"#)
        // A fallback keeps what was there before the value.
        var again = Array("[".utf8)
        try JSONTextEncoder().encode(RepeatedKey(), into: &again)
        #expect(String(decoding: again, as: UTF8.self) == #"[{"a":3,"b":2}"#)
    }
}
