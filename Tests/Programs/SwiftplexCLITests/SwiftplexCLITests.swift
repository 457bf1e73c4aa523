import Foundation
import RelayProtocol
import TestSupport
import SwiftplexPluginTesting
import Testing

/// The `swiftplex` executable as a real process: init, check-config, run, reload, stop.
@Suite(.timeLimit(.minutes(3))) struct SwiftplexCLITests {
    @Test func initWritesAStarterConfigThatChecksClean() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let written = try await CLIProcess.run(["init", "bot.yaml"], in: dir)
        #expect(written.status == 0, "\(written.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("bot.yaml").path))
        let again = try await CLIProcess.run(["init", "bot.yaml"], in: dir)
        #expect(again.status != 0 && again.stderr.contains("--force"))
        let check = try await CLIProcess.run(["check-config", "bot.yaml"], in: dir)
        #expect(check.status == 0, "\(check.stderr)")
        #expect(check.stdout.contains("OK"))
    }

    @Test func checkConfigReportsEveryProblemWithLineAndColumn() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // The host's own keys first: every problem in one pass.
        let host = dir.appendingPathComponent("host.yaml")
        try """
            bot:
              display_name: "@Checker"
            pluginz: []
            log_level: loud
            """.write(to: host, atomically: true, encoding: .utf8)
        let h = try await CLIProcess.run(["check-config", host.path])
        #expect(h.status != 0)
        let hostLines = h.stderr.split(separator: "\n").map(String.init)
        #expect(hostLines.contains { $0.hasPrefix("\(host.path):2:") && $0.contains("@") }, "\(hostLines)")
        #expect(hostLines.contains { $0.hasPrefix("\(host.path):3:1:") && $0.contains("pluginz") && $0.contains("plugins") }, "\(hostLines)")
        #expect(hostLines.contains { $0.hasPrefix("\(host.path):4:") && $0.contains("loud") }, "\(hostLines)")

        // Then each plugin: located, loaded, its config checked against its own schema.
        let file = dir.appendingPathComponent("plugins.yaml")
        try """
            bot:
              display_name: Checker
            plugins:
              - name: welcome
                path: auto-accept
                config:
                  welcome: 42
                  max_per_hour: lots
                  alow: ["x"]
              - name: ghost
                path: no-such-plugin
              - name: junk
                path: \(host.path)
            """.write(to: file, atomically: true, encoding: .utf8)
        let r = try await CLIProcess.run(["check-config", file.path])
        #expect(r.status != 0)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("\(file.path):8:21:") && $0.contains("max_per_hour") && $0.contains("integer") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("\(file.path):9:7:") && $0.contains("did you mean \"allow\"") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("\(file.path):10:5:") && $0.contains("libno-such-plugin.so") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("\(file.path):12:5:") && $0.contains("cannot load") }, "\(lines)")

        let broken = dir.appendingPathComponent("broken.yaml")
        try "bot:\n  display_name: [unclosed\n".write(to: broken, atomically: true, encoding: .utf8)
        let y = try await CLIProcess.run(["check-config", broken.path])
        #expect(y.status != 0)
        #expect(y.stderr.hasPrefix("\(broken.path):"), "\(y.stderr)")
    }

    /// The shipped group-moderator example checks clean; a bad pattern, a misspelt key and a
    /// rate limit without its window are reported at their lines and columns.
    @Test func groupModeratorConfigsAreCheckedWithPositions() async throws {
        let shipped = try await CLIProcess.run(["check-config", Repository.path("config/group-moderator.yaml").path])
        #expect(shipped.status == 0, "\(shipped.stderr)")
        #expect(shipped.stdout.contains("OK (2 plugins, 2 loaded and checked)"), "\(shipped.stdout)")

        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("groups.yaml")
        try """
            bot:
              display_name: Moderator
            plugins:
              - name: moderator
                path: group-moderator
                config:
                  groups:
                    - blocked_patterns: ['ok', '(unclosed']
                      rate_limit: {messages: 3}
                      remove_afer: 2
            """.write(to: file, atomically: true, encoding: .utf8)
        let r = try await CLIProcess.run(["check-config", file.path])
        #expect(r.status != 0)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("\(file.path):8:36:") && $0.contains("valid regular expression") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("\(file.path):9:") && $0.contains("seconds") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("\(file.path):10:11:") && $0.contains("did you mean \"remove_after\"") }, "\(lines)")
    }

    static func config(dataDir: URL, echo: Bool) -> String {
        let reply = echo ? "echo: true" : "rules:\n          - keyword: ping\n            reply: pong"
        return """
            data_dir: \(dataDir.path)
            log_level: warning
            bot:
              display_name: CLI Bot
            relays: embedded
            embedded_relay:
              listen: 127.0.0.1:0
            address:
              print_qr: false
            plugins:
              - name: welcome
                path: auto-accept
                config:
                  welcome: hi there
              - name: replies
                path: auto-reply
                config:
                  \(reply)
            """
    }

    @Test func runServesAPersonReloadsOnHangupAndStopsOnTerm() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("bot.yaml")
        try Self.config(dataDir: dir.appendingPathComponent("data"), echo: true).write(to: file, atomically: true, encoding: .utf8)
        let bot = try CLIProcess(["run", "--config", file.path])
        defer { bot.process.signal(SIGTERM) }
        let relay = try RelayAddress(parsing: try await bot.line(startingWith: "relay: "))
        let address = try await bot.line(startingWith: "bot address: ")

        let alice = try await ScriptedContact.start(name: "alice", directory: dir.appendingPathComponent("alice"), relay: relay)
        try await alice.connect(to: address)
        #expect(try await alice.nextMessage() == "hi there")
        try await alice.send("echo me")
        #expect(try await alice.nextMessage() == "echo me")

        // `swiftplex reload` (SIGHUP through the pid file): the reply rules change without a restart.
        try Self.config(dataDir: dir.appendingPathComponent("data"), echo: false).write(to: file, atomically: true, encoding: .utf8)
        let reload = try await CLIProcess.run(["reload", "--config", file.path])
        #expect(reload.status == 0, "\(reload.stderr)")
        var answer = ""
        for _ in 0..<50 where answer != "pong" {
            try await alice.send("ping")
            answer = try await alice.nextMessage()
        }
        #expect(answer == "pong")

        // A broken file is refused as a whole; the bot keeps answering as before.
        try "plugins: [".write(to: file, atomically: true, encoding: .utf8)
        kill(bot.process.processIdentifier, SIGHUP)
        try await bot.child.waitForErrorLine("the refused reload") { $0.contains("reload refused") }
        try await alice.send("ping")
        #expect(try await alice.nextMessage() == "pong")
        #expect(bot.stderr.contains("reload refused"))

        kill(bot.process.processIdentifier, SIGTERM)
        #expect(try await bot.exitStatus(timeout: .seconds(20)) == 0)
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("data/swiftplex.pid").path))
        await alice.stop()
    }
}
