import Agent
import ChatAPI
import ChatCore
import Foundation
@testable import HostConfig
import SwiftplexBase
import SwiftplexPluginKit

/// The Chat API command parser: one command line as a bot sends it (through libsimplex or the
/// WebSocket API), with the JSON and links it carries.
enum ChatCommandTarget: FuzzTarget {
    static let name = "chat-command"
    static let summary = "ChatAPI CommandParser.parse (SimpleX bot API command strings, their JSON and links)"

    static func fuzz(_ data: [UInt8]) {
        let line = text(data)
        guard let command = try? CommandParser.parse(line) else { return }
        // Parsing is a function of the text.
        fuzzCheck((try? CommandParser.parse(line)) == command, "the same line parsed twice gives two commands")
    }

    static func seeds() throws -> [[UInt8]] {
        let link = FixedKeys.invitation.description
        let address = ContactAddressLink(queue: FixedKeys.queue()).description
        let commands = [
            "/user", "/users",
            #"/_create user {"profile":{"displayName":"bot","fullName":""},"pastTimestamp":false}"#,
            "/_user 1", "/_user 2 secret", "/_delete user 1 del_smp=on", "/_delete @12 full notify=off", "/_delete @12 messages",
            "/_delete item @1 1,2 broadcast", "/_delete item #3 5,6 internal",
            #"/_profile 1 {"displayName":"bot","fullName":"A bot","peerType":"bot"}"#,
            "/_set receipts contacts 1 on", #"/_set prefs @3 {"calls":{"allow":"no"}}"#,
            "/_start main=on", "/_stop", "/_address 1", "/_address 1 short=on", "/_delete_address 1", "/_show_address 1",
            "/_profile_address 1 on",
            #"/_address_settings 1 {"autoAccept":{"acceptIncognito":false},"autoReply":{"text":"hi"}}"#,
            #"/_send @12 json [{"msgContent":{"type":"text","text":"hello"}}]"#,
            #"/_send @12 live=on ttl=30 json [{"quotedItemId":4,"msgContent":{"type":"text","text":"re"}}]"#,
            #"/_update item @12 5 json {"type":"text","text":"edited"}"#,
            #"/_reaction @12 5 on {"type":"emoji","emoji":"👍"}"#,
            "/_connect 1", "/_connect 1 incognito=on", "/_connect 1 \(link)", "/_connect 1 short=on \(address)",
            "/_connect plan 1 \(link)", "/connect \(address)", "/c \(LinksTarget.shortLink)",
            "/_accept 8", "/_accept incognito=on 8", "/_reject 8", "/_contacts 1",
            "/_get chats 1 pcc=on count=10", "/_get chat @12 count=10", "/_get chat @12 after=7 count=2", "/_get chat @12 before=40 count=10",
            "/_get chat @12 last=3", "/_get items count=10", "/_read chat @12",
            "/_relays 1", "/_relays 1 \(FixedKeys.queue().relay), smp://\(String(repeating: "A", count: 43))@[::1]:5224",
        ]
        return commands.map { Array($0.utf8) }
    }
}

/// The one JSON reader and writer (`SwiftplexBase.JSONValue`): message bodies from peers, API
/// parameters, plugin config schemas, and the Codable bridge typed values go through.
enum JSONTarget: FuzzTarget {
    static let name = "json"
    static let summary = "SwiftplexBase JSONValue.parse, its writer and the Codable bridge (what parses prints as JSON that parses to the same value)"

    static func fuzz(_ data: [UInt8]) {
        guard let v = try? SwiftplexBase.JSONValue.parse(text(data)) else { return }
        // A number that is not finite (`1e999`) is a parse error, so whatever parses
        // prints as JSON (never a bare `inf`) and reads back the same.
        let printed = v.description
        guard let again = try? SwiftplexBase.JSONValue.parse(printed) else { fuzzCheck(false, "printed JSON does not parse: \(printed.prefix(200))"); return }
        fuzzCheck(again == v, "printed JSON does not parse back: \(printed.prefix(200))")
        // Integers stay integers and doubles doubles: the second printing is the first, byte for byte.
        fuzzCheck(again.description == printed, "printing is not stable: \(printed.prefix(200))")
        // Through the Codable bridge (JSONValue as a field of a Codable type) nothing changes.
        let bridged = try? SwiftplexBase.JSONValueDecoder().decode([SwiftplexBase.JSONValue].self, from: SwiftplexBase.JSONValueEncoder().encode([v]))
        fuzzCheck(bridged.map { $0.count == 1 && $0[0].description == printed } == true, "the Codable bridge changed \(printed.prefix(200))")
    }

    static func seeds() throws -> [[UInt8]] { jsonSeeds }
}

/// The plugin config schema reader (HostConfig, over SwiftplexBase's JSON with its depth of 100).
enum HostConfigJSONTarget: FuzzTarget {
    static let name = "json-hostconfig"
    static let summary = "HostConfig PluginConfigSchema(json:) (plugin config schemas)"

    static func fuzz(_ data: [UInt8]) {
        _ = try? PluginConfigSchema(json: text(data))
    }

    static func seeds() throws -> [[UInt8]] { jsonSeeds + [Array(YAMLConfigTarget.schema.utf8)] }
}

/// The plugin SDK's JSON (`SwiftplexPluginKit.JSONValue`, SwiftplexBase's files compiled into the
/// SDK): every event and command response a plugin reads, through the SDK's `parse(_:as:)`.
enum PluginKitJSONTarget: FuzzTarget {
    static let name = "json-pluginkit"
    static let summary = "SwiftplexPluginKit JSONValue.parse(_:as:) (strict, RFC 8259) and .text"

    static func fuzz(_ data: [UInt8]) {
        guard let v = try? SwiftplexPluginKit.JSONValue.parse(text(data), as: .event) else { return }
        let printed = v.text
        let again = try? SwiftplexPluginKit.JSONValue.parse(printed, as: .event)
        fuzzCheck(again == v, "printed JSON does not parse back: \(printed.prefix(200))")
    }

    static func seeds() throws -> [[UInt8]] { jsonSeeds }
}

let jsonSeeds: [[UInt8]] = [
    #"{"type":"newChatItems","chatItems":[{"chatInfo":{"type":"direct","contact":{"contactId":3,"localDisplayName":"alice_1"}},"chatItem":{"meta":{"itemId":12,"itemTs":"2026-11-23T07:00:00Z"},"content":{"type":"rcvMsgContent","msgContent":{"type":"text","text":"hi \u00e9\n"}}}}]}"#,
    #"[1, -2.5e-3, 1E+2, 9007199254740993, true, false, null, "", "\"\\\/\b\f\n\r\t\ud83d\ude00"]"#,
    #"{"a":{"b":[[],{}]},"a2":1.0,"z":-0}"#,
    #"  "text"  "#,
    "12345678901234567890",
    #"{"x.msg.new":{"content":{"type":"text","text":"hello"}},"v":"1-2"}"#,
].map { Array($0.utf8) }

/// The bot host's YAML config: libyaml's reader (`YAMLReader`), `${VAR}` interpolation and the
/// typed loading of the whole file; mode byte odd: the YAML as a plugin's `config:` node checked
/// against a plugin config schema.
enum YAMLConfigTarget: FuzzTarget {
    static let name = "yaml-config"
    static let summary = "HostConfig YAMLReader (libyaml), interpolation, HostConfiguration.parse, PluginConfigSchema.validate"

    static let environment = ["BOT_NAME": "Fuzz Bot", "EMPTY": "", "PORT": "5223"]
    static let schema = #"""
    {"type":"object","properties":{
      "welcome":{"type":"string","default":"Hello!","maxLength":500},
      "max_per_hour":{"type":"integer","minimum":0,"maximum":10000,"default":60},
      "ratio":{"type":"number","minimum":0,"maximum":1},
      "enabled":{"type":"boolean","default":true},
      "mode":{"type":"string","enum":["echo","quiet"]},
      "admins":{"type":"array","items":{"type":"string"},"maxItems":20},
      "limits":{"type":"object","properties":{"burst":{"type":"integer"}},"additionalProperties":false}
    },"required":["welcome"],"additionalProperties":false}
    """#
    static let pluginSchema = try! PluginConfigSchema(json: schema)

    static func fuzz(_ data: [UInt8]) {
        var r = ByteReader(data)
        let mode = r.byte()
        let yaml = r.rest()
        if mode & 1 == 0 {
            _ = try? HostConfiguration.parse(bytes: yaml, file: "fuzz.yaml", directory: "/nonexistent", environment: environment)
        } else if let node = try? YAMLReader.parse(yaml, file: "fuzz.yaml") {
            if case let .success(json) = pluginSchema.validate(node, file: "fuzz.yaml") {
                fuzzCheck((try? SwiftplexBase.JSONValue.parse(json)) != nil, "a validated plugin config is not JSON: \(json.prefix(200))")
            }
            _ = node.toJSON()
        }
    }

    static func seeds() throws -> [[UInt8]] {
        let bundled = FileManager.default.contents(atPath: "config/bot.yaml").map { [UInt8]($0) }
        let configs = [
            """
            data_dir: /var/lib/swiftplex
            log_level: debug
            bot:
              display_name: ${BOT_NAME}
              full_name: "${EMPTY:-A bot}"
              peer_type: bot
            relays:
              - smp://\(String(repeating: "A", count: 43))@relay.example:${PORT}
            address: {enabled: true, print_qr: false}
            plugins:
              - name: greet
                path: auto-accept
                isolation: process
                timeout: 250ms
                queue_limit: 10
                restart_backoff: {initial: 1s, max: 1m}
                config:
                  welcome: "Hi $${literal}"
              - {name: echo, path: ./libauto-reply.so, enabled: false}
            """,
            """
            data_dir: data
            bot: {display_name: Bot}
            relays: embedded
            embedded_relay: {listen: "[::1]:0", public_host: bot.example}
            plugin_dirs: [plugins, /opt/plugins]
            """,
        ]
        let plugin = [
            "welcome: Hello\nmax_per_hour: 5\nratio: 0.5\nenabled: false\nmode: echo\nadmins: [\"1:alice\", '2:bob']\nlimits:\n  burst: 3\n",
            "welcome: !!str 123\nadmins:\n  - a\n  - b\n",
            "welcome: |\n  multi\n  line\n",
        ]
        var out = configs.map { [0] + Array($0.utf8) } + plugin.map { [1] + Array($0.utf8) }
        if let bundled { out.append([0] + bundled) }
        return out
    }
}
