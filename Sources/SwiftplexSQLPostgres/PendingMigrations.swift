import Logging
import NIOPosix
import PostgresNIO
import SwiftplexSQL

extension PostgresStore {
    /// The identifiers of `migrations` not yet applied in `location`'s schema (all of them when the
    /// schema or its record of migrations does not exist). Reads only: takes no lock, creates nothing.
    public static func pendingMigrations(_ migrations: [SQLMigration], at location: PostgresLocation) throws -> [String] {
        let logger = Logger(label: "swiftplex.sql.postgres")
        let connection: PostgresConnection
        do {
            connection = try PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.next(),
                                                        configuration: try location.connectionConfiguration(), id: 0, logger: logger).wait()
        } catch let e as SQLError {
            throw e
        } catch {
            throw SQLError(.connection, "cannot connect to \(location): \(String(reflecting: error).prefix(200))")
        }
        defer { try? connection.close().wait() }
        do {
            let schema = location.schema
            let recorded = try connection.query("""
                SELECT 1 FROM information_schema.tables WHERE table_schema = \(schema) AND table_name = 'swiftplex_migrations'
                """, logger: logger).wait()
            guard recorded.rows.first != nil else { return migrations.map(\.identifier) }
            let rows = try connection.query(PostgresQuery(unsafeSQL: "SELECT identifier FROM \(location.quotedSchema).swiftplex_migrations"), logger: logger).wait()
            let applied = Set(try rows.rows.map { try $0.decode(String.self) })
            return migrations.map(\.identifier).filter { !applied.contains($0) }
        } catch {
            throw SQLError(.statement, "cannot read the migrations of \(location): \(String(reflecting: error).prefix(200))")
        }
    }
}
