import ArgumentParser
import Foundation
import HostConfig

/// `swiftplex init [FILE]`: writes a commented starter configuration.
struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "init", abstract: "Write a commented starter configuration.")

    @Argument(help: "Where to write it.") var file: String = "bot.yaml"
    @Flag(help: "Overwrite an existing file.") var force = false

    func run() throws {
        if FileManager.default.fileExists(atPath: file) && !force {
            throw ValidationError("\(file) exists; use --force to overwrite it")
        }
        do {
            try HostConfiguration.starterTemplate.write(toFile: file, atomically: true, encoding: .utf8)
        } catch {
            throw ValidationError("cannot write \(file): \(error.localizedDescription)")
        }
        print("""
            wrote \(file)
            next: swiftplex check-config \(file)
                  swiftplex run --config \(file)
            """)
    }
}
