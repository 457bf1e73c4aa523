import GRDB

extension DatabaseQueue {
    /// ``write`` with the transaction's `BEGIN IMMEDIATE` and `COMMIT` run as cached statements.
    /// GRDB prepares them anew for every transaction (each preparation runs its statement
    /// authorizer); the engine's message path makes a dozen transactions per message, so
    /// preparing them was a measurable share of its CPU (`docs/performance.md`, "Chat echo").
    /// The same guarantees as ``write``: everything `updates` does commits together or not at
    /// all (an error rolls back and is rethrown).
    public func cachedWrite<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await writeWithoutTransaction { db in
            try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
            let result: T
            do {
                result = try updates(db)
                try db.cachedStatement(sql: "COMMIT TRANSACTION").execute()
            } catch {
                if db.isInsideTransaction { try? db.rollback() }
                throw error
            }
            return result
        }
    }

    /// A read with no transaction around it (GRDB's ``read`` prepares a `BEGIN` and a `COMMIT`
    /// for every read). A queue is one connection that serialises every access, and these
    /// databases have no other writer, so the statements of `value` see one state. Unlike
    /// ``read``, nothing stops `value` from writing (GRDB's `unsafeRead` sets no `query_only`):
    /// callers only read in it, and writes go through ``cachedWrite``.
    public func plainRead<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await unsafeRead(value)
    }
}
