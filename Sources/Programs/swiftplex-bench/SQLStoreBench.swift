import ArgumentParser
import Foundation
import SwiftplexSQL
import SwiftplexSQLPostgres

/// `swiftplex-bench sql-store --postgres postgresql://…`: the SQL layer's PostgreSQL backend
/// against its SQLite backend in the same run (rounds alternate): one-statement writes, point
/// reads, ten-statement writes — each transaction awaited before the next, as an engine's
/// `dbWrite`/`dbRead` — and one-statement writes from eight tasks at once. Each round on a new
/// SQLite file and a new schema (dropped at the end).
struct SQLStoreBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sql-store",
        abstract: "SwiftplexSQL on PostgreSQL against SQLite: time per transaction (writes, reads, 10-statement writes, 8 concurrent writers)."
    )

    @Option(help: "The PostgreSQL server: postgresql://user@host:port/database (the benchmark uses schemas of its own and drops them).")
    var postgres: String
    @Option(help: "Transactions of each kind per round.") var transactions: Int = 2000
    @Option(help: "Measured rounds on each backend (the median is reported).") var rounds: Int = 3

    func validate() throws {
        guard PostgresLocation.isPostgres(postgres) else { throw ValidationError("--postgres must be a postgresql:// URL") }
        guard transactions >= 10, rounds > 0 else { throw ValidationError("--transactions at least 10, --rounds at least 1") }
    }

    static let migrations = [
        SQLMigration("v1", sql: "CREATE TABLE item (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, n INTEGER NOT NULL, data BLOB)"),
    ]

    /// Microseconds per transaction of each kind, in order.
    static let kinds = ["write (1 INSERT)", "read (1 SELECT by id)", "write (10 UPDATEs)", "write, 8 tasks at once"]

    func run() async throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        let base = try PostgresLocation(url: postgres)
        print("sql-store benchmark: \(transactions) transactions of each kind per round, \(rounds) rounds; SQLite (WAL) vs PostgreSQL (\(base.host):\(base.port)/\(base.database))")
        print("load: \(RelayStoreBench.loadAverage())")
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        var sqlite: [[Double]] = []
        var pg: [[Double]] = []
        for round in 0...rounds {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sql-bench-\(tag)-\(round)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: dir) }
            let s = try SQLiteStore(path: dir.appendingPathComponent("b.db"), label: "bench", migrations: Self.migrations)
            let sf = try await measure(s)
            try s.close()
            let location = try base.with(schema: "bench_sql_\(tag)_\(round)")
            let p = try await PostgresStore.open(location: location, label: "bench", migrations: Self.migrations, lockWait: .zero)
            let pf = try await measure(p)
            try await p.write { db in try db.execute("DROP SCHEMA \(location.quotedSchema) CASCADE") }
            try p.close()
            if round > 0 {  // round 0 warms up
                sqlite.append(sf)
                pg.append(pf)
            }
        }
        func median(_ rows: [[Double]], _ k: Int) -> Double {
            let v = rows.map { $0[k] }.sorted()
            return v[v.count / 2]
        }
        func pad(_ s: String, _ width: Int) -> String { s.count >= width ? s : s + String(repeating: " ", count: width - s.count) }
        print(pad("µs per transaction", 26) + pad("SQLite", 12) + pad("PostgreSQL", 12) + "ratio PostgreSQL / SQLite")
        for (k, kind) in Self.kinds.enumerated() {
            let a = median(sqlite, k)
            let b = median(pg, k)
            print(pad(kind, 26) + pad(String(format: "%.1f", a), 12) + pad(String(format: "%.1f", b), 12) + String(format: "%.2f", b / a))
        }
        print("load: \(RelayStoreBench.loadAverage())")
    }

    private func measure(_ store: any SQLStore) async throws -> [Double] {
        let n = transactions
        let blob = [UInt8](repeating: 0xA5, count: 64)
        var results: [Double] = []
        var start = monotonicNanos()
        for i in 0..<n {
            try await store.write { db in try db.execute("INSERT INTO item (name, n, data) VALUES (?, ?, ?)", "item \(i)", i, blob) }
        }
        results.append(Double(monotonicNanos() - start) / 1e3 / Double(n))
        start = monotonicNanos()
        var sum = 0
        for i in 0..<n {
            sum += try await store.read { db in try db.value(Int.self, "SELECT n FROM item WHERE id = ?", i % n + 1) } ?? 0
        }
        results.append(Double(monotonicNanos() - start) / 1e3 / Double(n))
        precondition(sum == (0..<n).reduce(0, +), "the reads found what the writes wrote")
        let batches = n / 10
        start = monotonicNanos()
        for i in 0..<batches {
            try await store.write { db in
                for k in 0..<10 { try db.execute("UPDATE item SET n = n + 1 WHERE id = ?", (i * 10 + k) % n + 1) }
            }
        }
        results.append(Double(monotonicNanos() - start) / 1e3 / Double(batches))
        start = monotonicNanos()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for t in 0..<8 {
                group.addTask {
                    for i in stride(from: t, to: n, by: 8) {
                        try await store.write { db in try db.execute("INSERT INTO item (name, n) VALUES (?, ?)", "c \(i)", i) }
                    }
                }
            }
            try await group.waitForAll()
        }
        results.append(Double(monotonicNanos() - start) / 1e3 / Double(n))
        return results
    }
}
