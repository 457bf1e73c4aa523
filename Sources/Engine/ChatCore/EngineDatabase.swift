import Foundation
import SwiftplexSQL

/// Where an engine keeps its two databases (chat and agent).
public enum EngineDatabase: Sendable, CustomStringConvertible {
    /// SQLite files `<prefix>_chat.db` and `<prefix>_agent.db`.
    case sqlite(prefix: String)
    /// Schemas `<prefix>_chat_schema` and `<prefix>_agent_schema` of a PostgreSQL database, where
    /// `<prefix>` is the location's schema (as SimpleX's `schema_prefix`).
    case postgres(PostgresLocation)

    /// A connection string (`postgresql://…`, or libpq keywords) and a schema prefix: the prefix
    /// given, else the `schema` the connection string names, else `swiftplex`.
    public static func postgres(connection: String, schemaPrefix: String?) throws -> EngineDatabase {
        var location = try PostgresLocation(url: connection, defaultSchema: "swiftplex")
        if let schemaPrefix, !schemaPrefix.isEmpty { location = try location.with(schema: schemaPrefix) }
        // Both schemas must be valid names too (length): checked here, before anything opens.
        _ = try location.with(schema: location.schema + "_agent_schema")
        return .postgres(location)
    }

    /// The databases of the bot whose data prefix is `data` on a host configured with
    /// `database: connection`: the schemas of `<schema>_<data>` (`<schema>` from the connection
    /// string, default `swiftplex`), as the host names them.
    public static func postgres(connection: String, bot data: String) throws -> EngineDatabase {
        let base = try PostgresLocation(url: connection, defaultSchema: "swiftplex")
        return try postgres(connection: connection, schemaPrefix: base.schema + "_" + data)
    }

    /// `value` as the host's `database:` or `swiftplex-chat --postgres` take it: a PostgreSQL
    /// connection string, else an SQLite path prefix.
    public static func parse(_ value: String, schemaPrefix: String? = nil) throws -> EngineDatabase {
        PostgresLocation.isPostgres(value) ? try postgres(connection: value, schemaPrefix: schemaPrefix) : .sqlite(prefix: value)
    }

    /// Where the chat database is.
    public var chat: DatabaseLocation {
        get throws {
            switch self {
            case let .sqlite(prefix): .sqlite(URL(fileURLWithPath: prefix + "_chat.db"))
            case let .postgres(location): .postgres(try location.with(schema: location.schema + "_chat_schema"))
            }
        }
    }

    /// Where the agent database is.
    public var agent: DatabaseLocation {
        get throws {
            switch self {
            case let .sqlite(prefix): .sqlite(URL(fileURLWithPath: prefix + "_agent.db"))
            case let .postgres(location): .postgres(try location.with(schema: location.schema + "_agent_schema"))
            }
        }
    }

    /// The migrations of `migrations` not yet applied at `location` (for `confirmation: .error`).
    static func pending(_ migrations: [SQLMigration], at location: DatabaseLocation) throws -> [String] {
        try location.pendingMigrations(migrations)
    }

    /// The files' prefix, or the server and schema prefix (never a password).
    public var description: String {
        switch self {
        case let .sqlite(prefix): prefix
        case let .postgres(location): location.description
        }
    }
}
