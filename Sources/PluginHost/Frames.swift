import Foundation

/// The framing between the host and an isolated plugin's child process: each frame is a
/// 4-byte big-endian length, a kind byte and a body. Events and their completions — the hot
/// path — are binary (`event`: 8-byte sequence number + event JSON; `done`: sequence number,
/// ok byte, error text); everything else is a JSON object (`control`). The child's stdin carries
/// host → child frames, its stdout child → host frames; its stderr is the plugin's own output,
/// logged by the host.
///
/// Control, host → child: `start {config}`, `stop`, `result {id, value}`.
/// Control, child → host: `hello {info}` or `loadFailed {error}`, `started` or
/// `startFailed {error}`, `call {id, fn, …}` (command, storageGet, storageSet, setCommands),
/// `log {level, message}`.
enum Frame {
    case control([String: Any])
    case event(seq: UInt64, json: String)
    case done(seq: UInt64, error: String?)

    /// The largest frame either side accepts unless configured otherwise (see ``IsolationLimits``).
    static let maxLength = 64 << 20

    var bytes: [UInt8]? {
        var body: [UInt8]
        switch self {
        case let .control(object):
            guard let data = try? JSONSerialization.data(withJSONObject: object) else { return nil }
            body = [0] + [UInt8](data)
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
            guard let o = try? JSONSerialization.jsonObject(with: Data(body[1...])) as? [String: Any] else { return nil }
            return .control(o)
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

/// Writes frames to a file descriptor; safe from any thread.
final class FrameWriter: @unchecked Sendable {
    private let fd: Int32
    private let lock = NSLock()
    private var broken = false

    init(fd: Int32) { self.fd = fd }

    /// Writes one control frame; false once the other side has gone.
    @discardableResult
    func send(_ object: [String: Any]) -> Bool { send(.control(object)) }

    /// Writes one frame; false once the other side has gone.
    @discardableResult
    func send(_ frame: Frame) -> Bool {
        guard let data = frame.bytes else { return false }
        lock.lock()
        defer { lock.unlock() }
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
    func send(_ object: [String: Any]) -> Bool { send(.control(object)) }

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
