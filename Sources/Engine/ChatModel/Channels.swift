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

/// Why a chat relay test failed (**Swiftplex**'s shape, after SimpleX's `ProtocolTestFailure`
/// of server tests): the step (`resolve`: reading the address's link; `connect`: the contact
/// request; `confirm`: the relay's answer; `verify`: its signature) and what went wrong.
public struct RelayTestFailure: Sendable, Hashable, Codable {
    public var testStep: String
    public var testError: String
    public init(testStep: String, testError: String) {
        self.testStep = testStep
        self.testError = testError
    }
}

/// `chatRelayTestResult` (**Swiftplex**'s answer to `/relay test <address>`; SimpleX's CLI prints
/// "relay test passed, profile: …"): the relay's profile from its address's link data, and the
/// failure if it did not pass.
public struct ChatRelayTestResult: Sendable, Hashable, Codable {
    public var user: User
    public var relayAddress: String
    public var relayProfile: RelayProfile?
    public var testFailure: RelayTestFailure?
    public init(user: User, relayAddress: String, relayProfile: RelayProfile?, testFailure: RelayTestFailure?) {
        self.user = user
        self.relayAddress = relayAddress
        self.relayProfile = relayProfile
        self.testFailure = testFailure
    }
}

/// `publicGroupCreated`: a channel was made, its link published and its relays invited; also the
/// payload of `groupRelaysAdded` (the same fields).
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

/// `publicGroupCreationFailed`: no channel was made; why, per relay; also the payload of
/// `groupRelaysAddFailed`.
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
    /// `/_add relays #g …`: the relays were invited (`{user, groupInfo, groupLink, groupRelays}`).
    case groupRelaysAdded(PublicGroupCreated)
    /// `/_add relays #g …`: no relay was added; why, per relay (`{user, addRelayResults}`).
    case groupRelaysAddFailed(PublicGroupCreationFailed)
    /// `/_relay allow #g`: a chat relay serves a channel it left again when invited.
    case relayGroupAllowed(UserGroup)
    /// `/relay test <address>`: the chat relay proved its address (or why not).
    case chatRelayTestResult(ChatRelayTestResult)
    /// `/_get group link data #g`: the channel with its link data's `publicMemberCount`
    /// (SimpleX `CRGroupInfo`, `{user, groupInfo}`).
    case groupInfo(UserGroup)

    public static let types: [ChatMessageType] = [.userChatRelays, .publicGroupCreated, .publicGroupCreationFailed, .groupRelays, .startedConnectionToGroup,
                                                  .groupRelaysAdded, .groupRelaysAddFailed, .relayGroupAllowed, .chatRelayTestResult, .groupInfo]

    public var type: ChatMessageType {
        switch self {
        case .userChatRelays: .userChatRelays
        case .publicGroupCreated: .publicGroupCreated
        case .publicGroupCreationFailed: .publicGroupCreationFailed
        case .groupRelays: .groupRelays
        case .startedConnectionToGroup: .startedConnectionToGroup
        case .groupRelaysAdded: .groupRelaysAdded
        case .groupRelaysAddFailed: .groupRelaysAddFailed
        case .relayGroupAllowed: .relayGroupAllowed
        case .chatRelayTestResult: .chatRelayTestResult
        case .groupInfo: .groupInfo
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
        case .groupRelaysAdded: self = .groupRelaysAdded(try PublicGroupCreated(from: decoder))
        case .groupRelaysAddFailed: self = .groupRelaysAddFailed(try PublicGroupCreationFailed(from: decoder))
        case .relayGroupAllowed: self = .relayGroupAllowed(try UserGroup(from: decoder))
        case .chatRelayTestResult: self = .chatRelayTestResult(try ChatRelayTestResult(from: decoder))
        case .groupInfo: self = .groupInfo(try UserGroup(from: decoder))
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
        case let .startedConnectionToGroup(p), let .relayGroupAllowed(p), let .groupInfo(p): try p.encode(to: encoder)
        case let .groupRelaysAdded(p): try p.encode(to: encoder)
        case let .groupRelaysAddFailed(p): try p.encode(to: encoder)
        case let .chatRelayTestResult(p): try p.encode(to: encoder)
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

/// **Swiftplex** extension of `GroupRelay` (`relayStats`, only in a subscriber's `/_get relays`):
/// what this relay brought to the subscriber since it joined through it. `received`: verified
/// owner messages that came through this relay first; `duplicates`: verified copies that another
/// relay had brought first; `missed`: messages taken through other relays since this relay
/// connected that it never brought; `rejected`: messages refused (bad or missing signature,
/// altered, authored by the relay) — never shown.
public struct RelayStats: Sendable, Hashable, Codable {
    public var received: Int
    public var duplicates: Int
    public var missed: Int
    public var rejected: Int
    public init(received: Int, duplicates: Int, missed: Int, rejected: Int) {
        self.received = received
        self.duplicates = duplicates
        self.missed = missed
        self.rejected = rejected
    }
}
