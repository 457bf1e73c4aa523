import ChatCore
import Hummingbird
import NIOCore
import SwiftplexBase

/// JSON bodies for the HTTP side of the WebSocket and admin APIs.
public enum JSONResponse {
    public static func make(_ value: JSONValue, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var h = headers
        h[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: h, body: .init(byteBuffer: ByteBuffer(string: value.description + "\n")))
    }

    /// `{"error": {"type": …, "message": …}}`.
    public static func error(_ status: HTTPResponse.Status, type: String, _ message: String, headers: HTTPFields = [:]) -> Response {
        make(errorValue(type: type, message), status: status, headers: headers)
    }

    public static func errorValue(type: String, _ message: String) -> JSONValue {
        .object([("error", .object([("type", .string(type)), ("message", .string(message))]))])
    }

    public static func unauthorized() -> Response {
        var h = HTTPFields()
        h[.wwwAuthenticate] = "Bearer"
        return error(.unauthorized, type: "unauthorized", "a valid bearer token is required (Authorization: Bearer <token>, or ?token=<token>)", headers: h)
    }
}
