/// A user of the engine: one identity with its own contacts and address. `userId` is the number
/// every `/_… <userId>` command takes.
public struct User: Sendable, Hashable, Codable {
    public var userId: Int64
    public var agentUserId: Int64
    public var userContactId: Int64
    public var localDisplayName: String
    public var profile: LocalProfile
    public var fullPreferences: FullPreferences
    public var activeUser: Bool
    public var activeOrder: Int64
    public var showNtfs: Bool
    public var sendRcptsContacts: Bool
    public var sendRcptsSmallGroups: Bool
    public var autoAcceptMemberContacts: Bool
    public var userMemberProfileUpdatedAt: ChatTimestamp?
    public var userChatRelay: Bool
    public var clientService: Bool

    public init(userId: Int64, agentUserId: Int64, userContactId: Int64, localDisplayName: String, profile: LocalProfile,
                fullPreferences: FullPreferences, activeUser: Bool, activeOrder: Int64, showNtfs: Bool = true, sendRcptsContacts: Bool = true,
                sendRcptsSmallGroups: Bool = true, autoAcceptMemberContacts: Bool = false, userMemberProfileUpdatedAt: ChatTimestamp? = nil,
                userChatRelay: Bool = false, clientService: Bool = false) {
        self.userId = userId
        self.agentUserId = agentUserId
        self.userContactId = userContactId
        self.localDisplayName = localDisplayName
        self.profile = profile
        self.fullPreferences = fullPreferences
        self.activeUser = activeUser
        self.activeOrder = activeOrder
        self.showNtfs = showNtfs
        self.sendRcptsContacts = sendRcptsContacts
        self.sendRcptsSmallGroups = sendRcptsSmallGroups
        self.autoAcceptMemberContacts = autoAcceptMemberContacts
        self.userMemberProfileUpdatedAt = userMemberProfileUpdatedAt
        self.userChatRelay = userChatRelay
        self.clientService = clientService
    }
}

/// A user in `usersList`, with its unread count.
public struct UserInfo: Sendable, Hashable, Codable {
    public var user: User
    public var unreadCount: Int
    public init(user: User, unreadCount: Int) {
        self.user = user
        self.unreadCount = unreadCount
    }
}

/// How `userProfileUpdated` went: how many contacts were sent the new profile.
public struct UserProfileUpdateSummary: Sendable, Hashable, Codable {
    public var updateSuccesses: Int
    public var updateFailures: Int
    public var changedContacts: [Contact]
    public init(updateSuccesses: Int, updateFailures: Int, changedContacts: [Contact]) {
        self.updateSuccesses = updateSuccesses
        self.updateFailures = updateFailures
        self.changedContacts = changedContacts
    }
}
