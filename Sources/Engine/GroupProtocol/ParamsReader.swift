import SwiftplexBase

/// Reads one JSON object field by field with typed errors that name the event and the path.
/// Fields not read are ignored, as SimpleX's aeson decoders ignore them. Public so that the
/// layers built on groups (`ChannelProtocol`) read their params the same way.
public struct ParamsReader {
    public let event: String
    public let path: String
    public let value: JSONValue

    public init(event: String, path: String = "params", _ value: JSONValue) throws(GroupMessageError) {
        guard case .object = value else {
            throw GroupMessageError(.wrongType, "\(event): \(path) must be an object")
        }
        self.event = event
        self.path = path
        self.value = value
    }

    private func present(_ key: String) -> JSONValue? {
        guard let v = value[key], !v.isNull else { return nil }
        return v
    }

    private func fail(_ code: GroupMessageError.Code, _ key: String, _ what: String) -> GroupMessageError {
        GroupMessageError(code, "\(event): \(path).\(key) \(what)")
    }

    public func string(_ key: String, maxLength: Int = GroupLimits.maxFieldBytes) throws(GroupMessageError) -> String {
        guard let v = present(key) else { throw fail(.missingField, key, "is missing") }
        return try checkString(v, key, maxLength: maxLength)
    }

    public func optionalString(_ key: String, maxLength: Int = GroupLimits.maxFieldBytes) throws(GroupMessageError) -> String? {
        guard let v = present(key) else { return nil }
        return try checkString(v, key, maxLength: maxLength)
    }

    private func checkString(_ v: JSONValue, _ key: String, maxLength: Int) throws(GroupMessageError) -> String {
        guard let s = v.stringValue else { throw fail(.wrongType, key, "must be a string") }
        guard s.utf8.count <= maxLength else { throw fail(.tooLarge, key, "is longer than \(maxLength) bytes") }
        return s
    }

    public func bool(_ key: String) throws(GroupMessageError) -> Bool {
        guard let v = present(key) else { throw fail(.missingField, key, "is missing") }
        guard let b = v.boolValue else { throw fail(.wrongType, key, "must be a boolean") }
        return b
    }

    public func optionalInt(_ key: String) throws(GroupMessageError) -> Int? {
        guard let v = present(key) else { return nil }
        guard case .int = v, let i = v.intValue else { throw fail(.wrongType, key, "must be an integer") }
        return i
    }

    public func object(_ key: String) throws(GroupMessageError) -> ParamsReader {
        guard let v = present(key) else { throw fail(.missingField, key, "is missing") }
        return try ParamsReader(event: event, path: "\(path).\(key)", v)
    }

    public func optionalObject(_ key: String) throws(GroupMessageError) -> ParamsReader? {
        guard let v = present(key) else { return nil }
        return try ParamsReader(event: event, path: "\(path).\(key)", v)
    }

    public func memberId(_ key: String) throws(GroupMessageError) -> MemberId {
        let s = try string(key, maxLength: MemberId.maxLength)
        guard let id = MemberId(s) else { throw fail(.invalidValue, key, "is not a member id (base64url)") }
        return id
    }

    public func optionalMemberId(_ key: String) throws(GroupMessageError) -> MemberId? {
        guard present(key) != nil else { return nil }
        return try memberId(key)
    }

    public func role(_ key: String) throws(GroupMessageError) -> GroupMemberRole {
        let s = try string(key, maxLength: 64)
        guard !s.isEmpty else { throw fail(.invalidValue, key, "is empty") }
        return GroupMemberRole(name: s)
    }

    public func profile(_ key: String) throws(GroupMessageError) -> MemberProfile {
        let r = try object(key)
        return try MemberProfile(reading: r)
    }

    public func groupProfile(_ key: String) throws(GroupMessageError) -> GroupProfile {
        let r = try object(key)
        return try GroupProfile(reading: r)
    }

    public func invalid(_ key: String, _ what: String) -> GroupMessageError { fail(.invalidValue, key, what) }
}

/// Builds a params object in a fixed key order, leaving out absent optionals.
public struct ParamsWriter {
    public private(set) var pairs: [(String, JSONValue)] = []

    public mutating func set(_ key: String, _ value: JSONValue) { pairs.append((key, value)) }
    public mutating func set(_ key: String, _ value: String) { pairs.append((key, .string(value))) }
    public mutating func set(_ key: String, _ value: String?) { if let value { pairs.append((key, .string(value))) } }
    public mutating func set(_ key: String, _ value: JSONValue?) { if let value { pairs.append((key, value)) } }

    public init() {}

    public var json: JSONValue { .object(pairs) }
}
