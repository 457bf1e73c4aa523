@testable import BotHost
import ChatAPI
import ChatTestSupport
import Foundation
import GRDB
import SwiftplexBackup
import SwiftplexBase
import SwiftplexPluginTesting
import RelayServer
import TestSupport
import Testing
import ZIPFoundation

/// `swiftplex backup` / `restore` (HostBackup) on a real bot: an online snapshot while it runs,
/// refusals (running bot, existing data, newer format, unsafe paths), and a restored bot that
/// keeps its contact and answers it over a real relay.
@Suite(.timeLimit(.minutes(3))) struct BackupTests: LiveRelaySuite {
    func options(_ dir: URL, relay: RelayServer) -> BotHostOptions {
        BotHostOptions(dataDirectory: dir, profile: .init(displayName: "Backup Bot"), relays: .external([relay.address]),
                       runnerExecutable: URL(fileURLWithPath: PluginTestBench.product("swiftplex-plugin-runner")))
    }

    func mode(_ url: URL) throws -> Int { try FileManager.default.attributesOfItem(atPath: url.path)[.posixPermissions] as? Int ?? -1 }

    @Test func aRestoredBotKeepsItsContactAndAnswersIt() async throws {
        try await withLiveRelay { dir, relay in
            let original = dir.appendingPathComponent("bot")
            let restored = dir.appendingPathComponent("restored")
            let archive = dir.appendingPathComponent("bot-backup.zip")
            let config = dir.appendingPathComponent("bot.yaml")
            try Data("data_dir: bot\nbot:\n  display_name: Backup Bot\n".utf8).write(to: config)

            try await withEngine(dir, "person", relays: [relay.address]) { person, inbox in
                await startUser(person, "person")
                // The bot, with the person as its contact.
                let host = try await BotHost.start(options(original, relay: relay), logger: quiet)
                let running = Task { await host.run() }
                let events = AsyncInbox(host.events.subscribe().events.map { (try? JSONValue.parse($0.json)) ?? .null }, describe: { $0["type"]?.stringValue ?? "?" })
                let address = try #require(host.address)
                _ = await person.execute("/_connect 1 \(address)")
                let request = try await events.first(where: { $0["type"]?.stringValue == "receivedContactRequest" }, "request", timeout: .seconds(30))
                let requestId = try #require(request["contactRequest"]?["contactRequestId"]?.intValue)
                #expect(await host.api.execute("/_accept \(requestId)")["type"]?.stringValue == "acceptingContactRequest")
                let botInPerson = try #require(try await inbox.next("contactConnected", timeout: .seconds(30))["contact"]?["contactId"]?.intValue)

                // Online: the snapshot is taken while the bot runs; a restore onto its data is refused.
                #expect(throws: BackupError.self) { try HostBackup.create(dataDirectory: original, configFile: nil, to: original.appendingPathComponent("inside.zip")) }
                let manifest = try HostBackup.create(dataDirectory: original, configFile: config, to: archive)
                #expect(try mode(archive) == 0o600)
                #expect(manifest.databases.contains("bot_chat.db") && manifest.databases.contains("bot_agent.db") && manifest.databases.contains("plugins.db"))
                #expect(manifest.databases.last == "bot_agent.db")
                #expect(throws: BackupError.self) { try HostBackup.restore(from: archive, dataDirectory: original, configFile: nil, replace: true) }
                await host.shutdown()
                await running.value

                // An existing bot's data is not overwritten without --replace.
                #expect(throws: BackupError.self) { try HostBackup.restore(from: archive, dataDirectory: original, configFile: nil, replace: false) }

                // Restored elsewhere: files 0600 in 0700 directories, and a config written from the archive.
                let restoredConfig = dir.appendingPathComponent("restored.yaml")
                try HostBackup.restoreConfiguration(from: archive, to: restoredConfig)
                #expect(try String(contentsOf: restoredConfig, encoding: .utf8).contains("Backup Bot") && (try mode(restoredConfig)) == 0o600)
                try HostBackup.restore(from: archive, dataDirectory: restored, configFile: nil, replace: false)
                #expect(try mode(restored) == 0o700)
                for name in manifest.databases + manifest.files {
                    #expect(try mode(restored.appendingPathComponent(name)) == 0o600, "\(name)")
                }

                // The restored bot has the contact, gets its message and answers it.
                let again = try await BotHost.start(options(restored, relay: relay), logger: quiet)
                let runningAgain = Task { await again.run() }
                let againEvents = AsyncInbox(again.events.subscribe().events.map { (try? JSONValue.parse($0.json)) ?? .null }, describe: { $0["type"]?.stringValue ?? "?" })
                #expect(again.address == address)
                let contacts = await again.api.execute("/_contacts \(again.userId)")
                let contact = try #require(contacts["contacts"]?.arrayFirst)
                #expect(contacts["contacts"]?.arrayCount == 1 && contact["localDisplayName"]?.stringValue == "person")
                let contactId = try #require(contact["contactId"]?.intValue)
                func message(_ text: String) -> String {
                    JSONValue.array([.object([("msgContent", .object([("type", .string("text")), ("text", .string(text))]))])]).description
                }
                _ = await person.execute("/_send @\(botInPerson) json \(message("are you still there?"))")
                _ = try await againEvents.first(where: { $0["type"]?.stringValue == "newChatItems" && text($0["chatItems"]?.arrayFirst) == "are you still there?" },
                                                "the person's message", timeout: .seconds(30))
                let answer = await again.api.execute("/_send @\(contactId) json \(message("yes, restored"))")
                #expect(answer["type"]?.stringValue == "newChatItems", "\(answer)")
                _ = try await inbox.next("newChatItems", where: { text($0["chatItems"]?.arrayFirst) == "yes, restored" }, timeout: .seconds(30))
                await again.shutdown()
                await runningAgain.value
            }
        }
    }

    /// `/_db export` (an engine's two databases, another prefix) restores into a host as its
    /// `bot_chat.db` and `bot_agent.db`; `/_db import` of a host's backup takes its two databases.
    @Test func engineExportsAndHostBackupsAreOneFormat() async throws {
        try await withLiveRelay { dir, relay in
            let exported = dir.appendingPathComponent("person-export.zip")
            try await withEngine(dir, "person", relays: [relay.address]) { person, _ in
                await startUser(person, "person")
                #expect(await person.execute("/_db export {\"archivePath\": \"\(exported.path)\"}")["chatError"]?["errorType"]?["type"]?.stringValue == "chatNotStopped")
                #expect(await person.execute("/_stop")["type"]?.stringValue == "chatStopped")
                let r = await person.execute("/_db export {\"archivePath\": \"\(exported.path)\"}")
                #expect(r["type"]?.stringValue == "archiveExported" && r["archiveErrors"]?.arrayCount == 0, "\(r)")
            }
            let target = dir.appendingPathComponent("host-data")
            let manifest = try HostBackup.restore(from: exported, dataDirectory: target, configFile: nil, replace: false)
            #expect(manifest.databases.count == 2 && manifest.files.isEmpty)
            let restoredChat = target.appendingPathComponent("bot_chat.db")
            #expect(FileManager.default.fileExists(atPath: target.appendingPathComponent("bot_agent.db").path))
            let queue = try DatabaseQueue(path: restoredChat.path)
            let names = try await queue.read { try String.fetchAll($0, sql: "SELECT display_name FROM user") }
            try queue.close()
            #expect(names == ["person"])
            #expect(try mode(restoredChat) == 0o600)
        }
    }

    @Test func anArchiveFromANewerVersionOrWithUnsafePathsIsRefused() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        func archive(_ name: String, manifest: String, entries: [String: String]) throws -> URL {
            let url = dir.appendingPathComponent(name)
            let zip = try Archive(url: url, accessMode: .create)
            for (path, text) in [("swiftplex-backup.json", manifest)] + entries.sorted(by: { $0.key < $1.key }).map({ ($0.key, $0.value) }) {
                let data = Data(text.utf8)
                try zip.addEntry(with: path, type: .file, uncompressedSize: Int64(data.count)) { position, size in
                    data.subdata(in: Int(position)..<Int(position) + size)
                }
            }
            return url
        }
        let newer = try archive("newer.zip", manifest: #"{"formatVersion": 2, "swiftplexVersion": "9.0.0", "createdAt": "2030-01-01T00:00:00Z", "databases": [], "files": ["x"]}"#,
                                entries: ["data/x": "x"])
        let target = dir.appendingPathComponent("data")
        do {
            try HostBackup.restore(from: newer, dataDirectory: target, configFile: nil, replace: false)
            Issue.record("a newer archive was restored")
        } catch let e as BackupError {
            #expect(e.description.contains("newer Swiftplex") && e.description.contains("9.0.0"), "\(e)")
        }
        #expect(!FileManager.default.fileExists(atPath: target.path))
        let unsafe = try archive("unsafe.zip", manifest: #"{"formatVersion": 1, "swiftplexVersion": "0.1.0", "createdAt": "2026-01-01T00:00:00Z", "databases": [], "files": ["../escape"]}"#,
                                 entries: ["data/../escape": "x"])
        #expect(throws: BackupError.self) { try HostBackup.restore(from: unsafe, dataDirectory: target, configFile: nil, replace: false) }
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("escape").path))
        let notABackup = try archive("plain.zip", manifest: "[]", entries: [:])
        #expect(throws: BackupError.self) { try HostBackup.restore(from: notABackup, dataDirectory: target, configFile: nil, replace: false) }
    }
}
