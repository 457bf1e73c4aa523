import Foundation
import TestSupport
import Testing
import ChatModel

/// Fails when the engine's sources write a `type` this model has no case for: every response,
/// event, error code, chat kind and item status spelled in `Sources/Engine/ChatCore` and `Sources/Edges/ChatAPI`.
@Suite struct EngineCoverageTests {
    static let root = Repository.root

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

    /// The engine builds model values (a `ChatResponse`, a `ChatEvent`, a `ChatError`), so every
    /// type it writes has a case by construction; what is left to check is that no string-typed
    /// path came back: no JSON objects built with a `type` spelled as a string, no hand-made
    /// responses or errors.
    @Test func theEngineWritesOnlyModelValues() throws {
        let engine = try Self.sources("Engine/ChatCore") + Self.sources("Edges/ChatAPI")
        #expect(engine.contains("ChatResponse") && engine.contains("ChatEvent"), "the engine's sources were not read")
        let built = try Self.matches(#"\("type", \.string\("(\w+)"\)\)"#, in: engine)
        #expect(built.isEmpty, "JSON objects built by hand: \(built.sorted())")
        #expect(try Self.matches(#"response\("(\w+)""#, in: engine).isEmpty, "responses built from strings")
        #expect(try Self.matches(#"(?:chatError|storeError)\("(\w+)""#, in: engine).isEmpty, "errors built from strings")
        #expect(!engine.contains("ChatJSON"))
    }

    /// The `type` tags come from one table (`ChatMessageType`): each is a response's or an
    /// event's (or both), and each case's `tag` is the one its JSON carries.
    @Test func tagsComeFromOneTable() throws {
        #expect(Set(ChatResponse.types).union(ChatEvent.types).union(ChatResponse.groupTypes).union(ChatEvent.groupTypes).union(ChatResponse.channelTypes).union(ChatEvent.channelTypes) == Set(ChatMessageType.allCases))
        #expect(Set(ChatResponse.allTags).count == ChatResponse.allTags.count)
        #expect(Set(ChatEvent.allTags).count == ChatEvent.allTags.count)
        let shared = Set(ChatResponse.types).intersection(ChatEvent.types)
        #expect(shared == [.acceptingContactRequest, .newChatItems, .chatItemUpdated, .chatItemsDeleted, .chatItemReaction])
        let event = ChatEvent.hostConnected(protocol: "smp", transportHost: "h")
        #expect(event.tag == "hostConnected" && ChatEvent.allTags.contains(event.tag))
        #expect(ChatResponse.chatStarted.tag == "chatStarted" && ChatResponse.allTags.contains("chatStarted"))
    }

    @Test func everyAgentErrorCodeHasACase() throws {
        let envelope = try String(contentsOf: Self.root.appendingPathComponent("Sources/Engine/Agent/Envelope.swift"), encoding: .utf8)
        let start = try #require(envelope.range(of: "public enum Code: String, Sendable {", range: envelope.range(of: "public struct AgentError")!.lowerBound..<envelope.endIndex))
        let body = envelope[start.upperBound...].prefix { $0 != "}" }
        let codes = try Self.matches(#"(?:case |, )(\w+)"#, in: body.split(separator: "\n").filter { !$0.contains("///") }.joined(separator: "\n"))
        #expect(codes.count >= 10, "the agent's error codes were not found")
        let known = Set(AgentErrorType.Code.allCases.map(\.rawValue))
        #expect(codes == known, "agent codes without a case: \(codes.subtracting(known).sorted()); cases without a code: \(known.subtracting(codes).sorted())")
    }
}
