import ArgumentParser
import ChatCore
import Foundation
import SwiftplexSQL
import SwiftplexSQLPostgres

/// `swiftplex store copy --from A --to B`: moves a bot's engine databases (chat and agent) between
/// SQLite files and PostgreSQL schemas, either way (``EngineStoreCopy``). Run it with the bot
/// stopped: a running bot's databases are refused.
struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Move a bot's databases between SQLite files and PostgreSQL.",
        subcommands: [Copy.self]
    )

    struct Copy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a bot's chat and agent databases from one store to another (SQLite files or postgresql://…).",
            discussion: """
                Each of --from and --to is a data directory (the bot's files are <dir>/<bot>_chat.db \
                and <dir>/<bot>_agent.db), an SQLite file prefix (<prefix>_chat.db, <prefix>_agent.db), \
                or a PostgreSQL URL as in the host's `database:` (the bot's schemas are \
                <schema>_<bot>_chat_schema and <schema>_<bot>_agent_schema; --schema-prefix names \
                them directly instead). Stop the bot first. The destination is created and migrated; \
                it must be empty unless --force is given (then everything in it is deleted first). \
                Progress goes to stderr; at the end every table's rows are counted on both sides.
                """
        )

        @Option(help: "Where the bot's databases are: a data directory, an SQLite file prefix, or postgresql://….")
        var from: String

        @Option(help: "Where to copy them: a data directory, an SQLite file prefix, or postgresql://….")
        var to: String

        @Option(help: "The bot's data prefix (`bots[].data`; `bot` for a host with a single bot).")
        var bot: String = "bot"

        @Option(name: .customLong("schema-prefix"),
                help: "For a PostgreSQL URL: the schemas' prefix as is (<prefix>_chat_schema), as swiftplex-chat or the Python library name them.")
        var schemaPrefix: String?

        @Flag(help: "Delete what the destination holds before copying.")
        var force = false

        @Option(help: "Rows read and written per transaction.")
        var batch: Int = 5000

        func validate() throws {
            guard batch > 0 else { throw ValidationError("--batch must be at least 1") }
            guard !bot.isEmpty, !bot.contains("/") else { throw ValidationError("--bot must be a data prefix (no /)") }
        }

        func run() async throws {
            umask(0o077)
            do {
                let source = try Self.database(from, bot: bot, schemaPrefix: schemaPrefix, role: "--from")
                let destination = try Self.database(to, bot: bot, schemaPrefix: schemaPrefix, role: "--to")
                FileHandle.standardError.write(Data("copying \(Self.describe(source)) -> \(Self.describe(destination))\n".utf8))
                let summary = try await EngineStoreCopy.copy(from: source, to: destination, force: force, batch: batch) { line in
                    FileHandle.standardError.write(Data((line + "\n").utf8))
                }
                let detail = summary.databases.map { d in
                    "\(d.label): \(d.rows.reduce(0) { $0 + $1.rows }) rows in \(d.rows.count) tables"
                }.joined(separator: ", ")
                print("copied \(summary.totalRows) rows (\(detail)); every table's count matches")
                print(Self.nextStep(destination, bot: bot, schemaPrefix: schemaPrefix))
            } catch let e as StoreCopyError {
                FileHandle.standardError.write(Data("swiftplex store copy: \(e.message)\n".utf8))
                throw ExitCode.failure
            }
        }

        /// A data directory (it exists and is a directory), a PostgreSQL URL, or an SQLite prefix.
        static func database(_ value: String, bot: String, schemaPrefix: String?, role: String) throws -> EngineDatabase {
            guard !value.isEmpty else { throw StoreCopyError(.badLocation, "\(role) is empty") }
            if PostgresLocation.isPostgres(value) {
                do {
                    if let schemaPrefix { return try EngineDatabase.postgres(connection: value, schemaPrefix: schemaPrefix) }
                    return try EngineDatabase.postgres(connection: value, bot: bot)
                } catch let e as SQLError {
                    throw StoreCopyError(.badLocation, "\(role): \(e.message)")
                }
            }
            var isDirectory: ObjCBool = false
            let path = URL(fileURLWithPath: value).standardizedFileURL.path
            if value.hasSuffix("/") || (FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue) {
                return .sqlite(prefix: URL(fileURLWithPath: path).appendingPathComponent(bot).path)
            }
            return .sqlite(prefix: path)
        }

        /// Both databases' places (files, or schemas), never a password.
        static func describe(_ database: EngineDatabase) -> String {
            guard let chat = try? database.chat, let agent = try? database.agent else { return "\(database)" }
            return "\(chat) and \(agent)"
        }

        static func nextStep(_ destination: EngineDatabase, bot: String, schemaPrefix: String?) -> String {
            switch destination {
            case let .postgres(location) where schemaPrefix == nil:
                "next: with the bot stopped, set `database:` in its configuration to the URL given to --to (its data prefix `\(bot)`: schemas \(location.schema)_chat_schema, \(location.schema)_agent_schema) and start it"
            case let .postgres(location):
                "next: open the schemas \(location.schema)_chat_schema and \(location.schema)_agent_schema with the schema prefix \(location.schema)"
            case let .sqlite(prefix):
                "next: with the bot stopped, remove `database:` from its configuration (its files: \(prefix)_chat.db, \(prefix)_agent.db; `data_dir:` \(URL(fileURLWithPath: prefix).deletingLastPathComponent().path), data prefix `\(URL(fileURLWithPath: prefix).lastPathComponent)`) and start it"
            }
        }
    }
}
