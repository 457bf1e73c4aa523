import Foundation

/// JSON as JSONSerialization reads it, made comparable: booleans, integers and doubles apart,
/// objects as unordered maps. Independent of the model under test.
indirect enum JSONTree: Equatable, CustomStringConvertible {
    case null, bool(Bool), int(Int64), double(Double), string(String), array([JSONTree]), object([String: JSONTree])

    init(text: String) throws { try self.init(data: Data(text.utf8)) }

    init(data: Data) throws { self.init(any: try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) }

    init(any: Any) {
        switch any {
        case is NSNull: self = .null
        case let n as NSNumber:
            switch String(cString: n.objCType) {
            case "c", "B": self = .bool(n.boolValue)
            case "d", "f": self = .double(n.doubleValue)
            default: self = .int(n.int64Value)
            }
        case let s as String: self = .string(s)
        case let a as [Any]: self = .array(a.map(JSONTree.init(any:)))
        case let o as [String: Any]: self = .object(o.mapValues(JSONTree.init(any:)))
        default: self = .string("\(any)")
        }
    }

    var description: String {
        switch self {
        case .null: "null"
        case let .bool(b): "\(b)"
        case let .int(i): "\(i)"
        case let .double(d): "\(d)"
        case let .string(s): "\"\(s)\""
        case let .array(a): "[" + a.map(\.description).joined(separator: ",") + "]"
        case let .object(o): "{" + o.keys.sorted().map { "\"\($0)\":\(o[$0]!)" }.joined(separator: ",") + "}"
        }
    }

    /// Where `self` and `other` first differ (a path and both sides), or nil when they are equal.
    func difference(from other: JSONTree, at path: String = "$") -> String? {
        switch (self, other) {
        case let (.object(a), .object(b)):
            for key in Set(a.keys).union(b.keys).sorted() {
                guard let x = a[key] else { return "\(path).\(key): missing here, \(b[key]!) there" }
                guard let y = b[key] else { return "\(path).\(key): \(x) here, missing there" }
                if let d = x.difference(from: y, at: "\(path).\(key)") { return d }
            }
            return nil
        case let (.array(a), .array(b)):
            guard a.count == b.count else { return "\(path): \(a.count) elements here, \(b.count) there" }
            for (i, (x, y)) in zip(a, b).enumerated() {
                if let d = x.difference(from: y, at: "\(path)[\(i)]") { return d }
            }
            return nil
        default:
            return self == other ? nil : "\(path): \(self) here, \(other) there"
        }
    }
}

/// The plain JSONEncoder (no strategies: every model type encodes itself).
func encoded<T: Encodable>(_ value: T) throws -> JSONTree { try JSONTree(data: try JSONEncoder().encode(value)) }

func decoded<T: Decodable>(_ type: T.Type, _ text: String) throws -> T { try JSONDecoder().decode(T.self, from: Data(text.utf8)) }

/// Decodes `text` as `T`, encodes the value again and returns the first difference from `text`.
func roundTripDifference<T: Codable>(_ type: T.Type, _ text: String) throws -> String? {
    try encoded(try decoded(T.self, text)).difference(from: try JSONTree(text: text))
}
