import ChatCore
import ChatModel
import SwiftplexBase

/// The SimpleX terminal's own commands, which bots and their libraries send over the WebSocket
/// API besides the `/_…` ones: they act as the active user and name contacts, groups and
/// requests by their local names (`'two words'` quoted). Each maps onto the engine's typed
/// commands (ChatAPI+CLI.swift) and answers with the same response types SimpleX does.
public enum CLICommand: Sendable, Equatable {
    /// `/c [short|s] [incognito|i]`: a new one-time invitation (`invitation`).
    case addContact(incognito: Bool, short: Bool)
    /// `/address`, `/ad [short|s]` (`userContactLinkCreated`).
    case createAddress(short: Bool)
    /// `/show_address`, `/sa` (`userContactLink`).
    case showAddress
    /// `/delete_address`, `/da` (`userContactLinkDeleted`).
    case deleteAddress
    /// `/profile_address on|off`, `/pa on|off` (`userProfileUpdated` / `userProfileNoChange`).
    case setProfileAddress(enabled: Bool)
    /// `/auto_accept on [incognito] [text <text> | json <MsgContent> | <text>]`, `/auto_accept off`
    /// (`userContactLinkUpdated`).
    case autoAccept(AutoAcceptSetting?)
    /// `/accept`, `/ac [incognito|i] [@]<name>` (`acceptingContactRequest`).
    case acceptContact(name: String, incognito: Bool)
    /// `/reject`, `/rc [@]<name>` (`contactRequestRejected`).
    case rejectContact(name: String)
    /// `/contacts` (`contactsList`).
    case listContacts
    /// `/groups`, `/gs [@<contact>] [<search>]` (`groupsList`).
    case listGroups(contact: String?, search: String?)
    /// `@<name> <text>`, `#<group> <text>` (`newChatItems`).
    case sendMessage(to: ChatName, text: String)
    /// `/profile`, `/p <name> [<full name>]` (`userProfileUpdated` / `userProfileNoChange`).
    case updateProfile(displayName: String, fullName: String)
    /// `/help [section]`, `/h`, `/hg`, … (`chatHelp`).
    case help(HelpSection)
    /// `/group`, `/g [incognito|i] [#]<name> [<full name>]` (`groupCreated`).
    case newGroup(name: String, fullName: String, incognito: Bool)
    /// `/add`, `/a [#]<group> [@]<contact> [<role>]` (`sentGroupInvitation`; role `member` unless given).
    case addMember(group: String, contact: String, role: GroupMemberRole)
    /// `/join`, `/j [#]<group>` (`userAcceptedGroupSent`).
    case joinGroup(group: String)
    /// `/leave`, `/l [#]<group>` (`leftMemberUser`).
    case leaveGroup(group: String)
    /// `/members`, `/ms [#]<group>` (`groupMembers`).
    case listMembers(group: String)
    /// `/delete`, `/d [@]<name> [full|entity|messages] [notify=on|off]` (`contactDeleted`).
    case deleteContact(name: String, mode: ChatCommand.ChatDeleteMode)
    /// `/delete #<group>`, `/d #<group>` (`groupDeletedUser`).
    case deleteGroup(group: String)

    public enum ChatName: Sendable, Equatable {
        case contact(String)
        case group(String)
    }

    /// An address's automatic accept: as an incognito contact or not, with an optional first
    /// message (a MsgContent object).
    public struct AutoAcceptSetting: Sendable, Equatable {
        public var incognito: Bool
        public var reply: JSONValue?
        public init(incognito: Bool, reply: JSONValue?) {
            self.incognito = incognito
            self.reply = reply
        }
    }

    /// SimpleX's help sections, as `chatHelp` writes them.
    public enum HelpSection: String, Sendable, Equatable {
        case main, files, groups, contacts, myAddress, incognito, markdown, messages, remote, settings, database
    }
}

extension CommandParser {
    /// A terminal command, or nil when the line is not one (the API's parser then reads it).
    static func parseCLI(_ line: String) throws(CommandParseError) -> ChatCommand? {
        if let first = line.first, first == "@" || first == "#" { return .cli(try parseNamedSend(line)) }
        var s = Scanner(line)
        guard let keyword = s.word() else { return nil }
        let command: ChatCommand
        switch keyword {
        case "/u":
            command = .showActiveUser
        case "/connect", "/c":
            command = try parseConnectCLI(&s)
        case "/address", "/ad":
            command = .cli(.createAddress(short: s.flag("short", "s")))
        case "/show_address", "/sa":
            command = .cli(.showAddress)
        case "/delete_address", "/da":
            command = .cli(.deleteAddress)
        case "/profile_address", "/pa":
            command = .cli(.setProfileAddress(enabled: try s.onOff("the profile address setting")))
        case "/auto_accept":
            command = .cli(.autoAccept(try parseAutoAccept(&s)))
        case "/accept", "/ac":
            let incognito = s.flagBeforeName("incognito", "i")
            command = .cli(.acceptContact(name: try s.name("contact", sigil: "@"), incognito: incognito))
        case "/reject", "/rc":
            command = .cli(.rejectContact(name: try s.name("contact", sigil: "@")))
        case "/contacts":
            command = .cli(.listContacts)
        case "/groups", "/gs":
            var contact: String?
            if s.peekWord()?.hasPrefix("@") == true { contact = try s.name("contact", sigil: "@") }
            let search = s.rest()
            command = .cli(.listGroups(contact: contact, search: search.isEmpty ? nil : search))
        case "/profile", "/p":
            guard !s.atEnd else { throw CommandParseError(.unknownCommand, "\(keyword) without a name (show the profile) is not supported; /u shows the active user") }
            let name = try s.name("display name", sigil: nil)
            command = .cli(.updateProfile(displayName: name, fullName: s.rest()))
        case "/help", "/h":
            command = .cli(.help(try parseHelpSection(&s)))
        case "/hf": command = .cli(.help(.files))
        case "/hg": command = .cli(.help(.groups))
        case "/hc": command = .cli(.help(.contacts))
        case "/ha": command = .cli(.help(.myAddress))
        case "/hi": command = .cli(.help(.incognito))
        case "/hm": command = .cli(.help(.messages))
        case "/hr": command = .cli(.help(.remote))
        case "/hs": command = .cli(.help(.settings))
        case "/hd": command = .cli(.help(.database))
        case "/markdown", "/m": command = .cli(.help(.markdown))
        case "/group", "/g":
            let incognito = s.flagBeforeName("incognito", "i")
            let name = try s.name("group", sigil: "#")
            command = .cli(.newGroup(name: name, fullName: s.rest(), incognito: incognito))
        case "/add", "/a":
            let group = try s.name("group", sigil: "#")
            let contact = try s.name("contact", sigil: "@")
            let role: GroupMemberRole = s.atEnd ? .member : try s.role()
            command = .cli(.addMember(group: group, contact: contact, role: role))
        case "/join", "/j":
            command = .cli(.joinGroup(group: try s.name("group", sigil: "#")))
        case "/leave", "/l":
            command = .cli(.leaveGroup(group: try s.name("group", sigil: "#")))
        case "/members", "/ms":
            command = .cli(.listMembers(group: try s.name("group", sigil: "#")))
        case "/delete", "/d":
            if s.peekWord()?.hasPrefix("#") == true {
                command = .cli(.deleteGroup(group: try s.name("group", sigil: "#")))
            } else {
                let name = try s.name("contact", sigil: "@")
                command = .cli(.deleteContact(name: name, mode: try parseDeleteMode(&s)))
            }
        default:
            return nil
        }
        guard s.atEnd else { throw CommandParseError(.badArguments, "unexpected text after \(keyword): \(s.rest())") }
        return command
    }

    /// `@<name> <text>` or `#<group> <text>`.
    private static func parseNamedSend(_ line: String) throws(CommandParseError) -> CLICommand {
        var s = Scanner(line)
        let toGroup = line.first == "#"
        let name = try s.name(toGroup ? "group" : "contact", sigil: toGroup ? "#" : "@")
        let text = s.rest()
        guard !text.isEmpty else { throw CommandParseError(.badArguments, "\(toGroup ? "#group" : "@name") needs a message after the name") }
        return .sendMessage(to: toGroup ? .group(name) : .contact(name), text: text)
    }

    /// `/c` with its flags: a new invitation, or a link to connect to.
    private static func parseConnectCLI(_ s: inout Scanner) throws(CommandParseError) -> ChatCommand {
        var incognito = false, short = false
        while let w = s.peekWord() {
            switch w {
            case "incognito", "i", "incognito=on": incognito = true
            case "incognito=off": incognito = false
            case "short", "s": short = true
            default:
                let link = s.rest()
                guard !short else { throw CommandParseError(.badArguments, "short makes a new invitation; it takes no link") }
                return .connectActiveUser(incognito: incognito, link: link)
            }
            _ = s.word()
        }
        return .cli(.addContact(incognito: incognito, short: short))
    }

    private static func parseAutoAccept(_ s: inout Scanner) throws(CommandParseError) -> CLICommand.AutoAcceptSetting? {
        guard try s.onOff("auto_accept") else { return nil }
        var incognito = false
        switch s.peekWord() {
        case "incognito", "i", "incognito=on": _ = s.word(); incognito = true
        case "incognito=off": _ = s.word()
        case "business": throw CommandParseError(.badArguments, "business addresses are not supported")
        default: break
        }
        let reply: JSONValue?
        switch s.peekWord() {
        case nil: reply = nil
        case "json":
            _ = s.word()
            reply = try s.jsonObject("MsgContent")
        case "text":
            _ = s.word()
            reply = .object([("type", "text"), ("text", .string(s.rest()))])
        default:
            reply = .object([("type", "text"), ("text", .string(s.rest()))])
        }
        return CLICommand.AutoAcceptSetting(incognito: incognito, reply: reply)
    }

    private static func parseHelpSection(_ s: inout Scanner) throws(CommandParseError) -> CLICommand.HelpSection {
        guard let w = s.word() else { return .main }
        switch w {
        case "files", "file": return .files
        case "groups", "group": return .groups
        case "contacts", "contact": return .contacts
        case "address": return .myAddress
        case "incognito": return .incognito
        case "messages": return .messages
        case "remote": return .remote
        case "settings": return .settings
        case "db": return .database
        case "markdown": return .markdown
        default: throw CommandParseError(.badArguments, "no help section \(w) (files, groups, contacts, address, incognito, messages, remote, settings, db)")
        }
    }

    private static func parseDeleteMode(_ s: inout Scanner) throws(CommandParseError) -> ChatCommand.ChatDeleteMode {
        let kind = s.peekWord()
        if kind == "full" || kind == "entity" || kind == "messages" { _ = s.word() }
        let notify = try s.notifyOption()
        switch kind {
        case "entity": return .entity(notify: notify)
        case "messages": return .messages
        default: return .full(notify: notify)
        }
    }
}

extension Scanner {
    /// A local name, after an optional `sigil` (`@` for contacts, `#` for groups): a word, or
    /// `'two words'` in single quotes. A name does not start with `@`, `#` or `'` once unquoted.
    mutating func name(_ what: String, sigil: Character?) throws(CommandParseError) -> String {
        while index < text.endIndex, text[index] == " " { index = text.index(after: index) }
        if let sigil, index < text.endIndex, text[index] == sigil { index = text.index(after: index) }
        guard index < text.endIndex, text[index] != " " else { throw CommandParseError(.badArguments, "missing \(what) name") }
        if text[index] == "'" {
            let start = text.index(after: index)
            guard let close = text[start...].firstIndex(of: "'"), close > start else {
                throw CommandParseError(.badArguments, "the quoted \(what) name is not closed with '")
            }
            index = text.index(after: close)
            guard index == text.endIndex || text[index] == " " else { throw CommandParseError(.badArguments, "expected a space after the quoted \(what) name") }
            return String(text[start..<close])
        }
        guard let name = word(), let first = name.first, first != "@", first != "#" else {
            throw CommandParseError(.badArguments, "a \(what) name cannot start with @ or #")
        }
        return String(name)
    }

    /// Consumes the next word when it is one of `names` (a flag such as `short` or `s`).
    mutating func flag(_ names: String...) -> Bool {
        guard let w = peekWord(), names.contains(String(w)) else { return false }
        _ = word()
        return true
    }

    /// A flag before a name (`/ac i bob`): taken only when a name follows, so a contact called
    /// `i` is still a name.
    mutating func flagBeforeName(_ names: String...) -> Bool {
        var copy = self
        guard let w = copy.word(), names.contains(String(w)), !copy.atEnd else { return false }
        self = copy
        return true
    }
}
