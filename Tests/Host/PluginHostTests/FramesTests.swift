import Testing
@testable import PluginHost

/// The wire form of the frames between the host and an isolated plugin's child.
@Suite struct FramesTests {
    static func body(_ frame: Frame) throws -> [UInt8] { Array(try #require(frame.bytes).dropFirst(4)) }

    static func control(_ json: String) -> Frame? { Frame.parse([0] + Array(json.utf8)) }

    @Test func everyControlMessageRoundTrips() throws {
        let all: [Control] = [
            .start(config: #"{"welcome":"hi"}"#), .stop, .result(id: 3, .init(value: "v")), .result(id: 4, .init(ok: false)),
            .result(id: 5, .init()),
            .hello(PluginInfo(name: "echo", version: "1.0", description: "d", events: ["newChatItems"], configSchema: nil)),
            .loadFailed(code: "abiMismatch", error: "built for ABI 0"), .started, .startFailed(error: "bad config"),
            .call(id: 1, .command("/_send @1 text hi", event: 9)), .call(id: 2, .command("/users", event: nil)),
            .call(id: 3, .storageGet(key: "k")), .call(id: 4, .storageSet(key: "k", value: nil)),
            .call(id: 5, .storageSet(key: "k", value: "é\n\"")), .call(id: 6, .setCommands("[]")),
            .call(id: 7, .unknown(fn: "later")), .log(level: -1, message: ""), .unknown(op: "later"),
        ]
        for control in all {
            #expect(Frame.parse(try Self.body(.control(control))) == .control(control), "\(control)")
        }
    }

    /// The JSON objects on the wire, as the other side of the pipe writes them.
    @Test func theWireFormIsAJSONObjectNamedByOp() throws {
        #expect(Self.control(#"{"op":"call","id":7,"fn":"command","command":"/users","event":4}"#)
                == .control(.call(id: 7, .command("/users", event: 4))))
        #expect(Self.control(#"{"op":"hello","info":{"name":"n","version":"1","events":["*"]}}"#)
                == .control(.hello(PluginInfo(name: "n", version: "1", description: "", events: ["*"], configSchema: nil))))
        #expect(Self.control(#"{"op":"log","message":"m"}"#) == .control(.log(level: 2, message: "m")), "level defaults to info")
        #expect(Self.control(#"{"op":"start"}"#) == .control(.start(config: "{}")))
        let text = String(decoding: try Self.body(.control(.result(id: 7, .init(ok: true)))).dropFirst(), as: UTF8.self)
        #expect(text == #"{"op":"result","id":7,"ok":true}"#)
    }

    /// A newer peer's message or callback is kept as unknown (answered or ignored); a known one
    /// with a field of the wrong type, or that is not an object at all, is malformed.
    @Test func unknownIsKeptAndWrongTypesAreMalformed() {
        #expect(Self.control(#"{"op":"ping","x":1}"#) == .control(.unknown(op: "ping")))
        #expect(Self.control(#"{"op":"call","id":1,"fn":"later","x":[]}"#) == .control(.call(id: 1, .unknown(fn: "later"))))
        for bad in [#"{"op":"log","level":2.5}"#, #"{"op":"log","level":4294967296}"#, #"{"op":"call","id":"1","fn":"command","command":"/x"}"#,
                    #"{"op":"call","id":1,"fn":"command"}"#, #"{"op":"hello","info":"echo"}"#, #"{"id":1}"#, "[]", "{", ""] {
            #expect(Self.control(bad) == nil, "\(bad)")
        }
    }

    @Test func binaryFramesKeepTheirBytes() throws {
        for frame: Frame in [.event(seq: .max, json: #"{"type":"x"}"#), .done(seq: 1, error: nil), .done(seq: 2, error: "")] {
            #expect(Frame.parse(try Self.body(frame)) == frame)
        }
    }
}
