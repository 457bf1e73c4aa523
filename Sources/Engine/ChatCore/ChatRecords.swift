import ChatModel
import Foundation
import SwiftplexSQL
import Synchronization
import SwiftplexBase

/// A transaction's connection (``ChatController/dbRead(_:)`` and ``ChatController/dbWrite(_:)``
/// closures take one).
typealias Database = any SQLConnection
typealias Row = SQLRow

// The chat database's rows as records (columns in snake_case). Each table's JSON columns
// (profiles, settings, message content) hold the JSON the API exchanges; `Stored` reads them into
// ChatModel values once, when a row is fetched.

/// A record whose columns are its properties in snake_case.
protocol ChatRecord: Codable, Sendable, FetchableRecord, MutablePersistableRecord {}

extension ChatRecord {
    static func databaseColumnName(forKey key: String) -> String { SnakeCaseColumns.column(forKey: key) }
}

/// Records' properties are camel case, their columns snake case. GRDB's own snake-case strategies
/// convert the name again for every column of every row read or written (a few percent of a
/// message's CPU in the echo bench's profile); the names are few and fixed, so each is converted
/// once and looked up after.
enum SnakeCaseColumns {
    private static let columns = Mutex<[String: String]>([:])

    static func column(forKey name: String) -> String {
        if let known = columns.withLock({ $0[name] }) { return known }
        let column = snakeCase(name)
        columns.withLock { $0[name] = column }
        return column
    }

    /// `contact_id` → `contactId` (the names are ASCII, no leading or doubled underscores).
    static func camelCase(_ column: String) -> String {
        let parts = column.split(separator: "_")
        guard let first = parts.first else { return column }
        return parts.dropFirst().reduce(String(first)) { $0 + $1.prefix(1).uppercased() + $1.dropFirst() }
    }

    /// `contactId` → `contact_id`, `peerURLHost` → `peer_url_host`: a word starts at an upper-case
    /// letter after a lower-case letter or a digit, and at the last upper-case letter of a run
    /// that a lower-case letter follows (as Foundation's and GRDB's `convertToSnakeCase`).
    static func snakeCase(_ key: String) -> String {
        let chars = Array(key)
        var out = ""
        for (i, ch) in chars.enumerated() {
            if ch.isUppercase, i > 0 {
                let before = chars[i - 1]
                let after: Character? = i + 1 < chars.count ? chars[i + 1] : nil
                if before.isLowercase || before.isNumber || (before.isUppercase && after?.isLowercase == true) { out.append("_") }
            }
            out += ch.lowercased()
        }
        return out
    }
}

/// `user`: one identity.
struct UserRecord: ChatRecord {
    static let databaseTableName = "user"
    var id: Int64?
    var displayName: String
    var profile: String
    var active: Bool
    var relays: String = ""
    var createdAt: String
    var sendReceipts: Bool = true
    var localDisplayName: String?
    /// A chat relay user (`NewUser.userChatRelay`): its address is a relay address (`/r`).
    var chatRelay: Bool = false
    /// Members' invitations to direct chats are joined at once (`/_set accept member contacts`).
    var autoAcceptMemberContacts: Bool = false

    enum Columns {
        static let id = Column("id")
        static let displayName = Column("display_name")
        static let active = Column("active")
        static let relays = Column("relays")
        static let sendReceipts = Column("send_receipts")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// `address`: a user's contact address.
struct AddressRecord: ChatRecord, PersistableRecord {
    static let databaseTableName = "address"
    static let databasePrimaryKey = ["user_id"]
    var userId: Int64
    var agentAddressId: Int64
    var link: String
    var settings: String
    var shortLink: String?

    enum Columns {
        static let userId = Column("user_id")
        static let agentAddressId = Column("agent_address_id")
        static let link = Column("link")
        static let shortLink = Column("short_link")
        static let settings = Column("settings")
    }
}

/// `contact_request`: a request waiting at an address.
struct ContactRequestRecord: ChatRecord {
    static let databaseTableName = "contact_request"
    var id: Int64?
    var userId: Int64
    var agentRequestId: Int64
    var profile: String
    var createdAt: String
    var localDisplayName: String?

    enum Columns {
        static let id = Column("id")
        static let userId = Column("user_id")
        static let createdAt = Column("created_at")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// Where a contact's connection is: made or joined (`pending`), connected (`ready`), or deleted by the contact.
enum ContactState: String, Codable, Sendable, SQLValueConvertible {
    case pending, ready, deleted
}

/// `contact`: a contact, or a connection on its way to being one.
struct ContactRecord: ChatRecord {
    static let databaseTableName = "contact"
    var id: Int64?
    var userId: Int64
    var agentConnId: Int64
    var profile: String?
    var status: ContactState
    var viaAddress: Bool
    var accepted: Bool
    var invitation: String?
    var createdAt: String
    var updatedAt: String
    var customData: String?
    var userPrefs: String?
    var incognitoProfile: String?
    var shortLink: String?
    var chatTs: String?
    var localDisplayName: String?
    /// A group member's contact (`/_create member contact`, `x.grp.direct.inv`): the member's row.
    var groupMemberRowId: Int64?
    /// The member has been sent this contact's invitation (`x.grp.direct.inv`).
    var grpInvSent: Bool = false
    /// A member's invitation received (``ChatModel/GroupDirectInvitation`` as JSON); until it is
    /// joined, `agentConnId` is a placeholder (minus the row id) that no agent event names.
    var directInv: String?

    enum Columns {
        static let id = Column("id")
        static let userId = Column("user_id")
        static let agentConnId = Column("agent_conn_id")
        static let status = Column("status")
        static let invitation = Column("invitation")
        static let shortLink = Column("short_link")
        static let incognitoProfile = Column("incognito_profile")
        static let chatTs = Column("chat_ts")
        static let updatedAt = Column("updated_at")
        static let customData = Column("custom_data")
        static let userPrefs = Column("user_prefs")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// An item's stored status (a CIStatus without its details).
enum ItemStatus: String, Codable, Sendable, SQLValueConvertible {
    case sndNew, sndSent, sndRcvd, sndErrorAuth, rcvNew, rcvRead
    /// A group item sent to (received by) some of its members only.
    case sndSentPartial, sndRcvdPartial

    var ciStatus: CIStatus {
        switch self {
        case .sndNew: .sndNew
        case .sndSent: .sndSent(sndProgress: .complete)
        case .sndRcvd: .sndRcvd(msgRcptStatus: .ok, sndProgress: .complete)
        case .sndSentPartial: .sndSent(sndProgress: .partial)
        case .sndRcvdPartial: .sndRcvd(msgRcptStatus: .ok, sndProgress: .partial)
        case .sndErrorAuth: .sndErrorAuth
        case .rcvNew: .rcvNew
        case .rcvRead: .rcvRead
        }
    }
}

/// `chat_item`: a message sent or received.
struct ChatItemRecord: ChatRecord {
    static let databaseTableName = "chat_item"
    var id: Int64?
    var userId: Int64
    var contactId: Int64
    var sent: Bool
    var content: String
    var sharedMsgId: String?
    var agentSeq: Int64?
    var status: ItemStatus
    var edited: Bool = false
    var deleted: Bool = false
    var createdAt: String
    var updatedAt: String?
    var quoted: String?

    enum Columns {
        static let id = Column("id")
        static let contactId = Column("contact_id")
        static let sent = Column("sent")
        static let content = Column("content")
        static let sharedMsgId = Column("shared_msg_id")
        static let agentSeq = Column("agent_seq")
        static let status = Column("status")
        static let edited = Column("edited")
        static let deleted = Column("deleted")
        static let updatedAt = Column("updated_at")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// `chat_item_reaction`: one side's reaction on an item (`reaction` is the MsgReaction's JSON).
struct ReactionRecord: ChatRecord, PersistableRecord {
    static let databaseTableName = "chat_item_reaction"
    static let databasePrimaryKey = ["item_id", "sent", "reaction"]
    var itemId: Int64
    var sent: Bool
    var reaction: String
    var createdAt: String

    enum Columns {
        static let itemId = Column("item_id")
        static let sent = Column("sent")
        static let reaction = Column("reaction")
    }
}

/// `display_name`: a local name taken in a user's names (``LocalNames``).
struct DisplayNameRecord: ChatRecord, PersistableRecord {
    static let databaseTableName = "display_name"
    static let databasePrimaryKey = ["user_id", "local_name"]
    var userId: Int64
    var localName: String
    var base: String
    var suffix: Int64

    enum Columns {
        static let userId = Column("user_id")
        static let localName = Column("local_name")
        static let base = Column("base")
        static let suffix = Column("suffix")
    }
}

/// Reading the JSON columns into model values, and writing them.
enum Stored {
    static func json(_ text: String?) -> JSONValue? { text.flatMap { try? JSONValue.parse($0) } }

    /// A stored value decoded as `T`; nil when absent or (for rows written by an older engine) not `T`.
    static func decode<T: Decodable>(_ type: T.Type, _ text: String?) -> T? {
        json(text).flatMap { try? JSONValueDecoder().decode(T.self, from: $0) }
    }

    static func text<T: Encodable>(_ value: T) throws -> String { try JSONValueEncoder().encode(value).description }

    static func timestamp(_ text: String) -> ChatTimestamp { ChatTimestamp(parsing: text) ?? ChatTimestamp(seconds: 0) }

    /// A profile as stored: the profile checked at input (``PeerInput/profile(_:)``); a row an
    /// older engine stored without checks keeps at least its display name. Decoded once per text
    /// (``DecodedColumns``): a contact's row is read for every message it sends.
    static func profile(_ text: String?) -> Profile? {
        guard let text else { return nil }
        return profileCache.value(text, decodeProfile)
    }

    /// A contact's custom data (any JSON), decoded once per text.
    static func customData(_ text: String?) -> JSONValue? {
        guard let text else { return nil }
        return customDataCache.value(text) { json($0) }
    }

    /// Preferences set for one contact, decoded once per text.
    static func preferences(_ text: String?) -> Preferences? {
        guard let text else { return nil }
        return preferencesCache.value(text) { decode(Preferences.self, $0) }
    }

    private static let profileCache = DecodedColumns<Profile?>()
    private static let customDataCache = DecodedColumns<JSONValue?>()
    private static let preferencesCache = DecodedColumns<Preferences?>()

    private static func decodeProfile(_ text: String) -> Profile? {
        guard let value = json(text) else { return nil }
        if let p = try? PeerInput.profile(value) { return p }
        return Profile(displayName: value["displayName"]?.stringValue ?? "", fullName: value["fullName"]?.stringValue ?? "")
    }
}

/// Values decoded from stored JSON text, by that text: a row read again (a contact's, for each of
/// its messages) is not parsed and decoded again. Keyed by the text itself, so an entry is never
/// stale; at most `capacity` entries are kept (all are dropped when it is reached).
final class DecodedColumns<Value: Sendable>: Sendable {
    private let values = Mutex<[String: Value]>([:])
    private let capacity: Int

    init(capacity: Int = 256) { self.capacity = capacity }

    func value(_ text: String, _ decode: (String) -> Value) -> Value {
        if let known = values.withLock({ $0[text] }) { return known }
        let decoded = decode(text)
        values.withLock { values in
            if values.count >= capacity { values.removeAll(keepingCapacity: true) }
            values[text] = decoded
        }
        return decoded
    }
}
