/// A request to connect that arrived at the user's address.
public struct UserContactRequest: Sendable, Hashable, Codable {
    public var contactRequestId: Int64
    public var agentInvitationId: String
    public var contactId: Int64?
    public var businessGroupId: Int64?
    public var userContactLinkId: Int64?
    public var cReqChatVRange: VersionRange
    public var localDisplayName: String
    public var profileId: Int64
    public var profile: LocalProfile
    public var createdAt: ChatTimestamp
    public var updatedAt: ChatTimestamp
    public var xContactId: String?
    public var pqSupport: Bool
    public var welcomeSharedMsgId: String?
    public var requestSharedMsgId: String?

    enum CodingKeys: String, CodingKey {
        case contactRequestId, agentInvitationId
        case contactId = "contactId_", businessGroupId = "businessGroupId_", userContactLinkId = "userContactLinkId_"
        case cReqChatVRange, localDisplayName, profileId, profile, createdAt, updatedAt, xContactId, pqSupport, welcomeSharedMsgId, requestSharedMsgId
    }

    public init(contactRequestId: Int64, agentInvitationId: String, contactId: Int64? = nil, businessGroupId: Int64? = nil, userContactLinkId: Int64? = nil,
                cReqChatVRange: VersionRange = VersionRange(minVersion: 1, maxVersion: 1), localDisplayName: String, profileId: Int64,
                profile: LocalProfile, createdAt: ChatTimestamp, updatedAt: ChatTimestamp, xContactId: String? = nil, pqSupport: Bool = false,
                welcomeSharedMsgId: String? = nil, requestSharedMsgId: String? = nil) {
        self.contactRequestId = contactRequestId
        self.agentInvitationId = agentInvitationId
        self.contactId = contactId
        self.businessGroupId = businessGroupId
        self.userContactLinkId = userContactLinkId
        self.cReqChatVRange = cReqChatVRange
        self.localDisplayName = localDisplayName
        self.profileId = profileId
        self.profile = profile
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.xContactId = xContactId
        self.pqSupport = pqSupport
        self.welcomeSharedMsgId = welcomeSharedMsgId
        self.requestSharedMsgId = requestSharedMsgId
    }
}

/// The user's contact address (`/_show_address`).
public struct UserContactLink: Sendable, Hashable, Codable {
    public var userContactLinkId: Int64
    public var connLinkContact: CreatedConnLink
    public var shortLinkDataSet: Bool
    public var shortLinkLargeDataSet: Bool
    public var addressSettings: AddressSettings

    public init(userContactLinkId: Int64, connLinkContact: CreatedConnLink, shortLinkDataSet: Bool, shortLinkLargeDataSet: Bool = false,
                addressSettings: AddressSettings) {
        self.userContactLinkId = userContactLinkId
        self.connLinkContact = connLinkContact
        self.shortLinkDataSet = shortLinkDataSet
        self.shortLinkLargeDataSet = shortLinkLargeDataSet
        self.addressSettings = addressSettings
    }
}

/// What the engine does with requests to an address: accept them (`autoAccept`), greet each new
/// contact (`autoReply`); `businessAddress` is stored but business chats are not made.
public struct AddressSettings: Sendable, Hashable, Codable {
    public var businessAddress: Bool
    public var autoAccept: AutoAccept?
    public var autoReply: MsgContent?
    public init(businessAddress: Bool = false, autoAccept: AutoAccept? = nil, autoReply: MsgContent? = nil) {
        self.businessAddress = businessAddress
        self.autoAccept = autoAccept
        self.autoReply = autoReply
    }
}

public struct AutoAccept: Sendable, Hashable, Codable {
    public var acceptIncognito: Bool
    public init(acceptIncognito: Bool) { self.acceptIncognito = acceptIncognito }
}
