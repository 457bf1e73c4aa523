import Foundation

/// The framing between the host and an isolated plugin's child process: each message is a
/// 4-byte big-endian length and a JSON object. The child's stdin carries host → child frames,
/// its stdout child → host frames; its stderr is the plugin's own output, logged by the host.
///
/// Host → child: `start {config}`, `event {seq, event}`, `stop`, `result {id, value}`.
/// Child → host: `hello {info}` or `loadFailed {error}`, `started` or `startFailed {error}`,
/// `done {seq, error?}`, `call {id, fn, …}` (command, storageGet, storageSet, setCommands),
/// `log {level, message}`.
enum Frames {
    /// Largest frame accepted; an event or response beyond this is refused, not buffered.
    static let maxFrame = 64 << 20

    static func encode(_ object: [String: Any]) -> Data? {
        guard let body = try? JSONSerialization.data(withJSONObject: object) else { return nil }
        var out = Data(capacity: body.count + 4)
        let n = UInt32(body.count).bigEndian
        withUnsafeBytes(of: n) { out.append(contentsOf: $0) }
        out.append(body)
        return out
    }
}

/// Writes frames to a file descriptor; safe from any thread.
final class FrameWriter: @unchecked Sendable {
    private let fd: Int32
    private let lock = NSLock()
    private var broken = false

    init(fd: Int32) { self.fd = fd }

    /// Writes one frame; false once the other side has gone.
    @discardableResult
    func send(_ object: [String: Any]) -> Bool {
        guard let data = Frames.encode(object) else { return false }
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

    enum Failure: Error { case closed, malformed(String) }

    func next() throws(Failure) -> [String: Any] {
        var header = [UInt8](repeating: 0, count: 4)
        try readExactly(&header)
        let length = Int(UInt32(header[0]) << 24 | UInt32(header[1]) << 16 | UInt32(header[2]) << 8 | UInt32(header[3]))
        guard length <= Frames.maxFrame else { throw .malformed("frame of \(length) bytes exceeds the limit") }
        var body = [UInt8](repeating: 0, count: length)
        try readExactly(&body)
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw .malformed("frame is not a JSON object")
        }
        return object
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
