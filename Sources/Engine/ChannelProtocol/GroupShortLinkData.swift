import GroupProtocol
import SwiftplexBase

/// What a group's or channel's short link carries as its user data (SimpleX chat
/// `GroupShortLinkData {groupProfile, publicGroupData}`, `PublicGroupData {publicMemberCount}`;
/// JSON, as SimpleX derives it with `defaultJSON`: `publicGroupData` absent when there is none).
/// The agent keeps these bytes opaque (`ShortLinkData.userData`); owners, relay links and the root
/// key travel beside them in the link data.
public struct GroupShortLinkData: Sendable, Hashable {
    public var groupProfile: GroupProfile
    /// A channel's subscriber count as its owner last published it.
    public var publicMemberCount: Int?

    /// At most this many bytes are read (the relay keeps 13,824 bytes of link data in all).
    public static let maxBytes = 13_824

    public init(groupProfile: GroupProfile, publicMemberCount: Int? = nil) {
        self.groupProfile = groupProfile
        self.publicMemberCount = publicMemberCount
    }

    /// Reads the JSON; anything malformed (not JSON, no valid `groupProfile`, a `publicMemberCount`
    /// that is not a non-negative integer, a `publicGroupData` that is no object, over ``maxBytes``) is ``ChannelError/Code/malformedMessage``.
    public init(bytes: [UInt8]) throws(ChannelError) {
        guard bytes.count <= Self.maxBytes else { throw ChannelError(.malformedMessage, "the link's group data is over \(Self.maxBytes) bytes") }
        let json: JSONValue
        do { json = try JSONValue.parse(utf8: bytes, maxDepth: 16, maxBytes: Self.maxBytes) } catch {
            throw ChannelError(.malformedMessage, "the link's group data is not JSON: \(error)")
        }
        guard case .object = json, let profileJSON = json["groupProfile"] else {
            throw ChannelError(.malformedMessage, "the link's group data has no groupProfile")
        }
        do { groupProfile = try GroupProfile(json: profileJSON) } catch { throw ChannelError.malformed(error) }
        switch json["publicGroupData"] {
        case nil, .null?:
            publicMemberCount = nil
        case let data?:
            guard case .object = data else { throw ChannelError(.malformedMessage, "the link's publicGroupData is not an object") }
            switch data["publicMemberCount"] {
            case nil, .null?: publicMemberCount = nil
            case let n?:
                guard let count = n.intValue, count >= 0 else {
                    throw ChannelError(.malformedMessage, "the link's publicGroupData.publicMemberCount is not a non-negative integer")
                }
                publicMemberCount = count
            }
        }
    }

    /// The JSON bytes.
    public var bytes: [UInt8] {
        var fields: [(String, JSONValue)] = [("groupProfile", groupProfile.json)]
        if let publicMemberCount { fields.append(("publicGroupData", .object([("publicMemberCount", .int(Int64(publicMemberCount)))]))) }
        return Array(JSONValue.object(fields).text.utf8)
    }
}
