@testable import PluginHost
import Foundation
import SwiftplexBase
import Testing
import TestSupport

/// What a plugin can take of the host: its storage is bounded per instance, and an isolated
/// child does not inherit the host's secrets.
@Suite struct PluginStorageLimitsTests {
    @Test func anInstanceIsBoundedByItsQuotaAndARefusedWriteChangesNothing() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await Blocking.run("plugin-storage") {
            let storage = try PluginStorage(path: dir.appendingPathComponent("plugins.db"),
                                            quota: .init(maxKeys: 3, maxValueCharacters: 100, maxKeyCharacters: 16))
            for k in ["a", "b", "c"] { try storage.set(instance: "greedy", key: k, value: String(repeating: "x", count: 20)) }
            // A fourth key is refused; rewriting an existing one within the quota is not.
            #expect(throws: PluginStorage.QuotaExceeded.self) { try storage.set(instance: "greedy", key: "d", value: "y") }
            try storage.set(instance: "greedy", key: "a", value: String(repeating: "z", count: 60))
            // 60 + 20 + 20 = 100 used: one more character anywhere is refused, and the old value stays.
            #expect(throws: PluginStorage.QuotaExceeded.self) { try storage.set(instance: "greedy", key: "b", value: String(repeating: "x", count: 21)) }
            #expect(try storage.get(instance: "greedy", key: "b") == String(repeating: "x", count: 20))
            #expect(try storage.get(instance: "greedy", key: "d") == nil)
            #expect(throws: PluginStorage.QuotaExceeded.self) { try storage.set(instance: "greedy", key: String(repeating: "k", count: 17), value: "v") }
            // Deleting makes room; another instance has its own quota.
            try storage.set(instance: "greedy", key: "c", value: nil)
            try storage.set(instance: "greedy", key: "d", value: "y")
            for k in ["a", "b", "c"] { try storage.set(instance: "modest", key: k, value: "1") }
            #expect(try storage.count(instance: "greedy") == 3 && storage.count(instance: "modest") == 3)
        }
    }

    @Test func anIsolatedChildInheritsNoSecretsOfTheHost() {
        let host = ["PATH": "/usr/bin:/bin", "HOME": "/home/bot", "LANG": "C.UTF-8", "TZ": "UTC",
                    "PGPASSWORD": "hunter2", "SWIFTPLEX_DATABASE": "postgresql://bot:pw@db/bot", "SWIFTPLEX_WS_TOKEN": "secret-token",
                    "AWS_SECRET_ACCESS_KEY": "k", "LD_PRELOAD": "/tmp/evil.so"]
        let child = Spawned.childEnvironment(host)
        #expect(child == ["PATH": "/usr/bin:/bin", "HOME": "/home/bot", "LANG": "C.UTF-8", "TZ": "UTC"])
    }
}
