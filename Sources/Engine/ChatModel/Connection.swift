/// A chat-level connection (a contact's `activeConn`).
public struct Connection: Sendable, Hashable, Codable {
    public var connId: Int64
    public var agentConnId: String
    public var connChatVersion: Int
    public var peerChatVRange: VersionRange
    public var connLevel: Int
    public var viaContact: Int64?
    public var viaUserContactLink: Int64?
    public var viaGroupLink: Bool
    public var groupLinkId: String?
    public var xContactId: String?
    /// Set when the user shows this peer an incognito profile.
    public var customUserProfileId: Int64?
    public var connType: ConnType
    public var connStatus: ConnStatus
    public var contactConnInitiated: Bool
    public var localAlias: String
    public var entityId: Int64?
    public var pqSupport: Bool
    public var pqEncryption: Bool
    public var pqSndEnabled: Bool?
    public var pqRcvEnabled: Bool?
    public var authErrCounter: Int
    public var quotaErrCounter: Int
    public var createdAt: ChatTimestamp

    public init(connId: Int64, agentConnId: String, connChatVersion: Int = 1, peerChatVRange: VersionRange = VersionRange(minVersion: 1, maxVersion: 1),
                connLevel: Int = 0, viaContact: Int64? = nil, viaUserContactLink: Int64? = nil, viaGroupLink: Bool = false, groupLinkId: String? = nil,
                xContactId: String? = nil, customUserProfileId: Int64? = nil, connType: ConnType = .contact, connStatus: ConnStatus,
                contactConnInitiated: Bool, localAlias: String = "", entityId: Int64? = nil, pqSupport: Bool = false, pqEncryption: Bool = false,
                pqSndEnabled: Bool? = nil, pqRcvEnabled: Bool? = nil, authErrCounter: Int = 0, quotaErrCounter: Int = 0, createdAt: ChatTimestamp) {
        self.connId = connId
        self.agentConnId = agentConnId
        self.connChatVersion = connChatVersion
        self.peerChatVRange = peerChatVRange
        self.connLevel = connLevel
        self.viaContact = viaContact
        self.viaUserContactLink = viaUserContactLink
        self.viaGroupLink = viaGroupLink
        self.groupLinkId = groupLinkId
        self.xContactId = xContactId
        self.customUserProfileId = customUserProfileId
        self.connType = connType
        self.connStatus = connStatus
        self.contactConnInitiated = contactConnInitiated
        self.localAlias = localAlias
        self.entityId = entityId
        self.pqSupport = pqSupport
        self.pqEncryption = pqEncryption
        self.pqSndEnabled = pqSndEnabled
        self.pqRcvEnabled = pqRcvEnabled
        self.authErrCounter = authErrCounter
        self.quotaErrCounter = quotaErrCounter
        self.createdAt = createdAt
    }
}

public struct VersionRange: Sendable, Hashable, Codable {
    public var minVersion: Int
    public var maxVersion: Int
    public init(minVersion: Int, maxVersion: Int) {
        self.minVersion = minVersion
        self.maxVersion = maxVersion
    }
}

public enum ConnType: String, StringEnum {
    case contact, member
    case userContact = "user_contact"
}

/// Where a connection is in its handshake.
public enum ConnStatus: Sendable, Hashable, Codable {
    case new, prepared, joined, requested, accepted, sndReady, ready, deleted
    case failed(connError: String)

    static let simple: [String: ConnStatus] = ["new": .new, "prepared": .prepared, "joined": .joined, "requested": .requested,
                                               "accepted": .accepted, "sndReady": .sndReady, "ready": .ready, "deleted": .deleted]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        let t = try c.tag()
        if let s = Self.simple[t] { self = s; return }
        guard t == "failed" else { throw c.unknown(t, in: "ConnStatus") }
        self = .failed(connError: try c.decode(String.self, forKey: "connError"))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .failed(error): try c.tag("failed"); try c.encode(error, forKey: "connError")
        default: try c.tag(Self.simple.first { $0.value == self }!.key)
        }
    }
}

/// A connection not yet a contact: a one-time invitation made or joined, an address joined.
public struct PendingContactConnection: Sendable, Hashable, Codable {
    public var pccConnId: Int64
    public var pccAgentConnId: String
    public var pccConnStatus: ConnStatus
    public var viaContactUri: Bool
    public var viaUserContactLink: Int64?
    public var groupLinkId: String?
    public var customUserProfileId: Int64?
    public var connLinkInv: CreatedConnLink?
    public var localAlias: String
    public var createdAt: ChatTimestamp
    public var updatedAt: ChatTimestamp

    public init(pccConnId: Int64, pccAgentConnId: String, pccConnStatus: ConnStatus, viaContactUri: Bool, viaUserContactLink: Int64? = nil,
                groupLinkId: String? = nil, customUserProfileId: Int64? = nil, connLinkInv: CreatedConnLink? = nil, localAlias: String = "",
                createdAt: ChatTimestamp, updatedAt: ChatTimestamp) {
        self.pccConnId = pccConnId
        self.pccAgentConnId = pccAgentConnId
        self.pccConnStatus = pccConnStatus
        self.viaContactUri = viaContactUri
        self.viaUserContactLink = viaUserContactLink
        self.groupLinkId = groupLinkId
        self.customUserProfileId = customUserProfileId
        self.connLinkInv = connLinkInv
        self.localAlias = localAlias
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// A link made by the engine: the full link and, when one was made, the short link.
public struct CreatedConnLink: Sendable, Hashable, Codable {
    public var connFullLink: String
    public var connShortLink: String?
    public init(connFullLink: String, connShortLink: String? = nil) {
        self.connFullLink = connFullLink
        self.connShortLink = connShortLink
    }
}
