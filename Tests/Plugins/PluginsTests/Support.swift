import Foundation
import PluginABITesting
import TestSupport
import Testing

/// Where `swift build` put the plugin libraries (the test bundle's directory, or SWIFTPLEX_BIN_DIR).
let binDir: URL = ProcessInfo.processInfo.environment["SWIFTPLEX_BIN_DIR"].map { URL(fileURLWithPath: $0) }
    ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()

/// The repository root (for the examples and the header).
let repoRoot = Repository.root

/// Loads lib<name>.so once per process (build it with `swift build --product <name>`).
func plugin(_ name: String) throws -> PluginLibrary {
    let path = binDir.appendingPathComponent("lib\(name).so").path
    guard FileManager.default.fileExists(atPath: path) else {
        throw PluginLibrary.LoadError(description: "\(path) is missing: run `swift build --product \(name)` (make test does)")
    }
    return try PluginLibrary(path: path)
}

/// A host that plays the Chat API for a bot with user id 1: answers `/user`, `/_send` (with the
/// sent item), `/_contacts` (from `contacts`), the address commands, `/_accept` (a new contact
/// id per request, from `nextContactId`), `/_reject`, `/_delete` (a contact, or `member item`), and
/// the group commands `/_join`, `/_block`, `/_remove`.
final class ScriptedChat: @unchecked Sendable {
    // @unchecked: mutable fields are only changed by the test between plugin calls.
    var contacts: [(Int64, String)] = []
    var failSendTo: Set<Int64> = []
    var hasAddress = true
    var nextContactId: Int64 = 100
    let host = TestHost()

    init() {
        host.respond { [unowned self] command in self.answer(command) }
    }

    func answer(_ command: String) -> String {
        let words = command.split(separator: " ")
        switch words.first {
        case "/user": return ChatFixtures.activeUser(1)
        case "/_contacts": return ChatFixtures.contactsList(contacts)
        case "/_show_address": return hasAddress ? ChatFixtures.contactLink() : ChatFixtures.chatCmdError("userContactLinkNotFound")
        case "/_address_settings": return ChatFixtures.contactLink("userContactLinkUpdated")
        case "/_accept":
            nextContactId += 1
            return ChatFixtures.acceptingContactRequest(contactId: nextContactId, name: "someone")
        case "/_reject": return ChatFixtures.contactRequestRejected(Int64(words.last ?? "") ?? 0, name: "someone")
        case "/_delete" where words.count > 1 && words[1] == "member":
            return ChatFixtures.json(["type": "chatItemsDeleted", "user": ChatFixtures.user(), "chatItemDeletions": [Any](), "byUser": true, "timed": false])
        case "/_delete": return ChatFixtures.contactDeleted(Int64(words[1].dropFirst()) ?? 0)
        case "/_join": return ChatFixtures.groupResponse("userAcceptedGroupSent", groupId: Int64(words[1].dropFirst()) ?? 0)
        case "/_block":
            return ChatFixtures.groupResponse("membersBlockedForAllUser", groupId: Int64(words[1].dropFirst()) ?? 0,
                                              ["members": [Any](), "blocked": true, "msgSigned": false])
        case "/_remove":
            return ChatFixtures.groupResponse("userDeletedMembers", groupId: Int64(words[1].dropFirst()) ?? 0,
                                              ["members": [Any](), "withMessages": false, "msgSigned": false])
        case "/_send":
            guard let (ref, content) = ChatFixtures.parseSend(command) else { return ChatFixtures.chatCmdError("badSend") }
            let id = Int64(ref.dropFirst()) ?? 0
            if failSendTo.contains(id) { return ChatFixtures.chatCmdError("contactNotFound") }
            return ChatFixtures.sent(to: id, text: content["text"] as? String ?? "")
        default: return ChatFixtures.chatCmdError("unknownCommand")
        }
    }

    /// `@id text` for every message sent, in order.
    var sent: [String] {
        host.commands.compactMap { ChatFixtures.parseSend($0) }.map { "\($0.ref) \($0.content["text"] as? String ?? "")" }
    }

    /// Commands other than sends and lookups.
    var actions: [String] {
        host.commands.filter { !$0.hasPrefix("/_send") && $0 != "/user" && !$0.hasPrefix("/_contacts") && !$0.hasPrefix("/_show_address") }
    }
}

func startOrRecord(_ lib: PluginLibrary, _ host: TestHost, _ config: String) throws -> RunningPlugin {
    switch lib.start(host: host, config: config) {
    case let .success(p): return p
    case let .failure(e): throw e
    }
}

func startError(_ lib: PluginLibrary, _ config: String) -> String? {
    if case let .failure(e) = lib.start(host: ScriptedChat().host, config: config) { return e.message }
    return nil
}
