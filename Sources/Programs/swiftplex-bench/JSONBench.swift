import ArgumentParser
import Foundation
import SwiftplexBase

/// `swiftplex-bench json`: SwiftplexBase's JSON — parse, write, Codable encode and decode of a
/// realistic `newChatItems` event — against Foundation's `JSONSerialization`, `JSONEncoder` and
/// `JSONDecoder` doing the same work in the same run. Ratios below 1 mean SwiftplexBase is faster.
struct JSONBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "json",
        abstract: "SwiftplexBase JSON (parse, write, Codable encode/decode) against Foundation's JSONSerialization/JSONEncoder/JSONDecoder."
    )

    @Option(help: "Operations per measurement.") var iterations: Int = 20_000
    @Option(help: "Chat items in the event.") var items: Int = 3

    func validate() throws {
        guard iterations > 0, items > 0 else { throw ValidationError("--iterations and --items must be positive") }
    }

    func run() throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        let event = BenchEvent.sample(items: items)
        let text = try JSONValue.text(encoding: event)
        let data = Data(text.utf8)
        let tree = try JSONValue.parse(text)
        let foundationTree = try JSONSerialization.jsonObject(with: data)
        // Both sides must agree on what they read, or the comparison is meaningless.
        let decoded = try JSONDecoder().decode(BenchEvent.self, from: Data(try JSONEncoder().encode(event)))
        guard try tree.decode(BenchEvent.self) == event, decoded == event else { throw ValidationError("the two codecs disagree on the sample") }
        print("json benchmark: a newChatItems event of \(items) item\(items == 1 ? "" : "s"), \(data.count) bytes, \(iterations) operations each")

        let n = iterations
        let rounds = 5
        var sink = 0
        /// Nanoseconds for one round (`n / rounds` operations) of `operation`.
        func timeRound(_ operation: () throws -> Int) rethrows -> UInt64 {
            let start = monotonicNanos()
            for _ in 0..<n / rounds { sink &+= try operation() }
            return monotonicNanos() - start
        }
        /// Both sides of one case: warmed up, then in alternating rounds so that neither gets a quieter machine.
        func measure(_ name: String, _ ours: () throws -> Int, _ foundation: () throws -> Int) rethrows {
            for _ in 0..<min(n, 1000) { sink &+= try ours() &+ foundation() }
            var oursNanos: UInt64 = 0
            var foundationNanos: UInt64 = 0
            for _ in 0..<rounds {
                oursNanos += try timeRound(ours)
                foundationNanos += try timeRound(foundation)
            }
            let count = Double(n / rounds * rounds)
            let oursUs = Double(oursNanos) / count / 1000
            let foundationUs = Double(foundationNanos) / count / 1000
            print(String(format: "%-26@ SwiftplexBase %8.2f µs   Foundation %8.2f µs   ratio %.2f%@", name as NSString, oursUs, foundationUs,
                         oursUs / foundationUs, sink == 42 ? " " as NSString : "" as NSString))
        }

        try measure("parse (text → tree)", { try JSONValue.parse(text).arrayValue?.count ?? 1 },
                    { (try JSONSerialization.jsonObject(with: data) as? [String: Any])?.count ?? 1 })
        try measure("write (tree → text)", { JSONWriter.bytes(tree).count },
                    { try JSONSerialization.data(withJSONObject: foundationTree).count })
        try measure("encode (Codable → text)", { JSONWriter.bytes(try JSONValueEncoder().encode(event)).count },
                    { try JSONEncoder().encode(event).count })
        try measure("decode (text → Codable)", { try JSONValue.parse(text).decode(BenchEvent.self).chatItems.count },
                    { try JSONDecoder().decode(BenchEvent.self, from: data).chatItems.count })
    }
}

/// The shape of a `newChatItems` event (docs/simplex-bot-api.md), as typed API models write it.
struct BenchEvent: Codable, Equatable {
    struct Profile: Codable, Equatable {
        var profileId: Int64
        var displayName: String
        var fullName: String
        var image: String?
        var localAlias: String
    }

    struct User: Codable, Equatable {
        var userId: Int64
        var agentUserId: Int64
        var userContactId: Int64
        var localDisplayName: String
        var profile: Profile
        var activeUser: Bool
        var activeOrder: Int64
        var showNtfs: Bool
        var sendRcptsContacts: Bool
        var sendRcptsSmallGroups: Bool
    }

    struct Connection: Codable, Equatable {
        var connId: Int64
        var agentConnId: String
        var connChatVersion: Int
        var connLevel: Int
        var viaGroupLink: Bool
        var connType: String
        var connStatus: Tagged
        var contactConnInitiated: Bool
        var localAlias: String
        var entityId: Int64
        var pqSupport: Bool
        var pqEncryption: Bool
        var authErrCounter: Int
        var quotaErrCounter: Int
        var createdAt: String
    }

    struct Tagged: Codable, Equatable {
        var type: String
    }

    struct Contact: Codable, Equatable {
        var contactId: Int64
        var localDisplayName: String
        var profile: Profile
        var activeConn: Connection
        var contactUsed: Bool
        var contactStatus: String
        var createdAt: String
        var updatedAt: String
        var chatTs: String?
        var contactGrpInvSent: Bool
        var chatTags: [Int64]
        var chatDeleted: Bool
    }

    struct ChatInfo: Codable, Equatable {
        var type: String
        var contact: Contact
    }

    struct MsgContent: Codable, Equatable {
        var type: String
        var text: String
    }

    struct Content: Codable, Equatable {
        var type: String
        var msgContent: MsgContent
    }

    struct Meta: Codable, Equatable {
        var itemId: Int64
        var itemTs: String
        var itemText: String
        var itemStatus: Tagged
        var itemSharedMsgId: String?
        var itemEdited: Bool
        var userMention: Bool
        var hasLink: Bool
        var deletable: Bool
        var editable: Bool
        var showGroupAsSender: Bool
        var createdAt: String
        var updatedAt: String
    }

    struct ChatItem: Codable, Equatable {
        var chatDir: Tagged
        var meta: Meta
        var content: Content
        var mentions: [String: Int64]
        var reactions: [Int64]
    }

    struct AChatItem: Codable, Equatable {
        var chatInfo: ChatInfo
        var chatItem: ChatItem
    }

    var type: String
    var user: User
    var chatItems: [AChatItem]

    static func sample(items: Int) -> BenchEvent {
        let ts = "2026-11-23T07:00:00.123456Z"
        let profile = Profile(profileId: 1_000_003, displayName: "alice", fullName: "Alice Liddell", image: nil, localAlias: "")
        let contact = Contact(
            contactId: 3, localDisplayName: "alice", profile: profile,
            activeConn: Connection(connId: 3, agentConnId: "17", connChatVersion: 1, connLevel: 0, viaGroupLink: false, connType: "contact",
                                   connStatus: Tagged(type: "ready"), contactConnInitiated: true, localAlias: "", entityId: 3, pqSupport: false,
                                   pqEncryption: false, authErrCounter: 0, quotaErrCounter: 0, createdAt: ts),
            contactUsed: true, contactStatus: "active", createdAt: ts, updatedAt: ts, chatTs: ts, contactGrpInvSent: false, chatTags: [], chatDeleted: false)
        let user = User(userId: 1, agentUserId: 1, userContactId: 1, localDisplayName: "bot",
                        profile: Profile(profileId: 1, displayName: "bot", fullName: "", image: nil, localAlias: ""),
                        activeUser: true, activeOrder: 1, showNtfs: true, sendRcptsContacts: true, sendRcptsSmallGroups: true)
        let chatItems = (0..<items).map { i in
            AChatItem(chatInfo: ChatInfo(type: "direct", contact: contact), chatItem: ChatItem(
                chatDir: Tagged(type: "directRcv"),
                meta: Meta(itemId: Int64(100 + i), itemTs: ts, itemText: "Hello \"bot\" — message \(i) é 😀\n", itemStatus: Tagged(type: "rcvNew"),
                           itemSharedMsgId: "dGhpcyBpcyBhIG1zZyBpZA==", itemEdited: false, userMention: false, hasLink: false, deletable: true,
                           editable: false, showGroupAsSender: false, createdAt: ts, updatedAt: ts),
                content: Content(type: "rcvMsgContent", msgContent: MsgContent(type: "text", text: "Hello \"bot\" — message \(i) é 😀\n")),
                mentions: [:], reactions: []))
        }
        return BenchEvent(type: "newChatItems", user: user, chatItems: chatItems)
    }
}
