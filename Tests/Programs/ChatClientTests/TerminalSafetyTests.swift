import Foundation
import Testing

/// What peers choose reaches the person's terminal harmless: no escape sequence, bidi override or
/// line of a peer's text can pass for the client's own output; two requests under one name are
/// both kept. Real `swiftplex-relay` and `swiftplex-chat` processes over pipes.
@Suite(.timeLimit(.minutes(5))) struct TerminalSafetyTests {
    func tempDir() -> URL {
        let u = FileManager.default.temporaryDirectory.appendingPathComponent("swiftplex-client-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: u, withIntermediateDirectories: true)
        return u
    }

    /// Starts a client whose name may not print as it is; waits for its ready line.
    func startClient(_ name: String, _ dir: URL, relay: RelayProcess) async throws -> LineProcess {
        let p = try LineProcess(Binaries.url("swiftplex-chat"), ["--data-dir", dir.path, "--name", name, "--server", relay.address])
        try await p.waitFor("ready") { $0.hasSuffix(" is ready; type /help for commands") }
        return p
    }

    func address(of alice: ChatProcess) async throws -> String {
        let from = alice.lines.count
        alice.send("/ad")
        return try await alice.process.waitFor(from: from, "the address") { $0.hasPrefix("simplex:/contact#/?v=") }.1
    }

    @Test func escapesBidiAndNewlinesFromPeersAreShownNotObeyed() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let relay = try await RelayProcess.start(dataDirectory: dir.appendingPathComponent("relay"))
        let alice = try await ChatProcess.start("alice", dataDirectory: dir.appendingPathComponent("alice"), relay: relay)
        let link = try await address(of: alice)
        // Clears the screen, then reverses what follows.
        let evilName = "mallory\u{1B}[2J\u{202E}cba"
        let evil = try await startClient(evilName, dir.appendingPathComponent("evil"), relay: relay)
        evil.send("/c \(link)")
        let shownName = "mallory^[[2J<U+202E>cba"
        let (_, request) = try await alice.process.waitFor("the request") { $0.hasPrefix("contact request from ") }
        #expect(request.hasPrefix("contact request from \(shownName) (/ac #"), "\(request)")
        // A name that cannot be typed back is addressed by its number.
        let handle = try #require(request.firstMatch(of: /\/ac (#[0-9]+) to accept/)?.1).description
        alice.send("/ac \(handle)")
        try await alice.waitFor(line: "\(shownName) connected")
        try await evil.waitFor("connected") { $0 == "alice connected" }

        // The peer's text tries to fake a line of the client's own, recolour the terminal and
        // hide a carriage return; it arrives through the Chat API, as any program could send it.
        let from = evil.lines.count
        evil.send("/_contacts 1")
        let (_, contacts) = try await evil.waitFor(from: from, "the contact list") { $0.contains(#""contacts""#) }
        let id = try #require(contacts.firstMatch(of: /"contactId":([0-9]+)/)?.1).description
        let text = "hello\n@carol: send me your key\u{1B}[31m\rX\u{85}"
        let json = #"[{"msgContent":{"type":"text","text":"\#(text.jsonEscaped)"},"mentions":{}}]"#
        evil.send("/_send @\(id) json \(json)")
        let (i, first) = try await alice.process.waitFor("the message") { $0.hasPrefix("@\(shownName): ") }
        #expect(first == "@\(shownName): hello")
        try await alice.waitFor(from: i + 1, line: "  | @carol: send me your key^[[31m^MX<U+0085>")
        #expect(!alice.lines.contains { $0.hasPrefix("@carol") })
        for line in alice.lines {
            #expect(!line.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0.value == 0x202E },
                    "raw control character in \(line.debugDescription)")
        }
        try await alice.quit()
        evil.send("/q")
        _ = await evil.waitForExit()
        await relay.stop()
    }

    @Test func twoRequestsUnderOneNameAreBothKeptAndAcceptable() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let relay = try await RelayProcess.start(dataDirectory: dir.appendingPathComponent("relay"))
        let alice = try await ChatProcess.start("alice", dataDirectory: dir.appendingPathComponent("alice"), relay: relay)
        let link = try await address(of: alice)
        let first = try await ChatProcess.start("bob", dataDirectory: dir.appendingPathComponent("bob1"), relay: relay)
        let second = try await ChatProcess.start("bob", dataDirectory: dir.appendingPathComponent("bob2"), relay: relay)
        first.send("/c \(link)")
        let (i, line1) = try await alice.process.waitFor("the first request") { $0.hasPrefix("contact request ") }
        second.send("/c \(link)")
        let (_, line2) = try await alice.process.waitFor(from: i + 1, "the second request") { $0.hasPrefix("contact request ") }
        let handle1 = try #require(line1.firstMatch(of: /\/ac (\S+) to accept/)?.1).description
        let handle2 = try #require(line2.firstMatch(of: /\/ac (\S+) to accept/)?.1).description
        // The second did not replace the first: each is accepted by what its own line says.
        alice.send("/ac \(handle2)")
        try await second.waitFor(line: "alice connected")
        alice.send("/ac \(handle1)")
        try await first.waitFor(line: "alice connected")
        try await alice.quit()
        try await first.quit()
        try await second.quit()
        await relay.stop()
    }

    @Test func aSecondClientOnOneDataDirectoryIsRefused() async throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let relay = try await RelayProcess.start(dataDirectory: dir.appendingPathComponent("relay"))
        let alice = try await ChatProcess.start("alice", dataDirectory: dir.appendingPathComponent("alice"), relay: relay)
        let again = try LineProcess(Binaries.url("swiftplex-chat"), ["--data-dir", dir.appendingPathComponent("alice").path, "--server", relay.address])
        #expect(await again.waitForExit() == 1)
        #expect(again.errorLines.contains { $0.contains("is in use by another swiftplex-chat") }, "\(again.errorLines)")
        try await alice.quit()
        await relay.stop()
    }
}

extension String {
    /// The string as the inside of a JSON string literal.
    var jsonEscaped: String {
        var out = ""
        for scalar in unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value):
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
