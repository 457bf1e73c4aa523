import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP listener on 127.0.0.1 that accepts connections and never answers — no TLS, no relay
/// hello: a relay that "never answers". Accepted sockets stay open until `close()`. Each accept
/// is recorded, so a test awaits the connection it expects instead of polling a counter.
public final class SilentListener: Sendable {
    public let port: Int
    private let listenFD: Int32
    private let accepted = AsyncLog<Int32>()

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw WaitTimeout("silent listener: socket() failed: \(String(cString: strerror(errno)))") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let message = String(cString: strerror(errno))
            Glibc.close(fd)
            throw WaitTimeout("silent listener: bind/listen failed: \(message)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: addr.sin_port))
        listenFD = fd
        let accepted = self.accepted
        Thread.detachNewThread {
            while true {
                let client = accept(fd, nil, nil)
                if client >= 0 {
                    accepted.append(client)
                } else if errno != EINTR {
                    return  // closed
                }
            }
        }
    }

    /// Connections accepted so far.
    public var connections: Int { accepted.count }

    /// Waits until at least `count` connections have been accepted.
    public func waitForConnections(_ count: Int = 1, timeout: Duration = .seconds(15)) async throws {
        try await accepted.waitUntil("\(count) connection(s) to the silent listener", timeout: timeout) { $0.count >= count }
    }

    /// Stops listening and closes every accepted connection.
    public func close() {
        shutdown(listenFD, Int32(SHUT_RDWR))
        Glibc.close(listenFD)
        for fd in accepted.all { Glibc.close(fd) }
    }
}
