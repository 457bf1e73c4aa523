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

/// `publicGroupCreated`: a channel was made, its link published and its relays invited.
public struct PublicGroupCreated: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var groupLink: GroupLink
    public var groupRelays: [GroupRelay]
    public init(user: User, groupInfo: GroupInfo, groupLink: GroupLink, groupRelays: [GroupRelay]) {
        self.user = user
        self.groupInfo = groupInfo
        self.groupLink = groupLink
        self.groupRelays = groupRelays
    }
}

/// One relay's outcome when it was added to a channel (`AddRelayResult`).
public struct AddRelayResult: Sendable, Hashable, Codable {
    public var relay: UserChatRelay
    public var relayError: ChatError?
    public init(relay: UserChatRelay, relayError: ChatError? = nil) {
        self.relay = relay
        self.relayError = relayError
    }
}

/// `publicGroupCreationFailed`: no channel was made; why, per relay.
public struct PublicGroupCreationFailed: Sendable, Hashable, Codable {
    public var user: User
    public var addRelayResults: [AddRelayResult]
    public init(user: User, addRelayResults: [AddRelayResult]) {
        self.user = user
        self.addRelayResults = addRelayResults
    }
}

/// `groupRelays`: a channel's relays as its owner sees them (`/_get relays #g`).
public struct GroupRelaysList: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var groupRelays: [GroupRelay]
    public init(user: User, groupInfo: GroupInfo, groupRelays: [GroupRelay]) {
        self.user = user
        self.groupInfo = groupInfo
        self.groupRelays = groupRelays
    }
}

/// `groupRelayUpdated`: a relay's status changed (owner).
public struct GroupRelayUpdated: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var member: GroupMember
    public var groupRelay: GroupRelay
    public init(user: User, groupInfo: GroupInfo, member: GroupMember, groupRelay: GroupRelay) {
        self.user = user
        self.groupInfo = groupInfo
        self.member = member
        self.groupRelay = groupRelay
    }
}

/// `groupLinkDataUpdated`: the channel link's data was published again (owner).
public struct GroupLinkDataUpdated: Sendable, Hashable, Codable {
    public var user: User
    public var groupInfo: GroupInfo
    public var groupLink: GroupLink
    public var groupRelays: [GroupRelay]
    public var relaysChanged: Bool
    public init(user: User, groupInfo: GroupInfo, groupLink: GroupLink, groupRelays: [GroupRelay], relaysChanged: Bool) {
        self.user = user
        self.groupInfo = groupInfo
        self.groupLink = groupLink
        self.groupRelays = groupRelays
        self.relaysChanged = relaysChanged
    }
}

/// The channel responses (``ChatResponse/channel(_:)``).
public enum ChannelResponse: Sendable, Hashable, Codable {
    case userChatRelays(UserChatRelays)
    case publicGroupCreated(PublicGroupCreated)
    case publicGroupCreationFailed(PublicGroupCreationFailed)
    case groupRelays(GroupRelaysList)
    /// `/connect` of a channel link: joining through its relays has started.
    case startedConnectionToGroup(UserGroup)

    public static let types: [ChatMessageType] = [.userChatRelays, .publicGroupCreated, .publicGroupCreationFailed, .groupRelays, .startedConnectionToGroup]

    public var type: ChatMessageType {
        switch self {
        case .userChatRelays: .userChatRelays
        case .publicGroupCreated: .publicGroupCreated
        case .publicGroupCreationFailed: .publicGroupCreationFailed
        case .groupRelays: .groupRelays
        case .startedConnectionToGroup: .startedConnectionToGroup
        }
    }

    /// Reads the payload of the message whose `type` is `type` (the caller read the tag).
    init(type: ChatMessageType, from decoder: any Decoder) throws {
        switch type {
        case .userChatRelays: self = .userChatRelays(try UserChatRelays(from: decoder))
        case .publicGroupCreated: self = .publicGroupCreated(try PublicGroupCreated(from: decoder))
        case .publicGroupCreationFailed: self = .publicGroupCreationFailed(try PublicGroupCreationFailed(from: decoder))
        case .groupRelays: self = .groupRelays(try GroupRelaysList(from: decoder))
        case .startedConnectionToGroup: self = .startedConnectionToGroup(try UserGroup(from: decoder))
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
        case let .publicGroupCreated(p): try p.encode(to: encoder)
        case let .publicGroupCreationFailed(p): try p.encode(to: encoder)
        case let .groupRelays(p): try p.encode(to: encoder)
        case let .startedConnectionToGroup(p): try p.encode(to: encoder)
        }
    }
}

/// The channel events (``ChatEvent/channel(_:)``).
public enum ChannelChatEvent: Sendable, Hashable, Codable {
    case groupRelayUpdated(GroupRelayUpdated)
    case groupLinkDataUpdated(GroupLinkDataUpdated)

    public static let types: [ChatMessageType] = [.groupRelayUpdated, .groupLinkDataUpdated]

    public var type: ChatMessageType {
        switch self {
        case .groupRelayUpdated: .groupRelayUpdated
        case .groupLinkDataUpdated: .groupLinkDataUpdated
        }
    }

    init(type: ChatMessageType, from decoder: any Decoder) throws {
        switch type {
        case .groupRelayUpdated: self = .groupRelayUpdated(try GroupRelayUpdated(from: decoder))
        case .groupLinkDataUpdated: self = .groupLinkDataUpdated(try GroupLinkDataUpdated(from: decoder))
        default: throw ModelDecodingError(.unknownTag, type: "ChannelChatEvent", value: type.rawValue, path: decoder.codingPath)
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        try self.init(type: try c.messageType(in: "ChannelChatEvent"), from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case let .groupRelayUpdated(p): try p.encode(to: encoder)
        case let .groupLinkDataUpdated(p): try p.encode(to: encoder)
        }
    }
}
