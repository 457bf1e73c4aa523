import Foundation
import TestSupport
import Testing
@testable import ChatCore

/// The records' cached column names agree with the snake-case conversion GRDB and Foundation make
/// (GRDB's is Foundation's), for every column of the chat database and for awkward names.
@Suite struct SnakeCaseColumnsTests {
    private struct Named: CodingKey {
        let stringValue: String
        init(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }

    private struct Probe: Encodable {
        let names: [String]
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: Named.self)
            for name in names { try c.encode(0, forKey: Named(stringValue: name)) }
        }
    }

    /// Foundation's conversions of `names`, read back from JSON written with a key strategy.
    func foundationSnakeCase(_ names: [String]) throws -> [String: String] {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        var out: [String: String] = [:]
        for name in names {
            let object = try JSONSerialization.jsonObject(with: encoder.encode(Probe(names: [name]))) as! [String: Int]
            out[name] = object.keys.first
        }
        return out
    }

    func foundationCamelCase(_ columns: [String]) throws -> [String: String] {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        var out: [String: String] = [:]
        for column in columns {
            let json = try JSONSerialization.data(withJSONObject: [column: 0])
            // Through a keyed container: dictionaries keep their keys as they are.
            struct Keys: Decodable {
                let key: String
                init(from decoder: any Decoder) throws {
                    key = try decoder.container(keyedBy: Named.self).allKeys.first?.stringValue ?? ""
                }
            }
            out[column] = try decoder.decode(Keys.self, from: json).key
        }
        return out
    }

    @Test func everyColumnOfTheChatDatabaseConvertsAsGRDBWould() throws {
        try withTemporaryDirectory(prefix: "swiftplex-columns") { dir in
            let store = try ChatStore(path: dir.appendingPathComponent("test_chat.db"))
            let columns = try store.db.readNow { db in
                try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'grdb_%'")
                    .flatMap { table in try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info(?)", arguments: [table]) }
            }
            #expect(columns.count > 50, "\(columns.count) columns")
            let camel = try foundationCamelCase(Array(Set(columns)))
            for column in Set(columns) {
                let key = try #require(camel[column], "\(column) has a camel-case key")
                #expect(SnakeCaseColumns.column(forKey: key) == column, "\(key) → \(SnakeCaseColumns.column(forKey: key)) ≠ \(column)")
            }
        }
    }

    /// (A name starting with an upper-case run, which no record property does, is left out:
    /// Foundation turns `URLValue` into `u_rl_value`.)
    @Test func awkwardPropertyNamesConvertAsFoundationDoes() throws {
        let names = ["id", "contactId", "agentConnId", "x3dhKey1", "peerURLHost", "aB", "valueA", "key2Value", "memberID", "sendRcptsContacts"]
        let expected = try foundationSnakeCase(names)
        for name in names {
            let column = SnakeCaseColumns.column(forKey: name)
            #expect(column == expected[name], "\(name): \(column) ≠ \(expected[name] ?? "-")")
        }
    }
}
