import Foundation
import SwiftplexBase
import Testing
@testable import PluginHost

/// `send_message` (ABI 1.2) as the host makes it: a checked chat ref and content become one
/// `/_send` through `command` (so an isolated child's goes to the host the same way, with the
/// same idempotency keys); anything malformed is refused without sending.
@Suite struct SendMessageTests {
    typealias Scripted = PostToChannelTests.Scripted

    func type(_ answer: String) -> String? { try? JSONValue.parse(answer)["type"]?.stringValue }
    func message(_ answer: String) -> String { (try? JSONValue.parse(answer)["chatError"]?["errorType"]?["message"]?.stringValue) ?? "" }

    @Test func aMessageIsOneSendToTheChat() {
        let s = Scripted()
        #expect(type(s.sendMessage(chatRef: "#5", contentJSON: #"{"type":"text","text":"hi \"there\""}"#, quotedItemId: 0)) == "newChatItems")
        _ = s.sendMessage(chatRef: "@12", contentJSON: #"{"type":"link","text":"x","preview":{}}"#, quotedItemId: 77)
        #expect(s.commands.withLockedValue { $0 } == [
            #"/_send #5 json [{"msgContent":{"type":"text","text":"hi \"there\""},"mentions":{}}]"#,
            #"/_send @12 json [{"msgContent":{"type":"link","text":"x","preview":{}},"mentions":{},"quotedItemId":77}]"#,
        ])
    }

    @Test(arguments: ["", "5", "@", "#x", "@-1", "@0", "@+5", "*3", "@5 /_stop", "#5\n/_stop", "@１２"])
    func aMalformedChatRefIsRefusedWithoutSending(_ ref: String) {
        let s = Scripted()
        let answer = s.sendMessage(chatRef: ref, contentJSON: #"{"type":"text","text":"hi"}"#, quotedItemId: 0)
        #expect(type(answer) == "chatCmdError" && message(answer).contains("not @<contactId> or #<groupId>"), "\(answer)")
        #expect(s.commands.withLockedValue { $0 }.isEmpty)
    }

    @Test func malformedContentOrQuoteIsRefusedWithoutSending() {
        let s = Scripted()
        for content in ["hi", "[1]", #""text""#, "{", ""] {
            let answer = s.sendMessage(chatRef: "#5", contentJSON: content, quotedItemId: 0)
            #expect(type(answer) == "chatCmdError" && message(answer).contains("not a JSON object"), "\(content): \(answer)")
        }
        let negative = s.sendMessage(chatRef: "#5", contentJSON: #"{"type":"text","text":"hi"}"#, quotedItemId: -3)
        #expect(type(negative) == "chatCmdError" && message(negative).contains("negative"), "\(negative)")
        #expect(s.commands.withLockedValue { $0 }.isEmpty)
    }
}
