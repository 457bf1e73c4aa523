import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP listener on 127.0.0.1 that accepts connections and never answers — no TLS, no relay
/// hello: a relay that "never answers". Accepted sockets stay open until `close()`. Each accept
/// is recorded, so a test awaits the connection it expects instead of polling a counter.
/// With `hangUp`, each accepted socket is closed at once instead: a relay that drops every
/// connection before any handshake, which fails a dial at once, without any timeout running.
public final class SilentListener: Sendable {
    public let port: Int
    private let listenFD: Int32
    private let accepted = AsyncLog<Int32>()

    public init(hangUp: Bool = false) throws {
        let (fd, port) = try Loopback.listen()
        self.port = port
        listenFD = fd
        let accepted = self.accepted
        Thread.detachNewThread {
            while true {
                let client = accept(fd, nil, nil)
                if client >= 0 {
                    if hangUp { Glibc.close(client) }
                    accepted.append(hangUp ? -1 : client)
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
        for fd in accepted.all where fd >= 0 { Glibc.close(fd) }
    }
}
