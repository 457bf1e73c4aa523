import Foundation
import TestSupport
import Testing
@testable import HostConfig

@Suite struct HostConfigurationTests {
    @Test func defaultsFillEverythingNotGiven() throws {
        let (c, dir) = try load(minimal)
        #expect(c.bot.displayName == "Test Bot")
        #expect(c.bot.peerType == .bot && c.bot.publishCommands)
        #expect(c.relays == .embedded)
        #expect(c.embeddedRelay.host == "127.0.0.1" && c.embeddedRelay.port == 5223 && c.embeddedRelay.publicHost == nil)
        #expect(c.address.enabled && c.address.printQR)
        #expect(c.logLevel == .info)
        #expect(c.plugins.isEmpty)
        #expect(c.directory == dir.path || c.directory.hasSuffix((dir.path as NSString).lastPathComponent))
    }

    /// Contact-request limits are the operator's to change, with checked values.
    @Test func contactRequestLimitsUnderAddress() throws {
        let (d, _) = try load(minimal)
        #expect(d.address.requestsPerMinute == 30 && d.address.maxPendingRequests == 1000 && d.address.requestTTL == .seconds(168 * 3600))
        let (c, _) = try load(minimal + "address:\n  requests_per_minute: 5\n  max_pending_requests: 50\n  request_ttl: 24h\n")
        #expect(c.address.requestsPerMinute == 5 && c.address.maxPendingRequests == 50 && c.address.requestTTL == .seconds(24 * 3600))
        let p = try problems(minimal + "address:\n  requests_per_minute: 0\n  max_pending_requests: lots\n  request_ttl: 7\n")
        #expect(p.contains { $0.contains("requests_per_minute") && $0.contains("1...1000000") }, "\(p)")
        #expect(p.contains { $0.contains("max_pending_requests") }, "\(p)")
        #expect(p.contains { $0.contains("request_ttl") && $0.contains("duration") }, "\(p)")
    }

    @Test func groupMemberLimitUnderGroups() throws {
        let (d, _) = try load(minimal)
        #expect(d.bots[0].groups.maxMembers == 1000)
        let (c, _) = try load(minimal + "groups:\n  max_members: 250\n")
        #expect(c.bots[0].groups.maxMembers == 250)
        let p = try problems(minimal + "groups:\n  max_members: 1\n")
        #expect(p.contains { $0.hasPrefix("4:") && $0.contains("groups.max_members") && $0.contains("2...100000") }, "\(p)")
        let q = try problems(minimal + "groups:\n  max_member: 5\n")
        #expect(q.contains { $0.contains("max_member") }, "\(q)")
        let bots = try load("""
            bots:
              - name: a
                display_name: A
                groups: {max_members: 10}
              - name: b
                display_name: B
            """).0
        #expect(bots.bots.map(\.groups.maxMembers) == [10, 1000])
        let top = try problems("bots:\n  - name: a\n    display_name: A\ngroups:\n  max_members: 5\n")
        #expect(top.contains { $0.contains("groups") && $0.contains("bots") }, "\(top)")
    }

    @Test func peerRelaysAllowListPrivateRangesAndTimeout() throws {
        let (plain, _) = try load(minimal)
        #expect(plain.peerRelays == HostConfiguration.PeerRelays(allow: nil, refusePrivate: false, timeout: .seconds(30)))
        let (c, _) = try load(minimal + """
            peer_relays:
              allow: [relay.example.org, "smp2.example.org:5223", 203.0.113.7]
              refuse_private: true
              timeout: 10s
            """)
        #expect(c.peerRelays.allow == ["relay.example.org", "smp2.example.org:5223", "203.0.113.7"])
        #expect(c.peerRelays.refusePrivate && c.peerRelays.timeout == .seconds(10))
        let p = try problems(minimal + """
            peer_relays:
              allow: ["smp://x@y", ""]
              refuse_private: maybe
              timeout: soon
              deny: []
            """)
        #expect(p.contains { $0.hasPrefix("4:") && $0.contains("peer_relays.allow[0]") }, "\(p)")
        #expect(p.contains { $0.contains("peer_relays.allow[1]") }, "\(p)")
        #expect(p.contains { $0.contains("peer_relays.refuse_private") }, "\(p)")
        #expect(p.contains { $0.contains("peer_relays.timeout") }, "\(p)")
        #expect(p.contains { $0.contains("deny") }, "\(p)")
    }

    @Test func pluginsWithEveryKey() throws {
        let (c, _) = try load(minimal + """
            plugins:
              - name: greeter-en
                path: auto-accept
                isolation: process
                timeout: 250ms
                queue_limit: 10
                restart_backoff: {initial: 2s, max: 1m}
                config:
                  welcome: Hello
              - name: greeter-de
                path: ./plugins/libgreeter.so
                enabled: false
            """)
        #expect(c.plugins.count == 2)
        let en = c.plugins[0]
        #expect(en.name == "greeter-en" && en.path == .name("auto-accept") && en.isolation == .process)
        #expect(en.timeout == .milliseconds(250) && en.queueLimit == 10)
        #expect(en.restartBackoff == .init(initial: .seconds(2), max: .seconds(60)))
        #expect(en.config.toJSON() == #"{"welcome":"Hello"}"#)
        #expect(en.mark.line == 4)
        guard case let .file(path) = c.plugins[1].path else { throw ConfigErrors([]) }
        #expect(path.hasPrefix("/") && path.hasSuffix("plugins/libgreeter.so"))
        #expect(!c.plugins[1].enabled)
    }

    @Test func everyHostProblemIsReportedWithItsPosition() throws {
        let p = try problems("""
            bot:
              display_name: "#general"
              peer_type: robot
            log_level: verbose
            relays: [ftp://nowhere]
            embedded_relay:
              listen: 127.0.0.1:99999
            plugins:
              - name: Bad Name
                path: x
                timeout: soon
              - name: dup
                path: x
              - name: dup
                path: x
                queue_limt: 5
            """)
        #expect(p.contains { $0.hasPrefix("2:17:") && $0.contains("#") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("3:14:") && $0.contains("bot") && $0.contains("human") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("4:12:") && $0.contains("verbose") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("5:") && $0.contains("ftp://nowhere") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("7:11:") && $0.contains("99999") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("9:11:") && $0.contains("Bad Name") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("11:14:") && $0.contains("soon") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("14:11:") && $0.contains("dup") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("16:") && $0.contains("queue_limt") && $0.contains("queue_limit") }, "\(p)")
        // Sorted by position.
        let positions = p.map { $0.split(separator: ":").prefix(2).map { Int($0)! } }
        #expect(positions == positions.sorted { ($0[0], $0[1]) < ($1[0], $1[1]) })
    }

    @Test func secretsComeFromTheEnvironmentAndNeverShowInErrors() throws {
        let (c, _) = try load(minimal + "data_dir: ${DATA}\nplugins:\n  - name: a\n    path: auto-reply\n    config:\n      token: ${TOKEN}\n",
                              environment: ["DATA": "/srv/bot", "TOKEN": "s3cr3t-value"])
        #expect(c.dataDirectory == "/srv/bot")
        #expect(c.plugins[0].config.toJSON() == #"{"token":"s3cr3t-value"}"#)
        let p = try problems(minimal + "log_level: ${LEVEL}\n", environment: ["LEVEL": "s3cr3t-value"])
        #expect(p.count == 1 && !p[0].contains("s3cr3t-value") && p[0].contains("LEVEL"), "\(p)")
        let unset = try problems(minimal + "data_dir: ${NOT_SET}\n")
        #expect(unset.count == 1 && unset[0].hasPrefix("3:11:") && unset[0].contains("NOT_SET"), "\(unset)")
    }

    @Test func theStarterTemplateLoadsAndMatchesTheRepositoryConfig() throws {
        let (c, _) = try load(HostConfiguration.starterTemplate)
        #expect(c.relays == .embedded)
        #expect(c.plugins.map(\.name) == ["welcome", "echo"])
        #expect(c.plugins.map(\.path) == [.name("auto-accept"), .name("auto-reply")])
        #expect(c.plugins[1].config.toJSON() == #"{"echo":true}"#)
        let shipped = try String(contentsOf: Repository.path("config/bot.yaml"), encoding: .utf8)
        #expect(shipped == HostConfiguration.starterTemplate.replacingOccurrences(of: "data_dir: .swiftplex/bot", with: "data_dir: ../.swiftplex/bot"))
    }
}

@Suite struct PluginConfigSchemaTests {
    static let schema = """
        {"type":"object","properties":{
          "welcome":{"type":"string","default":"Hi"},
          "max_per_hour":{"type":"integer","minimum":0,"maximum":1000},
          "ratio":{"type":"number"},
          "enabled":{"type":"boolean","default":true},
          "allow":{"type":"array","items":{"type":"string"}},
          "mode":{"type":"string","enum":["echo","rules"]},
          "rules":{"type":"array","items":{"type":"object","properties":{
              "keyword":{"type":"string"},"reply":{"type":"string"}},"required":["reply"],"additionalProperties":false}}},
         "required":["mode"],"additionalProperties":false}
        """

    func validate(_ yaml: String) throws -> Result<String, ConfigErrors> {
        try PluginConfigSchema(json: Self.schema).validate(try tree(yaml), file: "t.yaml")
    }

    @Test func validConfigGetsDefaultsAndSchemaDirectedScalars() throws {
        let json = try validate("mode: echo\nallow: [123, yes]\nratio: 2\n").get()
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: Any]
        #expect(object["welcome"] as? String == "Hi")
        #expect(object["enabled"] as? Bool == true)
        #expect(object["allow"] as? [String] == ["123", "yes"])  // plain scalars where strings are expected
        #expect(object["mode"] as? String == "echo")
    }

    @Test func everyViolationWithItsPosition() throws {
        guard case let .failure(e) = try validate("""
            max_per_hour: -1
            enabled: yes
            mode: loud
            rules:
              - keyword: hi
              - reply: ok
                extra: 1
            welcom: x
            """) else { Issue.record("accepted"); return }
        let lines = e.problems.map { "\($0.line):\($0.column): \($0.message)" }
        #expect(lines.contains { $0.hasPrefix("1:15:") && $0.contains("minimum") || $0.hasPrefix("1:15:") && $0.contains("0") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("2:10:") && $0.contains("boolean") }, "\(lines)")  // YAML 1.2: yes is not a boolean
        #expect(lines.contains { $0.hasPrefix("3:7:") && $0.contains("echo") && $0.contains("rules") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("5:") && $0.contains("reply") }, "\(lines)")  // required in the item
        #expect(lines.contains { $0.hasPrefix("7:5:") && $0.contains("extra") }, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("8:1:") && $0.contains("did you mean \"welcome\"") }, "\(lines)")
    }

    @Test func aMissingRequiredKeyIsReported() throws {
        guard case let .failure(e) = try validate("welcome: x\n") else { Issue.record("accepted"); return }
        #expect(e.problems.count == 1 && e.problems[0].message.contains("mode"))
    }

    @Test func regexFormatStringsMustCompileAndAreReportedAtTheirPosition() throws {
        let schema = try PluginConfigSchema(json: #"{"type":"object","properties":{"patterns":{"type":"array","items":{"type":"string","format":"regex"}},"site":{"type":"string","format":"uri"}}}"#)
        #expect(try schema.validate(try tree("patterns: ['^a+$', '(?i)b[0-9]']\nsite: not checked\n"), file: "t.yaml").get()
            == #"{"patterns":["^a+$","(?i)b[0-9]"],"site":"not checked"}"#)
        guard case let .failure(e) = schema.validate(try tree("patterns:\n  - ok\n  - '(unclosed'\n"), file: "t.yaml") else {
            Issue.record("accepted"); return
        }
        #expect(e.problems.count == 1 && e.problems[0].line == 3 && e.problems[0].column == 5, "\(e.problems)")
        #expect(e.problems.first?.message.contains("patterns[1]") == true && e.problems.first?.message.contains("must be a valid regular expression") == true)
        #expect(throws: PluginSchemaError.self) { try PluginConfigSchema(json: #"{"type":"object","properties":{"a":{"type":"string","format":1}}}"#) }
        #expect(throws: PluginSchemaError.self) { try PluginConfigSchema(json: #"{"type":"object","properties":{"a":{"type":"integer","format":"regex"}}}"#) }
    }

    @Test func malformedSchemasAreTypedErrors() {
        #expect(throws: PluginSchemaError.self) { try PluginConfigSchema(json: "{not json") }
        #expect(throws: PluginSchemaError.self) { try PluginConfigSchema(json: #"{"type":"object","properties":{"a":{"type":"date"}}}"#) }
    }

    @Test func jsonTextIsEscapedCorrectly() throws {
        let text = "quote \" backslash \\ tab \t newline \n bell \u{7} ünï ✓"
        let node = try tree("welcome: \(try String(data: JSONSerialization.data(withJSONObject: [text]), encoding: .utf8)!.dropFirst().dropLast())\nmode: echo\n")
        let json = try PluginConfigSchema(json: Self.schema).validate(node, file: "t.yaml").get()
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: Any]
        #expect(object["welcome"] as? String == text)
        #expect(node.toJSON().contains(#"\""#))
    }
}
