import Foundation
@testable import PluginHost

/// What an isolated plugin's child writes to the host: the byte stream (4-byte length, kind,
/// body) read by the host's `FrameReader` from a pipe, and each body by `Frame.parse`.
enum PluginFramesTarget: FuzzTarget {
    static let name = "plugin-frames"
    static let summary = "PluginHost FrameReader (length-prefixed frames from a child's stdout, over a real pipe) and Frame.parse"

    static func fuzz(_ data: [UInt8]) {
        if let frame = Frame.parse(data) { checkRoundTrip(frame) }
        // The same bytes as a stream from the child. The reader allocates a frame's declared
        // length before reading it; a stream whose frame is cut short but declares more than
        // 1 MiB (up to the 64 MiB limit) only tests that allocation, at ~100 inputs a second
        // under ASan, so such streams are left out.
        guard !truncatedFrameIsLarge(data) else { return }
        var fds: [Int32] = [0, 0]
        fuzzCheck(pipe(&fds) == 0, "pipe: errno \(errno)")
        // The whole input fits in the pipe's buffer (libFuzzer's inputs are a few KiB), so one
        // thread can write it all, close, then read.
        let written = data.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
        fuzzCheck(written == data.count, "short write to the pipe")
        close(fds[1])
        let reader = FrameReader(fd: fds[0])
        while let frame = try? reader.next() { checkRoundTrip(frame) }
        close(fds[0])
    }

    static func truncatedFrameIsLarge(_ data: [UInt8]) -> Bool {
        var offset = 0
        while offset + 4 <= data.count {
            let length = Int(data[offset]) << 24 | Int(data[offset + 1]) << 16 | Int(data[offset + 2]) << 8 | Int(data[offset + 3])
            if length > Frame.maxLength { return false } // refused before any allocation
            if length > data.count - offset - 4 { return length > 1 << 20 }
            offset += 4 + length
        }
        return false
    }

    /// A frame that parsed encodes to bytes that parse to the same frame.
    static func checkRoundTrip(_ frame: Frame) {
        guard let bytes = frame.bytes else { return }
        let again = Frame.parse(Array(bytes.dropFirst(4)))
        switch (frame, again) {
        case let (.event(s1, j1), .event(s2, j2)?):
            fuzzCheck(s1 == s2 && j1 == j2, "event frame does not round-trip")
        case let (.done(s1, e1), .done(s2, e2)?):
            fuzzCheck(s1 == s2 && e1 == e2, "done frame does not round-trip")
        case let (.control(c1), .control(c2)?):
            fuzzCheck(c1 == c2, "control frame does not round-trip")
        default:
            fuzzCheck(false, "frame re-encodes as a different kind")
        }
    }

    static func seeds() throws -> [[UInt8]] {
        let frames: [Frame] = [
            .control(.hello(PluginInfo(name: "echo", version: "1.0", description: "", events: ["*"], configSchema: #"{"type":"object"}"#))),
            .control(.loadFailed(code: "abiMismatch", error: "wrong ABI version")),
            .control(.start(config: #"{"welcome":"hi"}"#)),
            .control(.started),
            .control(.startFailed(error: "bad config")),
            .control(.call(id: 7, .command(#"/_send @3 json [{"msgContent":{"type":"text","text":"hi"}}]"#, event: 4))),
            .control(.call(id: 8, .storageSet(key: "k", value: "v"))),
            .control(.call(id: 9, .storageGet(key: "k"))),
            .control(.call(id: 10, .setCommands(#"[{"keyword":"help","label":"Help"}]"#))),
            .control(.call(id: 11, .unknown(fn: "newerFunction"))),
            .control(.log(level: 3, message: "a log line")),
            .control(.result(id: 7, .init(value: #"{"type":"ok"}"#))),
            .control(.result(id: 8, .init(ok: true))),
            .control(.stop),
            .control(.unknown(op: "newerOp")),
            .event(seq: 1, json: #"{"type":"contactConnected","contact":{"contactId":3}}"#),
            .done(seq: 1, error: nil),
            .done(seq: 2, error: "handler failed"),
        ]
        var out = frames.compactMap { $0.bytes.map { Array($0.dropFirst(4)) } }
        // Streams: several frames back to back, and one cut short.
        let stream = frames.compactMap(\.bytes).joined()
        out.append(Array(stream))
        out.append(Array(stream.prefix(stream.count - 3)))
        return out
    }
}
