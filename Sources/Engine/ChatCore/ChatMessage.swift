import Foundation
import SwiftplexBase
import SwiftplexCrypto

/// One message of the chat protocol, carried as an agent message body:
/// `{"v":"1","msgId":"<base64url>","event":"x.msg.new","params":{…}}`.
///
/// `params` is kept as JSON so that fields this engine does not interpret travel unchanged;
/// ``ChatEvent`` gives the typed view of the events it acts on.
public struct ChatMessage: Sendable, Equatable {
    public static let protocolVersion = "1"

    public var msgId: String?
    public var event: String
    public var params: JSONValue

    public init(msgId: String? = ChatMessage.newMessageId(), event: String, params: JSONValue) {
        self.msgId = msgId
        self.event = event
        self.params = params
    }

    public static func newMessageId() -> String { Base64URL.encode(Sodium.randomBytes(12)) }

    public var json: JSONValue {
        var pairs: [(String, JSONValue)] = [("v", .string(Self.protocolVersion))]
        if let msgId { pairs.append(("msgId", .string(msgId))) }
        pairs.append(("event", .string(event)))
        pairs.append(("params", params))
        return .object(pairs)
    }

    public var encoded: [UInt8] { JSONWriter.bytes(json) }

    public init(decoding bytes: [UInt8]) throws {
        let value: JSONValue
        do {
            value = try JSONValue.parse(String(decoding: bytes, as: UTF8.self))
        } catch {
            throw ChatProtocolError(.malformed, "chat message is not JSON: \(error)")
        }
        guard let event = value["event"]?.stringValue, event.hasPrefix("x.") else {
            throw ChatProtocolError(.malformed, "chat message has no x.* event")
        }
        guard let params = value["params"], case .object = params else {
            throw ChatProtocolError(.malformed, "chat message params must be an object")
        }
        self.init(msgId: value["msgId"]?.stringValue, event: event, params: params)
    }
}

/// Why a chat message was not understood.
public struct ChatProtocolError: CodedError {
    public enum Code: String, Sendable { case malformed, unsupported }
    public let code: Code
    public let message: String
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}
