import Logging
import NIOPosix
import PostgresNIO
import SwiftplexBase
import SwiftplexSQL

// What is done to a schema from outside a store: reading which migrations it lacks, dropping it.
// Each opens a connection of its own for the call (blocking the calling thread).

extension PostgresStore {
    private static func withConnection<T>(_ location: PostgresLocation, _ body: (PostgresConnection, Logger) throws -> T) throws -> T {
        Blocking.willWait("a PostgreSQL schema's maintenance connection")
        let logger = Logger(label: "swiftplex.sql.postgres")
        let connection: PostgresConnection
        do {
            connection = try PostgresConnection.connect(on: MultiThreadedEventLoopGroup.singleton.next(),
                                                        configuration: try location.connectionConfiguration(), id: 0, logger: logger).wait()
        } catch let e as SQLError {
            throw e
        } catch {
            throw SQLError(.connection, "cannot connect to \(location): \(PostgresSession.describe(error))")
        }
        defer { try? connection.close().wait() }
        return try body(connection, logger)
    }

    /// Drops `location`'s schema and everything in it, unless another process holds it (its
    /// advisory lock) for longer than `lockWait`: ``SQLError`` `.locked` then. Nothing happens
    /// when it does not exist. (A store just closed may hold the lock a moment longer: the server
    /// lets it go when it has seen the session end.)
    public static func dropSchema(at location: PostgresLocation, lockWait: Duration = .seconds(5)) throws {
        try withConnection(location) { connection, logger in
            do {
                // The lock a store holds on its schema (``PostgresStore``), for this connection's life.
                // The server waits for it (lock_timeout), then refuses with 55P03.
                let schema = location.schema
                let ms = max(1, Int(lockWait.components.seconds * 1000 + lockWait.components.attoseconds / 1_000_000_000_000_000))
                _ = try connection.query(PostgresQuery(unsafeSQL: "SET lock_timeout = \(ms)"), logger: logger).wait()
                do {
                    _ = try connection.query("SELECT pg_advisory_lock(hashtext(\(schema)))", logger: logger).wait()
                } catch let e as PSQLError where e.serverInfo?[.sqlState] == "55P03" {
                    throw SQLError(.locked, "another process holds the schema \(location.schema) of \(location)")
                }
                _ = try connection.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \(location.quotedSchema) CASCADE"), logger: logger).wait()
            } catch let e as SQLError {
                throw e
            } catch {
                throw SQLError(.statement, "cannot drop the schema \(location.schema) of \(location): \(PostgresSession.describe(error))")
            }
        }
    }

    /// ``dropSchema(at:lockWait:)`` from async code, on a thread of its own.
    public static func dropSchema(at location: PostgresLocation, lockWait: Duration = .seconds(5)) async throws {
        try await Blocking.run("pg-drop-schema") { try dropSchema(at: location, lockWait: lockWait) as Void }
    }

    /// ``pendingMigrations(_:at:)`` from async code, on a thread of its own.
    public static func pendingMigrations(_ migrations: [SQLMigration], at location: PostgresLocation) async throws -> [String] {
        try await Blocking.run("pg-pending-migrations") { try pendingMigrations(migrations, at: location) as [String] }
    }

    /// The identifiers of `migrations` not yet applied in `location`'s schema (all of them when the
    /// schema or its record of migrations does not exist). Reads only: takes no lock, creates nothing.
    public static func pendingMigrations(_ migrations: [SQLMigration], at location: PostgresLocation) throws -> [String] {
        try withConnection(location) { connection, logger in
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
            throw SQLError(.statement, "cannot read the migrations of \(location): \(PostgresSession.describe(error))")
        }
        }
    }
}

extension PostgresStore {
    /// This driver as the SQL layer's PostgreSQL backend: a program that offers PostgreSQL calls
    /// `SQLBackends.use(postgres: PostgresStore.backend)` once, at start.
    public static let backend: any PostgresBackend = Backend()

    private struct Backend: PostgresBackend {
        func open(location: PostgresLocation, label: String, migrations: [SQLMigration], lockWait: Duration) throws -> any SQLStore {
            try PostgresStore(location: location, label: label, migrations: migrations, lockWait: lockWait)
        }

        func openReadingOnly(location: PostgresLocation, label: String) async throws -> any SQLStore {
            try await PostgresStore.openReadingOnly(location: location, label: label)
        }

        func pendingMigrations(_ migrations: [SQLMigration], at location: PostgresLocation) throws -> [String] {
            try PostgresStore.pendingMigrations(migrations, at: location)
        }

        func dropSchema(at location: PostgresLocation) throws {
            try PostgresStore.dropSchema(at: location)
        }
    }
}
