import ArgumentParser
import SwiftplexSQL
import SwiftplexSQLPostgres

/// `swiftplex`: the bot host — runs the chat engine and dispatches its events to plugins.
@main
struct Swiftplex: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swiftplex",
        abstract: "Runs a SimpleX-style bot: the chat engine plus plugins configured in YAML.",
        discussion: """
            Start with `swiftplex init bot.yaml`, check it with `swiftplex check-config bot.yaml`, \
            run it with `swiftplex run --config bot.yaml`. Send SIGHUP (or `swiftplex reload`) to \
            reload changed plugins.
            """,
        subcommands: [RunCommand.self, InitCommand.self, CheckConfigCommand.self, ReloadCommand.self, PluginCommand.self, AdminTokenCommand.self,
                      BackupCommand.self, RestoreCommand.self, StoreCommand.self]
    )

    static func main() async {
        // Bots' engines open PostgreSQL (`database: postgresql://…`) through the backend this program passes in.
        SQLBackends.use(postgres: PostgresStore.backend)
        await main(nil)
    }
}
