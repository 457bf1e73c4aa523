import GroupProtocol
import SwiftplexBase

/// Reads one JSON object field by field with typed errors (``GroupMessageError``, as GroupProtocol's
/// decoders) that name the event and the path. Fields not read are ignored, as SimpleX's aeson
/// decoders ignore them.
struct ChannelParams {
    let event: String
    let path: String
    let value: JSONValue

    init(event: String, path: String = "params", _ value: JSONValue) throws(GroupMessageError) {
        guard case .object = value else { throw GroupMessageError(.wrongType, "\(event): \(path) must be an object") }
        self.event = event
        self.path = path
        self.value = value
    }

    private func present(_ key: String) -> JSONValue? {
        guard let v = value[key], !v.isNull else { return nil }
        return v
    }

    func fail(_ code: GroupMessageError.Code, _ key: String, _ what: String) -> GroupMessageError {
        GroupMessageError(code, "\(event): \(path).\(key) \(what)")
    }

    func string(_ key: String, maxLength: Int) throws(GroupMessageError) -> String {
        guard let v = present(key) else { throw fail(.missingField, key, "is missing") }
        return try check(v, key, maxLength)
    }

    func optionalString(_ key: String, maxLength: Int) throws(GroupMessageError) -> String? {
        guard let v = present(key) else { return nil }
        return try check(v, key, maxLength)
    }

    private func check(_ v: JSONValue, _ key: String, _ maxLength: Int) throws(GroupMessageError) -> String {
        guard let s = v.stringValue else { throw fail(.wrongType, key, "must be a string") }
        guard s.utf8.count <= maxLength else { throw fail(.tooLarge, key, "is longer than \(maxLength) bytes") }
        return s
    }

    func object(_ key: String) throws(GroupMessageError) -> ChannelParams {
        guard let v = present(key) else { throw fail(.missingField, key, "is missing") }
        return try ChannelParams(event: event, path: "\(path).\(key)", v)
    }

    func optionalObject(_ key: String) throws(GroupMessageError) -> ChannelParams? {
        guard let v = present(key) else { return nil }
        return try ChannelParams(event: event, path: "\(path).\(key)", v)
    }

    func memberId(_ key: String) throws(GroupMessageError) -> MemberId {
        let s = try string(key, maxLength: MemberId.maxLength)
        guard let id = MemberId(s) else { throw fail(.invalidValue, key, "is not a member id (base64url)") }
        return id
    }

    func optionalMemberId(_ key: String) throws(GroupMessageError) -> MemberId? {
        guard present(key) != nil else { return nil }
        return try memberId(key)
    }

    func role(_ key: String) throws(GroupMessageError) -> GroupMemberRole {
        let s = try string(key, maxLength: 64)
        guard !s.isEmpty else { throw fail(.invalidValue, key, "is empty") }
        return GroupMemberRole(name: s)
    }

    func profile(_ key: String) throws(GroupMessageError) -> MemberProfile {
        guard let v = present(key) else { throw fail(.missingField, key, "is missing") }
        do { return try MemberProfile(json: v) } catch { throw GroupMessageError(error.code, "\(event): \(path).\(key): \(error.message)") }
    }

    func groupProfile(_ key: String) throws(GroupMessageError) -> GroupProfile {
        guard let v = present(key) else { throw fail(.missingField, key, "is missing") }
        do { return try GroupProfile(json: v) } catch { throw GroupMessageError(error.code, "\(event): \(path).\(key): \(error.message)") }
    }

    /// A short link of the given kinds (`groupLink` is a channel link `/c#` or a group link `/g#`,
    /// `relayLink` a relay's per-channel link, which SimpleX creates as a group link).
    func link(_ key: String, kinds: Set<SimplexLinkType>) throws(GroupMessageError) -> String {
        let s = try string(key, maxLength: ChannelLimits.maxLinkBytes)
        guard let kind = SimplexLink.recognize(s), kinds.contains(kind.type) else {
            throw fail(.invalidValue, key, "is not a \(kinds.map(\.rawValue).sorted().joined(separator: " or ")) link")
        }
        return s
    }
}

/// Builds a params object in a fixed key order, leaving out absent optionals.
struct ChannelParamsWriter {
    private(set) var pairs: [(String, JSONValue)] = []
    mutating func set(_ key: String, _ value: JSONValue?) { if let value { pairs.append((key, value)) } }
    mutating func set(_ key: String, _ value: String?) { if let value { pairs.append((key, .string(value))) } }
    var json: JSONValue { .object(pairs) }
}
