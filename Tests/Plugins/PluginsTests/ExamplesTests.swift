import Foundation
import PluginScaffold
import PluginABITesting
import TestSupport
import Testing

/// Runs a program and returns its exit status and output.
func run(_ executable: String, _ arguments: [String], in directory: URL? = nil) throws -> (Int32, String) {
    let result = try runProgram(executable, arguments, in: directory)
    return (result.status, result.output + result.errors)
}

/// A fresh temporary directory (0700) named after `tag`; the test removes it.
func temporaryDirectory(_ tag: String) throws -> URL { TemporaryDirectory(prefix: "swiftplex-\(tag)").url }

@Suite(.serialized) struct ExamplesTests {
    @Test func theCPluginBuildsWithCCAndRunsThroughTheABI() throws {
        let dir = try temporaryDirectory("c-plugin")
        let lib = dir.appendingPathComponent("libhello-c.so").path
        let (status, output) = try run("/usr/bin/env", ["cc", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                                                        "-I", repoRoot.appendingPathComponent("Sources/PluginSDK/CSwiftplexPlugin/include").path,
                                                        "-o", lib, repoRoot.appendingPathComponent("examples/c-plugin/hello.c").path])
        #expect(status == 0, "\(output)")
        let plugin = try PluginLibrary(path: lib)
        #expect(plugin.abiVersion == 1 && plugin.name == "hello-c" && plugin.version == "1.0.0" && plugin.events == ["contactConnected"])
        #expect(plugin.configSchema?.contains(#""greeting""#) == true)

        let chat = ScriptedChat()
        guard case let .failure(e) = plugin.start(host: chat.host, config: #"{"greeting":5}"#) else { Issue.record("started"); return }
        #expect(e.message == "config.greeting: expected a string")

        let p = try startOrRecord(plugin, chat.host, #"{"greeting":"Hi \"friend\"\nfrom C"}"#)
        #expect(p.handle(ChatFixtures.directMessage(from: 3, name: "x", text: "ignored")) == nil)
        #expect(p.handle(ChatFixtures.contactConnected(7, name: "ann")) == nil)
        #expect(p.handle(ChatFixtures.contactConnected(8, name: "bo")) == nil)
        #expect(chat.sent == ["@7 Hi \"friend\"\nfrom C", "@8 Hi \"friend\"\nfrom C"])
        #expect(chat.host.storage["greeted"] == "2")
        chat.failSendTo = [9]
        #expect(p.handle(ChatFixtures.contactConnected(9, name: "cy")) == "/_send: the Chat API refused the greeting")
        p.stop()
    }

    @Test func scaffoldRefusesBadNamesAndExistingDirectories() throws {
        let dir = try temporaryDirectory("scaffold")
        for bad in ["", "Dice", "1dice", "-dice", "dice_bot", "dice bot", "dïce", String(repeating: "a", count: 65)] {
            #expect(throws: PluginScaffold.Failure(code: .invalidName, message: "")) {
                try PluginScaffold.create(name: bad, in: dir.appendingPathComponent("x\(bad.count)"), sdkPath: repoRoot.path)
            }
        }
        #expect(throws: PluginScaffold.Failure(code: .directoryExists, message: "")) {
            try PluginScaffold.create(name: "dice", in: dir, sdkPath: repoRoot.path)
        }
        #expect(PluginScaffold.moduleName(for: "dice-bot-2") == "DiceBot2")
    }

    /// examples/swift-plugin is exactly what `swiftplex plugin new dice-bot` writes (so the build
    /// test below covers the example too).
    @Test func theSwiftExampleIsTheScaffoldsOutput() throws {
        let dir = try temporaryDirectory("scaffold-compare").appendingPathComponent("dice-bot")
        try PluginScaffold.create(name: "dice-bot", in: dir, sdkPath: "../..")
        let example = repoRoot.appendingPathComponent("examples/swift-plugin")
        for file in ["Package.swift", "Sources/DiceBot/DiceBot.swift", "README.md", ".gitignore"] {
            let written = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
            let committed = try String(contentsOf: example.appendingPathComponent(file), encoding: .utf8)
            #expect(written == committed, "\(file) differs")
        }
    }

    /// Slow (a SwiftPM build of its own): the scaffolded package builds lib<name>.so, which loads.
    @Test(.timeLimit(.minutes(15))) func aScaffoldedPackageBuildsAndLoads() throws {
        let dir = try temporaryDirectory("scaffold-build").appendingPathComponent("dice-bot")
        try PluginScaffold.create(name: "dice-bot", in: dir, sdkPath: repoRoot.path)
        for file in ["Package.swift", "Sources/DiceBot/DiceBot.swift", "README.md"] {
            #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent(file).path))
        }
        let swift = ProcessInfo.processInfo.environment["SWIFT"] ?? "swift"
        let (status, output) = try run("/usr/bin/env", [swift, "build", "--product", "dice-bot"], in: dir)
        #expect(status == 0, "\(output.suffix(3000))")
        let lib = try PluginLibrary(path: dir.appendingPathComponent(".build/debug/libdice-bot.so").path)
        #expect(lib.name == "dice-bot" && lib.events == ["newChatItems", "contactConnected"])

        let chat = ScriptedChat()
        let p = try startOrRecord(lib, chat.host, #"{"greeting":"Welcome!","sides":20}"#)
        #expect(chat.host.menu == #"[{"keyword":"roll","label":"Roll a dice (/roll or /roll 20)"}]"#)
        #expect(p.handle(ChatFixtures.contactConnected(4, name: "x")) == nil)
        #expect(p.handle(ChatFixtures.directMessage(from: 4, name: "x", text: "/roll")) == nil)
        #expect(p.handle(ChatFixtures.directMessage(from: 4, name: "x", text: "hello")) == nil)
        #expect(chat.sent.first == "@4 Welcome!")
        let roll = try #require(chat.sent.last)
        #expect(roll.hasPrefix("@4 🎲 ") && roll.hasSuffix("(d20)"))
        #expect(chat.host.storage["seen"] == "1")
        p.stop()
    }
}
