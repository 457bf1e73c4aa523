import ChatCore
import SwiftplexBase
import SwiftplexCrypto

/// A Chat API command, parsed from the SimpleX bot API's command strings (`/_send @12 json […]`).
/// JSON parameters are kept as ``JSONValue`` and validated by the chat core.
public enum ChatCommand: Sendable, Equatable {
    // Users
    case showActiveUser
    case createActiveUser(newUser: JSONValue)
    case listUsers
    case setActiveUser(userId: Int64, viewPassword: String?)
    case deleteUser(userId: Int64, deleteQueues: Bool, viewPassword: String?)
    case updateProfile(userId: Int64, profile: JSONValue)
    case setContactPreferences(contactId: Int64, preferences: JSONValue)
    /// `/_set receipts contacts <userId> on|off` (upstream SimpleX Chat's syntax; not in the bot API).
    case setContactReceipts(userId: Int64, enabled: Bool)
    // Lifecycle
    case startChat
    case stopChat
    // Database archives (the chat must be stopped)
    /// `/_db export <json ArchiveConfig>`
    case exportArchive(config: JSONValue)
    /// `/_db import <json ArchiveConfig>`
    case importArchive(config: JSONValue)
    /// `/_db delete`
    case deleteStorage
    // Address
    /// `short`: also a short link (`/_address <userId> short=on`, a Swiftplex extension).
    case createAddress(userId: Int64, short: Bool = false)
    case deleteAddress(userId: Int64)
    case showAddress(userId: Int64)
    case setProfileAddress(userId: Int64, enabled: Bool)
    case setAddressSettings(userId: Int64, settings: JSONValue)
    // Messages
    case sendMessages(chat: ChatRef, live: Bool, ttl: Int?, sign: Bool, messages: [JSONValue])
    case updateChatItem(chat: ChatRef, itemId: Int64, live: Bool, message: JSONValue)
    case deleteChatItems(chat: ChatRef, itemIds: [Int64], mode: DeleteMode)
    case reaction(chat: ChatRef, itemId: Int64, add: Bool, reaction: JSONValue)
    // Connections
    /// `short`: also a short link (`/_connect <userId> short=on`).
    case addContact(userId: Int64, incognito: Bool, short: Bool = false)
    case connectPlan(userId: Int64, link: String)
    case connect(userId: Int64, incognito: Bool, fullLink: String, shortLink: String?)
    case connectActiveUser(incognito: Bool, link: String?)
    case acceptContact(requestId: Int64, incognito: Bool)
    case rejectContact(requestId: Int64)
    // Chats
    case listContacts(userId: Int64)
    case getChats(userId: Int64, pendingConnections: Bool, count: Int, query: JSONValue?)
    case getChat(chat: ChatRef, pagination: Pagination)
    case readChat(chat: ChatRef)
    case deleteChat(chat: ChatRef, mode: ChatDeleteMode)
    case setContactCustomData(contactId: Int64, data: JSONValue?)
    case setGroupCustomData(groupId: Int64, data: JSONValue?)
    // Relays
    case setUserRelays(userId: Int64, relays: [String])
    case getUserRelays(userId: Int64)
    // Groups
    case group(GroupCommand)
    // Terminal commands
    /// The SimpleX terminal's own commands (`/ad`, `@name text`, `/a group name`, …): they act as
    /// the active user and take names instead of ids (CommandParser+CLI.swift).
    case cli(CLICommand)
    // Channels
    /// `/relays`: the active user's chat relays.
    case listChatRelays
    /// `/relays name=<name> <address> …`: replaces the active user's chat relays.
    case setChatRelays(relays: [ChatRelayEntry])
    /// `/relay test <address>` (the active user) or `/_relay test <userId> <address>`: the chat
    /// relay at this address proves it holds it (`x.grp.relay.test`).
    case testChatRelay(userId: Int64?, address: String)
    /// `/_public group <userId>[ incognito=on] <relayId,…> <json GroupProfile>`: a channel.
    case newPublicGroup(userId: Int64, incognito: Bool, relayIds: [Int64], profile: JSONValue)
    /// `/_get relays #<groupId>`: a channel's relays (owner).
    case getGroupRelays(groupId: Int64)
    /// `/_get group link data #<groupId>`: a channel's link data read again — a subscriber joins
    /// relays added and drops relays removed — answered `groupInfo` with `publicMemberCount`.
    case getUpdatedGroupLinkData(groupId: Int64)
    /// `/_add relays #<groupId> <relayId,…>`: more chat relays for a channel (owner).
    case addGroupRelays(groupId: Int64, relayIds: [Int64])
    /// `/_relay allow #<groupId>`: a chat relay serves a channel it left again when invited.
    case allowRelayGroup(groupId: Int64)
    /// `/_relay policy <json>`: a chat relay's operator policy (Swiftplex; ChatCore `ChannelRelayPolicy`).
    case setRelayPolicy(policy: JSONValue)

    public enum DeleteMode: String, Sendable, Equatable {
        case broadcast, `internal`, internalMark
    }

    public enum Pagination: Sendable, Equatable {
        case last(Int)
        case after(Int64, Int)
        case before(Int64, Int)
    }

    public enum ChatDeleteMode: Sendable, Equatable {
        case full(notify: Bool)
        case entity(notify: Bool)
        case messages
    }
}

/// Why a command string was refused; reported as `chatCmdError` with a `commandError`.
public struct CommandParseError: CodedError {
    public enum Code: String, Sendable { case unknownCommand, badArguments, badJSON }
    public let code: Code
    public let message: String
    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}
