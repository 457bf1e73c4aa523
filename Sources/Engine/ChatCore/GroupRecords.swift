import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase

// The group tables of the chat database (migration `v4: groups`) and their GRDB records. A group's
// protocol state (`GroupProtocol.GroupState`) is restored from them; what the machine asks to
// persist (members, the membership, the profile, introductions) is written in the same
// transaction as the input's other effects (``GroupActionRecord``) and its "handled" mark.

enum GroupStore {
    static func register(_ m: inout [SQLMigration]) {
        m.append(SQLMigration("v4: groups", sql: """
                CREATE TABLE chat_group (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
                    local_display_name TEXT NOT NULL,
                    profile TEXT NOT NULL,
                    pending_join TEXT,
                    custom_data TEXT,
                    deleted INTEGER NOT NULL DEFAULT 0,
                    created_at TEXT NOT NULL,
                    updated_at TEXT NOT NULL,
                    chat_ts TEXT
                );
                CREATE TABLE group_member (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    member_id TEXT NOT NULL,
                    role TEXT NOT NULL,
                    status TEXT NOT NULL,
                    category TEXT NOT NULL,
                    profile TEXT,
                    invited_by TEXT,
                    blocked INTEGER NOT NULL DEFAULT 0,
                    contact_id INTEGER,
                    agent_conn_id INTEGER UNIQUE,
                    local_display_name TEXT,
                    created_at TEXT NOT NULL,
                    updated_at TEXT NOT NULL,
                    UNIQUE (group_id, member_id)
                );
                CREATE TABLE group_intro (
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    re_member TEXT NOT NULL,
                    to_member TEXT NOT NULL,
                    status TEXT NOT NULL,
                    PRIMARY KEY (group_id, re_member, to_member)
                );
                CREATE TABLE group_msg (
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    author_member_id TEXT NOT NULL,
                    shared_msg_id TEXT NOT NULL,
                    PRIMARY KEY (group_id, author_member_id, shared_msg_id)
                );
                CREATE TABLE group_input (
                    agent_conn_id INTEGER NOT NULL,
                    seq INTEGER NOT NULL,
                    PRIMARY KEY (agent_conn_id, seq)
                );
                CREATE TABLE group_item (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    member_row_id INTEGER,
                    forwarded_by_row_id INTEGER,
                    content TEXT NOT NULL,
                    shared_msg_id TEXT,
                    status TEXT NOT NULL,
                    blocked INTEGER NOT NULL DEFAULT 0,
                    created_at TEXT NOT NULL
                );
                CREATE INDEX group_item_by_group ON group_item(group_id, id);
                CREATE TABLE group_action (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    group_id INTEGER NOT NULL,
                    action TEXT NOT NULL
                );
                CREATE INDEX group_action_by_group ON group_action(group_id, id);
                """))
        m.append(SQLMigration("v4b: group item quotes", sql: "ALTER TABLE group_item ADD COLUMN quote TEXT"))
        m.append(SQLMigration("v4-items: group item edits, deletions, reactions", sql: """
                ALTER TABLE group_item ADD COLUMN edited INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE group_item ADD COLUMN deleted TEXT;
                ALTER TABLE group_item ADD COLUMN deleted_by_row_id INTEGER;
                ALTER TABLE group_item ADD COLUMN updated_at TEXT;
                CREATE INDEX group_item_by_msg ON group_item(group_id, shared_msg_id);
                CREATE TABLE group_reaction (
                    item_id INTEGER NOT NULL REFERENCES group_item(id) ON DELETE CASCADE,
                    by_member TEXT NOT NULL,
                    sent INTEGER NOT NULL,
                    reaction TEXT NOT NULL,
                    created_at TEXT NOT NULL,
                    PRIMARY KEY (item_id, by_member, reaction)
                );
                """))
        m.append(SQLMigration("v4-items-b: group delivery statuses", sql: """
                CREATE TABLE group_snd_status (
                    item_id INTEGER NOT NULL REFERENCES group_item(id) ON DELETE CASCADE,
                    member_row_id INTEGER NOT NULL,
                    agent_conn_id INTEGER NOT NULL,
                    seq INTEGER NOT NULL,
                    status TEXT NOT NULL,
                    PRIMARY KEY (item_id, member_row_id)
                );
                CREATE INDEX group_snd_status_by_msg ON group_snd_status(agent_conn_id, seq);
                """))
        m.append(SQLMigration("v4-items-c: pending moderations", sql: """
                CREATE TABLE group_pending_moderation (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    author_member_id TEXT NOT NULL,
                    shared_msg_id TEXT NOT NULL,
                    moderator_row_id INTEGER NOT NULL,
                    created_at TEXT NOT NULL,
                    UNIQUE (group_id, author_member_id, shared_msg_id)
                );
                """))
        m.append(SQLMigration("v5-links: group links and admission", sql: """
                CREATE TABLE group_link (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    group_id INTEGER NOT NULL UNIQUE REFERENCES chat_group(id) ON DELETE CASCADE,
                    agent_address_id INTEGER NOT NULL UNIQUE,
                    group_link_id TEXT NOT NULL,
                    link TEXT NOT NULL,
                    short_link TEXT,
                    role TEXT NOT NULL,
                    created_at TEXT NOT NULL
                );
                CREATE TABLE group_link_join (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
                    agent_conn_id INTEGER NOT NULL UNIQUE,
                    link TEXT NOT NULL,
                    short_link TEXT,
                    x_contact_id TEXT NOT NULL,
                    created_at TEXT NOT NULL
                );
                ALTER TABLE group_member ADD COLUMN via_link INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE group_member ADD COLUMN pending_connected INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE group_member ADD COLUMN x_contact_id TEXT;
                ALTER TABLE chat_group ADD COLUMN via_link TEXT;
                CREATE INDEX group_member_by_x_contact ON group_member(group_id, x_contact_id);
                """))
    }

    /// Registered after the channel migrations (``ChatStore/migrations``).
    static func registerItemTimes(_ m: inout [SQLMigration]) {
        m.append(SQLMigration("v6-history: group item times", sql: "ALTER TABLE group_item ADD COLUMN item_ts TEXT"))
    }

    /// Registered after `v7-member-contacts` (``ChatStore/migrations``): databases made before it
    /// migrate in the order the migrations were written.
    static func registerDeliveryStatuses(_ m: inout [SQLMigration]) {
        // A delivery status is made for every recipient when the item is sent (the agent message
        // it goes as comes later): `agent_conn_id` and `seq` may be NULL until then.
        m.append(SQLMigration("v6-items-d: group delivery statuses from the send", sql: """
                CREATE TABLE group_snd_status_new (
                    item_id INTEGER NOT NULL REFERENCES group_item(id) ON DELETE CASCADE,
                    member_row_id INTEGER NOT NULL,
                    agent_conn_id INTEGER,
                    seq INTEGER,
                    status TEXT NOT NULL,
                    PRIMARY KEY (item_id, member_row_id)
                );
                INSERT INTO group_snd_status_new (item_id, member_row_id, agent_conn_id, seq, status)
                    SELECT item_id, member_row_id, agent_conn_id, seq, status FROM group_snd_status;
                DROP TABLE group_snd_status;
                ALTER TABLE group_snd_status_new RENAME TO group_snd_status;
                CREATE INDEX group_snd_status_by_msg ON group_snd_status(agent_conn_id, seq);
                """))
    }
}

/// `chat_group`: one group of a user. `deleted` groups are hidden and purged once their last
/// actions (the `x.grp.del` or `x.grp.leave` to send) are done.
struct GroupRecord: ChatRecord {
    static let databaseTableName = "chat_group"
    var id: Int64?
    var userId: Int64
    var localDisplayName: String
    var profile: String
    var pendingJoin: String?
    var customData: String?
    var deleted: Bool = false
    var createdAt: String
    var updatedAt: String
    var chatTs: String?
    /// The group link (full) the user joined by, if it did.
    var viaLink: String?

    enum Columns {
        static let id = Column("id")
        static let userId = Column("user_id")
        static let deleted = Column("deleted")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// `group_member`: a member, the user's own membership (category `user`) included.
struct GroupMemberRecord: ChatRecord {
    static let databaseTableName = "group_member"
    var id: Int64?
    var groupId: Int64
    var memberId: String
    var role: String
    var status: String
    var category: String
    var profile: String?
    var invitedBy: String?
    var blocked: Bool
    var contactId: Int64?
    var agentConnId: Int64?
    var localDisplayName: String?
    var createdAt: String
    var updatedAt: String
    /// Host only: joined through the group link; its connection is up while it waits for review.
    var viaLink: Bool = false
    var pendingConnected: Bool = false
    /// A link joiner's request id (`x.contact`'s `contactReqId`): a request sent again is not a new member.
    var xContactId: String?

    enum Columns {
        static let id = Column("id")
        static let xContactId = Column("x_contact_id")
        static let groupId = Column("group_id")
        static let memberId = Column("member_id")
        static let category = Column("category")
        static let agentConnId = Column("agent_conn_id")
        static let contactId = Column("contact_id")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }

    /// The machine's view of this member.
    var state: GroupMemberState? {
        guard let mid = MemberId(memberId), let st = GroupProtocol.GroupMemberStatus(rawValue: status),
              let cat = GroupProtocol.GroupMemberCategory(rawValue: category) else { return nil }
        let p = Stored.json(profile).flatMap { try? MemberProfile(json: $0) }
        return GroupMemberState(memberId: mid, role: GroupProtocol.GroupMemberRole(name: role), status: st, category: cat, profile: p,
                                invitedBy: invitedBy.flatMap(MemberId.init), blocked: blocked, contact: contactId, viaLink: viaLink,
                                pendingConnected: pendingConnected)
    }
}

/// `group_link`: a group's link — a contact address owned by the group, whose requests become
/// members with `role`.
struct GroupLinkRecord: ChatRecord {
    static let databaseTableName = "group_link"
    var id: Int64?
    var groupId: Int64
    var agentAddressId: Int64
    var groupLinkId: String
    var link: String
    var shortLink: String?
    var role: String
    var createdAt: String

    enum Columns {
        static let groupId = Column("group_id")
        static let agentAddressId = Column("agent_address_id")
        static let link = Column("link")
        static let shortLink = Column("short_link")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// `group_link_join`: a join request the user sent through someone's group link, until the host's
/// `x.grp.link.inv` makes it a group (the row goes in the same transaction).
struct GroupLinkJoinRecord: ChatRecord {
    static let databaseTableName = "group_link_join"
    var id: Int64?
    var userId: Int64
    var agentConnId: Int64
    var link: String
    var shortLink: String?
    var xContactId: String
    var createdAt: String

    enum Columns {
        static let agentConnId = Column("agent_conn_id")
        static let link = Column("link")
        static let userId = Column("user_id")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// `group_intro`: an introduction the user hosts.
struct GroupIntroRecord: ChatRecord, PersistableRecord {
    static let databaseTableName = "group_intro"
    static let databasePrimaryKey = ["group_id", "re_member", "to_member"]
    var groupId: Int64
    var reMember: String
    var toMember: String
    var status: String
}

/// `group_msg`: (author, shared message id) pairs applied — the forward dedup that survives restarts.
struct GroupMsgRecord: ChatRecord, PersistableRecord {
    static let databaseTableName = "group_msg"
    static let databasePrimaryKey = ["group_id", "author_member_id", "shared_msg_id"]
    var groupId: Int64
    var authorMemberId: String
    var sharedMsgId: String
}

/// `group_input`: agent messages on member connections already handled (a replay after a crash is dropped).
struct GroupInputRecord: ChatRecord, PersistableRecord {
    static let databaseTableName = "group_input"
    static let databasePrimaryKey = ["agent_conn_id", "seq"]
    var agentConnId: Int64
    var seq: Int64
}

/// `group_item`: a message in a group; `member_row_id` is the author's row (nil: the user sent it).
struct GroupItemRecord: ChatRecord {
    static let databaseTableName = "group_item"
    var id: Int64?
    var userId: Int64
    var groupId: Int64
    var memberRowId: Int64?
    var forwardedByRowId: Int64?
    var content: String
    var sharedMsgId: String?
    var status: ItemStatus
    var blocked: Bool
    var createdAt: String
    /// The quoted message (``GroupItemQuote`` as JSON), when the item quotes one.
    var quote: String?
    /// Changed by its author (`x.msg.update`).
    var edited: Bool = false
    /// nil, or how it was deleted for everyone: ``GroupItemDeletion``.
    var deleted: GroupItemDeletion?
    /// Who moderated it (a member's row; nil with `moderated`: the user).
    var deletedByRowId: Int64?
    var updatedAt: String?
    /// The item's time when it is not `createdAt`: a forwarded message's `msgTs` (clamped to the
    /// receive time); nil for the user's own items and messages received directly.
    var itemTs: String?
    /// A channel post's author at a subscriber (``ChatController/channelAuthorTag`` for a post as
    /// the channel, else the owner's member id): how the owner's later events on it find it.
    var channelAuthor: String?

    enum Columns {
        static let id = Column("id")
        static let groupId = Column("group_id")
        static let channelAuthor = Column("channel_author")
        static let status = Column("status")
        static let sharedMsgId = Column("shared_msg_id")
        static let memberRowId = Column("member_row_id")
        static let deleted = Column("deleted")
        static let blocked = Column("blocked")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// How a group item was deleted for everyone: by its author (`x.msg.del`), or by a moderator
/// (`x.msg.del` with the author's `memberId`, or a removal with `messages=on`).
enum GroupItemDeletion: String, Codable, Sendable, SQLValueConvertible {
    case deleted, moderated
}

/// `group_reaction`: a reaction on a group item — by a member (its member id) or by the user (`sent`).
struct GroupReactionRecord: ChatRecord, PersistableRecord {
    static let databaseTableName = "group_reaction"
    static let databasePrimaryKey = ["item_id", "by_member", "reaction"]
    var itemId: Int64
    var byMember: String
    var sent: Bool
    var reaction: String
    var createdAt: String

    enum Columns {
        static let itemId = Column("item_id")
        static let byMember = Column("by_member")
        static let sent = Column("sent")
        static let reaction = Column("reaction")
    }
}

/// `group_snd_status`: the delivery of one of the user's group items to one member (the agent
/// message it went as), SimpleX's `group_snd_item_statuses`. Made `sndNew` for every recipient in
/// the send's transaction; `agentConnId` and `seq` are nil until the agent has the message.
struct GroupSndStatusRecord: ChatRecord, PersistableRecord {
    static let databaseTableName = "group_snd_status"
    static let databasePrimaryKey = ["item_id", "member_row_id"]
    var itemId: Int64
    var memberRowId: Int64
    var agentConnId: Int64?
    var seq: Int64?
    var status: ItemStatus

    enum Columns {
        static let itemId = Column("item_id")
        static let memberRowId = Column("member_row_id")
        static let agentConnId = Column("agent_conn_id")
        static let seq = Column("seq")
        static let status = Column("status")
    }
}

/// What a group item's `quote` column holds: the quoted message as the quote carried it (shared id,
/// time, content) and, when this side has that message, its item and author (nil = the user).
struct GroupItemQuote: Codable, Sendable {
    var sharedMsgId: String?
    var sentAt: ChatTimestamp
    var content: MsgContent
    var itemId: Int64?
    var authorRowId: Int64?
}

/// `group_action`: an effect of a committed input still to perform (an agent call), in order per group.
struct GroupActionRecord: ChatRecord {
    static let databaseTableName = "group_action"
    var id: Int64?
    var groupId: Int64
    var action: String

    enum Columns {
        static let id = Column("id")
        static let groupId = Column("group_id")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// What an action row holds: the agent side of a ``GroupEffect``.
enum GroupPendingAction: Sendable {
    case send(GroupEnvelope, to: MemberId)
    case sendToContact(GroupEnvelope, contact: Int64)
    case createInvitation(for: MemberId)
    case join(for: MemberId, connRequest: String, info: GroupEnvelope)
    case allow(for: MemberId, info: GroupEnvelope?)
    case acceptRequest(for: MemberId, request: Int64, info: GroupEnvelope)
    case delete(for: MemberId)
    case deleteAll
    /// Join a member's direct invitation for this member contact (+MemberContacts).
    case joinMemberContact(contact: Int64)

    var json: JSONValue {
        switch self {
        case let .send(env, to): .object([("kind", "send"), ("member", .string(to.text)), ("msg", env.json)])
        case let .sendToContact(env, contact): .object([("kind", "sendToContact"), ("contact", .int(contact)), ("msg", env.json)])
        case let .createInvitation(m): .object([("kind", "createInvitation"), ("member", .string(m.text))])
        case let .join(m, req, info): .object([("kind", "join"), ("member", .string(m.text)), ("connReq", .string(req)), ("msg", info.json)])
        case let .allow(m, info): .object([("kind", "allow"), ("member", .string(m.text)), ("msg", info?.json ?? .null)])
        case let .acceptRequest(m, request, info):
            .object([("kind", "acceptRequest"), ("member", .string(m.text)), ("request", .int(request)), ("msg", info.json)])
        case let .delete(m): .object([("kind", "delete"), ("member", .string(m.text))])
        case .deleteAll: .object([("kind", "deleteAll")])
        case let .joinMemberContact(contact): .object([("kind", "joinMemberContact"), ("contact", .int(contact))])
        }
    }

    init?(json: JSONValue) {
        let member = json["member"]?.stringValue.flatMap(MemberId.init)
        let env = json["msg"].flatMap { $0 == .null ? nil : try? GroupEnvelope(json: $0) }
        switch json["kind"]?.stringValue {
        case "send":
            guard let member, let env else { return nil }
            self = .send(env, to: member)
        case "sendToContact":
            guard let c = json["contact"]?.int64Value, let env else { return nil }
            self = .sendToContact(env, contact: c)
        case "createInvitation":
            guard let member else { return nil }
            self = .createInvitation(for: member)
        case "join":
            guard let member, let env, let req = json["connReq"]?.stringValue else { return nil }
            self = .join(for: member, connRequest: req, info: env)
        case "allow":
            guard let member else { return nil }
            self = .allow(for: member, info: env)
        case "acceptRequest":
            guard let member, let env, let request = json["request"]?.int64Value else { return nil }
            self = .acceptRequest(for: member, request: request, info: env)
        case "delete":
            guard let member else { return nil }
            self = .delete(for: member)
        case "deleteAll":
            self = .deleteAll
        case "joinMemberContact":
            guard let c = json["contact"]?.int64Value else { return nil }
            self = .joinMemberContact(contact: c)
        default:
            return nil
        }
    }
}

extension GroupItemRecord {
    /// Takes `content` as an edit of the item (stored, marked edited, its update time `now`);
    /// false when the item holds that content already.
    mutating func edit(to content: JSONValue, at now: String, _ db: Database) throws -> Bool {
        guard Stored.json(self.content) != content else { return false }
        self.content = content.description
        edited = true
        updatedAt = now
        try update(db)
        return true
    }
}
