import Foundation
import RelayProtocol
import SwiftplexPluginTesting
import TestSupport
import Testing

/// The bot host under faults and misuse, as real processes: `kill -9` mid-conversation, a second
/// host on the same data directory, a stale pid file.
@Suite(.timeLimit(.minutes(10))) struct FaultTests {
    /// A `swiftplex-relay` process on an ephemeral loopback port (it outlives the bot's restarts).
    static func startRelay(_ dir: URL) async throws -> (CLIProcess, RelayAddress) {
        let relay = try CLIProcess(["--data-dir", dir.path, "--listen", "127.0.0.1:0", "--log-level", "warning"], executable: "swiftplex-relay")
        let line = try await relay.line(startingWith: "smp://")
        return (relay, try RelayAddress(parsing: "smp://" + line))
    }

    static func config(dataDir: URL, relay: RelayAddress, database: String? = nil, engine: String? = nil) -> String {
        """
        data_dir: \(dataDir.path)
        log_level: warning\(database.map { "\ndatabase: \($0)" } ?? "")\(engine.map { "\nengine: \($0)" } ?? "")
        bot:
          display_name: Echo Bot
        relays:
          - \(relay)
        address:
          print_qr: false
        plugins:
          - name: accept
            path: auto-accept
          - name: echo
            path: auto-reply
            config:
              echo: true
              help: false
        """
    }

    static func startBot(_ config: URL) async throws -> (CLIProcess, String) {
        let bot = try CLIProcess(["run", "--config", config.path])
        let address = try await bot.line(startingWith: "bot address: ", timeout: .seconds(120))
        return (bot, address)
    }

    static func kill9(_ p: CLIProcess) async throws {
        kill(p.process.processIdentifier, SIGKILL)
        _ = try await p.exitStatus(timeout: .seconds(30))
    }

    /// `kill -9` of the bot host twice in a 1,000-message conversation with an echoing plugin:
    /// every message reaches the plugin and every answer the person exactly once, in order.
    ///
    /// Before the durable dispatch cursor each kill lost the messages the engine had stored but
    /// the plugin had not yet answered (24, 98 and 204 in three runs): events reached plugins
    /// only in memory. Now each instance's mark in plugins.db makes the next host replay them,
    /// and the idempotency keys of the answers keep a replayed message from being answered twice.
    @Test
    func kill9TwiceMidConversationLosesAndDuplicatesNothing() async throws {
        try await kill9TwiceMidConversation(database: nil)
    }

    /// The same with the bot's chat and agent data in PostgreSQL (`database:`): a transaction the
    /// server committed survives the host's `kill -9`, and the relay is acknowledged only after it.
    @Test(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)))
    func kill9TwiceMidConversationOnPostgreSQLLosesAndDuplicatesNothing() async throws {
        let database = try #require(TestPostgres.url())
        try await kill9TwiceMidConversation(database: database)
    }

    /// The same on a foreign engine: the project's `libsimplex.so` loaded by path, as SimpleX's
    /// would be. The host reads the messages its plugins missed back through the bot API
    /// (`ForeignItemFeed`): none is lost and they come in order; a foreign engine keeps no
    /// idempotency keys, so an answer the plugin sent just before the kill may be sent again.
    @Test
    func kill9TwiceMidConversationOnLibsimplexLosesNothing() async throws {
        let library = PluginTestBench.product("libsimplex.so")
        try await kill9TwiceMidConversation(database: nil, engine: "{type: libsimplex, library: \(library)}", total: 300, killsAt: [80, 180],
                                            duplicatesAllowed: true)
    }

    /// The same on a `swiftplex-chat -p` process the host drives over the WebSocket API, with the
    /// host killed twice and, between, the engine process itself: while it is down and restarting
    /// the host's connection is gone and so are the events the engine sends before the host is
    /// back; the host reads what its plugin missed from the engine once it has reconnected.
    @Test
    func kill9OfHostAndEngineMidConversationOnWebSocketLosesNothing() async throws {
        try await kill9TwiceMidConversation(database: nil, webSocketEngine: true, total: 300,
                                            kills: [(80, .host), (150, .engine), (220, .host)], duplicatesAllowed: true)
    }

    /// A `swiftplex-chat -p PORT` process (0: a free port) on `relay`, and the port it listens on.
    static func startChatEngine(_ dir: URL, relay: RelayAddress, port: Int) async throws -> (CLIProcess, Int) {
        let engine = try CLIProcess(["--data-dir", dir.path, "--server", relay.description, "--name", "Echo Bot", "-p", "\(port)"],
                                    executable: "swiftplex-chat")
        let (_, line) = try await engine.child.waitForErrorLine("the WebSocket API's port", timeout: .seconds(60)) {
            $0.contains("WebSocket API listening on ")
        }
        guard let bound = line.split(separator: ":").last.flatMap({ Int($0) }) else { throw CLIError("no port in '\(line)'") }
        return (engine, bound)
    }

    /// Two hosts (two data directories) pointed at the same PostgreSQL schemas: the second refuses
    /// to start while the first runs, and starts once the first is gone (a standby taking over).
    @Test(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)))
    func aSecondHostOnTheSamePostgreSQLSchemaIsRefusedUntilTheFirstIsGone() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (relayProcess, relay) = try await Self.startRelay(dir.appendingPathComponent("relay"))
        defer { relayProcess.process.signal(SIGTERM) }
        let database = try #require(TestPostgres.url())
        let first = dir.appendingPathComponent("first.yaml"), standby = dir.appendingPathComponent("standby.yaml")
        try Self.config(dataDir: dir.appendingPathComponent("a"), relay: relay, database: database).write(to: first, atomically: true, encoding: .utf8)
        try Self.config(dataDir: dir.appendingPathComponent("b"), relay: relay, database: database).write(to: standby, atomically: true, encoding: .utf8)
        let (bot, address) = try await Self.startBot(first)
        let second = try CLIProcess(["run", "--config", standby.path])
        #expect(try await second.exitStatus(timeout: .seconds(60)) != 0)
        #expect(second.stderr.contains("another process"), "\(second.stderr.suffix(2000))")
        try await Self.kill9(bot)
        let (takenOver, sameAddress) = try await Self.startBot(standby)
        #expect(sameAddress == address, "the standby serves the same bot (its address from the shared database)")
        // Stopped once it serves (SIGTERM before the host's services run ends it by the signal).
        _ = try await takenOver.line(startingWith: "ready: ", timeout: .seconds(60))
        kill(takenOver.process.processIdentifier, SIGTERM)
        let status = try await takenOver.exitStatus(timeout: .seconds(30))
        #expect(status == 0, "exit \(status): \(takenOver.stderr.suffix(3000))")
    }

    /// What a `kill -9` hits: the bot host, or the `swiftplex-chat -p` engine process it drives.
    enum Victim { case host, engine }

    func kill9TwiceMidConversation(database: String?, engine: String? = nil, webSocketEngine: Bool = false, total: Int = 1000,
                                   killsAt: [Int] = [250, 600], kills: [(at: Int, victim: Victim)]? = nil,
                                   duplicatesAllowed: Bool = false) async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (relayProcess, relay) = try await Self.startRelay(dir.appendingPathComponent("relay"))
        defer { relayProcess.process.signal(SIGTERM) }
        var chatEngine: CLIProcess?
        var engine = engine
        var enginePort = 0
        if webSocketEngine {
            let started = try await Self.startChatEngine(dir.appendingPathComponent("engine"), relay: relay, port: 0)
            (chatEngine, enginePort) = started
            engine = "{type: websocket, url: \"ws://127.0.0.1:\(enginePort)\"}"
        }
        defer { chatEngine?.process.signal(SIGTERM) }
        let file = dir.appendingPathComponent("bot.yaml")
        try Self.config(dataDir: dir.appendingPathComponent("data"), relay: relay, database: database, engine: engine)
            .write(to: file, atomically: true, encoding: .utf8)
        var (bot, address) = try await Self.startBot(file)
        let person = try await ScriptedContact.start(name: "person", directory: dir.appendingPathComponent("person"), relay: relay)
        try await person.connect(to: address, timeout: .seconds(60))

        let received = AsyncLog<String>()
        // The person writes all the while (the relay keeps what arrives while the bot is down).
        let sender = Task {
            for n in 1...total { try await person.send("m\(n)") }
        }
        let receiver = Task {
            while !Task.isCancelled {
                guard let text = try? await person.nextMessage(timeout: .seconds(600)) else { continue }
                for line in text.split(separator: "\n") { received.append(String(line)) }
            }
        }
        defer { sender.cancel(); receiver.cancel() }

        func waitForAnswers(_ n: Int, timeout: Duration) async throws {
            do {
                try await received.waitUntil("\(n) answers", timeout: timeout) { $0.count >= n }
            } catch let timedOut as WaitTimeout {
                let got = received.all
                let missing = (1...total).map { "m\($0)" }.filter { !got.contains($0) }
                let repeated = Dictionary(grouping: got, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
                throw CLIError("""
                    \(timedOut): \(got.count) answers of \(n) arrived; missing \(missing.count): \(missing.prefix(30)); \
                    repeated: \(repeated.prefix(30)); last: \(got.suffix(5)); bot stderr: \(bot.stderr.suffix(3000))
                    """)
            }
        }
        for (killAt, victim) in kills ?? killsAt.map({ ($0, .host) }) {
            try await waitForAnswers(killAt, timeout: .seconds(180))
            switch victim {
            case .host:
                try await Self.kill9(bot)
                (bot, _) = try await Self.startBot(file)
            case .engine:
                let old = try #require(chatEngine)
                try await Self.kill9(old)
                chatEngine = try await Self.startChatEngine(dir.appendingPathComponent("engine"), relay: relay, port: enginePort).0
            }
        }
        try await sender.value
        try await waitForAnswers(total, timeout: .seconds(180))
        // A last message: its answer comes after any duplicate of an earlier one would have.
        try await person.send("end")
        try await received.first("the answer to \"end\"", timeout: .seconds(180)) { $0 == "end" }
        let all = received.all
        let expected = (1...total).map { "m\($0)" } + ["end"]
        let duplicates = Dictionary(grouping: all, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        let missing = Set(expected).subtracting(all)
        if duplicatesAllowed {
            // At least once, in order: each answer's first copy in the order sent; copies only of
            // answers sent around a kill (a few per kill).
            #expect(duplicates.count <= 20 * (kills?.count ?? killsAt.count), "answered more than once: \(duplicates.count): \(duplicates.prefix(20))")
        } else {
            #expect(duplicates.isEmpty, "answered more than once: \(duplicates.prefix(20))")
        }
        #expect(missing.isEmpty, "never answered: \(missing.sorted().prefix(20))")
        var seen = Set<String>()
        let answers = all.filter { seen.insert($0).inserted }
        let firstDifference: Int? = zip(answers, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        let context: [String] = firstDifference.map { i in Array(answers[max(0, i - 2)..<min(answers.count, i + 3)]) } ?? []
        #expect(answers == expected, "out of order near \(context)")

        kill(bot.process.processIdentifier, SIGTERM)
        #expect(try await bot.exitStatus(timeout: .seconds(30)) == 0)
        await person.stop()
        relayProcess.process.signal(SIGTERM)
    }

    /// Two `swiftplex run` on one data directory would encrypt with the same chain keys: the
    /// second exits at once with a clear message and a non-zero status; the first keeps serving.
    /// A stale pid file (the bot was killed, its pid now names another process) makes
    /// `swiftplex reload` refuse instead of signalling that process.
    @Test func aSecondHostOnTheSameDataDirectoryIsRefusedAndStalePidFilesAreNotSignalled() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (relayProcess, relay) = try await Self.startRelay(dir.appendingPathComponent("relay"))
        defer { relayProcess.process.signal(SIGTERM) }
        let file = dir.appendingPathComponent("bot.yaml")
        let data = dir.appendingPathComponent("data")
        try Self.config(dataDir: data, relay: relay).write(to: file, atomically: true, encoding: .utf8)
        let (first, address) = try await Self.startBot(file)
        defer { first.process.signal(SIGTERM) }

        let second = try CLIProcess(["run", "--config", file.path])
        let status = try await second.exitStatus(timeout: .seconds(60))
        #expect(status == 75, "status \(status); stderr: \(second.stderr.suffix(1000))")
        #expect(second.stderr.contains("is in use by another running bot (pid \(first.process.processIdentifier))"), "\(second.stderr.suffix(1000))")
        #expect(!second.stdout.contains { $0.hasPrefix("bot address: ") })

        // The first is untouched: it still answers, and its pid file still names it.
        let person = try await ScriptedContact.start(name: "person", directory: dir.appendingPathComponent("person"), relay: relay)
        try await person.connect(to: address, timeout: .seconds(60))
        try await person.send("still there?")
        #expect(try await person.nextMessage(timeout: .seconds(60)) == "still there?")
        let pidFile = data.appendingPathComponent("swiftplex.pid")
        #expect(try String(contentsOf: pidFile, encoding: .utf8) == "\(first.process.processIdentifier)\n")
        // The check reads the kernel's whole lock table, however long (here 200 more locks: a
        // table past one page, which a size-based read cuts short).
        let locks = (0..<200).map { i -> Int32 in
            let fd = open(dir.appendingPathComponent("extra-\(i).lock").path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            flock(fd, LOCK_EX)
            return fd
        }
        defer { locks.forEach { close($0) } }
        let reload = try await CLIProcess.run(["reload", "--config", file.path])
        #expect(reload.status == 0, "\(reload.stderr)")

        // kill -9 leaves the pid file behind; its pid now names an unrelated process.
        try await Self.kill9(first)
        let unrelated = try SpawnedProcess("/bin/sleep", ["120"], stdin: .null, stdout: .null, stderr: .null)
        defer { unrelated.signal(SIGTERM) }
        try "\(unrelated.processIdentifier)\n".write(to: pidFile, atomically: true, encoding: .utf8)
        let stale = try await CLIProcess.run(["reload", "--config", file.path])
        #expect(stale.status != 0)
        #expect(stale.stderr.contains("stale pid file"), "\(stale.stderr)")
        // SIGHUP would have ended `sleep`: it is still running, so nothing was sent.
        #expect(unrelated.isRunning)

        await person.stop()
        relayProcess.process.signal(SIGTERM)
    }
}
