import ChatAPI
import ChatCore
import QRCode
import SwiftplexBase

/// The profile to create on first start: its name (asked at the terminal when missing), and
/// whether it is a bot's (`--create-bot-display-name`) or a chat relay's (`--relay`).
struct NewProfile: Sendable {
    var name: String?
    var bot: Bool
    var relay: Bool
}

/// Turns the client's short commands into Chat API commands and the engine's events into
/// readable lines. Contact and request names are looked up here, since the API works with ids.
actor ChatClient {
    enum Outcome { case proceed, quit }

    let api: ChatAPI
    private let terminal: Terminal
    private let qrColors: Bool
    private var userId: Int64 = 0
    /// Pending contact requests (id and display name), from `receivedContactRequest` events, in
    /// arrival order. Two may carry the same name: both are kept, and `/ac #<id>` picks one.
    private var requests: [(id: Int64, name: String)] = []

    init(api: ChatAPI, terminal: Terminal, qrColors: Bool) {
        self.api = api
        self.terminal = terminal
        self.qrColors = qrColors
    }

    // MARK: - Start-up

    /// Whether there is no profile yet (first start).
    func needsProfile() async throws -> Bool {
        let user = await api.execute("/user")
        if user["type"]?.stringValue == "activeUser" { return false }
        if user["chatError"]?["errorType"]?["type"]?.stringValue == "noActiveUser" { return true }
        throw ClientFailure("cannot read the profile: \(EventText.errorWords(user))")
    }

    /// Creates the profile on first start (a bot's, a chat relay's or a person's), stores the
    /// relays given on the command line, and starts the engine. A chat relay's relay address is
    /// made on first start and printed. `quiet` (`-e`) prints only failures.
    func setUp(_ new: NewProfile, servers: [String], quiet: Bool = false) async throws {
        var user = await api.execute("/user")
        if user["type"]?.stringValue != "activeUser" {
            guard let name = new.name else { throw ClientFailure("no display name given; a new profile needs one") }
            var fields: [(String, JSONValue)] = [("displayName", .string(name)), ("fullName", .string(""))]
            if new.bot { fields.append(("peerType", "bot")) }
            let newUser = JSONValue.object([("profile", .object(fields)), ("pastTimestamp", .bool(false)),
                                            ("userChatRelay", .bool(new.relay)), ("clientService", .bool(false))])
            user = await api.execute("/_create user \(newUser)")
            guard user["type"]?.stringValue == "activeUser" else {
                throw ClientFailure("cannot create the profile: \(EventText.errorWords(user))")
            }
            if !quiet {
                let kind = new.relay ? "chat relay profile" : new.bot ? "bot profile" : "profile"
                terminal.line("\(kind) \(Sanitize.line(user["user"]?["localDisplayName"]?.stringValue ?? name)) created")
            }
        }
        guard let id = user["user"]?["userId"]?.intValue else { throw ClientFailure("the engine returned a user without an id") }
        userId = Int64(id)
        let isRelay = user["user"]?["userChatRelay"]?.boolValue ?? false
        if new.relay, !isRelay {
            throw ClientFailure("this profile was created as an ordinary user and cannot become a chat relay; give the relay its own database (-d)")
        }
        if !servers.isEmpty {
            let set = await api.execute("/_relays \(userId) \(servers.joined(separator: ","))")
            guard set["type"]?.stringValue == "userRelays" else { throw ClientFailure("cannot store the relays: \(EventText.errorWords(set))") }
        }
        let started = await api.execute("/_start")
        guard ["chatStarted", "chatRunning"].contains(started["type"]?.stringValue ?? "") else {
            throw ClientFailure("cannot start the chat: \(EventText.errorWords(started))")
        }
        if new.relay { try await showRelayAddress(quiet: quiet) }
        guard !quiet else { return }
        let display = Sanitize.line(user["user"]?["localDisplayName"]?.stringValue ?? "")
        terminal.line("\(display) is ready; type /help for commands")
    }

    /// A chat relay's relay address (channel owners invite the relay with it): made on first use.
    private func showRelayAddress(quiet: Bool) async throws {
        var r = await api.execute("/_show_address \(userId)")
        if r["chatError"]?["storeError"]?["type"]?.stringValue == "userContactLinkNotFound" {
            let created = await api.execute("/_address \(userId)")
            guard created["type"]?.stringValue == "userContactLinkCreated" else {
                throw ClientFailure("cannot create the relay address: \(EventText.errorWords(created))")
            }
            r = await api.execute("/_show_address \(userId)")
        }
        let link = r["contactLink"]?["connLinkContact"]
        guard let shown = link?["connShortLink"]?.stringValue ?? link?["connFullLink"]?.stringValue else {
            throw ClientFailure("cannot read the relay address: \(EventText.errorWords(r))")
        }
        if !quiet { terminal.line("chat relay address: \(shown)") }
    }

    // MARK: - Input

    /// Executes one input line.
    func handle(_ raw: String) async -> Outcome {
        let line = raw.trimmingCharacters(in: .whitespaces)
        guard !line.isEmpty else { return .proceed }
        let (word, rest) = Self.split(line)
        switch word {
        case "/q", "/quit": return .quit
        case "/help", "/h": terminal.line(Self.help)
        case "/c", "/connect":
            if rest.isEmpty { await newInvitation() } else { await connect(rest) }
        case "/ad", "/address": await showAddress()
        case "/ac", "/accept": await decideRequest(rest, accept: true)
        case "/rc", "/reject": await decideRequest(rest, accept: false)
        case "/contacts": await listContacts()
        case "/g", "/group": await newGroup(rest)
        case "/a", "/add": await addMember(rest)
        case "/j", "/join": await joinGroup(rest)
        case "/ms", "/members": await listMembers(rest)
        case "/l", "/leave": await leaveGroup(rest)
        case "/create" where rest.hasPrefix("link"): await createGroupLink(String(Self.split(rest).1))
        case "/relays": await chatRelays(line)
        case "/public": await newChannel(rest)
        default:
            if line.hasPrefix("@") {
                await send(line)
            } else if line.hasPrefix("#") {
                await sendToGroup(line)
            } else if line.hasPrefix("/") {
                // Anything else is a Chat API command, answered with its JSON.
                terminal.line((await api.execute(line)).description)
            } else {
                terminal.line("to send a message write @name text; /help lists the commands")
            }
        }
        return .proceed
    }

    static let help = """
        /c                 new one-time invitation (link and QR code)
        /c <link>          connect by an invitation link or a contact address
        /ad                your contact address (created on first use)
        /ac <name>         accept the contact request from <name> (/ac #<number> when it says so)
        /rc <name>         reject the contact request from <name> (/rc #<number> likewise)
        @<name> <text>     send a message (@'two words' text for names with spaces)
        /contacts          list your contacts
        /g <group>         create a group (you are its owner)
        /a <group> <name>  invite the contact <name> to the group (as a member)
        /j <group>         join a group you were invited to
        #<group> <text>    send a message to the group (#'two words' text for names with spaces)
        /ms <group>        list the group's members
        /l <group>         leave the group
        /create link #<group>  the group's link (anyone can join with /c <link>; created on first use)
        /relays            list your chat relays (with the ids /public group takes)
        /relays name=<name> <address> [name=<name> <address> …]
                           set your chat relays (replaces the list; <address> is a relay's /r link)
        /public group relays=<id>[,<id>…] #<channel>
                           create a channel served by those chat relays (you post, subscribers read)
        /c <channel link>  subscribe to a channel (through each of its relays)
        #<channel> <text>  post to a channel you own (subscribers see it as the channel)
        /help              this list
        /q                 quit (also end of input, Ctrl-C)
        any other /command is passed to the Chat API as it is and its JSON answer printed
        """

    private func newInvitation() async {
        let r = await api.execute("/_connect \(userId)")
        guard r["type"]?.stringValue == "invitation", let link = r["connLinkInvitation"]?["connFullLink"]?.stringValue else {
            return terminal.line("cannot create an invitation: \(EventText.errorWords(r))")
        }
        terminal.line("one-time invitation link (give it to one person; /c <link> on their side):")
        printLink(link)
    }

    private func connect(_ link: String) async {
        let r = await api.execute("/_connect \(userId) \(link)")
        switch r["type"]?.stringValue {
        case "sentConfirmation": terminal.line("connection request sent; you are connected when the other side's client answers")
        case "sentInvitation" where r["connection"]?["groupLinkId"] != nil:
            terminal.line("request to join the group sent; you are in when the host's client answers")
        case "sentInvitation": terminal.line("contact request sent; you are connected when it is accepted")
        case "startedConnectionToGroup":
            let g = EventText.group(r["groupInfo"])
            terminal.line("joining channel #\(g) through its relays; you are subscribed when a relay answers")
        case "contactAlreadyExists":
            terminal.line("you are already connected to \(Sanitize.line(r["contact"]?["localDisplayName"]?.stringValue ?? "this contact"))")
        default: terminal.line("cannot connect: \(EventText.errorWords(r))")
        }
    }

    private func showAddress() async {
        var r = await api.execute("/_show_address \(userId)")
        var link = r["contactLink"]?["connLinkContact"]?["connFullLink"]?.stringValue
        if link == nil, r["chatError"]?["storeError"]?["type"]?.stringValue == "userContactLinkNotFound" {
            r = await api.execute("/_address \(userId)")
            link = r["connLinkContact"]?["connFullLink"]?.stringValue
        }
        guard let link else { return terminal.line("cannot get your address: \(EventText.errorWords(r))") }
        terminal.line("your contact address (anyone can use it; requests need /ac <name>):")
        printLink(link)
    }

    private func printLink(_ link: String) {
        terminal.line(link)
        // Low error correction keeps the code small enough for a terminal; a screen is a clean medium.
        do {
            terminal.line(try QRCode.encode(link, ecc: .low).terminalString(quietZone: 2, ansiColors: qrColors))
        } catch {
            terminal.line("(no QR code: \(error))")
        }
    }

    /// The pending request `/ac`/`/rc` names: `#<id>`, or a name only one pending request has.
    enum RequestChoice: Equatable { case found(Int64, String), none, ambiguous([Int64]) }

    func chooseRequest(_ word: String) -> RequestChoice {
        if word.hasPrefix("#"), let id = Int64(word.dropFirst()), let r = requests.first(where: { $0.id == id }) {
            return .found(r.id, r.name)
        }
        let matches = requests.filter { $0.name == word }
        switch matches.count {
        case 0: return .none
        case 1: return .found(matches[0].id, matches[0].name)
        default: return .ambiguous(matches.map(\.id))
        }
    }

    private func decideRequest(_ argument: String, accept: Bool) async {
        let word = Self.unquote(argument)
        let verb = accept ? "ac" : "rc"
        guard !word.isEmpty else { return terminal.line("usage: /\(verb) <name> (or /\(verb) #<request number>)") }
        let id: Int64, name: String
        switch chooseRequest(word) {
        case .none: return terminal.line("no contact request from \(Sanitize.line(word))")
        case let .ambiguous(ids):
            return terminal.line("several contact requests are from \(Sanitize.line(word)): \(ids.map { "/\(verb) #\($0)" }.joined(separator: " or "))")
        case let .found(i, n): (id, name) = (i, Sanitize.line(n))
        }
        let r = await api.execute(accept ? "/_accept \(id)" : "/_reject \(id)")
        switch r["type"]?.stringValue {
        case "acceptingContactRequest":
            requests.removeAll { $0.id == id }
            terminal.line("accepting \(name); you are connected when their client answers")
        case "contactRequestRejected":
            requests.removeAll { $0.id == id }
            terminal.line("contact request from \(name) rejected")
        default:
            terminal.line("cannot \(accept ? "accept" : "reject") \(name): \(EventText.errorWords(r))")
        }
    }

    private func contacts() async -> [JSONValue]? {
        let r = await api.execute("/_contacts \(userId)")
        guard case let .array(list)? = r["contacts"] else {
            terminal.line("cannot list contacts: \(EventText.errorWords(r))")
            return nil
        }
        return list
    }

    private func listContacts() async {
        guard let list = await contacts() else { return }
        if list.isEmpty { return terminal.line("no contacts yet: /c makes an invitation, /c <link> uses one") }
        for c in list {
            let ready = c["activeConn"]?["connStatus"]?["type"]?.stringValue == "ready"
            terminal.line("\(Sanitize.line(c["localDisplayName"]?.stringValue ?? "?"))\(ready ? "" : " (connecting)")")
        }
    }

    private func send(_ line: String) async {
        let (target, text) = Self.split(String(line.dropFirst()))
        let name = Self.unquote(target)
        guard !name.isEmpty, !text.isEmpty else { return terminal.line("usage: @name text") }
        guard let list = await contacts() else { return }
        let matches = list.filter { $0["localDisplayName"]?.stringValue == name }
        guard matches.count == 1, let id = matches[0]["contactId"]?.intValue else {
            return terminal.line(matches.isEmpty ? "no contact called \(Sanitize.line(name)) (/contacts lists them)" : "several contacts are called \(Sanitize.line(name)); use /_send @<contactId> json …")
        }
        let content = JSONValue.object([("type", .string("text")), ("text", .string(text))])
        let message = JSONValue.array([.object([("msgContent", content), ("mentions", .object([]))])])
        let r = await api.execute("/_send @\(id) json \(message)")
        if r["type"]?.stringValue == "newChatItems" {
            terminal.line("sent to @\(Sanitize.line(name)): \(Sanitize.text(text))")
        } else {
            terminal.line("not sent to \(Sanitize.line(name)): \(EventText.errorWords(r))")
        }
    }

    // MARK: - Channels

    /// `/relays` (list) and `/relays name=<name> <address> …` (set, then list): the engine's
    /// command as typed, its answer as lines.
    private func chatRelays(_ line: String) async {
        let setting = line.split(separator: " ").count > 1
        let r = await api.execute(line)
        guard r["type"]?.stringValue == "userChatRelays", case let .array(relays)? = r["chatRelays"] else {
            return terminal.line("cannot \(setting ? "set" : "list") the chat relays: \(EventText.errorWords(r))")
        }
        if relays.isEmpty { return terminal.line("no chat relays (/relays name=<name> <address> sets them)") }
        terminal.line("your chat relays (/public group relays=<id>,… #<channel> uses them):")
        for relay in relays {
            let id = relay["chatRelayId"]?.intValue.map(String.init) ?? "?"
            terminal.line("  \(id) \(EventText.relayName(relay)): \(Sanitize.line(relay["address"]?.stringValue ?? "?"))")
        }
    }

    /// `/public group relays=<id>[,<id>…] #<name>` (SimpleX's CLI form): a channel with those
    /// chat relays; the answer's relays with their status, and the channel's link.
    private func newChannel(_ argument: String) async {
        let usage = "usage: /public group relays=<id>[,<id>…] #<channel> (/relays lists the ids)"
        let (keyword, rest) = Self.split(argument)
        let (relaysWord, nameWord) = Self.split(rest)
        guard keyword == "group", relaysWord.hasPrefix("relays=") else { return terminal.line(usage) }
        let ids = relaysWord.dropFirst("relays=".count).split(separator: ",", omittingEmptySubsequences: false)
        guard !ids.isEmpty, ids.allSatisfy({ Int64($0) != nil }) else { return terminal.line(usage) }
        let name = Self.unquote(nameWord.hasPrefix("#") ? String(nameWord.dropFirst()) : nameWord)
        guard !name.isEmpty else { return terminal.line(usage) }
        let profile = JSONValue.object([("displayName", .string(name)), ("fullName", .string(""))])
        let r = await api.execute("/_public group \(userId) \(ids.joined(separator: ",")) \(profile)")
        switch r["type"]?.stringValue {
        case "publicGroupCreated":
            let g = EventText.group(r["groupInfo"])
            terminal.line("group #\(g) is created")
            terminal.line("wait for selected relay(s) to join, then you can invite members via group link")
            for relay in r["groupRelays"]?.arrayValue ?? [] { terminal.line(EventText.relayStatusLine(relay)) }
            if let link = r["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue {
                terminal.line("#\(g) link (subscribers join with /c <link>):")
                printLink(link)
            }
        case "publicGroupCreationFailed":
            terminal.line("cannot create channel #\(Sanitize.line(name)): no relay could be invited")
            for result in r["addRelayResults"]?.arrayValue ?? [] {
                let why = result["relayError"].map { EventText.errorWords(.object([("chatError", $0)])) } ?? "ok"
                terminal.line("  - relay \(EventText.relayName(result["relay"] ?? .null)): \(why)")
            }
        default:
            terminal.line("cannot create channel #\(Sanitize.line(name)): \(EventText.errorWords(r))")
        }
    }

    // MARK: - Groups

    private func newGroup(_ argument: String) async {
        let name = Self.unquote(argument)
        guard !name.isEmpty else { return terminal.line("usage: /g <group name>") }
        let profile = JSONValue.object([("displayName", .string(name)), ("fullName", .string(""))])
        let r = await api.execute("/_group \(userId) \(profile)")
        guard r["type"]?.stringValue == "groupCreated", let local = r["groupInfo"]?["localDisplayName"]?.stringValue else {
            return terminal.line("cannot create the group: \(EventText.errorWords(r))")
        }
        let shown = EventText.quoted(Sanitize.line(local))
        terminal.line("group #\(shown) created; /a \(shown) <name> invites a contact")
    }

    /// The group a name means: its id and local name, or nil after printing why not.
    private func group(_ word: String) async -> (Int, String)? {
        let name = Self.unquote(word)
        guard !name.isEmpty else {
            terminal.line("which group? (/help lists the commands)")
            return nil
        }
        let r = await api.execute("/_groups \(userId)")
        guard case let .array(list)? = r["groups"] else {
            terminal.line("cannot list groups: \(EventText.errorWords(r))")
            return nil
        }
        let matches = list.filter { $0["localDisplayName"]?.stringValue == name }
        guard matches.count == 1, let id = matches[0]["groupId"]?.intValue else {
            terminal.line(matches.isEmpty ? "no group called \(Sanitize.line(name))" : "several groups are called \(Sanitize.line(name)); use the API's #<groupId> commands")
            return nil
        }
        return (id, name)
    }

    private func addMember(_ argument: String) async {
        let (groupWord, contactWord) = Self.split(argument)
        let contactName = Self.unquote(contactWord)
        guard !contactName.isEmpty else { return terminal.line("usage: /a <group> <contact>") }
        guard let (groupId, groupName) = await group(groupWord), let list = await contacts() else { return }
        let matches = list.filter { $0["localDisplayName"]?.stringValue == contactName }
        guard matches.count == 1, let contactId = matches[0]["contactId"]?.intValue else {
            return terminal.line(matches.isEmpty ? "no contact called \(Sanitize.line(contactName)) (/contacts lists them)" : "several contacts are called \(Sanitize.line(contactName)); use /_add #<groupId> <contactId> member")
        }
        let r = await api.execute("/_add #\(groupId) \(contactId) member")
        if r["type"]?.stringValue == "sentGroupInvitation" {
            terminal.line("invited \(Sanitize.line(contactName)) to #\(Sanitize.line(groupName))")
        } else {
            terminal.line("cannot invite \(Sanitize.line(contactName)) to #\(Sanitize.line(groupName)): \(EventText.errorWords(r))")
        }
    }

    /// The group's link: made on first use (joiners become members), else the existing one.
    private func createGroupLink(_ argument: String) async {
        let word = argument.hasPrefix("#") ? String(argument.dropFirst()) : argument
        guard let (groupId, groupName) = await group(word) else { return }
        var r = await api.execute("/_get link #\(groupId)")
        if r["chatError"]?["storeError"]?["type"]?.stringValue == "groupLinkNotFound" {
            r = await api.execute("/_create link #\(groupId) member")
        }
        let link = r["groupLink"]?["connLinkContact"]
        guard let shown = link?["connShortLink"]?.stringValue ?? link?["connFullLink"]?.stringValue else {
            return terminal.line("cannot make a link for #\(Sanitize.line(groupName)): \(EventText.errorWords(r))")
        }
        terminal.line("#\(Sanitize.line(groupName)) link (anyone can join with /c <link>):")
        printLink(shown)
    }

    private func joinGroup(_ argument: String) async {
        guard let (groupId, groupName) = await group(argument) else { return }
        let r = await api.execute("/_join #\(groupId)")
        if r["type"]?.stringValue == "userAcceptedGroupSent" {
            terminal.line("joining #\(Sanitize.line(groupName)); you are in when the host's client answers")
        } else {
            terminal.line("cannot join #\(Sanitize.line(groupName)): \(EventText.errorWords(r))")
        }
    }

    private func listMembers(_ argument: String) async {
        guard let (groupId, groupName) = await group(argument) else { return }
        let r = await api.execute("/_members #\(groupId)")
        guard case let .array(members)? = r["group"]?["members"] else {
            return terminal.line("cannot list the members of #\(Sanitize.line(groupName)): \(EventText.errorWords(r))")
        }
        let me = r["group"]?["groupInfo"]?["membership"]
        terminal.line("#\(Sanitize.line(groupName)): you (\(Sanitize.line(me?["memberRole"]?.stringValue ?? "?"))), \(members.count) other member\(members.count == 1 ? "" : "s")")
        for m in members {
            let role = Sanitize.line(m["memberRole"]?.stringValue ?? "?")
            let status = Sanitize.line(m["memberStatus"]?.stringValue ?? "?")
            terminal.line("\(EventText.memberName(m)) (\(role), \(status))")
        }
    }

    private func leaveGroup(_ argument: String) async {
        guard let (groupId, groupName) = await group(argument) else { return }
        let r = await api.execute("/_leave #\(groupId)")
        if r["type"]?.stringValue == "leftMemberUser" {
            terminal.line("you left #\(Sanitize.line(groupName))")
        } else {
            terminal.line("cannot leave #\(Sanitize.line(groupName)): \(EventText.errorWords(r))")
        }
    }

    private func sendToGroup(_ line: String) async {
        let (target, text) = Self.split(String(line.dropFirst()))
        guard !Self.unquote(target).isEmpty, !text.isEmpty else { return terminal.line("usage: #group text") }
        guard let (groupId, groupName) = await group(target) else { return }
        let content = JSONValue.object([("type", .string("text")), ("text", .string(text))])
        let message = JSONValue.array([.object([("msgContent", content), ("mentions", .object([]))])])
        let r = await api.execute("/_send #\(groupId) json \(message)")
        if r["type"]?.stringValue == "newChatItems" {
            terminal.line("sent to #\(Sanitize.line(groupName)): \(Sanitize.text(text))")
        } else {
            terminal.line("not sent to #\(Sanitize.line(groupName)): \(EventText.errorWords(r))")
        }
    }

    /// The first word (a `'quoted name'` counts as one) and the rest of the line.
    static func split(_ line: String) -> (String, String) {
        if line.hasPrefix("'"), let close = line.dropFirst().firstIndex(of: "'") {
            let word = String(line[...close])
            return (word, String(line[line.index(after: close)...]).trimmingCharacters(in: .whitespaces))
        }
        guard let space = line.firstIndex(of: " ") else { return (line, "") }
        return (String(line[..<space]), String(line[space...]).trimmingCharacters(in: .whitespaces))
    }

    static func unquote(_ name: String) -> String {
        let t = name.trimmingCharacters(in: .whitespaces)
        if t.count >= 2, t.hasPrefix("'"), t.hasSuffix("'") { return String(t.dropFirst().dropLast()) }
        return t
    }

    // MARK: - Events

    /// Prints the engine's events until the stream ends.
    func printEvents(_ events: AsyncStream<JSONValue>) async {
        for await event in events {
            if event["type"]?.stringValue == "receivedContactRequest",
               let id = event["contactRequest"]?["contactRequestId"]?.intValue,
               let name = event["contactRequest"]?["localDisplayName"]?.stringValue {
                let others = requests.filter { $0.name == name && $0.id != Int64(id) }
                requests.removeAll { $0.id == Int64(id) }
                requests.append((Int64(id), name))
                if !others.isEmpty {
                    // A second request under a name already pending: both stay, each by its number.
                    let shown = Sanitize.line(name)
                    terminal.line("contact request #\(id) from \(shown) (another pending request is also from \(shown): /ac #\(id) to accept this one, /rc #\(id) to reject it)")
                    continue
                }
            }
            for line in EventText.lines(for: event) { terminal.line(line) }
        }
    }
}
