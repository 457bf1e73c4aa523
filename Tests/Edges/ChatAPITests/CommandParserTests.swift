import ChatCore
import SwiftplexBase
import Testing
@testable import ChatAPI

@Suite struct CommandParserTests {
    func json(_ text: String) -> JSONValue { try! JSONValue.parse(text) }

    /// The command strings the Python library sends (from its own serialisers), and what they mean.
    @Test func parsesTheBotLibrarysCommands() throws {
        let cases: [(String, ChatCommand)] = [
            ("/user", .showActiveUser),
            ("/users", .listUsers),
            (#"/_create user {"pastTimestamp": false, "userChatRelay": false, "clientService": false, "profile": {"displayName": "bot", "fullName": ""}}"#,
             .createActiveUser(newUser: json(#"{"pastTimestamp": false, "userChatRelay": false, "clientService": false, "profile": {"displayName": "bot", "fullName": ""}}"#))),
            (#"/_user 2 "secret""#, .setActiveUser(userId: 2, viewPassword: "secret")),
            ("/_user 2", .setActiveUser(userId: 2, viewPassword: nil)),
            ("/_delete user 2 del_smp=on", .deleteUser(userId: 2, deleteQueues: true, viewPassword: nil)),
            (#"/_profile 1 {"displayName": "bot", "fullName": "", "peerType": "bot"}"#,
             .updateProfile(userId: 1, profile: json(#"{"displayName": "bot", "fullName": "", "peerType": "bot"}"#))),
            (#"/_set prefs @12 {"files": {"allow": "no"}}"#, .setContactPreferences(contactId: 12, preferences: json(#"{"files": {"allow": "no"}}"#))),
            ("/_start", .startChat),
            ("/_start main=on", .startChat),
            ("/_stop", .stopChat),
            ("/_address 1", .createAddress(userId: 1)),
            ("/_delete_address 1", .deleteAddress(userId: 1)),
            ("/_show_address 1", .showAddress(userId: 1)),
            ("/_profile_address 1 on", .setProfileAddress(userId: 1, enabled: true)),
            (#"/_address_settings 1 {"businessAddress": false, "autoAccept": {"acceptIncognito": false}, "autoReply": {"type": "text", "text": "Hello!"}}"#,
             .setAddressSettings(userId: 1, settings: json(#"{"businessAddress": false, "autoAccept": {"acceptIncognito": false}, "autoReply": {"type": "text", "text": "Hello!"}}"#))),
            (#"/_send @12 json [{"msgContent": {"type": "text", "text": "hi"}, "mentions": {}, "quotedItemId": 77}]"#,
             .sendMessages(chat: .direct(12), live: false, ttl: nil, sign: false,
                           messages: [json(#"{"msgContent": {"type": "text", "text": "hi"}, "mentions": {}, "quotedItemId": 77}"#)])),
            (#"/_send #3(_support:40) live=on ttl=30 json [{"msgContent": {"type": "text", "text": "\ud83d\udc4d"}, "mentions": {}}]"#,
             .sendMessages(chat: .group(3, supportScope: .member(40)), live: true, ttl: 30, sign: false,
                           messages: [json(#"{"msgContent": {"type": "text", "text": "👍"}, "mentions": {}}"#)])),
            (#"/_update item @12 5 json {"msgContent": {"type": "text", "text": "hi"}, "mentions": {}}"#,
             .updateChatItem(chat: .direct(12), itemId: 5, live: false, message: json(#"{"msgContent": {"type": "text", "text": "hi"}, "mentions": {}}"#))),
            ("/_delete item #3 5,6 broadcast", .deleteChatItems(chat: .group(3, supportScope: nil), itemIds: [5, 6], mode: .broadcast)),
            ("/_delete member item #3 5,6", .group(.deleteMemberItems(groupId: 3, itemIds: [5, 6]))),
            (#"/_reaction @12 5 on {"type": "emoji", "emoji": "+"}"#, .reaction(chat: .direct(12), itemId: 5, add: true, reaction: json(#"{"type": "emoji", "emoji": "+"}"#))),
            ("/_connect 1", .addContact(userId: 1, incognito: false)),
            ("/_connect 1 incognito=on", .addContact(userId: 1, incognito: true)),
            ("/_connect plan 1 simplex:/contact#/?v=1&smp=x", .connectPlan(userId: 1, link: "simplex:/contact#/?v=1&smp=x")),
            ("/_connect 1 simplex:/invitation#/?v=1 https://relay/i#abc", .connect(userId: 1, incognito: false, fullLink: "simplex:/invitation#/?v=1", shortLink: "https://relay/i#abc")),
            ("/connect https://smp.example/a#key", .connectActiveUser(incognito: false, link: "https://smp.example/a#key")),
            ("/c", .cli(.addContact(incognito: false, short: false))),
            ("/_accept 8", .acceptContact(requestId: 8, incognito: false)),
            ("/_accept incognito=on 8", .acceptContact(requestId: 8, incognito: true)),
            ("/_reject 8", .rejectContact(requestId: 8)),
            ("/_contacts 1", .listContacts(userId: 1)),
            (#"/_get chats 1 count=20 {"type": "filters", "favorite": false, "unread": false}"#,
             .getChats(userId: 1, pendingConnections: false, count: 20, query: json(#"{"type": "filters", "favorite": false, "unread": false}"#))),
            ("/_get chats 1 pcc=on count=5", .getChats(userId: 1, pendingConnections: true, count: 5, query: nil)),
            ("/_get chat @12 count=10", .getChat(chat: .direct(12), pagination: .last(10))),
            ("/_get chat @12 before=40 count=10", .getChat(chat: .direct(12), pagination: .before(40, 10))),
            ("/_read chat @12", .readChat(chat: .direct(12))),
            ("/_delete @12 full notify=off", .deleteChat(chat: .direct(12), mode: .full(notify: false))),
            ("/_delete @12 messages", .deleteChat(chat: .direct(12), mode: .messages)),
            (#"/_set custom @12 {"plan": "pro"}"#, .setContactCustomData(contactId: 12, data: json(#"{"plan": "pro"}"#))),
            ("/_set custom @12", .setContactCustomData(contactId: 12, data: nil)),
            ("/_relays 1 smp://a@h1:5223,smp://b@h2", .setUserRelays(userId: 1, relays: ["smp://a@h1:5223", "smp://b@h2"])),
            ("/_relays 1", .getUserRelays(userId: 1)),
            ("/relays", .listChatRelays),
            ("/relays name=r1 https://h/r?c=x#a/b  name=r2 https://k/r#c",
             .setChatRelays(relays: [ChatRelayEntry(name: "r1", address: "https://h/r?c=x#a/b"), ChatRelayEntry(name: "r2", address: "https://k/r#c")])),
            // Swiftplex's additions and upstream syntax beyond the bot library's generated commands.
            ("/_address 1 short=on", .createAddress(userId: 1, short: true)),
            ("/_connect 1 short=on", .addContact(userId: 1, incognito: false, short: true)),
            ("/_connect 1 incognito=on short=on", .addContact(userId: 1, incognito: true, short: true)),
            ("/_connect 1 incognito=on simplex:/contact#/?v=1&smp=x", .connect(userId: 1, incognito: true, fullLink: "simplex:/contact#/?v=1&smp=x", shortLink: nil)),
            ("/_get chat @12 last=3", .getChat(chat: .direct(12), pagination: .last(3))),
            ("/_get chat @12 after=7 count=2", .getChat(chat: .direct(12), pagination: .after(7, 2))),
            ("/_set receipts contacts 1 off", .setContactReceipts(userId: 1, enabled: false)),
        ]
        for (text, expected) in cases {
            #expect(try CommandParser.parse(text) == expected, "\(text)")
        }
    }

    @Test func refusesMalformedCommandsWithTypedErrors() {
        let cases: [(String, CommandParseError.Code)] = [
            ("hello", .unknownCommand),
            ("/nope 1", .unknownCommand),
            ("/_address", .badArguments),
            ("/_address x", .badArguments),
            ("/_address -3", .badArguments),
            ("/_address 1 extra", .badArguments),
            ("/_send 12 json []", .badArguments),
            ("/_send @12 json []", .badJSON),
            ("/_send @12 json {", .badJSON),
            ("/_send @12 fast=on json [{}]", .badArguments),
            ("/_send @12", .badArguments),
            ("/_create user [1]", .badJSON),
            ("/_profile_address 1 maybe", .badArguments),
            ("/_delete item @1 1,,2 broadcast", .badArguments),
            ("/_delete item @1 1 everywhere", .badArguments),
            ("/_delete member item @3 5", .badArguments),
            ("/_delete user 1 del_smp=yes", .badArguments),
            ("/_get chat @1 count=0", .badArguments),
            ("/_connect plan 1", .badArguments),
            ("/relays https://h/r#a", .badArguments),
            ("/relays name=r1", .badArguments),
            ("/relays name= https://h/r#a", .badArguments),
            ("/_send #3(_support:x) json [{}]", .badArguments),
            (#"/_user 2 secret"#, .badJSON),
            ("/_address 1 short=maybe", .badArguments),
            ("/_connect 1 short=on simplex:/contact#/?v=1&smp=x", .badArguments),
            ("/_connect 1 incognito=yes", .badArguments),
            ("/_set receipts contacts 1", .badArguments),
            ("/_set receipts groups 1 on", .badArguments),
            ("/_get chat @12 after=7", .badArguments),
        ]
        for (text, code) in cases {
            #expect(throws: CommandParseError(code, "")) { try CommandParser.parse(text) }
        }
    }

    /// The group link commands and `/_accept member` (7.0.2's strings, and upstream's optional role and `short=`).
    @Test func parsesGroupLinkCommands() throws {
        let cases: [(String, ChatCommand)] = [
            ("/_create link #3 member", .group(.createLink(groupId: 3, role: .member, short: true))),
            ("/_create link #3", .group(.createLink(groupId: 3, role: .member, short: true))),
            ("/_create link #3 observer short=off", .group(.createLink(groupId: 3, role: .observer, short: false))),
            ("/_set link role #3 author", .group(.setLinkRole(groupId: 3, role: .author))),
            ("/_get link #3", .group(.getLink(groupId: 3))),
            ("/_delete link #3", .group(.deleteLink(groupId: 3))),
            ("/_accept member #3 40 member", .group(.acceptMember(groupId: 3, groupMemberId: 40, role: .member))),
            ("/_accept 8", .acceptContact(requestId: 8, incognito: false)),
        ]
        for (text, expected) in cases {
            #expect(try CommandParser.parse(text) == expected, "\(text)")
        }
        let bad: [(String, CommandParseError.Code)] = [
            ("/_create link 3 member", .badArguments),
            ("/_create link #3 relay", .badArguments),
            ("/_create link #3 member short=maybe", .badArguments),
            ("/_set link role #3", .badArguments),
            ("/_set link #3 member", .badArguments),
            ("/_get link", .badArguments),
            ("/_delete link #x", .badArguments),
            ("/_accept member #3 member", .badArguments),
            ("/_accept member #3 40", .badArguments),
            ("/_get link #3 extra", .badArguments),
        ]
        for (text, code) in bad {
            #expect(throws: CommandParseError(code, "")) { try CommandParser.parse(text) }
        }
    }
}
