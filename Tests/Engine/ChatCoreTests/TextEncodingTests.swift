import ChatModel
import SwiftplexBase
import Testing
@testable import ChatAPI
@testable import ChatCore

/// The API edge writes responses and events straight to text (`ChatAPI.text`, libsimplex's
/// envelopes): for every response and event shape the core produces, those bytes are exactly the
/// tree encoder's JSON written out (`ChatAPI.encode(…).description`).
@Suite struct TextEncodingTests {
    @Test func everyResponseIsWrittenAsTheTreeWritesIt() {
        for response in ResponseShapeTests.responses {
            let direct = String(decoding: ChatAPI.text(response), as: UTF8.self)
            #expect(direct == ChatAPI.encode(response).description, "\(response.tag)")
        }
    }

    @Test func everyEventIsWrittenAsTheTreeWritesIt() {
        for event in ResponseShapeTests.events {
            let direct = String(decoding: ChatAPI.text(event), as: UTF8.self)
            #expect(direct == ChatAPI.encode(event).description, "\(event.tag)")
        }
    }

    @Test func errorsAndEnvelopesAreWrittenAsTheTreeWritesThem() {
        let errors: [ChatError] = [
            .error(.noActiveUser), .error(.commandError(message: "bad \"line\"\n")), .store(.contactNotFound(contactId: 7)),
            ChatError(.errorAgent(AgentErrorType(code: .store, message: "x"), agentConnId: "3")),
        ]
        for error in errors {
            var out: [UInt8] = []
            ChatAPI.write(error, into: &out)
            #expect(String(decoding: out, as: UTF8.self) == ChatAPI.encode(error).description)
        }
        // Appending after what is there (an envelope's opening).
        var out = Array(#"{"result":"#.utf8)
        ChatAPI.write(ChatResponse.chatStarted, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == #"{"result":{"type":"chatStarted"}"#)
    }
}
