import Foundation
import Logging
import SwiftplexSpawn

/// Reads a plugin's descriptor without starting it (for `swiftplex check-config`): in this
/// process for in-process plugins, in a throwaway child for isolated ones, so a plugin that
/// crashes while loading cannot take the checker down.
public enum PluginProbe {
    public static func describe(path: String, isolation: PluginSpec.Isolation, runnerExecutable: URL, logger: Logger) async throws -> PluginInfo {
        switch isolation {
        case .inProcess:
            return try PluginLibrary.load(path: path).info
        case .process:
            let spawned = try await Spawned.spawn(path: path, runner: runnerExecutable, logger: logger, instance: "check")
            spawned.writer.send(.stop)
            spawned.process.signal(SIGKILL)
            spawned.process.waitUntilExit()
            spawned.writer.close()
            return spawned.info
        }
    }
}
