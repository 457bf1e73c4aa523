import Foundation
import NIOConcurrencyHelpers
import SwiftplexBase
import Testing
@testable import PluginHost

/// `post_to_channel` (ABI 1.1) as the host makes it of Chat API commands: the group must be a
/// channel the bot owns (`/_get relays`), then one `/_send` as the channel. The live runs are the
/// end-to-end test (an isolated channel plugin) and the channel plugin's tests.
@Suite struct PostToChannelTests {
    /// Services whose `command` answers `/_get relays #5` as the bot's channel and `#6` as a
    /// channel it only subscribes to; everything else is a store error.
    final class Scripted: HostServices {
        let commands = NIOLockedValueBox<[String]>([])
        func command(_ line: String) -> String {
            commands.withLockedValue { $0.append(line) }
            switch line {
            case "/_get relays #5": return #"{"type":"groupRelays","groupInfo":{"groupId":5,"membership":{"memberRole":"owner"}},"groupRelays":[]}"#
            case "/_get relays #6": return #"{"type":"groupRelays","groupInfo":{"groupId":6,"membership":{"memberRole":"observer"}},"groupRelays":[]}"#
            case let l where l.hasPrefix("/_send #5 json "): return #"{"type":"newChatItems","chatItems":[]}"#
            default: return #"{"type":"chatCmdError","chatError":{"type":"errorStore","storeError":{"type":"groupNotFound"}}}"#
            }
        }
        func log(level: Int32, message: String) {}
        func storageGet(_ key: String) -> String? { nil }
        func storageSet(_ key: String, _ value: String?) -> Bool { true }
        func timerStart(name: String, delayMs: UInt64, repeatMs: UInt64) -> UInt64 { 0 }
        func timerCancel(_ id: UInt64) -> Bool { false }
        func setCommands(_ json: String) -> Bool { true }
    }

    func type(_ answer: String) -> String? { try? JSONValue.parse(answer)["type"]?.stringValue }
    func message(_ answer: String) -> String { (try? JSONValue.parse(answer)["chatError"]?["errorType"]?["message"]?.stringValue) ?? "" }

    @Test func aPostToTheBotsChannelIsOneSendAsTheChannel() {
        let s = Scripted()
        let answer = s.postToChannel(5, contentJSON: #"{"type":"text","text":"hi"}"#)
        #expect(type(answer) == "newChatItems", "\(answer)")
        #expect(s.commands.withLockedValue { $0 } == ["/_get relays #5", #"/_send #5 json [{"msgContent":{"type":"text","text":"hi"},"mentions":{}}]"#])
    }

    @Test func otherGroupsAndBadContentAreRefusedWithoutSending() {
        let s = Scripted()
        let notChannel = s.postToChannel(9, contentJSON: #"{"type":"text","text":"hi"}"#)
        #expect(type(notChannel) == "chatCmdError" && message(notChannel).contains("#9 is not a channel of this bot"), "\(notChannel)")
        let notOwner = s.postToChannel(6, contentJSON: #"{"type":"text","text":"hi"}"#)
        #expect(type(notOwner) == "chatCmdError" && message(notOwner).contains("does not own channel #6"), "\(notOwner)")
        let bad = s.postToChannel(5, contentJSON: "hi")
        #expect(type(bad) == "chatCmdError" && message(bad).contains("not a JSON object"), "\(bad)")
        #expect(!s.commands.withLockedValue { $0 }.contains { $0.hasPrefix("/_send") })
    }
}
