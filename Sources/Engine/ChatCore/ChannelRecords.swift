import ChatModel
import Foundation
import SwiftplexSQL
import SwiftplexBase

// The channel tables of the chat database: the chat relays an owner registered (`chat_relay`),
// which users are chat relays (`user.chat_relay`), and the channels themselves (`channel`, one
// per channel group, and `channel_member`, the relays, owners and subscribers a channel's machine
// talks to, with their agent connections).

enum ChannelStore {
    static func register(_ m: inout [SQLMigration]) {
        m.append(SQLMigration("channels 1: chat relays, relay users", sql: """
                ALTER TABLE "user" ADD COLUMN chat_relay INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE chat_relay (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    user_id INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    address TEXT NOT NULL,
                    relay_profile TEXT NOT NULL,
                    domains TEXT NOT NULL DEFAULT '[]',
                    preset INTEGER NOT NULL DEFAULT 0,
                    tested INTEGER,
                    enabled INTEGER NOT NULL DEFAULT 1,
                    deleted INTEGER NOT NULL DEFAULT 0,
                    created_at TEXT NOT NULL,
                    UNIQUE (user_id, address)
                );
                """))
    }

    /// Registered after every other migration (``ChatStore/migrations``): an existing database
    /// migrates in the same order as a new one.
    static func registerChannels(_ m: inout [SQLMigration]) {
        m.append(SQLMigration("channels 2: channels, their relays and members", sql: """
                CREATE TABLE channel (
                    group_id INTEGER PRIMARY KEY REFERENCES chat_group(id) ON DELETE CASCADE,
                    role TEXT NOT NULL,
                    channel_link TEXT NOT NULL,
                    public_group_id TEXT,
                    member_id TEXT NOT NULL,
                    member_key TEXT,
                    root_key TEXT,
                    agent_address_id INTEGER,
                    full_link TEXT,
                    relay_link TEXT,
                    relay_status TEXT,
                    inviter TEXT,
                    owners TEXT NOT NULL DEFAULT '[]',
                    owner_connected INTEGER NOT NULL DEFAULT 0,
                    owner_request INTEGER,
                    created_at TEXT NOT NULL
                );
                CREATE INDEX channel_by_address ON channel(agent_address_id);
                CREATE TABLE channel_member (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    member_id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    agent_conn_id INTEGER UNIQUE,
                    chat_relay_id INTEGER,
                    address TEXT,
                    status TEXT NOT NULL,
                    relay_link TEXT,
                    connected INTEGER NOT NULL DEFAULT 0,
                    member_key TEXT,
                    UNIQUE (group_id, member_id)
                );
                CREATE TABLE channel_delivery (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    body BLOB NOT NULL,
                    recipients TEXT NOT NULL,
                    created_at TEXT NOT NULL
                );
                CREATE INDEX channel_delivery_by_group ON channel_delivery(group_id, id);
                """))
    }

    /// Registered after ``registerChannels(_:)`` and every other migration: what lived in memory —
    /// the relay's history for late joiners, the subscriber's per-relay counters — the channels a
    /// relay's operator left (refused until `/_relay allow`), the signature check of a received
    /// channel post (`meta.msgVerified`), and the channel steps still to make (`channel_action`).
    static func registerChannelState(_ m: inout [SQLMigration]) {
        m.append(SQLMigration("channels 3: relay history, refused channels, subscriber counters, verified posts, channel actions", sql: """
                CREATE TABLE channel_history (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    body BLOB NOT NULL
                );
                CREATE INDEX channel_history_by_group ON channel_history(group_id, id);
                CREATE TABLE channel_refused (
                    user_id INTEGER NOT NULL REFERENCES "user"(id) ON DELETE CASCADE,
                    channel_link TEXT NOT NULL,
                    group_id INTEGER REFERENCES chat_group(id) ON DELETE SET NULL,
                    created_at TEXT NOT NULL,
                    PRIMARY KEY (user_id, channel_link)
                );
                ALTER TABLE channel ADD COLUMN unique_messages INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE channel_member ADD COLUMN delivered INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE channel_member ADD COLUMN first_copies INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE channel_member ADD COLUMN rejected INTEGER NOT NULL DEFAULT 0;
                ALTER TABLE channel_member ADD COLUMN baseline INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE channel_item_check (
                    item_id INTEGER PRIMARY KEY REFERENCES group_item(id) ON DELETE CASCADE,
                    msg_verified TEXT NOT NULL
                );
                CREATE TABLE channel_action (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    action TEXT NOT NULL
                );
                CREATE INDEX channel_action_by_group ON channel_action(group_id, id);
                """))
    }
}

extension ChannelStore {
    /// Registered after ``registerChannelState(_:)``: a subscriber's channel items carry their
    /// channel author, so that the owner's updates, deletions and reactions find them (posts
    /// were kept under the relay that brought them; those as the channel are marked `#channel`).
    static func registerChannelItems(_ m: inout [SQLMigration]) {
        m.append(SQLMigration("channels 4: channel item authors", sql: """
                ALTER TABLE group_item ADD COLUMN channel_author TEXT;
                UPDATE group_item SET channel_author = '#channel' WHERE id IN (SELECT item_id FROM channel_item_check)
                    AND member_row_id IN (SELECT id FROM group_member WHERE role = 'relay');
                """))
        // A relay address's link root key (base64url secret key), to answer `/relay test`; the
        // channel's member count as its link data last said (`groupSummary.publicMemberCount`);
        // the chat relay's operator policy (one row), in force from the engine's start.
        m.append(SQLMigration("channels 5: relay address keys, public member counts, relay policy", sql: """
                CREATE TABLE relay_address_key (
                    user_id INTEGER PRIMARY KEY REFERENCES "user"(id) ON DELETE CASCADE,
                    root_key TEXT NOT NULL
                );
                ALTER TABLE channel ADD COLUMN public_member_count INTEGER;
                CREATE TABLE relay_policy (
                    id INTEGER PRIMARY KEY,
                    policy TEXT NOT NULL
                );
                """))
        // Every owner control event a subscriber applied (ChannelSubscriberState.appliedControl):
        // kept for good, so that a relay cannot replay an old one after any number of posts or a
        // restart.
        m.append(SQLMigration("channels 6: owner control events applied", sql: """
                CREATE TABLE channel_control_msg (
                    group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                    author_member_id TEXT NOT NULL,
                    shared_msg_id TEXT NOT NULL,
                    PRIMARY KEY (group_id, author_member_id, shared_msg_id)
                );
                """))
    }
}

/// `channel_history`: a relay's latest forwarded posts (the forward encoded as a one-item batch),
/// served to subscribers who join later; the newest ``ChannelRelayState/historyLimit`` are kept.
struct ChannelHistoryRecord: ChatRecord {
    static let databaseTableName = "channel_history"
    var id: Int64?
    var groupId: Int64
    var body: Data

    enum Columns {
        static let id = Column("id")
        static let groupId = Column("group_id")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// `channel_refused`: a channel (by its link) a chat relay user's operator left; its invitations
/// are answered `x.grp.relay.reject` until `/_relay allow #g`.
struct ChannelRefusedRecord: ChatRecord {
    static let databaseTableName = "channel_refused"
    static let databasePrimaryKey = ["user_id", "channel_link"]
    var userId: Int64
    var channelLink: String
    var groupId: Int64?
    var createdAt: String

    enum Columns {
        static let userId = Column("user_id")
        static let channelLink = Column("channel_link")
    }
}

/// `channel`: a channel group as this user takes part in it — `owner` (its keys: the channel
/// link's root key and the owner's member key, base64url of the Ed25519 secret key, in the 0600
/// chat database and never logged; the `/c` link's agent address), or `relay` (the inviting owner,
/// its own status, its per-channel `/g` link and that link's agent address, the owners from the
/// channel's link data, the owner's request until it is accepted).
struct ChannelRecord: ChatRecord {
    static let databaseTableName = "channel"
    static let databasePrimaryKey = ["group_id"]
    var groupId: Int64
    var role: String
    var channelLink: String
    var publicGroupId: String?
    var memberId: String
    var memberKey: String?
    var rootKey: String?
    var agentAddressId: Int64?
    var fullLink: String?
    var relayLink: String?
    var relayStatus: String?
    var inviter: String?
    /// `[{memberId, memberKey, profile}]` as JSON.
    var owners: String = "[]"
    var ownerConnected: Bool = false
    var ownerRequest: Int64?
    var createdAt: String
    /// Subscriber: distinct owner messages taken (the base of each relay's `missed`).
    var uniqueMessages: Int = 0
    /// The channel's `publicMemberCount`: as the owner last published it, as a subscriber last
    /// read it from the link data (at its join, `/_get group link data`).
    var publicMemberCount: Int64?

    enum Role: String { case owner, relay, subscriber }

    enum Columns {
        static let groupId = Column("group_id")
        static let agentAddressId = Column("agent_address_id")
    }
}

/// `channel_member`: whom a channel's machine talks to — an owner's relay (`relay`: the chat relay
/// it was added with, its address, status, per-channel link), a relay's owner (`owner`) — with the
/// agent connection to it.
struct ChannelMemberRecord: ChatRecord {
    static let databaseTableName = "channel_member"
    var id: Int64?
    var groupId: Int64
    var memberId: String
    var kind: String
    var agentConnId: Int64?
    var chatRelayId: Int64?
    var address: String?
    var status: String
    var relayLink: String?
    var connected: Bool = false
    var memberKey: String?
    /// Subscriber's counters of a relay (``SubscriberRelay``): verified owner messages it
    /// brought, those it brought first, those refused, and the distinct messages taken before it
    /// connected.
    var delivered: Int = 0
    var firstCopies: Int = 0
    var rejected: Int = 0
    var baseline: Int = 0

    enum Columns {
        static let groupId = Column("group_id")
        static let memberId = Column("member_id")
        static let agentConnId = Column("agent_conn_id")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// `chat_relay`: a chat relay a user registered (`/relays name=<name> <address>`). A relay
/// dropped from the list is kept `deleted` (channels may still name it, as SimpleX keeps it);
/// registering its address again brings it back under the new name.
struct ChatRelayRecord: ChatRecord {
    static let databaseTableName = "chat_relay"
    var id: Int64?
    var userId: Int64
    var name: String
    var address: String
    /// ``RelayProfile`` as JSON.
    var relayProfile: String
    /// `[String]` as JSON.
    var domains: String = "[]"
    var preset: Bool = false
    var tested: Bool?
    var enabled: Bool = true
    var deleted: Bool = false
    var createdAt: String

    enum Columns {
        static let id = Column("id")
        static let userId = Column("user_id")
        static let address = Column("address")
        static let deleted = Column("deleted")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }

    /// The relay as the API shows it.
    var model: UserChatRelay {
        UserChatRelay(chatRelayId: id ?? 0, address: address,
                      relayProfile: Stored.json(relayProfile) ?? .object([("displayName", .string(name)), ("fullName", "")]),
                      domains: Stored.decode([String].self, domains) ?? [], preset: preset, tested: tested, enabled: enabled, deleted: deleted)
    }
}

/// `channel_delivery`: a relay's delivery job — one forward, encoded once as a batch, to the
/// subscribers still to send it to (`[memberId]` as JSON, in order). Written in the same
/// transaction as the relay's input that made it; removed when every subscriber has it. Each send
/// carries the idempotency key `chdl:<job>:<member>`, so a job resumed after a crash sends nothing twice.
struct ChannelDeliveryRecord: ChatRecord {
    static let databaseTableName = "channel_delivery"
    var id: Int64?
    var groupId: Int64
    var body: Data
    var recipients: String
    var createdAt: String

    enum Columns {
        static let id = Column("id")
        static let groupId = Column("group_id")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// `channel_action`: a channel step still to make — the agent call of an effect committed with the
/// input that asked for it (fetching link data, creating the relay's link, accepting, joining,
/// allowing, publishing link data) as JSON (``ChannelStep``); removed once made. Steps left by a
/// crash or a shutdown are made again at start (+ChannelActions).
struct ChannelActionRecord: ChatRecord {
    static let databaseTableName = "channel_action"
    var id: Int64?
    var groupId: Int64
    var action: String

    enum Columns {
        static let id = Column("id")
        static let groupId = Column("group_id")
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}
