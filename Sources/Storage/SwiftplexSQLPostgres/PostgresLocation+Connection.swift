import NIOSSL
import PostgresNIO
import SwiftplexSQL

extension PostgresLocation {
    /// postgres-nio's configuration (TLS from `sslmode`; the server's certificate is checked
    /// against the system's trust store).
    public func connectionConfiguration() throws -> PostgresConnection.Configuration {
        if host.hasPrefix("/") {
            return PostgresConnection.Configuration(unixSocketPath: host + "/.s.PGSQL.\(port)", username: user, password: password, database: database)
        }
        let tls: PostgresConnection.Configuration.TLS
        switch sslMode {
        case "prefer": tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        case "require": tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        default: tls = .disable
        }
        return PostgresConnection.Configuration(host: host, port: port, username: user, password: password, database: database, tls: tls)
    }
}
