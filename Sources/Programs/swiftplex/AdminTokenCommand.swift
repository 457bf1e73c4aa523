import ArgumentParser
import BotHost
import Foundation
import HostConfig

/// `swiftplex admin-token [--rotate]`: prints the admin API's bearer token (made on first use),
/// or replaces it with a new one. A running host reads the new token at its next request.
struct AdminTokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin-token",
        abstract: "Print the admin API's bearer token (<data_dir>/admin.token), or rotate it with --rotate."
    )

    @Option(name: .shortAndLong, help: "The bot's configuration file.") var config: String = "config/bot.yaml"
    @Flag(help: "Replace the token with a new random one (the old one stops working at once).") var rotate = false

    func run() throws {
        let configuration: HostConfiguration
        do { configuration = try HostConfiguration.load(path: config) } catch {
            FileHandle.standardError.write(Data("\(error.description)\n".utf8))
            throw ExitCode(78)
        }
        let dataDirectory = HostSetup(config: configuration).dataDirectory
        do {
            let token = rotate ? try AdminToken.rotate(dataDirectory: dataDirectory) : try AdminToken.loadOrCreate(dataDirectory: dataDirectory)
            print(token)
        } catch {
            throw ValidationError("cannot \(rotate ? "rotate" : "read") the admin token in \(dataDirectory.path): \(error)")
        }
    }
}
