import ArgumentParser
import Foundation
import Logging
import RelayPostgres
import RelayServer
import SwiftplexSQL
import SwiftplexSQLPostgres

/// `swiftplex-relay store copy --from A --to B`: moves a relay's queues and messages between
/// stores (SQLite file ↔ PostgreSQL, either way), rows unchanged (sequence numbers kept), in
/// batches with progress, and checks the counts at the end. Run it with the relay stopped (on
/// PostgreSQL the schema's lock refuses a running relay).
struct StoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store",
        abstract: "Move a relay's queues and messages between stores.",
        subcommands: [Copy.self]
    )

    struct Copy: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy every queue and message from one store to another (SQLite file or postgresql://…).",
            discussion: """
                Stop the relay first. The destination must be empty unless --force is given (then \
                everything in it is deleted first). Prints progress and checks that the destination \
                holds as many queues and messages as the source.
                """
        )

        @Option(help: "The store to copy from: an SQLite file (relay.db) or postgresql://….")
        var from: String

        @Option(help: "The store to copy to: an SQLite file (created) or postgresql://….")
        var to: String

        @Flag(help: "Delete what the destination holds before copying.")
        var force = false

        @Option(name: .customLong("batch"), help: "Rows read and written per transaction.")
        var batch: Int = 5000

        func validate() throws {
            guard batch > 0 else { throw ValidationError("--batch must be at least 1") }
            for (value, option) in [(from, "--from"), (to, "--to")] where PostgresLocation.isPostgres(value) {
                do { _ = try PostgresLocation.relay(url: value) } catch let e as RelayServerError { throw ValidationError("\(option): \(e.message)") }
            }
            guard from != to else { throw ValidationError("--from and --to are the same store") }
            if !PostgresLocation.isPostgres(from), !FileManager.default.fileExists(atPath: from) {
                throw ValidationError("--from: no such file \(from)")
            }
        }

        func run() async throws {
            umask(0o077)
            var logger = Logger(label: "swiftplex.relay.copy")
            logger.logLevel = .warning
            do {
                let source = try await StoreCommand.open(from, logger: logger)
                let destination: any RelayQueueStore
                do { destination = try await StoreCommand.open(to, logger: logger) } catch {
                    try? await source.closeStore()
                    throw error
                }
                do {
                    let totals = try await StoreCopy.copy(from: source, to: destination, force: force, batch: batch) { line in
                        print(line)
                        fflush(nil)
                    }
                    print("copied \(totals.queues) queues and \(totals.messages) messages; the counts match")
                } catch {
                    try? await source.closeStore()
                    try? await destination.closeStore()
                    throw error
                }
                try? await source.closeStore()
                try? await destination.closeStore()
            } catch let e as RelayServerError {
                FileHandle.standardError.write(Data("store copy: \(e.message)\n".utf8))
                throw ExitCode.failure
            }
        }
    }

    /// An SQLite file or a PostgreSQL URL.
    static func open(_ value: String, logger: Logger) async throws -> any RelayQueueStore {
        if PostgresLocation.isPostgres(value) {
            return try await PostgresRelayStore.open(try PostgresLocation.relay(url: value), logger: logger)
        }
        return try openSQLiteRelayStore(URL(fileURLWithPath: value))
    }
}
