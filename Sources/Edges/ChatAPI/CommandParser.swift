import ChatCore
import SwiftplexBase

/// Parses command strings of the SimpleX bot API. Words are separated by single or repeated
/// spaces; JSON and links run to the end of the line. The terminal's own commands (`/ad`,
/// `@name text`, …) are read first (CommandParser+CLI.swift).
public enum CommandParser {
    public static func parse(_ line: String) throws(CommandParseError) -> ChatCommand {
        let line = line.trimmingCharactersInSet()
        if let command = try parseCLI(line) { return command }
        var s = Scanner(line)
        guard let keyword = s.word(), keyword.hasPrefix("/") else {
            throw CommandParseError(.unknownCommand, "a command starts with /")
        }
        let command: ChatCommand
        switch keyword {
        case "/user":
            command = .showActiveUser
        case "/users":
            command = .listUsers
        case "/_create":
            if s.peekWord() == "link" || s.peekWord() == "member" {
                command = .group(try parseGroupLink("create", &s))
            } else {
                try s.expect("user")
                command = .createActiveUser(newUser: try s.jsonObject("NewUser"))
            }
        case "/_user":
            let id = try s.id("userId")
            command = .setActiveUser(userId: id, viewPassword: try s.optionalJSONString())
        case "/_delete":
            command = try parseDelete(&s)
        case "/_profile":
            let id = try s.id("userId")
            command = .updateProfile(userId: id, profile: try s.jsonObject("Profile"))
        case "/_set":
            command = try parseSet(&s)
        case "/_start":
            _ = s.rest() // upstream flags (main=on …) are accepted and ignored
            command = .startChat
        case "/_stop":
            command = .stopChat
        case "/_db":
            switch s.word() {
            case "export": command = .exportArchive(config: try s.jsonObject("ArchiveConfig"))
            case "import": command = .importArchive(config: try s.jsonObject("ArchiveConfig"))
            case "delete": command = .deleteStorage
            case let w: throw CommandParseError(.badArguments, "/_db takes export <json>, import <json> or delete, not \(w.map { "'\($0)'" } ?? "nothing")")
            }
        case "/_address":
            let id = try s.id("userId")
            var short = false
            if let w = s.peekWord(), w.hasPrefix("short=") {
                _ = s.word()
                guard let v = Scanner.onOffValue(w.dropFirst("short=".count)) else { throw CommandParseError(.badArguments, "short must be on or off") }
                short = v
            }
            command = .createAddress(userId: id, short: short)
        case "/_delete_address":
            command = .deleteAddress(userId: try s.id("userId"))
        case "/_show_address":
            command = .showAddress(userId: try s.id("userId"))
        case "/_profile_address":
            let id = try s.id("userId")
            command = .setProfileAddress(userId: id, enabled: try s.onOff("enable"))
        case "/_address_settings":
            let id = try s.id("userId")
            command = .setAddressSettings(userId: id, settings: try s.jsonObject("AddressSettings"))
        case "/_send":
            command = try parseSend(&s)
        case "/_update":
            try s.expect("item")
            let chat = try s.chatRef()
            let item = try s.id("chatItemId")
            var live = false
            if s.peekWord() == "live=on" { _ = s.word(); live = true }
            try s.expect("json")
            command = .updateChatItem(chat: chat, itemId: item, live: live, message: try s.jsonObject("UpdatedMessage"))
        case "/_reaction":
            let chat = try s.chatRef()
            let item = try s.id("chatItemId")
            let add = try s.onOff("add")
            command = .reaction(chat: chat, itemId: item, add: add, reaction: try s.jsonObject("MsgReaction"))
        case "/_connect":
            command = try parseConnect(&s)
        case "/_accept" where s.peekWord() == "member":
            command = .group(try parseGroupLink("accept", &s))
        case "/_accept":
            var incognito = false
            if s.peekWord() == "incognito=on" { _ = s.word(); incognito = true }
            command = .acceptContact(requestId: try s.id("contactReqId"), incognito: incognito)
        case "/_reject":
            command = .rejectContact(requestId: try s.id("contactReqId"))
        case "/_contacts":
            command = .listContacts(userId: try s.id("userId"))
        case "/_get":
            command = try parseGet(&s)
        case "/_read":
            try s.expect("chat")
            command = .readChat(chat: try s.chatRef())
        case "/_public":
            try s.expect("group")
            let id = try s.id("userId")
            var incognito = false
            if let w = s.peekWord(), w.hasPrefix("incognito=") {
                _ = s.word()
                guard let v = Scanner.onOffValue(w.dropFirst("incognito=".count)) else { throw CommandParseError(.badArguments, "incognito must be on or off") }
                incognito = v
            }
            let relayIds = try s.idList("relayIds")
            command = .newPublicGroup(userId: id, incognito: incognito, relayIds: relayIds, profile: try s.jsonObject("GroupProfile"))
        case "/_add" where s.peekWord() == "relays":
            _ = s.word()
            let g = try s.groupId()
            command = .addGroupRelays(groupId: g, relayIds: try s.idList("relayIds"))
        case "/_relay" where s.peekWord() == "allow":
            _ = s.word()
            command = .allowRelayGroup(groupId: try s.groupId())
        case "/_relays":
            let id = try s.id("userId")
            let list = s.rest()
            if list.isEmpty {
                command = .getUserRelays(userId: id)
            } else {
                command = .setUserRelays(userId: id, relays: list.split(separator: ",").map { String($0).trimmingCharactersInSet() })
            }
        case "/_relay" where s.peekWord() == "test":
            _ = s.word()
            let id = try s.id("userId")
            guard let address = s.word() else { throw CommandParseError(.badArguments, "/_relay test needs a chat relay address") }
            command = .testChatRelay(userId: id, address: String(address))
        case "/relay" where s.peekWord() == "test":
            _ = s.word()
            guard let address = s.word() else { throw CommandParseError(.badArguments, "/relay test needs a chat relay address") }
            command = .testChatRelay(userId: nil, address: String(address))
        case "/_relay" where s.peekWord() == "policy":
            _ = s.word()
            command = .setRelayPolicy(policy: try s.jsonObject("RelayPolicy"))
        case "/relays":
            var relays: [ChatRelayEntry] = []
            while let w = s.word() {
                guard w.hasPrefix("name="), w.count > 5 else { throw CommandParseError(.badArguments, "expected name=<name> <address>, got \(w)") }
                guard let address = s.word() else { throw CommandParseError(.badArguments, "name=\(w.dropFirst(5)) needs a chat relay address") }
                relays.append(ChatRelayEntry(name: String(w.dropFirst(5)), address: String(address)))
            }
            command = relays.isEmpty ? .listChatRelays : .setChatRelays(relays: relays)
        default:
            guard let group = try parseGroupCommand(keyword, &s) else { throw CommandParseError(.unknownCommand, "unknown command \(keyword)") }
            command = .group(group)
        }
        guard s.atEnd else { throw CommandParseError(.badArguments, "unexpected text after \(keyword): \(s.rest())") }
        return command
    }

    private static func parseDelete(_ s: inout Scanner) throws(CommandParseError) -> ChatCommand {
        switch s.peekWord() {
        case "user":
            _ = s.word()
            let id = try s.id("userId")
            guard let flag = s.word(), flag.hasPrefix("del_smp="), let on = Scanner.onOffValue(flag.dropFirst("del_smp=".count)) else {
                throw CommandParseError(.badArguments, "expected del_smp=on|off")
            }
            return .deleteUser(userId: id, deleteQueues: on, viewPassword: try s.optionalJSONString())
        case "item":
            _ = s.word()
            let chat = try s.chatRef()
            let ids = try s.idList("chatItemIds")
            guard let m = s.word(), let mode = ChatCommand.DeleteMode(rawValue: String(m)) else {
                throw CommandParseError(.badArguments, "delete mode must be broadcast, internal or internalMark")
            }
            return .deleteChatItems(chat: chat, itemIds: ids, mode: mode)
        case "member":
            _ = s.word()
            try s.expect("item")
            let g = try s.groupId()
            return .group(.deleteMemberItems(groupId: g, itemIds: try s.idList("chatItemIds")))
        case "link":
            return .group(try parseGroupLink("delete", &s))
        default:
            let chat = try s.chatRef()
            guard let kind = s.word() else { return .deleteChat(chat: chat, mode: .full(notify: true)) }
            let notify = try s.notifyOption()
            switch kind {
            case "full": return .deleteChat(chat: chat, mode: .full(notify: notify))
            case "entity": return .deleteChat(chat: chat, mode: .entity(notify: notify))
            case "messages": return .deleteChat(chat: chat, mode: .messages)
            default: throw CommandParseError(.badArguments, "chat delete mode must be full, entity or messages")
            }
        }
    }

    private static func parseSet(_ s: inout Scanner) throws(CommandParseError) -> ChatCommand {
        if s.peekWord() == "link" { return .group(try parseGroupLink("set", &s)) }
        switch s.word() {
        case "prefs":
            guard case let .direct(id) = try s.chatRef() else { throw CommandParseError(.badArguments, "/_set prefs takes @<contactId>") }
            return .setContactPreferences(contactId: id, preferences: try s.jsonObject("Preferences"))
        case "accept":
            try s.expect("member")
            try s.expect("contacts")
            let id = try s.id("userId")
            return .group(.setAutoAcceptMemberContacts(userId: id, enabled: try s.onOff("accept")))
        case "receipts":
            try s.expect("contacts")
            let id = try s.id("userId")
            return .setContactReceipts(userId: id, enabled: try s.onOff("receipts"))
        case "custom":
            let chat = try s.chatRef()
            let data = s.atEnd ? nil : try s.jsonObject("custom data")
            switch chat {
            case let .direct(id): return .setContactCustomData(contactId: id, data: data)
            case let .group(id, nil): return .setGroupCustomData(groupId: id, data: data)
            default: throw CommandParseError(.badArguments, "/_set custom takes @<contactId> or #<groupId>")
            }
        default:
            throw CommandParseError(.unknownCommand, "unknown /_set command")
        }
    }

    private static func parseSend(_ s: inout Scanner) throws(CommandParseError) -> ChatCommand {
        let chat = try s.chatRef()
        var live = false, sign = false
        var ttl: Int?
        while let w = s.peekWord(), w != "json" {
            _ = s.word()
            if w == "live=on" { live = true } else if w == "sign=on" { sign = true } else if w.hasPrefix("ttl="), let t = Int(w.dropFirst(4)), t > 0 {
                ttl = t
            } else {
                throw CommandParseError(.badArguments, "unknown /_send option \(w)")
            }
        }
        try s.expect("json")
        guard case let .array(items) = try s.json("ComposedMessage[]"), !items.isEmpty else {
            throw CommandParseError(.badJSON, "/_send needs a non-empty JSON array of messages")
        }
        return .sendMessages(chat: chat, live: live, ttl: ttl, sign: sign, messages: items)
    }

    private static func parseConnect(_ s: inout Scanner) throws(CommandParseError) -> ChatCommand {
        if s.peekWord() == "plan" {
            _ = s.word()
            let id = try s.id("userId")
            let link = s.rest()
            guard !link.isEmpty else { throw CommandParseError(.badArguments, "/_connect plan needs a link") }
            return .connectPlan(userId: id, link: link)
        }
        let id = try s.id("userId")
        var incognito = false, makeShort = false
        while let w = s.peekWord(), w.hasPrefix("incognito=") || w.hasPrefix("short=") {
            _ = s.word()
            let (name, value) = w.hasPrefix("short=") ? ("short", w.dropFirst(6)) : ("incognito", w.dropFirst(10))
            guard let v = Scanner.onOffValue(value) else { throw CommandParseError(.badArguments, "\(name) must be on or off") }
            if name == "short" { makeShort = v } else { incognito = v }
        }
        guard let full = s.word() else { return .addContact(userId: id, incognito: incognito, short: makeShort) }
        guard !makeShort else { throw CommandParseError(.badArguments, "short=on makes a new invitation; it takes no link") }
        let short = s.word()
        return .connect(userId: id, incognito: incognito, fullLink: String(full), shortLink: short.map(String.init))
    }

    private static func parseGet(_ s: inout Scanner) throws(CommandParseError) -> ChatCommand {
        if s.peekWord() == "link" { return .group(try parseGroupLink("get", &s)) }
        switch s.word() {
        case "relays":
            return .getGroupRelays(groupId: try s.groupId())
        case "group":
            guard s.word() == "link", s.word() == "data" else { throw CommandParseError(.badArguments, "expected /_get group link data #<groupId>") }
            return .getUpdatedGroupLinkData(groupId: try s.groupId())
        case "chats":
            let id = try s.id("userId")
            var pcc = false
            if s.peekWord() == "pcc=on" { _ = s.word(); pcc = true }
            let count = try s.keyedInt("count")
            let query = s.atEnd ? nil : try s.jsonObject("ChatListQuery")
            return .getChats(userId: id, pendingConnections: pcc, count: count, query: query)
        case "chat":
            let chat = try s.chatRef()
            guard let w = s.word() else { throw CommandParseError(.badArguments, "expected count=<n>, last=<n>, after=<id> count=<n> or before=<id> count=<n>") }
            if w.hasPrefix("count="), let n = Int(w.dropFirst(6)), n > 0 { return .getChat(chat: chat, pagination: .last(n)) }
            if w.hasPrefix("last="), let n = Int(w.dropFirst(5)), n > 0 { return .getChat(chat: chat, pagination: .last(n)) }
            if w.hasPrefix("after="), let id = Int64(w.dropFirst(6)) { return .getChat(chat: chat, pagination: .after(id, try s.keyedInt("count"))) }
            if w.hasPrefix("before="), let id = Int64(w.dropFirst(7)) { return .getChat(chat: chat, pagination: .before(id, try s.keyedInt("count"))) }
            throw CommandParseError(.badArguments, "expected count=<n>, last=<n>, after=<id> count=<n> or before=<id> count=<n>")
        default:
            throw CommandParseError(.unknownCommand, "unknown /_get command")
        }
    }
}

/// A cursor over a command line.
struct Scanner {
    let text: Substring
    var index: Substring.Index

    init(_ text: String) {
        self.text = Substring(text)
        index = self.text.startIndex
    }

    var atEnd: Bool {
        var i = index
        while i < text.endIndex, text[i] == " " { i = text.index(after: i) }
        return i == text.endIndex
    }

    private mutating func skipSpaces() {
        while index < text.endIndex, text[index] == " " { index = text.index(after: index) }
    }

    mutating func word() -> Substring? {
        skipSpaces()
        guard index < text.endIndex else { return nil }
        let start = index
        while index < text.endIndex, text[index] != " " { index = text.index(after: index) }
        return text[start..<index]
    }

    func peekWord() -> Substring? {
        var copy = self
        return copy.word()
    }

    mutating func rest() -> String {
        skipSpaces()
        let r = String(text[index...])
        index = text.endIndex
        return r.trimmingCharactersInSet()
    }

    mutating func expect(_ w: String) throws(CommandParseError) {
        guard word() == Substring(w) else { throw CommandParseError(.badArguments, "expected '\(w)'") }
    }

    mutating func id(_ name: String) throws(CommandParseError) -> Int64 {
        guard let w = word() else { throw CommandParseError(.badArguments, "missing \(name)") }
        guard let v = Int64(w), v > 0 else { throw CommandParseError(.badArguments, "\(name) must be a positive number, got '\(w)'") }
        return v
    }

    mutating func idList(_ name: String) throws(CommandParseError) -> [Int64] {
        guard let w = word() else { throw CommandParseError(.badArguments, "missing \(name)") }
        let ids = w.split(separator: ",", omittingEmptySubsequences: false).map { Int64($0) }
        guard !ids.isEmpty, ids.allSatisfy({ ($0 ?? 0) > 0 }) else { throw CommandParseError(.badArguments, "\(name) must be comma-separated positive numbers") }
        return ids.map { $0! }
    }

    mutating func keyedInt(_ key: String) throws(CommandParseError) -> Int {
        guard let w = word(), w.hasPrefix("\(key)="), let n = Int(w.dropFirst(key.count + 1)), n > 0 else {
            throw CommandParseError(.badArguments, "expected \(key)=<positive number>")
        }
        return n
    }

    mutating func onOff(_ name: String) throws(CommandParseError) -> Bool {
        guard let w = word(), let v = Self.onOffValue(w) else { throw CommandParseError(.badArguments, "\(name) must be on or off") }
        return v
    }

    static func onOffValue(_ w: Substring) -> Bool? {
        switch w {
        case "on": true
        case "off": false
        default: nil
        }
    }

    /// An optional `notify=on|off` word after a chat delete mode; on when it is absent.
    mutating func notifyOption() throws(CommandParseError) -> Bool {
        guard let n = peekWord(), n.hasPrefix("notify=") else { return true }
        _ = word()
        guard let v = Scanner.onOffValue(n.dropFirst("notify=".count)) else { throw CommandParseError(.badArguments, "notify must be on or off") }
        return v
    }

    mutating func chatRef() throws(CommandParseError) -> ChatRef {
        guard let w = word() else { throw CommandParseError(.badArguments, "missing chat reference (@id, #id or *id)") }
        guard let ref = ChatRef(w) else { throw CommandParseError(.badArguments, "bad chat reference '\(w)' (expected @id, #id or *id)") }
        return ref
    }

    /// The rest of the line as JSON.
    mutating func json(_ what: String) throws(CommandParseError) -> JSONValue {
        let r = rest()
        guard !r.isEmpty else { throw CommandParseError(.badJSON, "missing \(what) JSON") }
        do {
            return try JSONValue.parse(r)
        } catch {
            throw CommandParseError(.badJSON, "bad \(what) JSON: \(error)")
        }
    }

    mutating func jsonObject(_ what: String) throws(CommandParseError) -> JSONValue {
        let v = try json(what)
        guard case .object = v else { throw CommandParseError(.badJSON, "\(what) must be a JSON object") }
        return v
    }

    /// An optional trailing JSON string literal (view passwords).
    mutating func optionalJSONString() throws(CommandParseError) -> String? {
        guard !atEnd else { return nil }
        guard case let .string(s) = try json("password") else { throw CommandParseError(.badJSON, "the password must be a JSON string") }
        return s
    }
}

extension String {
    func trimmingCharactersInSet() -> String {
        var s = Substring(self)
        while let f = s.first, f.isWhitespace { s = s.dropFirst() }
        while let l = s.last, l.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
