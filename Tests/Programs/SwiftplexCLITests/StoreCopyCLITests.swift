import Foundation
import RelayProtocol
import SwiftplexPluginTesting
import TestSupport
import Testing

/// `swiftplex store copy` as an operator runs it: refused while the bot runs, then the stopped
/// bot's files copied to PostgreSQL, and the bot started on them (`database:`) serves the same
/// address and goes on answering its contact.
@Suite(.timeLimit(.minutes(6))) struct StoreCopyCLITests {
    @Test(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)))
    func aStoppedBotMovesToPostgreSQLAndGoesOnAnsweringItsContact() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (relayProcess, relay) = try await FaultTests.startRelay(dir.appendingPathComponent("relay"))
        defer { relayProcess.process.signal(SIGTERM) }
        let data = dir.appendingPathComponent("data")
        let database = try #require(TestPostgres.url())
        let onFiles = dir.appendingPathComponent("files.yaml"), onPostgres = dir.appendingPathComponent("postgres.yaml")
        try FaultTests.config(dataDir: data, relay: relay).write(to: onFiles, atomically: true, encoding: .utf8)
        try FaultTests.config(dataDir: data, relay: relay, database: database).write(to: onPostgres, atomically: true, encoding: .utf8)

        let (bot, address) = try await FaultTests.startBot(onFiles)
        let person = try await ScriptedContact.start(name: "person", directory: dir.appendingPathComponent("person"), relay: relay)
        try await person.connect(to: address, timeout: .seconds(60))
        try await person.send("one")
        #expect(try await person.nextMessage(timeout: .seconds(60)) == "one")

        // The running bot's files are not copied.
        let busy = try await CLIProcess.run(["store", "copy", "--from", data.path, "--to", database])
        #expect(busy.status != 0 && busy.stderr.contains("is in use"), "\(busy.status): \(busy.stderr)")
        kill(bot.process.processIdentifier, SIGTERM)
        #expect(try await bot.exitStatus(timeout: .seconds(30)) == 0)

        let copied = try await CLIProcess.run(["store", "copy", "--from", data.path, "--to", database, "--batch", "2"])
        #expect(copied.status == 0, "\(copied.stderr)")
        #expect(copied.stdout.contains("every table's count matches"), "\(copied.stdout)")
        #expect(copied.stderr.contains("chat: chat_item 2/"), "progress per batch: \(copied.stderr)")
        let again = try await CLIProcess.run(["store", "copy", "--from", data.path, "--to", database])
        #expect(again.status != 0 && again.stderr.contains("is not empty") && again.stderr.contains("--force"), "\(again.stderr)")
        let bad = try await CLIProcess.run(["store", "copy", "--from", dir.appendingPathComponent("nothing").path, "--to", database])
        #expect(bad.status != 0 && bad.stderr.contains("has no nothing_chat.db"), "\(bad.stderr)")

        let (moved, sameAddress) = try await FaultTests.startBot(onPostgres)
        #expect(sameAddress == address, "the same bot: its address from the copied database")
        try await person.send("two")
        #expect(try await person.nextMessage(timeout: .seconds(60)) == "two")
        kill(moved.process.processIdentifier, SIGTERM)
        _ = try await moved.exitStatus(timeout: .seconds(30))
        await person.stop()
    }
}
