import Agent
import ChatAPI
import ChatCore
import ChatTestSupport
import Foundation
import SwiftplexSQL
import SwiftplexSQLPostgres
import TestSupport
import Testing

/// An engine whose two databases are PostgreSQL schemas: one engine per pair of schemas, the
/// archive commands refused with what to use instead, `/_db delete` dropping both schemas.
@Suite(.enabled(if: TestPostgres.isAvailable, Comment(rawValue: TestPostgres.skipReason)))
struct EnginePostgresTests {
    static func database() throws -> EngineDatabase {
        try EngineDatabase.postgres(connection: try #require(TestPostgres.serverURL), schemaPrefix: TestPostgres.schema(for: UUID().uuidString))
    }

    @Test func aSecondEngineOnTheSameSchemasIsRefusedUntilTheFirstCloses() async throws {
        let database = try Self.database()
        let first = try await ChatController.open(database: database, defaultRelays: [], logger: silent)
        await #expect {
            _ = try await ChatController.open(database: database, defaultRelays: [], logger: silent)
        } throws: { error in
            "\(error)".contains("another process holds the schema")
        }
        await first.close()
        let second = try await ChatController.open(database: database, defaultRelays: [], logger: silent)
        await second.close()
    }

    @Test func archivesAreRefusedAndDeleteDropsBothSchemas() async throws {
        let database = try Self.database()
        guard case let .postgres(location) = database else { Issue.record("not PostgreSQL"); return }
        let controller = try await ChatController.open(database: database, defaultRelays: [], logger: silent)
        let api = ChatAPI(controller: controller)
        #expect(await api.execute(createUser("pg"))["type"]?.stringValue == "activeUser")
        let export = await api.execute(#"/_db export {"archivePath": "/tmp/never.zip"}"#)
        #expect("\(export)".contains("pg_dump"), "\(export)")
        let deleted = await api.execute("/_db delete")
        #expect(deleted["type"]?.stringValue == "cmdOk", "\(deleted)")
        for suffix in ["_chat_schema", "_agent_schema"] {
            let schema = try location.with(schema: location.schema + suffix)
            let pending = try await PostgresStore.pendingMigrations(suffix == "_chat_schema" ? ChatController.databaseMigrations : Agent.databaseMigrations, at: schema)
            #expect(!pending.isEmpty && pending.first == "v1", "\(suffix): the schema is gone, every migration pending again")
        }
        await controller.close()
        // The same schemas open again, empty.
        let again = ChatAPI(controller: try await ChatController.open(database: database, defaultRelays: [], logger: silent))
        #expect(await again.execute("/users")["users"]?.arrayValue?.isEmpty == true)
        await again.controller.close()
    }
}
