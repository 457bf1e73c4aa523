import ArgumentParser
import SwiftplexSQL
import SwiftplexSQLPostgres

@main
struct Bench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "swiftplex-bench",
        abstract: "Swiftplex benchmarks. Each prints its figures against a baseline measured in the same run; build with -c release.",
        subcommands: [RelayBench.self, RelayStoreBench.self, SQLStoreBench.self, RelayAbuseBench.self, RelayAbuseAttackers.self, LibSimplexBench.self, EchoBench.self, EnginesBench.self, GroupBench.self, ChannelBench.self, RelayClientsBench.self, RelayClientsRelay.self, ContactsBench.self, ContactsRestart.self, DispatchBench.self, JSONBench.self]
    )

    static func main() async {
        // Engines on PostgreSQL open through the backend this program passes in.
        SQLBackends.use(postgres: PostgresStore.backend)
        await main(nil)
    }
}
