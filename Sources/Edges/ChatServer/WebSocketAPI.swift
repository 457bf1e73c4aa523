import ChatAPI
import ChatCore
import SwiftplexBase

/// SimpleX's WebSocket API frames (what `simplex-chat -p PORT` speaks), as pure functions.
///
/// - A client sends `{"corrId": "1", "cmd": "/_send @2 json [...]"}` and gets
///   `{"corrId": "1", "resp": {…the Chat API's response…}}`; a failed command's `resp` is a
///   `chatCmdError` response, as from the Chat API.
/// - Events arrive as `{"resp": {…event…}}`, with no `corrId` (SimpleX's own clients treat a
///   frame whose `corrId` is missing or empty as an event).
/// - A frame that is not such an object is answered with a `chatCmdError` (`commandError`)
///   naming what is wrong, carrying the frame's `corrId` when it had one; the connection keeps
///   serving.
public enum WebSocketAPI {
    /// A parsed client frame, or what is wrong with it.
    public enum Request: Sendable, Equatable {
        case command(corrId: String, cmd: String)
        case invalid(corrId: String?, reason: String)
    }

    public static func parse(_ text: String) -> Request {
        let value: JSONValue
        do { value = try JSONValue.parse(text) } catch {
            return .invalid(corrId: nil, reason: "invalid frame: not JSON (\(error)); send {\"corrId\": \"1\", \"cmd\": \"/command\"}")
        }
        guard case .object = value else {
            return .invalid(corrId: nil, reason: "invalid frame: expected a JSON object {\"corrId\": …, \"cmd\": …}")
        }
        // SimpleX's clients send corrId as a string; a number is taken as its decimal text.
        let corrId: String? = switch value["corrId"] {
        case let .string(s)?: s
        case let .int(n)?: String(n)
        default: nil
        }
        guard let corrId, !corrId.isEmpty else {
            return .invalid(corrId: nil, reason: "invalid frame: \"corrId\" must be a non-empty string")
        }
        guard case let .string(cmd)? = value["cmd"] else {
            return .invalid(corrId: corrId, reason: "invalid frame: \"cmd\" must be a string holding a chat command")
        }
        return .command(corrId: corrId, cmd: cmd)
    }

    /// The answer to one frame (runs the command when the frame holds one).
    public static func respond(to text: String, api: any ChatCommandRunner) async -> String {
        switch parse(text) {
        case let .command(corrId, cmd):
            return response(corrId: corrId, resp: await api.execute(cmd))
        case let .invalid(corrId, reason):
            return response(corrId: corrId, resp: commandError(reason))
        }
    }

    public static func response(corrId: String?, resp: JSONValue) -> String {
        var pairs: [(String, JSONValue)] = []
        if let corrId { pairs.append(("corrId", .string(corrId))) }
        pairs.append(("resp", resp))
        return JSONValue.object(pairs).description
    }

    public static func event(_ event: JSONValue) -> String { response(corrId: nil, resp: event) }

    /// An event frame around an event's JSON text (``EncodedChatEvent/json``): the same text as
    /// ``event(_:)`` of its JSON object, without building the object.
    public static func event(json: String) -> String { #"{"resp":"# + json + "}" }

    /// A `chatCmdError` response with a `commandError`, as the Chat API gives for a bad command.
    public static func commandError(_ message: String) -> JSONValue {
        .object([("type", .string("chatCmdError")), ("chatError", ChatFailure(commandError: message).chatError)])
    }
}

/// A chat event the WebSocket API can write as its frame (`{"resp": …event…}`): the Chat API's
/// JSON object (`swiftplex-chat`'s hub), or an ``EncodedChatEvent`` (the bot host's hub), whose
/// text was written once for every reader.
public protocol WebSocketAPIEvent: Sendable {
    var webSocketFrame: String { get }
}

extension JSONValue: WebSocketAPIEvent {
    public var webSocketFrame: String { WebSocketAPI.event(self) }
}

extension EncodedChatEvent: WebSocketAPIEvent {
    public var webSocketFrame: String { WebSocketAPI.event(json: json) }
}
