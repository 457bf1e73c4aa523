import SwiftplexSQL

/// The engine's migration scripts as of this branch, copied as data (ChatCore's `ChatStore.migrator`
/// and Agent's `AgentStore.migrator` are GRDB closures that cannot be read from here). Once the
/// chat and agent stores expose `ChatStore.migrations` / `AgentStore.migrations` as
/// `[SQLMigration]`, the test that applies these to PostgreSQL takes those instead and this file
/// goes. Only the scripts: v3's renaming of existing rows is Swift code (a no-op on a new database).
///
/// Each is `SQLMigration(id, sqlite: s, postgres: s)`: the same SQL for both, which the
/// PostgreSQL store translates.
enum EngineMigrations {
    static func same(_ identifier: String, _ sql: String) -> SQLMigration { SQLMigration(identifier, sqlite: sql, postgres: sql) }

    static let chat: [SQLMigration] = [
        same("v1", #"""
            CREATE TABLE user (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                display_name TEXT NOT NULL UNIQUE,
                profile TEXT NOT NULL,
                active INTEGER NOT NULL DEFAULT 0,
                relays TEXT NOT NULL DEFAULT '',
                created_at TEXT NOT NULL
            );
            CREATE TABLE address (
                user_id INTEGER PRIMARY KEY REFERENCES user(id) ON DELETE CASCADE,
                agent_address_id INTEGER NOT NULL,
                link TEXT NOT NULL,
                settings TEXT NOT NULL
            );
            CREATE TABLE contact_request (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
                agent_request_id INTEGER NOT NULL,
                profile TEXT NOT NULL,
                created_at TEXT NOT NULL
            );
            CREATE TABLE contact (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
                agent_conn_id INTEGER NOT NULL UNIQUE,
                profile TEXT,
                status TEXT NOT NULL,
                via_address INTEGER NOT NULL DEFAULT 0,
                accepted INTEGER NOT NULL DEFAULT 0,
                invitation TEXT,
                created_at TEXT NOT NULL,
                updated_at TEXT NOT NULL
            );
            CREATE TABLE chat_item (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
                contact_id INTEGER NOT NULL REFERENCES contact(id) ON DELETE CASCADE,
                sent INTEGER NOT NULL,
                content TEXT NOT NULL,
                shared_msg_id TEXT,
                agent_seq INTEGER,
                status TEXT NOT NULL,
                edited INTEGER NOT NULL DEFAULT 0,
                deleted INTEGER NOT NULL DEFAULT 0,
                created_at TEXT NOT NULL,
                updated_at TEXT
            );
            CREATE INDEX chat_item_by_contact ON chat_item(contact_id, id);
            CREATE TABLE chat_item_reaction (
                item_id INTEGER NOT NULL REFERENCES chat_item(id) ON DELETE CASCADE,
                sent INTEGER NOT NULL,
                reaction TEXT NOT NULL,
                created_at TEXT NOT NULL,
                PRIMARY KEY (item_id, sent, reaction)
            );
            """#),
        same("v2: quotes, chat state, incognito, short links, receipts", #"""
            ALTER TABLE user ADD COLUMN send_receipts INTEGER NOT NULL DEFAULT 1;
            ALTER TABLE address ADD COLUMN short_link TEXT;
            ALTER TABLE contact ADD COLUMN custom_data TEXT;
            ALTER TABLE contact ADD COLUMN user_prefs TEXT;
            ALTER TABLE contact ADD COLUMN incognito_profile TEXT;
            ALTER TABLE contact ADD COLUMN short_link TEXT;
            ALTER TABLE contact ADD COLUMN chat_ts TEXT;
            ALTER TABLE chat_item ADD COLUMN quoted TEXT;
            CREATE INDEX chat_item_by_seq ON chat_item(contact_id, agent_seq);
            CREATE INDEX chat_item_by_shared_id ON chat_item(contact_id, shared_msg_id);
            """#),
        same("v3: local display names unique per user", #"""
            CREATE TABLE display_name (
                user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
                local_name TEXT NOT NULL,
                base TEXT NOT NULL,
                suffix INTEGER NOT NULL,
                PRIMARY KEY (user_id, local_name),
                UNIQUE (user_id, base, suffix)
            );
            ALTER TABLE user ADD COLUMN local_display_name TEXT;
            ALTER TABLE contact ADD COLUMN local_display_name TEXT;
            ALTER TABLE contact_request ADD COLUMN local_display_name TEXT;
            CREATE INDEX contact_request_by_age ON contact_request(created_at);
            """#),
        same("v4: groups", #"""
            CREATE TABLE chat_group (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
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
                user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
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
            """#),
        same("v4b: group item quotes", #"""
            ALTER TABLE group_item ADD COLUMN quote TEXT
            """#),
        same("v4-items: group item edits, deletions, reactions", #"""
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
            """#),
        same("v4-items-b: group delivery statuses", #"""
            CREATE TABLE group_snd_status (
                item_id INTEGER NOT NULL REFERENCES group_item(id) ON DELETE CASCADE,
                member_row_id INTEGER NOT NULL,
                agent_conn_id INTEGER NOT NULL,
                seq INTEGER NOT NULL,
                status TEXT NOT NULL,
                PRIMARY KEY (item_id, member_row_id)
            );
            CREATE INDEX group_snd_status_by_msg ON group_snd_status(agent_conn_id, seq);
            """#),
        same("v4-items-c: pending moderations", #"""
            CREATE TABLE group_pending_moderation (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                author_member_id TEXT NOT NULL,
                shared_msg_id TEXT NOT NULL,
                moderator_row_id INTEGER NOT NULL,
                created_at TEXT NOT NULL,
                UNIQUE (group_id, author_member_id, shared_msg_id)
            );
            """#),
        same("v5-links: group links and admission", #"""
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
                user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
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
            """#),
        same("channels 1: chat relays, relay users", #"""
            ALTER TABLE user ADD COLUMN chat_relay INTEGER NOT NULL DEFAULT 0;
            CREATE TABLE chat_relay (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
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
            """#),
        same("v6-history: group item times", #"""
            ALTER TABLE group_item ADD COLUMN item_ts TEXT
            """#),
        same("v7-member-contacts: member contacts", #"""
            ALTER TABLE contact ADD COLUMN group_member_row_id INTEGER;
            ALTER TABLE contact ADD COLUMN grp_inv_sent INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE contact ADD COLUMN direct_inv TEXT;
            ALTER TABLE user ADD COLUMN auto_accept_member_contacts INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE group_link_join ADD COLUMN incognito_profile TEXT;
            ALTER TABLE chat_group ADD COLUMN incognito INTEGER NOT NULL DEFAULT 0;
            """#),
        same("v6-items-d: group delivery statuses from the send", #"""
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
            """#),
        same("channels 2: channels, their relays and members", #"""
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
            """#),
        same("channels 3: relay history, refused channels, subscriber counters, verified posts, channel actions", #"""
            CREATE TABLE channel_history (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                group_id INTEGER NOT NULL REFERENCES chat_group(id) ON DELETE CASCADE,
                body BLOB NOT NULL
            );
            CREATE INDEX channel_history_by_group ON channel_history(group_id, id);
            CREATE TABLE channel_refused (
                user_id INTEGER NOT NULL REFERENCES user(id) ON DELETE CASCADE,
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
            """#),
    ]

    static let agent: [SQLMigration] = [
        same("v1", #"""
            CREATE TABLE connection (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                rcv_id BLOB NOT NULL UNIQUE,
                rcv_sender_id BLOB NOT NULL,
                state BLOB NOT NULL
            );
            CREATE TABLE pending (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                connection_id INTEGER NOT NULL REFERENCES connection(id) ON DELETE CASCADE,
                envelope BLOB NOT NULL,
                message_seq INTEGER,
                created_at INTEGER NOT NULL
            );
            CREATE INDEX pending_by_connection ON pending(connection_id, id);
            """#),
        same("v2: addresses", #"""
            CREATE TABLE address (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                rcv_id BLOB NOT NULL UNIQUE,
                rcv_sender_id BLOB NOT NULL,
                state BLOB NOT NULL
            );
            CREATE TABLE contact_request (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                address_id INTEGER NOT NULL REFERENCES address(id) ON DELETE CASCADE,
                invitation TEXT NOT NULL,
                info BLOB NOT NULL,
                created_at INTEGER NOT NULL
            );
            """#),
        same("v3: inbox", #"""
            CREATE TABLE inbox (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                connection_id INTEGER NOT NULL REFERENCES connection(id) ON DELETE CASCADE,
                seq INTEGER NOT NULL,
                body BLOB NOT NULL,
                UNIQUE (connection_id, seq)
            );
            """#),
        same("v4: idempotent sends", #"""
            CREATE TABLE send_key (
                connection_id INTEGER NOT NULL REFERENCES connection(id) ON DELETE CASCADE,
                key TEXT NOT NULL,
                seq INTEGER NOT NULL,
                created_at INTEGER NOT NULL,
                PRIMARY KEY (connection_id, key)
            ) WITHOUT ROWID;
            CREATE INDEX send_key_by_age ON send_key(created_at);
            """#),
        same("v5: connection status and queue columns", #"""
            ALTER TABLE connection ADD COLUMN status TEXT;
            ALTER TABLE connection ADD COLUMN rcv TEXT;
            UPDATE connection SET status = json_extract(CAST(state AS TEXT), '$.status'),
                                  rcv = json_extract(CAST(state AS TEXT), '$.rcv');
            CREATE INDEX connection_by_status ON connection(status);
            """#),
    ]
}
