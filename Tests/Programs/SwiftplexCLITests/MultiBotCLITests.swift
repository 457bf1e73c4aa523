import Foundation
import RelayProtocol
import SwiftplexPluginTesting
import TestSupport
import Testing

/// `bots:` in a real `swiftplex` process: two bots with their own plugins, people talking to
/// each, a per-bot reload, and the configuration checks.
@Suite(.timeLimit(.minutes(3))) struct MultiBotCLITests {
    static func config(dataDir: URL, betaRule: String) -> String {
        """
        data_dir: \(dataDir.path)
        log_level: warning
        relays: embedded
        embedded_relay:
          listen: 127.0.0.1:0
        bots:
          - name: alpha
            display_name: Alpha
            address: {print_qr: false}
            plugins:
              - name: welcome
                path: auto-accept
                config: {welcome: alpha here}
          - name: beta
            display_name: Beta
            address: {print_qr: false}
            plugins:
              - name: welcome
                path: auto-accept
                config: {welcome: beta here}
              - name: replies
                path: auto-reply
                config:
                  \(betaRule)
        """
    }

    @Test func oneProcessRunsTwoBotsEachWithItsOwnPlugins() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("bots.yaml")
        try Self.config(dataDir: dir.appendingPathComponent("data"), betaRule: "echo: true").write(to: file, atomically: true, encoding: .utf8)
        let check = try await CLIProcess.run(["check-config", file.path])
        #expect(check.status == 0 && check.stdout.contains("OK (2 bots, 3 plugins, 3 loaded and checked)"), "\(check.stdout) \(check.stderr)")

        let host = try CLIProcess(["run", "--config", file.path])
        defer { host.process.signal(SIGTERM) }
        let relay = try RelayAddress(parsing: try await host.line(startingWith: "relay: "))
        let alphaAddress = try await host.line(startingWith: "bot alpha address: ")
        let betaAddress = try await host.line(startingWith: "bot beta address: ")
        #expect(alphaAddress != betaAddress)
        _ = try await host.line(startingWith: "plugin beta/replies: ")
        // Both engines connected to the embedded relay.
        #expect(try await host.line(startingWith: "ready: ") == "2 bots, 2 relay(s) connected")

        let alice = try await ScriptedContact.start(name: "alice", directory: dir.appendingPathComponent("alice"), relay: relay)
        let bob = try await ScriptedContact.start(name: "bob", directory: dir.appendingPathComponent("bob"), relay: relay)
        try await alice.connect(to: alphaAddress)
        #expect(try await alice.nextMessage() == "alpha here")
        try await bob.connect(to: betaAddress)
        #expect(try await bob.nextMessage() == "beta here")
        try await bob.send("echo me")
        #expect(try await bob.nextMessage() == "echo me")

        // `swiftplex reload` (the pid file, checked against the first bot's lock): beta's rules change.
        try Self.config(dataDir: dir.appendingPathComponent("data"), betaRule: "rules: [{keyword: ping, reply: pong}]")
            .write(to: file, atomically: true, encoding: .utf8)
        let reload = try await CLIProcess.run(["reload", "--config", file.path])
        #expect(reload.status == 0, "\(reload.stderr)")
        var answer = ""
        for _ in 0..<50 where answer != "pong" {
            try await bob.send("ping")
            answer = try await bob.nextMessage()
        }
        #expect(answer == "pong")
        // Alpha has no reply plugin: alice's ping goes unanswered.
        try await alice.send("ping")
        #expect(await alice.receivesNothing(for: .seconds(2)))

        host.process.signal(SIGTERM)
        #expect(try await host.exitStatus(timeout: .seconds(20)) == 0)
        let data = dir.appendingPathComponent("data")
        for f in ["bot_alpha_chat.db", "bot_alpha_agent.db", "bot_alpha_plugins.db", "bot_beta_chat.db", "bot_beta_agent.db", "bot_beta_plugins.db"] {
            #expect(FileManager.default.fileExists(atPath: data.appendingPathComponent(f).path), "\(f)")
        }
        await alice.stop()
        await bob.stop()
    }

    /// The shipped example of two bots checks clean, every plugin loaded and its config checked.
    @Test func theShippedSeveralBotsExampleChecksClean() async throws {
        let shipped = try await CLIProcess.run(["check-config", Repository.path("config/several-bots.yaml").path])
        #expect(shipped.status == 0, "\(shipped.stderr)")
        #expect(shipped.stdout.contains("OK (2 bots, 4 plugins, 4 loaded and checked)"), "\(shipped.stdout)")
    }

    @Test func checkConfigNamesDuplicateBotsAndSharedFilesWithPositions() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("bots.yaml")
        try """
            bots:
              - name: a
                display_name: A
              - name: a
                display_name: B
              - name: c
                data: bot_a
                display_name: C
            """.write(to: file, atomically: true, encoding: .utf8)
        for command in [["check-config", file.path], ["run", "--config", file.path]] {
            let result = try await CLIProcess.run(command)
            #expect(result.status != 0)
            let lines = result.stderr.split(separator: "\n").map(String.init)
            #expect(lines.contains { $0.hasPrefix("\(file.path):4:11: bots[1].name: duplicate bot name \"a\"") }, "\(lines)")
            #expect(lines.contains { $0.hasPrefix("\(file.path):7:11: bots[2].data: bot \"c\" would use the data files bot_a_chat.db") }, "\(lines)")
        }
    }
}
