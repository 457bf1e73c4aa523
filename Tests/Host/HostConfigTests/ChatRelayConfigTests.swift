import Foundation
import Testing
@testable import HostConfig

/// `chat_relay:` — relay mode, for the one bot and for each entry of `bots:`.
@Suite struct ChatRelayConfigTests {
    static let bot = "bot:\n  display_name: Relay\n"

    @Test func relayModeIsOffUnlessGivenAndTakesTheBooleanAndTheMappingForms() throws {
        #expect(try load(Self.bot).0.bots[0].chatRelay == nil)
        #expect(try load(Self.bot + "chat_relay: true\n").0.bots[0].chatRelay == HostConfiguration.ChatRelay())
        #expect(try load(Self.bot + "chat_relay: false\n").0.bots[0].chatRelay == nil)
        // A key without a value takes its default, as everywhere in the file: off.
        #expect(try load(Self.bot + "chat_relay:\n").0.bots[0].chatRelay == nil)
        #expect(try load(Self.bot + "chat_relay:\n  print_qr: true\n").0.bots[0].chatRelay == HostConfiguration.ChatRelay(printQR: true))
        #expect(try load(Self.bot + "chat_relay:\n  enabled: false\n").0.bots[0].chatRelay == nil)
        let bots = try load("bots:\n  - name: r\n    display_name: R\n    chat_relay: true\n  - name: o\n    display_name: O\n").0.bots
        #expect(bots.map { $0.chatRelay != nil } == [true, false])
    }

    @Test func mistakesAreReportedAtTheirPlace() throws {
        #expect(try problems(Self.bot + "chat_relay: 5\n") == [#"3:13: chat_relay: expected true, false or a mapping (enabled, print_qr), got "5""#])
        #expect(try problems(Self.bot + "chat_relay:\n  printqr: true\n") == [#"4:3: unknown key "printqr" in chat_relay; did you mean "print_qr"?"#])
        #expect(try problems(Self.bot + "chat_relay:\n  enabled: yes\n").first?.hasPrefix("4:12: chat_relay.enabled: expected a boolean") == true)
        let beside = try problems("bots:\n  - name: a\n    display_name: A\nchat_relay: true\n")
        #expect(beside.contains { $0.hasPrefix("4:1: chat_relay: with bots: given") }, "\(beside)")
    }
}
