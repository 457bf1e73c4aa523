import ArgumentParser
import Foundation
import HostConfig

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
        let pidFile = HostSetup(config: configuration).dataDirectory.appendingPathComponent("swiftplex.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8),
              let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw ValidationError("no running bot for \(config) (no pid file at \(pidFile.path))")
        }
        guard kill(pid, SIGHUP) == 0 else {
            throw ValidationError("cannot signal process \(pid): \(String(cString: strerror(errno))) (stale pid file \(pidFile.path)?)")
        }
        print("asked process \(pid) to reload; its log shows the outcome")
    }
}
