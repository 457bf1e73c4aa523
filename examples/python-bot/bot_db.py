"""Where the example bots keep their data, from the environment: BOT_DB is an SQLite file prefix,
or a PostgreSQL connection string (postgresql://user@host:5432/db), then with BOT_DB_SCHEMA as
the schema prefix (the engine makes <prefix>_chat_schema and <prefix>_agent_schema)."""

import os

from simplex_chat import PostgresDb, SqliteDb


def database(default_prefix):
    value = os.environ.get("BOT_DB", default_prefix)
    if value.startswith(("postgresql://", "postgres://")):
        return PostgresDb(connection_string=value, schema_prefix=os.environ.get("BOT_DB_SCHEMA"))
    return SqliteDb(file_prefix=value)
