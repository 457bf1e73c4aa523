import ArgumentParser
import BotHost
import Foundation
import HostConfig
import Logging
import PluginHost

/// `swiftplex check-config FILE`: every problem as `FILE:LINE:COLUMN: message`, exit 1 if any.
///
/// Beyond the YAML and the host's own keys it locates each plugin, reads its descriptor and
/// validates the entry's `config:` against the plugin's schema — everything `run` would refuse.
struct CheckConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "check-config", abstract: "Check a configuration file and its plugins' configs.")

    @Argument(help: "The YAML configuration file.") var file: String

    func run() async throws {
        var problems: [ConfigProblem] = []
        let configuration: HostConfiguration
        do {
            configuration = try HostConfiguration.load(path: file)
        } catch {
            report(error.problems)
            throw ExitCode.failure
        }
        problems += configuration.warnings
        let setup = HostSetup(config: configuration)
        var logger = Logger(label: "swiftplex.check")
        logger.logLevel = .critical
        var checked = 0
        let entries = configuration.bots.flatMap { bot in bot.plugins.enumerated().map { (bot.keyPath, $0.offset, $0.element) } }
        for (keyPath, index, plugin) in entries {
            switch setup.locate(plugin) {
            case let .failure(f): problems.append(f.problem)
            case let .success(path):
                do {
                    let info = try await PluginProbe.describe(path: path, isolation: plugin.isolation == .process ? .process : .inProcess,
                                                             runnerExecutable: HostSetup.runnerExecutable, logger: logger)
                    if case let .failure(errors) = setup.configure(plugin, keyPath: keyPath, index: index, info: info) { problems += errors.problems }
                    checked += 1
                } catch {
                    problems.append(ConfigProblem(file: configuration.file, at: plugin.mark, "plugin '\(plugin.name)': \(error)"))
                }
            }
        }
        if case let .external(list) = configuration.relays {
            _ = list  // syntax checked by the loader; full parsing happens at run
        }
        guard problems.isEmpty else {
            report(problems)
            throw ExitCode.failure
        }
        for bot in configuration.bots where bot.engine != .swiftplex {
            print("note: bot \(bot.name) runs on a foreign engine (\(EngineChoice(bot.engine))): " + EngineChoice.foreignEngineNotes.joined(separator: "; "))
        }
        let bots = configuration.bots.count > 1 ? "\(configuration.bots.count) bots, " : ""
        print("\(file): OK (\(bots)\(entries.count) plugin\(entries.count == 1 ? "" : "s"), \(checked) loaded and checked)")
    }

    private func report(_ problems: [ConfigProblem]) {
        for p in problems.sorted(by: { ($0.line, $0.column) < ($1.line, $1.column) }) {
            FileHandle.standardError.write(Data("\(p)\n".utf8))
        }
    }
}
