import CSwiftplexPlugin
import Foundation
import PluginABITesting
import Testing
@testable import SwiftplexPluginKit

/// A plugin that uses every part of the SDK, driven through its C descriptor in this process.
final class Probe: Plugin {
    struct Config: Decodable {
        var greeting: String
        var count: Int?
    }

    static let name = "probe"
    static let version = "0.0.1"
    static let description = "SDK test plugin"
    static let configSchema: JSONSchema? = .object(["greeting": .string(), "count": .integer(minimum: 0)], required: ["greeting"])

    let config: Config
    let context: PluginContext
    var ticks = 0

    init(config: Config, context: PluginContext) throws {
        if config.count == 13 { throw PluginError.config("count", "unlucky") }
        self.config = config
        self.context = context
        try context.every(.seconds(60), name: "tick") { [unowned self] in
            self.ticks += 1
            try self.context.storage.set(self.ticks, forKey: "ticks")
        }
        try context.after(.milliseconds(1500), name: "once") { [unowned self] in
            self.context.log.info("once")
        }
    }

    static func routes(_ r: inout Routes<Probe>) {
        r.onMessage(.contentType("text"), .direct, .text(matching: "^hi\\b")) { p, m in
            try p.context.reply(to: m, text: "\(p.config.greeting) \(m.displayName)")
        }
        r.onMessage(.contentType("image")) { p, m in try p.context.reply(to: m, text: "nice picture") }
        r.onMessage(.contactName("boss")) { p, m in try p.context.send(contactId: 99, text: "boss said: \(m.text)") }
        r.onMessage(.group) { p, m in try p.context.send(groupId: m.groupId ?? 0, text: "group ok") }
        r.onMessage(.text(matching: "^fail")) { _, _ in throw PluginError(.plugin, "asked to fail") }
        r.onCommand("echo", label: "Echo the arguments") { p, c in try p.context.reply(to: c.message, text: c.arguments.joined(separator: "|")) }
        r.onCommand("hidden", label: "Only with count", enabled: { $0.config.count != nil }) { p, c in
            try p.context.reply(to: c.message, text: "hidden")
        }
        r.onCommand("store", label: "Store a value") { p, c in
            try p.context.storage.set(["k": c.argumentText], forKey: "stored")
            let back = try p.context.storage.value([String: String].self, forKey: "stored")
            try p.context.reply(to: c.message, text: back?["k"] ?? "?")
        }
        r.onCommand("contacts", label: "Count contacts") { p, c in
            try p.context.reply(to: c.message, text: "\(try p.context.contacts().count)")
        }
        r.onCommand("names", label: "List contact names") { p, c in
            struct Listed: Decodable {
                struct Entry: Decodable { var localDisplayName: String }
                var contacts: [Entry]
            }
            let listed = try p.context.command("/_contacts \(try p.context.userId())", decoding: Listed.self)
            try p.context.reply(to: c.message, text: listed.contacts.map(\.localDisplayName).joined(separator: ","))
            struct Wrong: Decodable { var nope: Int }
            _ = try p.context.command("/user", decoding: Wrong.self)
        }
        r.onEvent("contactConnected") { p, e in
            try p.context.send(contactId: e.connectedContact?.contactId ?? 0, text: p.config.greeting)
        }
    }
}

/// A second type in the same image (a separate descriptor slot).
final class Minimal: Plugin {
    static let name = "minimal"
    static let version = "1"
    static let description = "no config, no handlers"
    init(config: EmptyConfig, context: PluginContext) {}
    static func routes(_ r: inout Routes<Minimal>) {}
}

/// Hands its context to the test, as a plugin thread that outlives the instance would keep it.
final class Keeper: Plugin {
    nonisolated(unsafe) static var onStart: (PluginContext) -> Void = { _ in }
    static let name = "keeper"
    static let version = "1"
    static let description = "keeps its context"
    init(config: EmptyConfig, context: PluginContext) { Self.onStart(context) }
    static func routes(_ r: inout Routes<Keeper>) {}
}

@Suite struct RuntimeTests {
    let library = PluginLibrary(descriptor: PluginExport.descriptor(for: Probe.self))

    /// A host that answers /_send, /user and /_contacts like the Chat API.
    func host() -> TestHost {
        TestHost { command in
            if command == "/user" { return ChatFixtures.activeUser(4) }
            if command == "/_contacts 4" { return ChatFixtures.contactsList([(1, "a"), (2, "b"), (3, "c")]) }
            if let (ref, content) = ChatFixtures.parseSend(command) {
                return ChatFixtures.sent(to: Int64(ref.dropFirst()) ?? 0, text: content["text"] as? String ?? "")
            }
            return ChatFixtures.chatCmdError("noSuchThing")
        }
    }

    func start(_ host: TestHost, _ config: String = #"{"greeting":"hello"}"#) throws -> RunningPlugin {
        try library.start(host: host, config: config).get()
    }

    func sent(_ host: TestHost) -> [String] {
        host.commands.compactMap { ChatFixtures.parseSend($0) }.map { "\($0.ref) \($0.content["text"] as? String ?? "")" }
    }

    @Test func descriptorDescribesThePlugin() throws {
        #expect(library.abiVersion == SWIFTPLEX_PLUGIN_ABI_VERSION)
        #expect(library.structSize == UInt32(MemoryLayout<swiftplex_plugin_descriptor>.size))
        #expect(library.name == "probe" && library.version == "0.0.1" && library.summary == "SDK test plugin")
        #expect(library.events == ["newChatItems", "contactConnected"])
        #expect(library.configSchema == Probe.configSchema?.json.text)
        // The same type gives the same descriptor; another type its own.
        #expect(PluginExport.descriptor(for: Probe.self) == UnsafeRawPointer(library.descriptor))
        let minimal = PluginLibrary(descriptor: PluginExport.descriptor(for: Minimal.self))
        #expect(minimal.name == "minimal" && minimal.events.isEmpty && minimal.configSchema == nil)
        let h = host()
        let m = try minimal.start(host: h, config: #"{"anything":1}"#).get()
        #expect(m.handle(ChatFixtures.directMessage(from: 1, name: "a", text: "hi")) == nil)
        #expect(h.commands.isEmpty && h.menu == nil)
        m.stop()
    }

    /// The start error for `config`, or nil (recorded as an issue) if it started.
    func startError(_ config: String) -> String? {
        switch library.start(host: host(), config: config) {
        case let .failure(e): return e.message
        case let .success(p):
            p.stop()
            Issue.record("started with \(config)")
            return nil
        }
    }

    @Test func configErrorsNameTheField() {
        #expect(startError(#"{"greeting":5}"#) == "config.greeting: expected a string")
        #expect(startError(#"{}"#) == "config.greeting: missing")
        #expect(startError(#"{"greeting":"x","count":"many"}"#) == "config.count: expected an integer")
        #expect(startError(#"{"greeting":"x","count":13}"#) == "config.count: unlucky")
        #expect(startError(#"[1,2"#)?.hasPrefix("config: ") == true)
    }

    @Test func aHostOfAnotherABIIsRefused() {
        let h = host()
        h.api.pointee.abi_version = 2
        guard case let .failure(e) = library.start(host: h, config: #"{"greeting":"x"}"#) else { Issue.record("started"); return }
        #expect(e.message.contains("ABI version 2"))
        h.api.pointee.abi_version = SWIFTPLEX_PLUGIN_ABI_VERSION
        h.api.pointee.struct_size = 16
        guard case let .failure(e2) = library.start(host: h, config: #"{"greeting":"x"}"#) else { Issue.record("started"); return }
        #expect(e2.message.contains("16 bytes"))
    }

    /// Sends go through the host's `send_message` (ABI 1.2); on an older host's table (1.1 and
    /// 1.0: smaller `struct_size`), the SDK writes the `/_send` command itself. The plugin sees
    /// the same either way.
    @Test func sendsUseSendMessageAndFallBackToTheCommandOnOlderHosts() throws {
        let sizes = [nil, MemoryLayout<swiftplex_host_api>.offset(of: \swiftplex_host_api.send_message)!,
                     MemoryLayout<swiftplex_host_api>.offset(of: \swiftplex_host_api.post_to_channel)!]
        for size in sizes {
            let h = host()
            if let size { h.api.pointee.struct_size = UInt32(size) }
            let p = try start(h)
            #expect(p.handle(ChatFixtures.contactConnected(9, name: "cy")) == nil)
            #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "a", text: "/echo hi there")) == nil)
            #expect(sent(h) == ["@9 hello", "@7 hi|there"], "\(h.commands)")
            #expect(h.messagesSent == (size == nil ? 2 : 0), "struct_size \(size.map(String.init) ?? "full")")
            p.stop()
        }
    }

    @Test func publishesTheCommandMenuWithLabels() throws {
        let h = host()
        let p = try start(h)
        let menu = try JSONValue.parse(try #require(h.menu))
        #expect(menu == [["keyword": "echo", "label": "Echo the arguments"], ["keyword": "store", "label": "Store a value"],
                         ["keyword": "contacts", "label": "Count contacts"], ["keyword": "names", "label": "List contact names"]])
        p.stop()
        let h2 = host()
        let p2 = try start(h2, #"{"greeting":"x","count":1}"#)
        #expect(h2.menu?.contains("hidden") == true)
        p2.stop()
    }

    @Test func filtersPickTheHandlers() throws {
        let h = host()
        let p = try start(h)
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "alice", text: "hi bot")) == nil)
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "alice", text: "high")) == nil)
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "alice", text: "", contentType: "image")) == nil)
        #expect(p.handle(ChatFixtures.directMessage(from: 8, name: "x", localName: "boss", text: "raise")) == nil)
        #expect(p.handle(ChatFixtures.groupMessage(groupId: 3, memberName: "bob", memberContactId: nil, text: "hi all")) == nil)
        #expect(p.handle(ChatFixtures.sentMessage(to: 7, text: "hi")) == nil)
        #expect(sent(h) == ["@7 hello alice", "@7 nice picture", "@99 boss said: raise", "#3 group ok"])
        p.stop()
    }

    @Test func commandsGetParsedArgumentsAndOthersFallThrough() throws {
        let h = host()
        let p = try start(h)
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "a", text: #"/echo one "two three""#)) == nil)
        // Disabled for this instance: not a command, and no message handler matches.
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "a", text: "/hidden")) == nil)
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "a", text: "/contacts")) == nil)
        #expect(sent(h) == ["@7 one|two three", "@7 3"])
        // Responses decoded into the plugin's own types; a mismatch names the command and the field.
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "a", text: "/names")) == "/names handler: /user: response activeUser does not decode as Wrong: nope: missing")
        #expect(sent(h).last == "@7 a,b,c")
        #expect(h.commands.contains("/user") && h.commands.contains("/_contacts 4"))
        p.stop()
    }

    @Test func aThrowingHandlerIsAnErrorResultAndTheRestStillRun() throws {
        let h = host()
        let p = try start(h)
        let error = p.handle(ChatFixtures.directMessage(from: 7, name: "alice", text: "fail hi"))
        #expect(error == "onMessage handler 5: asked to fail")
        // A command the Chat API refuses: the error names the command keyword, not its text.
        h.respond { _ in ChatFixtures.chatCmdError("contactNotFound") }
        let refused = p.handle(ChatFixtures.contactConnected(5, name: "e"))
        #expect(refused == "contactConnected handler: /_send: errorStore/contactNotFound")
        #expect(p.handle("not json")?.hasPrefix("malformed JSON") == true)
        #expect(p.handle(#"{"no":"type"}"#) != nil)
        // Still alive.
        h.respond { _ in ChatFixtures.sent(to: 7, text: "") }
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "alice", text: "hi")) == nil)
        p.stop()
    }

    @Test func aContextKeptPastStopRefusesToCallTheHost() throws {
        let h = host()
        nonisolated(unsafe) var kept: PluginContext?
        let lib = PluginLibrary(descriptor: PluginExport.descriptor(for: Keeper.self))
        Keeper.onStart = { kept = $0 }
        let p = try lib.start(host: h, config: "{}").get()
        p.stop()
        let context = try #require(kept)
        #expect(throws: PluginError(.host, "")) { try context.command("/user") }
        #expect(throws: PluginError(.host, "")) { try context.after(.seconds(1)) {} }
        #expect(h.commands.isEmpty)
    }

    @Test func timersAndStorage() throws {
        let h = host()
        let p = try start(h)
        let timers = h.timers
        #expect(timers.map(\.name) == ["tick", "once"])
        #expect(timers[0].delayMs == 60_000 && timers[0].repeatMs == 60_000 && timers[1].delayMs == 1500 && timers[1].repeatMs == 0)
        #expect(p.handle(TestHost.timerEvent(timers[0])) == nil)
        #expect(p.handle(TestHost.timerEvent(timers[0])) == nil)
        #expect(h.storage["ticks"] == "2")
        #expect(p.handle(TestHost.timerEvent(timers[1])) == nil)
        #expect(h.logs.contains { $0.message == "once" && $0.level == Int32(SWIFTPLEX_LOG_INFO) })
        // A fired one-shot timer is gone; its event again does nothing.
        #expect(p.handle(TestHost.timerEvent(timers[1])) == nil)
        #expect(h.logs.filter { $0.message == "once" }.count == 1)
        #expect(p.handle(ChatFixtures.directMessage(from: 7, name: "a", text: #"/store some "value""#)) == nil)
        #expect(h.storage["stored"] == #"{"k":"some \"value\""}"#)
        #expect(sent(h).last == #"@7 some "value""#)
        p.stop()
    }
}
