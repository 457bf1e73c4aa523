import ArgumentParser
import Foundation
import BotHost
import HostConfig
import SwiftplexStorage

/// `swiftplex reload --config FILE`: asks the running bot (its pid file) to reload its plugins.
struct ReloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "reload", abstract: "Reload the plugins of a running bot (sends it SIGHUP).")

    @Option(name: .shortAndLong, help: "The running bot's configuration file.") var config: String = "config/bot.yaml"

    func run() throws {
        let configuration: HostConfiguration
        do { configuration = try HostConfiguration.load(path: config) } catch {
            FileHandle.standardError.write(Data("\(error.description)\n".utf8))
            throw ExitCode.failure
        }
        let dataDirectory = HostSetup(config: configuration).dataDirectory
        let pidFile = dataDirectory.appendingPathComponent("swiftplex.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8),
              let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0 else {
            throw ValidationError("no running bot for \(config) (no pid file at \(pidFile.path))")
        }
        // A pid file outlives a killed bot, and its pid may since name an unrelated process: signal
        // only a process that holds this data directory's database lock (the running bot does).
        let prefix = HostedBot.databasePrefix(dataDirectory, prefix: configuration.bots.first?.data ?? BotOptions.defaultName)
        guard DatabaseLock.isHeld(prefix: prefix, by: pid) else {
            throw ValidationError("stale pid file \(pidFile.path): process \(pid) is not a bot running on \(dataDirectory.path) (it does not hold \(DatabaseLock.lockFile(prefix: prefix))); nothing signalled")
        }
        guard kill(pid, SIGHUP) == 0 else {
            throw ValidationError("cannot signal process \(pid): \(String(cString: strerror(errno))) (stale pid file \(pidFile.path)?)")
        }
        print("asked process \(pid) to reload; its log shows the outcome")
    }
}
