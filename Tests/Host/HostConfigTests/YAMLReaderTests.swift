import Foundation
import Testing
@testable import HostConfig

@Suite struct YAMLReaderTests {
    @Test func everyNodeKeepsItsPosition() throws {
        let root = try tree("a: 1\nb:\n  - x\n  - \"y\"\nc: {d: e}\n")
        #expect(root.mark == ConfigMark(line: 1, column: 1))
        let entries = try #require(root.entries)
        #expect(entries.map(\.key) == ["a", "b", "c"])
        #expect(entries.map(\.keyMark) == [ConfigMark(line: 1, column: 1), ConfigMark(line: 2, column: 1), ConfigMark(line: 5, column: 1)])
        #expect(root["a"]?.mark == ConfigMark(line: 1, column: 4))
        #expect(root["a"]?.value == .scalar("1", .plain))
        let items = try #require(root["b"]?.sequence)
        #expect(root["b"]?.mark == ConfigMark(line: 3, column: 3))
        #expect(items.map(\.mark) == [ConfigMark(line: 3, column: 5), ConfigMark(line: 4, column: 5)])
        #expect(items.map(\.value) == [.scalar("x", .plain), .scalar("y", .quoted)])
        #expect(root["c"]?.mark == ConfigMark(line: 5, column: 4))
        #expect(root["c"]?["d"]?.mark == ConfigMark(line: 5, column: 8))
        #expect(root["c"]?.entries?.first?.keyMark == ConfigMark(line: 5, column: 5))
    }

    @Test func columnsCountCharactersNotBytes() throws {
        let root = try tree("name: \"héllo wörld\"\nnext: 1\nü: ö\n")
        #expect(root["ü"]?.mark == ConfigMark(line: 3, column: 4))
        #expect(root["ü"]?.scalar == "ö")
    }

    @Test func everyNonPlainScalarIsQuoted() throws {
        let root = try tree("a: 'x'\nb: |\n  text\nc: >\n  folded\nd: !!str 12\ne: 12\nf: yes\n")
        #expect(root["a"]?.value == .scalar("x", .quoted))
        #expect(root["b"]?.value == .scalar("text\n", .quoted))
        #expect(root["c"]?.value == .scalar("folded\n", .quoted))
        #expect(root["d"]?.value == .scalar("12", .quoted))
        #expect(root["d"]?.intValue == nil)
        #expect(root["e"]?.intValue == 12)
        #expect(root["f"]?.boolValue == nil) // YAML 1.2: yes is a string
    }

    @Test func coreSchemaResolution() throws {
        let root = try tree("""
            n1: ~
            n2: null
            n3:
            n4: "null"
            b1: true
            b2: False
            b3: TRUE
            b4: no
            i1: 0x1F
            i2: 0o17
            i3: -12
            i4: +3
            i5: 1_000
            f1: 12.5
            f2: -2e3
            f3: .5
            f4: .inf
            f5: 1.2.3
            big: 99999999999999999999
            """)
        for k in ["n1", "n2", "n3"] { #expect(root[k]?.isNull == true, "\(k)") }
        #expect(root["n4"]?.isNull == false)
        #expect(["b1", "b2", "b3", "b4"].map { root[$0]?.boolValue } == [true, false, true, nil])
        #expect(["i1", "i2", "i3", "i4", "i5"].map { root[$0]?.intValue } == [31, 15, -12, 3, nil])
        #expect(["f1", "f2", "f3", "f4", "f5"].map { root[$0]?.doubleValue } == [12.5, -2000, 0.5, nil, nil])
        #expect(root["big"]?.intValue == nil)
    }

    @Test func syntaxErrorsUseLibyamlsProblemMark() throws {
        #expect(try problems("a: b: c\n") == ["1:5: YAML syntax error: mapping values are not allowed in this context"])
        #expect(try problems("a:\n\tb: 1\n") == ["2:1: YAML syntax error: found character that cannot start any token (while scanning for the next token at 2:1)"])
        #expect(try problems("a: \"open\nb: 1\n") == ["3:1: YAML syntax error: found unexpected end of stream (while scanning a quoted scalar at 1:4)"])
        #expect(try problems("a: [1, 2\nb: 3\n") == ["2:2: YAML syntax error: did not find expected ',' or ']' (while parsing a flow sequence at 1:4)"])
        #expect(try problems("a:\n  - 1\n b: 2\n") == ["3:2: YAML syntax error: did not find expected key (while parsing a block mapping at 1:1)"])
    }

    @Test func duplicateKeysAreAllReported() throws {
        let p = try problems("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n")
        #expect(p == [
            "4:3: duplicate key \"c\" (first defined at 3:3)",
            "5:1: duplicate key \"a\" (first defined at 1:1)",
        ])
    }

    @Test func anchorsAliasesAndTagsAreRefused() throws {
        #expect(try problems("a: &x 1\nb: *x\n") == ["1:4: YAML anchors (&name) are not supported; write the value out"])
        #expect(try problems("a: 1\nb: *x\n") == ["2:4: YAML aliases (*name) are not supported; write the value out"])
        #expect(try problems("a: !!int 5\n") == ["1:4: YAML tags are not supported (found !!int); only !!str on a scalar is"])
        #expect(try problems("a: !custom\n  b: 1\n") == ["1:4: YAML tags are not supported (found !custom); only !!str on a scalar is"])
    }

    @Test func complexKeysAreRefused() throws {
        #expect(try problems("? [a, b]\n: 1\n") == ["1:3: a mapping key must be a scalar, not a list"])
    }

    @Test func emptyFilesAndExtraDocuments() throws {
        #expect(try problems("") == ["1:1: the file is empty: it holds no YAML document"])
        #expect(try problems("# only a comment\n\n") == ["1:1: the file is empty: it holds no YAML document"])
        #expect(try problems("---\n") == ["2:1: the file holds no settings; it needs at least bot.display_name"])
        #expect(try problems("a: 1\n---\nb: 2\n") == ["2:1: only one YAML document is allowed; remove the second `---` and what follows"])
        #expect(try problems("- a\n- b\n") == ["1:1: expected a mapping of settings at the top level, got a list"])
    }

    @Test func invalidUTF8IsReportedWhereItIs() throws {
        let dir = try TempDirectory()
        let file = (dir.path as NSString).appendingPathComponent("bad.yaml")
        try Data([0x61, 0x3A, 0x20, 0x31, 0x0A, 0x62, 0x3A, 0x20, 0xC3, 0xA9, 0xFF, 0x0A]).write(to: URL(fileURLWithPath: file))
        #expect(throws: ConfigErrors.self) { try HostConfiguration.load(path: file, environment: [:]) }
        do {
            _ = try HostConfiguration.load(path: file, environment: [:])
        } catch {
            #expect(error.description == "\(file):2:5: the file is not valid UTF-8 text: invalid leading UTF-8 octet")
        }
    }

    @Test func deepNestingIsRefused() throws {
        let deep = String(repeating: "[", count: 300) + String(repeating: "]", count: 300) + "\n"
        #expect(try problems(deep) == ["1:201: nesting deeper than 200 levels is not supported"])
    }
}
