import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP forwarder on 127.0.0.1 to another local port that can be frozen: while frozen it passes
/// no byte either way (what it has read is held; TCP backpressure does the rest), so a connection
/// that already completed its handshakes goes silent — a relay that stops answering mid-session.
/// `thaw()` delivers what was held and forwarding goes on.
public final class FreezableProxy: @unchecked Sendable {  // `frozen` and `sockets` are guarded by `condition`
    public let port: Int
    private let listenFD: Int32
    private let upstreamPort: Int
    private let condition = NSCondition()
    private var frozen = false
    private var sockets: [Int32] = []

    public init(to upstreamPort: Int) throws {
        self.upstreamPort = upstreamPort
        let (fd, port) = try Loopback.listen()
        listenFD = fd
        self.port = port
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    public func freeze() {
        condition.lock()
        frozen = true
        condition.unlock()
    }

    public func thaw() {
        condition.lock()
        frozen = false
        condition.broadcast()
        condition.unlock()
    }

    /// Stops listening and closes every forwarded connection.
    public func close() {
        shutdown(listenFD, Int32(SHUT_RDWR))
        Glibc.close(listenFD)
        condition.lock()
        let open = sockets
        sockets.removeAll()
        frozen = false
        condition.broadcast()
        condition.unlock()
        for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listenFD, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return  // closed
            }
            guard let upstream = Loopback.connect(port: upstreamPort) else {
                Glibc.close(client)
                continue
            }
            condition.lock()
            sockets += [client, upstream]
            condition.unlock()
            Thread.detachNewThread { [self] in pump(from: client, to: upstream) }
            Thread.detachNewThread { [self] in pump(from: upstream, to: client) }
        }
    }

    /// Copies `source` to `destination` until either closes, holding each chunk while frozen.
    private func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        defer {
            shutdown(destination, Int32(SHUT_WR))
        }
        while true {
            let n = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return }
            condition.lock()
            while frozen { condition.wait() }
            condition.unlock()
            var sent = 0
            while sent < n {
                let w = buffer.withUnsafeBytes { write(destination, $0.baseAddress! + sent, n - sent) }
                if w < 0, errno == EINTR { continue }
                guard w > 0 else { return }
                sent += w
            }
        }
    }
}
