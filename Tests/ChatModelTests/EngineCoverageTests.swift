import Foundation
import Testing
import ChatModel

/// Fails when the engine's sources write a `type` this model has no case for: every response,
/// event, error code, chat kind and item status spelled in `Sources/ChatCore` and `Sources/ChatAPI`.
@Suite struct EngineCoverageTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func sources(_ module: String) throws -> String {
        let dir = root.appendingPathComponent("Sources/\(module)")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".swift") }.sorted()
        #expect(!files.isEmpty, "no sources in \(dir.path)")
        return try files.map { try String(contentsOf: dir.appendingPathComponent($0), encoding: .utf8) }.joined(separator: "\n")
    }

    static func matches(_ pattern: String, in text: String) throws -> Set<String> {
        let regex = try NSRegularExpression(pattern: pattern)
        return Set(regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { String(text[Range($0.range(at: 1), in: text)!]) })
    }

    @Test func everyTypeTheEngineWritesHasACase() throws {
        let engine = try Self.sources("ChatCore") + Self.sources("ChatAPI")

        let responses = try Self.matches(#"response\("(\w+)""#, in: engine)
        #expect(responses.count >= 25, "the pattern no longer finds the engine's responses")
        let messages = Set(ChatResponse.allTags + ChatEvent.allTags)
        #expect(responses.subtracting(messages).isEmpty, "responses/events without a case: \(responses.subtracting(messages).sorted())")

        // Objects whose `type` is spelled directly (`("type", .string("chatStarted"))`): any tagged type of the model.
        let tagged = try Self.matches(#"\("type", \.string\("(\w+)"\)\)"#, in: engine)
        #expect(tagged.contains("chatStarted"), "the pattern no longer finds tagged objects")
        let known = messages.union(ChatError.allTags).union(ChatInfo.allTags).union(ConnectionPlan.allTags).union(["emoji"])
        #expect(tagged.subtracting(known).isEmpty, "tagged objects without a case: \(tagged.subtracting(known).sorted())")

        let chatErrors = try Self.matches(#"chatError\("(\w+)""#, in: engine)
        #expect(chatErrors.subtracting(ChatErrorType.allTags).isEmpty, "chat errors without a case: \(chatErrors.subtracting(ChatErrorType.allTags).sorted())")
        let storeErrors = try Self.matches(#"storeError\("(\w+)""#, in: engine)
        #expect(storeErrors.subtracting(StoreError.allTags).isEmpty, "store errors without a case: \(storeErrors.subtracting(StoreError.allTags).sorted())")
        #expect(chatErrors.contains("commandError") && storeErrors.contains("contactNotFound"))

        // Item statuses and contents (`"sndSent"`, `'rcvNew'`, `"sndMsgContent"`), not keys (`("sndProgress", …)`).
        let items = try Self.matches(#"(?<!\()["']((?:snd|rcv)[A-Z]\w*)["']"#, in: engine)
        let itemTags = Set(CIStatus.allTags + CIContent.allTags)
        #expect(items.contains("sndRcvd") && items.contains("rcvMsgContent"))
        #expect(items.subtracting(itemTags).isEmpty, "item statuses/contents without a case: \(items.subtracting(itemTags).sorted())")
    }

    @Test func everyAgentErrorCodeHasACase() throws {
        let envelope = try String(contentsOf: Self.root.appendingPathComponent("Sources/Agent/Envelope.swift"), encoding: .utf8)
        let start = try #require(envelope.range(of: "public enum Code: String, Sendable {", range: envelope.range(of: "public struct AgentError")!.lowerBound..<envelope.endIndex))
        let body = envelope[start.upperBound...].prefix { $0 != "}" }
        let codes = try Self.matches(#"(?:case |, )(\w+)"#, in: body.split(separator: "\n").filter { !$0.contains("///") }.joined(separator: "\n"))
        #expect(codes.count >= 10, "the agent's error codes were not found")
        let known = Set(AgentErrorType.Code.allCases.map(\.rawValue))
        #expect(codes == known, "agent codes without a case: \(codes.subtracting(known).sorted()); cases without a code: \(known.subtracting(codes).sorted())")
    }
}
