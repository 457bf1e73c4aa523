import ChatCore
import ChatModel
import SwiftplexBase
import Testing
@testable import ChatAPI

/// The SimpleX terminal's own commands, as bots send them over the WebSocket API besides the
/// `/_…` ones (SimpleX's `chatCommandP` spellings, long and short).
@Suite struct CLICommandParserTests {
    func json(_ text: String) -> JSONValue { try! JSONValue.parse(text) }

    @Test func parsesTheTerminalsCommands() throws {
        let text = { (t: String) in JSONValue.object([("type", "text"), ("text", .string(t))]) }
        let cases: [(String, ChatCommand)] = [
            ("/u", .showActiveUser),
            ("/user", .showActiveUser),
            ("/ad", .cli(.createAddress(short: false))),
            ("/address short", .cli(.createAddress(short: true))),
            ("/ad s", .cli(.createAddress(short: true))),
            ("/sa", .cli(.showAddress)),
            ("/show_address", .cli(.showAddress)),
            ("/da", .cli(.deleteAddress)),
            ("/delete_address", .cli(.deleteAddress)),
            ("/pa on", .cli(.setProfileAddress(enabled: true))),
            ("/profile_address off", .cli(.setProfileAddress(enabled: false))),
            ("/auto_accept off", .cli(.autoAccept(nil))),
            ("/auto_accept on", .cli(.autoAccept(.init(incognito: false, reply: nil)))),
            ("/auto_accept on incognito", .cli(.autoAccept(.init(incognito: true, reply: nil)))),
            ("/auto_accept on incognito=on Welcome!", .cli(.autoAccept(.init(incognito: true, reply: text("Welcome!"))))),
            ("/auto_accept on Hello there", .cli(.autoAccept(.init(incognito: false, reply: text("Hello there"))))),
            ("/auto_accept on text hi", .cli(.autoAccept(.init(incognito: false, reply: text("hi"))))),
            (#"/auto_accept on json {"type": "text", "text": "hi"}"#, .cli(.autoAccept(.init(incognito: false, reply: json(#"{"type": "text", "text": "hi"}"#))))),
            ("/c", .cli(.addContact(incognito: false, short: false))),
            ("/connect short incognito", .cli(.addContact(incognito: true, short: true))),
            ("/c i", .cli(.addContact(incognito: true, short: false))),
            ("/c https://relay/a#key", .connectActiveUser(incognito: false, link: "https://relay/a#key")),
            ("/c i https://relay/a#key", .connectActiveUser(incognito: true, link: "https://relay/a#key")),
            ("/c incognito=on https://relay/a#key", .connectActiveUser(incognito: true, link: "https://relay/a#key")),
            ("/ac bob", .cli(.acceptContact(name: "bob", incognito: false))),
            ("/accept @bob", .cli(.acceptContact(name: "bob", incognito: false))),
            ("/ac incognito bob", .cli(.acceptContact(name: "bob", incognito: true))),
            ("/ac i", .cli(.acceptContact(name: "i", incognito: false))),
            ("/ac 'Bob Smith'", .cli(.acceptContact(name: "Bob Smith", incognito: false))),
            ("/rc bob", .cli(.rejectContact(name: "bob"))),
            ("/reject @bob", .cli(.rejectContact(name: "bob"))),
            ("/contacts", .cli(.listContacts)),
            ("/groups", .cli(.listGroups(contact: nil, search: nil))),
            ("/gs @bob team", .cli(.listGroups(contact: "bob", search: "team"))),
            ("@bob hello there", .cli(.sendMessage(to: .contact("bob"), text: "hello there"))),
            ("@'Bob Smith' hi", .cli(.sendMessage(to: .contact("Bob Smith"), text: "hi"))),
            ("#team hello all", .cli(.sendMessage(to: .group("team"), text: "hello all"))),
            ("/p Bot2", .cli(.updateProfile(displayName: "Bot2", fullName: ""))),
            ("/profile Bot2 The Second Bot", .cli(.updateProfile(displayName: "Bot2", fullName: "The Second Bot"))),
            ("/help", .cli(.help(.main))),
            ("/h", .cli(.help(.main))),
            ("/help groups", .cli(.help(.groups))),
            ("/hg", .cli(.help(.groups))),
            ("/help address", .cli(.help(.myAddress))),
            ("/g team", .cli(.newGroup(name: "team", fullName: "", incognito: false))),
            ("/group #team The Team", .cli(.newGroup(name: "team", fullName: "The Team", incognito: false))),
            ("/g i team", .cli(.newGroup(name: "team", fullName: "", incognito: true))),
            ("/a team bob", .cli(.addMember(group: "team", contact: "bob", role: .member))),
            ("/add #team @bob admin", .cli(.addMember(group: "team", contact: "bob", role: .admin))),
            ("/j team", .cli(.joinGroup(group: "team"))),
            ("/join #team", .cli(.joinGroup(group: "team"))),
            ("/l team", .cli(.leaveGroup(group: "team"))),
            ("/leave #team", .cli(.leaveGroup(group: "team"))),
            ("/ms team", .cli(.listMembers(group: "team"))),
            ("/members #team", .cli(.listMembers(group: "team"))),
            ("/d bob", .cli(.deleteContact(name: "bob", mode: .full(notify: true)))),
            ("/delete @bob entity notify=off", .cli(.deleteContact(name: "bob", mode: .entity(notify: false)))),
            ("/d #team", .cli(.deleteGroup(group: "team"))),
        ]
        for (line, expected) in cases {
            #expect(try CommandParser.parse(line) == expected, "\(line)")
        }
    }

    @Test func refusesMalformedTerminalCommandsWithTypedErrors() {
        let cases: [(String, CommandParseError.Code)] = [
            ("/pa maybe", .badArguments),
            ("/pa", .badArguments),
            ("/auto_accept", .badArguments),
            ("/auto_accept on business", .badArguments),
            ("/auto_accept on json {", .badJSON),
            ("/ac", .badArguments),
            ("/ac 'Bob", .badArguments),
            ("@bob", .badArguments),
            ("@ hi", .badArguments),
            ("#team", .badArguments),
            ("/a team", .badArguments),
            ("/a team bob boss", .badArguments),
            ("/ms", .badArguments),
            ("/sa extra", .badArguments),
            ("/c short https://relay/a#key", .badArguments),
            ("/help everything", .badArguments),
            ("/p", .unknownCommand),
            ("/d @#x", .badArguments),
            ("/tail", .unknownCommand),
        ]
        for (text, code) in cases {
            #expect(throws: CommandParseError(code, ""), "\(text)") { try CommandParser.parse(text) }
        }
    }
}
