import Foundation
import SwiftplexBase
import Synchronization

/// The framing between the host and an isolated plugin's child process: each frame is a
/// 4-byte big-endian length, a kind byte and a body. Events and their completions — the hot
/// path — are binary (`event`: 8-byte sequence number + event JSON; `done`: sequence number,
/// ok byte, error text); everything else is a ``Control`` message, a JSON object whose `op` names
/// it. The child's stdin carries host → child frames, its stdout child → host frames; its stderr
/// is the plugin's own output, logged by the host.
enum Frame: Equatable, Sendable {
    case control(Control)
    case event(seq: UInt64, json: String)
    case done(seq: UInt64, error: String?)

    /// The largest frame either side accepts unless configured otherwise (see ``IsolationLimits``).
    static let maxLength = 64 << 20

    var bytes: [UInt8]? {
        var body: [UInt8]
        switch self {
        case let .control(control):
            body = [0]
            guard (try? JSONTextEncoder().encode(control, into: &body)) != nil else { return nil }
        case let .event(seq, json):
            body = [1]
            body.reserveCapacity(json.utf8.count + 9)
            Self.append(seq, to: &body)
            body.append(contentsOf: json.utf8)
        case let .done(seq, error):
            body = [2]
            Self.append(seq, to: &body)
            body.append(error == nil ? 1 : 0)
            if let error { body.append(contentsOf: error.utf8) }
        }
        let n = UInt32(body.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)] + body
    }

    static func append(_ v: UInt64, to out: inout [UInt8]) {
        for i in (0..<8).reversed() { out.append(UInt8(truncatingIfNeeded: v >> (UInt64(i) * 8))) }
    }

    static func parse(_ body: [UInt8]) -> Frame? {
        guard let kind = body.first else { return nil }
        func seq() -> UInt64? {
            guard body.count >= 9 else { return nil }
            return body[1...8].reduce(0) { $0 << 8 | UInt64($1) }
        }
        switch kind {
        case 0:
            return (try? Control(json: Array(body[1...]))).map(Frame.control)
        case 1:
            guard let s = seq() else { return nil }
            return .event(seq: s, json: String(decoding: body[9...], as: UTF8.self))
        case 2:
            guard let s = seq(), body.count >= 10 else { return nil }
            return .done(seq: s, error: body[9] == 1 ? nil : String(decoding: body[10...], as: UTF8.self))
        default:
            return nil
        }
    }
}

/// A control message between the host and an isolated plugin's child. On the wire it is a JSON
/// object: `{"op":"start","config":…}`, `{"op":"call","id":7,"fn":"command","command":…}`, ….
/// A message whose `op` (or a call whose `fn`) this build does not know decodes as `unknown`, so
/// a newer peer is answered or ignored rather than cut off; a known one with fields of the wrong
/// type does not decode at all, and the frame is malformed.
enum Control: Equatable, Sendable {
    // Host → child.
    /// Start the plugin with its `config:` as JSON text.
    case start(config: String)
    /// Stop the plugin and exit.
    case stop
    /// The answer to the child's call `id`.
    case result(id: Int, Answer)

    // Child → host.
    /// The plugin loaded: its descriptor. Always the child's first frame, or `loadFailed`.
    case hello(PluginInfo)
    /// The plugin did not load; `code` is a ``PluginLoadError/Code`` name.
    case loadFailed(code: String, error: String)
    /// The plugin's start succeeded.
    case started
    /// The plugin's start failed.
    case startFailed(error: String)
    /// A host callback the plugin made; answered with `result` of the same id.
    case call(id: Int, Call)
    /// A line the plugin logged.
    case log(level: Int32, message: String)

    /// An `op` this build does not know.
    case unknown(op: String)

    /// A host callback made by the plugin in the child.
    enum Call: Equatable, Sendable {
        /// A Chat API command; `event` is the sequence number of the event the plugin was handling.
        case command(String, event: UInt64?)
        case storageGet(key: String)
        /// Sets `key`, or deletes it when `value` is nil.
        case storageSet(key: String, value: String?)
        /// The plugin's command menu, as JSON text.
        case setCommands(String)
        /// A `fn` this build does not know; answered with an empty result.
        case unknown(fn: String)
    }

    /// What a callback returns: `value` for `command` and `storageGet`, `ok` for `storageSet`
    /// and `setCommands`, neither for an unknown function.
    struct Answer: Equatable, Sendable {
        var value: String?
        var ok: Bool?

        init(value: String? = nil, ok: Bool? = nil) {
            self.value = value
            self.ok = ok
        }
    }

    /// The message's `op`.
    var op: String {
        switch self {
        case .start: "start"
        case .stop: "stop"
        case .result: "result"
        case .hello: "hello"
        case .loadFailed: "loadFailed"
        case .started: "started"
        case .startFailed: "startFailed"
        case .call: "call"
        case .log: "log"
        case let .unknown(op): op
        }
    }

    /// Decodes a control message from its JSON text.
    init(json bytes: [UInt8]) throws {
        self = try JSONValueDecoder().decode(Control.self, from: JSONValue.parse(utf8: bytes))
    }
}

extension Control: Codable {
    private enum Key: String, CodingKey {
        case op, config, id, value, ok, info, code, error, fn, command, event, key, commands, level, message
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        let op = try c.decode(String.self, forKey: .op)
        switch op {
        case "start": self = .start(config: try c.decodeIfPresent(String.self, forKey: .config) ?? "{}")
        case "stop": self = .stop
        case "result":
            self = .result(id: try c.decode(Int.self, forKey: .id),
                           Answer(value: try c.decodeIfPresent(String.self, forKey: .value),
                                  ok: try c.decodeIfPresent(Bool.self, forKey: .ok)))
        case "hello": self = .hello(try c.decode(PluginInfo.self, forKey: .info))
        case "loadFailed":
            self = .loadFailed(code: try c.decodeIfPresent(String.self, forKey: .code) ?? "",
                               error: try c.decodeIfPresent(String.self, forKey: .error) ?? "cannot load")
        case "started": self = .started
        case "startFailed": self = .startFailed(error: try c.decodeIfPresent(String.self, forKey: .error) ?? "start failed")
        case "call":
            let id = try c.decode(Int.self, forKey: .id)
            let call: Call = switch try c.decode(String.self, forKey: .fn) {
            case "command": .command(try c.decode(String.self, forKey: .command),
                                     event: try c.decodeIfPresent(UInt64.self, forKey: .event))
            case "storageGet": .storageGet(key: try c.decode(String.self, forKey: .key))
            case "storageSet": .storageSet(key: try c.decode(String.self, forKey: .key),
                                           value: try c.decodeIfPresent(String.self, forKey: .value))
            case "setCommands": .setCommands(try c.decode(String.self, forKey: .commands))
            case let fn: .unknown(fn: fn)
            }
            self = .call(id: id, call)
        case "log":
            self = .log(level: try c.decodeIfPresent(Int32.self, forKey: .level) ?? 2,
                        message: try c.decodeIfPresent(String.self, forKey: .message) ?? "")
        default: self = .unknown(op: op)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        switch self {
        case let .start(config):
            try c.encode("start", forKey: .op)
            try c.encode(config, forKey: .config)
        case .stop:
            try c.encode("stop", forKey: .op)
        case let .result(id, answer):
            try c.encode("result", forKey: .op)
            try c.encode(id, forKey: .id)
            try c.encodeIfPresent(answer.value, forKey: .value)
            try c.encodeIfPresent(answer.ok, forKey: .ok)
        case let .hello(info):
            try c.encode("hello", forKey: .op)
            try c.encode(info, forKey: .info)
        case let .loadFailed(code, error):
            try c.encode("loadFailed", forKey: .op)
            try c.encode(code, forKey: .code)
            try c.encode(error, forKey: .error)
        case .started:
            try c.encode("started", forKey: .op)
        case let .startFailed(error):
            try c.encode("startFailed", forKey: .op)
            try c.encode(error, forKey: .error)
        case let .call(id, call):
            try c.encode("call", forKey: .op)
            try c.encode(id, forKey: .id)
            switch call {
            case let .command(line, event):
                try c.encode("command", forKey: .fn)
                try c.encode(line, forKey: .command)
                try c.encodeIfPresent(event, forKey: .event)
            case let .storageGet(key):
                try c.encode("storageGet", forKey: .fn)
                try c.encode(key, forKey: .key)
            case let .storageSet(key, value):
                try c.encode("storageSet", forKey: .fn)
                try c.encode(key, forKey: .key)
                try c.encodeIfPresent(value, forKey: .value)
            case let .setCommands(json):
                try c.encode("setCommands", forKey: .fn)
                try c.encode(json, forKey: .commands)
            case let .unknown(fn):
                try c.encode(fn, forKey: .fn)
            }
        case let .log(level, message):
            try c.encode("log", forKey: .op)
            try c.encode(level, forKey: .level)
            try c.encode(message, forKey: .message)
        case let .unknown(op):
            try c.encode(op, forKey: .op)
        }
    }
}

extension PluginInfo: Codable {
    private enum Key: String, CodingKey { case name, version, description, events, configSchema }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        self.init(name: try c.decode(String.self, forKey: .name), version: try c.decode(String.self, forKey: .version),
                  description: try c.decodeIfPresent(String.self, forKey: .description) ?? "",
                  events: try c.decode([String].self, forKey: .events),
                  configSchema: try c.decodeIfPresent(String.self, forKey: .configSchema))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(name, forKey: .name)
        try c.encode(version, forKey: .version)
        try c.encode(description, forKey: .description)
        try c.encode(events, forKey: .events)
        try c.encodeIfPresent(configSchema, forKey: .configSchema)
    }
}

/// Writes frames to a file descriptor; safe from any thread.
final class FrameWriter: Sendable {
    private let fd: Int32
    /// Held for each whole frame; true once a write failed (the other side has gone).
    private let broken = Mutex(false)

    init(fd: Int32) { self.fd = fd }

    /// Writes one control frame; false once the other side has gone.
    @discardableResult
    func send(_ control: Control) -> Bool { send(.control(control)) }

    /// Writes one frame; false once the other side has gone.
    @discardableResult
    func send(_ frame: Frame) -> Bool {
        guard let data = frame.bytes else { return false }
        return broken.withLock { broken in
        guard !broken else { return false }
        let ok = data.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let n = write(fd, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 { if errno == EINTR { continue }; return false }
                offset += n
            }
            return true
        }
        if !ok { broken = true }
        return ok
        }
    }
}

/// Reads frames from a file descriptor, blocking; for a reader thread.
struct FrameReader {
    let fd: Int32
    /// Frames longer than this are refused before their body is read.
    var maxLength = Frame.maxLength

    enum Failure: Error { case closed, malformed(String) }

    func next() throws(Failure) -> Frame {
        var header = [UInt8](repeating: 0, count: 4)
        try readExactly(&header)
        let length = Int(UInt32(header[0]) << 24 | UInt32(header[1]) << 16 | UInt32(header[2]) << 8 | UInt32(header[3]))
        guard length <= maxLength else { throw .malformed("a frame of \(length) bytes (the limit is \(maxLength))") }
        var body = [UInt8](repeating: 0, count: length)
        try readExactly(&body)
        guard let frame = Frame.parse(body) else { throw .malformed("malformed frame") }
        return frame
    }

    private func readExactly(_ buffer: inout [UInt8]) throws(Failure) {
        var offset = 0
        let count = buffer.count
        while offset < count {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + offset, count - offset) }
            if n == 0 { throw .closed }
            if n < 0 {
                if errno == EINTR { continue }
                throw .closed
            }
            offset += n
        }
    }
}

/// The host's side of a child's stdin: frames are queued and written by a thread of this child's
/// own, so a child that stops reading blocks nothing but that thread — never the dispatcher, the
/// other plugins, or a lock someone else needs. The queue is bounded in bytes: past the bound the
/// input is closed and `onOverflow` runs (the runner treats the child as hung); `stalledSince`
/// tells the watchdog how long bytes have waited without any being written.
final class ChildInput: @unchecked Sendable {  // everything mutable is guarded by `condition`
    private let fd: Int32
    private let limit: Int
    private let condition = NSCondition()
    private var queue: [[UInt8]] = []
    private var head = 0
    private var pendingBytes = 0
    private var open = true
    private var lastProgress = ContinuousClock.now
    private var overflowHandler: (@Sendable () -> Void)?

    init(fd: Int32, limit: Int) {
        self.fd = fd
        self.limit = limit
        Thread.detachNewThread { [self] in loop() }
    }

    /// Runs (on another thread) when the queue overflows; set before frames are sent.
    func onOverflow(_ handler: @escaping @Sendable () -> Void) {
        condition.withLock { overflowHandler = handler }
    }

    @discardableResult
    func send(_ control: Control) -> Bool { send(.control(control)) }

    /// Queues one frame without blocking; false once closed, broken or overflowing.
    @discardableResult
    func send(_ frame: Frame) -> Bool {
        guard let bytes = frame.bytes else { return false }
        condition.lock()
        guard open else {
            condition.unlock()
            return false
        }
        if pendingBytes + bytes.count > limit {
            open = false
            queue.removeAll()
            head = 0
            pendingBytes = 0
            let handler = overflowHandler
            condition.broadcast()
            condition.unlock()
            if let handler { DispatchQueue.global().async { handler() } }
            return false
        }
        if pendingBytes == 0 { lastProgress = .now }
        queue.append(bytes)
        pendingBytes += bytes.count
        condition.signal()
        condition.unlock()
        return true
    }

    /// Since when queued bytes have waited with none written; nil when nothing waits.
    var stalledSince: ContinuousClock.Instant? {
        condition.withLock { pendingBytes > 0 ? lastProgress : nil }
    }

    /// Bytes queued and not yet written.
    var pending: Int { condition.withLock { pendingBytes } }

    /// Drops what waits and ends the writer thread (a write under way ends when the child goes).
    func close() {
        condition.withLock {
            open = false
            queue.removeAll()
            head = 0
            pendingBytes = 0
            condition.broadcast()
        }
    }

    private func loop() {
        while true {
            condition.lock()
            while head == queue.count && open { condition.wait() }
            guard open, head < queue.count else {
                condition.unlock()
                return
            }
            let bytes = queue[head]
            queue[head] = []
            head += 1
            if head > 64 && head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
            condition.unlock()
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
                if n < 0 {
                    if errno == EINTR { continue }
                    close()
                    return
                }
                offset += n
                condition.withLock {
                    pendingBytes = max(0, pendingBytes - n)
                    lastProgress = .now
                }
            }
        }
    }
}
