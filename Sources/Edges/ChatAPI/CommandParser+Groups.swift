import ChatCore
import ChatModel
import SwiftplexBase

/// The bot API's group commands (``ChatCommand/group(_:)``).
public enum GroupCommand: Sendable, Equatable {
    /// `/_group <userId>[ incognito=on] <json GroupProfile>`
    case newGroup(userId: Int64, incognito: Bool, profile: JSONValue)
    /// `/_add #<groupId> <contactId> <role>`
    case addMember(groupId: Int64, contactId: Int64, role: GroupMemberRole)
    /// `/_join #<groupId>`
    case joinGroup(groupId: Int64)
    /// `/_member role #<groupId> <id>[,<id>…] <role>`
    case membersRole(groupId: Int64, memberIds: [Int64], role: GroupMemberRole)
    /// `/_block #<groupId> <id>[,<id>…] blocked=on|off`
    case blockMembers(groupId: Int64, memberIds: [Int64], blocked: Bool)
    /// `/_remove #<groupId> <id>[,<id>…][ messages=on|off]`
    case removeMembers(groupId: Int64, memberIds: [Int64], withMessages: Bool)
    /// `/_leave #<groupId>`
    case leaveGroup(groupId: Int64)
    /// `/_members #<groupId>`
    case listMembers(groupId: Int64)
    /// `/_groups <userId>[ @<contactId>][ <search>]`
    case listGroups(userId: Int64, contactId: Int64?, search: String?)
    /// `/_group_profile #<groupId> <json GroupProfile>`
    case updateProfile(groupId: Int64, profile: JSONValue)
    /// `/_delete member item #<groupId> <id>[,<id>…]`
    case deleteMemberItems(groupId: Int64, itemIds: [Int64])
    /// `/_create link #<groupId>[ <role>][ short=on|off]` (role `member` unless given; short link on unless off)
    case createLink(groupId: Int64, role: GroupMemberRole, short: Bool)
    /// `/_set link role #<groupId> <role>`
    case setLinkRole(groupId: Int64, role: GroupMemberRole)
    /// `/_delete link #<groupId>`
    case deleteLink(groupId: Int64)
    /// `/_get link #<groupId>`
    case getLink(groupId: Int64)
    /// `/_accept member #<groupId> <groupMemberId> <role>`
    case acceptMember(groupId: Int64, groupMemberId: Int64, role: GroupMemberRole)
    /// `/_create member contact #<groupId> <groupMemberId>`
    case createMemberContact(groupId: Int64, groupMemberId: Int64)
    /// `/_invite member contact @<contactId>[ text <text>| json <MsgContent>]` (the text form as a `text` MsgContent)
    case inviteMemberContact(contactId: Int64, content: JSONValue?)
    /// `/_accept member contact @<contactId>`
    case acceptMemberContact(contactId: Int64)
    /// `/_set accept member contacts <userId> on|off`
    case setAutoAcceptMemberContacts(userId: Int64, enabled: Bool)
}

extension CommandParser {
    /// A group command for `keyword`, or nil when `keyword` is not one.
    static func parseGroupCommand(_ keyword: Substring, _ s: inout Scanner) throws(CommandParseError) -> GroupCommand? {
        switch keyword {
        case "/_group":
            let id = try s.id("userId")
            var incognito = false
            if let w = s.peekWord(), w.hasPrefix("incognito=") {
                _ = s.word()
                guard let v = Scanner.onOffValue(w.dropFirst("incognito=".count)) else { throw CommandParseError(.badArguments, "incognito must be on or off") }
                incognito = v
            }
            return .newGroup(userId: id, incognito: incognito, profile: try s.jsonObject("GroupProfile"))
        case "/_add":
            let g = try s.groupId()
            let contact = try s.id("contactId")
            return .addMember(groupId: g, contactId: contact, role: try s.role())
        case "/_join":
            return .joinGroup(groupId: try s.groupId())
        case "/_member":
            try s.expect("role")
            let g = try s.groupId()
            let ids = try s.idList("groupMemberIds")
            return .membersRole(groupId: g, memberIds: ids, role: try s.role())
        case "/_block":
            let g = try s.groupId()
            let ids = try s.idList("groupMemberIds")
            guard let w = s.word(), w.hasPrefix("blocked="), let on = Scanner.onOffValue(w.dropFirst("blocked=".count)) else {
                throw CommandParseError(.badArguments, "expected blocked=on|off")
            }
            return .blockMembers(groupId: g, memberIds: ids, blocked: on)
        case "/_remove":
            let g = try s.groupId()
            let ids = try s.idList("groupMemberIds")
            var messages = false
            if let w = s.peekWord(), w.hasPrefix("messages=") {
                _ = s.word()
                guard let v = Scanner.onOffValue(w.dropFirst("messages=".count)) else { throw CommandParseError(.badArguments, "messages must be on or off") }
                messages = v
            }
            return .removeMembers(groupId: g, memberIds: ids, withMessages: messages)
        case "/_leave":
            return .leaveGroup(groupId: try s.groupId())
        case "/_members":
            return .listMembers(groupId: try s.groupId())
        case "/_groups":
            let id = try s.id("userId")
            var contact: Int64?
            if let w = s.peekWord(), w.hasPrefix("@") {
                _ = s.word()
                guard let c = Int64(w.dropFirst()), c > 0 else { throw CommandParseError(.badArguments, "expected @<contactId>") }
                contact = c
            }
            let search = s.rest()
            return .listGroups(userId: id, contactId: contact, search: search.isEmpty ? nil : search)
        case "/_group_profile":
            let g = try s.groupId()
            return .updateProfile(groupId: g, profile: try s.jsonObject("GroupProfile"))
        case "/_invite":
            try s.expect("member")
            try s.expect("contact")
            let id = try s.contactId()
            switch s.peekWord() {
            case nil:
                return .inviteMemberContact(contactId: id, content: nil)
            case "text":
                _ = s.word()
                let text = s.rest()
                return .inviteMemberContact(contactId: id, content: .object([("type", "text"), ("text", .string(String(text)))]))
            case "json":
                _ = s.word()
                return .inviteMemberContact(contactId: id, content: try s.jsonObject("MsgContent"))
            case let w?:
                throw CommandParseError(.badArguments, "expected text <message> or json <MsgContent>, not \(w)")
            }
        default:
            return nil
        }
    }
}

extension CommandParser {
    /// The group link commands and `/_accept member` (`verb` is the command's keyword without
    /// `/_`; the scanner is at `link` or `member`).
    static func parseGroupLink(_ verb: String, _ s: inout Scanner) throws(CommandParseError) -> GroupCommand {
        switch verb {
        case "create" where s.peekWord() == "member":
            try s.expect("member")
            try s.expect("contact")
            let g = try s.groupId()
            return .createMemberContact(groupId: g, groupMemberId: try s.id("groupMemberId"))
        case "create":
            try s.expect("link")
            let g = try s.groupId()
            var role = GroupMemberRole.member
            var short = true
            while let w = s.peekWord() {
                if w.hasPrefix("short=") {
                    _ = s.word()
                    guard let v = Scanner.onOffValue(w.dropFirst("short=".count)) else { throw CommandParseError(.badArguments, "short must be on or off") }
                    short = v
                } else {
                    role = try s.role()
                }
            }
            return .createLink(groupId: g, role: role, short: short)
        case "set":
            try s.expect("link")
            try s.expect("role")
            let g = try s.groupId()
            return .setLinkRole(groupId: g, role: try s.role())
        case "delete":
            try s.expect("link")
            return .deleteLink(groupId: try s.groupId())
        case "get":
            try s.expect("link")
            return .getLink(groupId: try s.groupId())
        default:
            try s.expect("member")
            if s.peekWord() == "contact" {
                _ = s.word()
                return .acceptMemberContact(contactId: try s.contactId())
            }
            let g = try s.groupId()
            let m = try s.id("groupMemberId")
            return .acceptMember(groupId: g, groupMemberId: m, role: try s.role())
        }
    }
}

extension Scanner {
    /// `@<contactId>`.
    mutating func contactId() throws(CommandParseError) -> Int64 {
        guard let w = word(), w.first == "@", let id = Int64(w.dropFirst()), id > 0 else {
            throw CommandParseError(.badArguments, "expected @<contactId>")
        }
        return id
    }

    /// `#<groupId>` (no support scope).
    mutating func groupId() throws(CommandParseError) -> Int64 {
        guard let w = word(), w.first == "#", let id = Int64(w.dropFirst()), id > 0 else {
            throw CommandParseError(.badArguments, "expected #<groupId>")
        }
        return id
    }

    /// A member role a command may give (`observer` … `owner`; never `relay`).
    mutating func role() throws(CommandParseError) -> GroupMemberRole {
        guard let w = word(), let role = GroupMemberRole(rawValue: String(w)), role != .relay else {
            throw CommandParseError(.badArguments, "expected a member role: observer, author, member, moderator, admin or owner")
        }
        return role
    }
}

extension ChatAPI {
    /// Runs the group commands, and the chat commands addressed to a group (`#<groupId>`);
    /// nil for any other command.
    func dispatchGroup(_ command: ChatCommand, idempotencyKey: String?) async throws -> ChatResponse? {
        let c = controller
        switch command {
        case let .group(g):
            switch g {
            case let .newGroup(userId, incognito, profile): return try await c.createGroup(userId: userId, incognito: incognito, profile: profile)
            case let .addMember(groupId, contactId, role): return try await c.addMember(groupId: groupId, contactId: contactId, role: role)
            case let .joinGroup(groupId): return try await c.joinGroup(groupId: groupId)
            case let .membersRole(groupId, ids, role): return try await c.setMembersRole(groupId: groupId, memberIds: ids, role: role)
            case let .blockMembers(groupId, ids, blocked): return try await c.blockMembers(groupId: groupId, memberIds: ids, blocked: blocked)
            case let .removeMembers(groupId, ids, messages): return try await c.removeMembers(groupId: groupId, memberIds: ids, withMessages: messages)
            case let .leaveGroup(groupId): return try await c.leaveGroup(groupId: groupId)
            case let .listMembers(groupId): return try await c.listMembers(groupId: groupId)
            case let .listGroups(userId, contactId, search): return try await c.listGroups(userId: userId, contactId: contactId, search: search)
            case let .updateProfile(groupId, profile): return try await c.updateGroupProfile(groupId: groupId, profile: profile)
            case let .deleteMemberItems(groupId, ids): return try await c.deleteMemberItems(groupId: groupId, itemIds: ids)
            case let .createLink(groupId, role, short): return try await c.createGroupLink(groupId: groupId, role: role, short: short)
            case let .setLinkRole(groupId, role): return try await c.setGroupLinkRole(groupId: groupId, role: role)
            case let .deleteLink(groupId): return try await c.deleteGroupLink(groupId: groupId)
            case let .getLink(groupId): return try await c.getGroupLink(groupId: groupId)
            case let .acceptMember(groupId, memberId, role): return try await c.acceptMember(groupId: groupId, groupMemberId: memberId, role: role)
            case let .createMemberContact(groupId, memberId): return try await c.createMemberContact(groupId: groupId, groupMemberId: memberId)
            case let .inviteMemberContact(contactId, content): return try await c.sendMemberContactInvitation(contactId: contactId, content: content)
            case let .acceptMemberContact(contactId): return try await c.acceptMemberContact(contactId: contactId)
            case let .setAutoAcceptMemberContacts(userId, enabled): return try await c.setAutoAcceptMemberContacts(userId: userId, enabled: enabled)
            }
        case let .sendMessages(.group(groupId, nil), _, _, _, messages):
            return try await c.sendToGroup(groupId: groupId, messages: messages)
        case let .getChat(.group(groupId, nil), pagination):
            let page: ItemPage = switch pagination {
            case let .last(n): .last(n)
            case let .after(id, n): .after(id, n)
            case let .before(id, n): .before(id, n)
            }
            return try await c.getGroupChat(groupId: groupId, page: page)
        case let .readChat(.group(groupId, nil)): return try await c.readGroupChat(groupId: groupId)
        case let .updateChatItem(.group(groupId, nil), itemId, _, message):
            return try await c.updateGroupItem(groupId: groupId, itemId: itemId, message: message)
        case let .deleteChatItems(.group(groupId, nil), itemIds, mode):
            return try await c.deleteGroupItems(groupId: groupId, itemIds: itemIds, broadcast: mode == .broadcast, markOnly: mode == .internalMark)
        case let .reaction(.group(groupId, nil), itemId, add, reaction):
            return try await c.reactGroupItem(groupId: groupId, itemId: itemId, add: add, reaction: reaction)
        case let .deleteChat(.group(groupId, nil), mode):
            guard mode != .messages else { throw ChatFailure(commandError: "deleting a group's messages only is not supported yet") }
            return try await c.deleteGroup(groupId: groupId)
        case let .setGroupCustomData(groupId, data): return try await c.setGroupCustomData(groupId: groupId, data: data)
        default:
            return nil
        }
    }
}
