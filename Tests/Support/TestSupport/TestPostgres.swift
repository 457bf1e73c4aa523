import Foundation
import SwiftplexSQL
import SwiftplexSQLPostgres

/// The throwaway PostgreSQL server the tests run against: `make test` starts one
/// (Tests/Support/postgres/cluster.sh: `initdb` into a temporary directory, a free port on
/// 127.0.0.1, stopped at the end) and passes its URL in `SWIFTPLEX_TEST_POSTGRES`. Each test
/// takes a schema of its own on it (``url(schema:)``), so tests run in parallel.
///
/// In a plain `swift test` without the variable the PostgreSQL tests are skipped, each saying so.
public enum TestPostgres {
    public static let environmentVariable = "SWIFTPLEX_TEST_POSTGRES"

    /// The server's URL (`postgresql://postgres@127.0.0.1:PORT/postgres`), if one was given. The
    /// tests are a program that offers PostgreSQL: asking for the server passes the backend in.
    public static var serverURL: String? {
        _ = backendInstalled
        guard let v = ProcessInfo.processInfo.environment[environmentVariable], !v.isEmpty else { return nil }
        return v
    }

    private static let backendInstalled: Void = SQLBackends.use(postgres: PostgresStore.backend)

    public static var isAvailable: Bool { serverURL != nil }

    /// Why PostgreSQL tests are skipped (printed by the test runner with each skipped test).
    public static let skipReason =
        "PostgreSQL tests skipped: \(environmentVariable) is not set (`make test` starts a throwaway PostgreSQL 15 and sets it)"

    /// The server's URL with a schema of the test's own: `schema` (a–z 0–9 _) or a fresh one.
    public static func url(schema: String? = nil) -> String? {
        guard let base = serverURL else { return nil }
        let name = schema ?? "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        return base + (base.contains("?") ? "&" : "?") + "schema=" + name
    }

    /// A schema name derived from `key` (the same key, the same schema: a test that restarts its
    /// relay on the same data directory finds its queues again).
    public static func schema(for key: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in key.utf8 { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        return "t_" + String(hash, radix: 16)
    }

    /// Prints, once per process, that the PostgreSQL variants are left out.
    public static func noteSkippedOnce() {
        _ = printedSkip
    }

    private static let printedSkip: Void = {
        if !isAvailable { print("note: \(skipReason) — the PostgreSQL variants (relay and SQL store suites) are left out") }
    }()
}
