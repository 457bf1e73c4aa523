// Channels and chat relays as the bot API writes them (simplex-chat 7.0.2 `types/_types.py`): a
// relay's profile and the channel responses (``ChannelResponse``), read and written beside the
// other responses. `UserChatRelay`, `GroupRelay` and `RelayStatus` are in Groups.swift.

/// A chat relay's profile (`RelayProfile`): what a relay shows of itself.
public struct RelayProfile: Sendable, Hashable, Codable {
    public var displayName: String
    public var fullName: String
    public var shortDescr: String?
    public var image: String?

    public init(displayName: String, fullName: String = "", shortDescr: String? = nil, image: String? = nil) {
        self.displayName = displayName
        self.fullName = fullName
        self.shortDescr = shortDescr
        self.image = image
    }
}

/// `userChatRelays`: a user's chat relays (the answer to `/relays`).
public struct UserChatRelays: Sendable, Hashable, Codable {
    public var user: User
    public var chatRelays: [UserChatRelay]
    public init(user: User, chatRelays: [UserChatRelay]) {
        self.user = user
        self.chatRelays = chatRelays
    }
}

/// The channel responses (``ChatResponse/channel(_:)``).
public enum ChannelResponse: Sendable, Hashable, Codable {
    case userChatRelays(UserChatRelays)

    public static let types: [ChatMessageType] = [.userChatRelays]

    public var type: ChatMessageType {
        switch self {
        case .userChatRelays: .userChatRelays
        }
    }

    /// Reads the payload of the message whose `type` is `type` (the caller read the tag).
    init(type: ChatMessageType, from decoder: any Decoder) throws {
        switch type {
        case .userChatRelays: self = .userChatRelays(try UserChatRelays(from: decoder))
        default: throw ModelDecodingError(.unknownTag, type: "ChannelResponse", value: type.rawValue, path: decoder.codingPath)
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        try self.init(type: try c.messageType(in: "ChannelResponse"), from: decoder)
    }

    /// Writes the payload (the caller wrote the tag).
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case let .userChatRelays(p): try p.encode(to: encoder)
        }
    }
}
