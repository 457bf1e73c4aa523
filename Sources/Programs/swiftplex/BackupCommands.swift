import ArgumentParser
import BotHost
import Foundation
import HostConfig

/// `swiftplex backup --out FILE.zip`: a consistent snapshot of the bot's databases (SQLite's
/// online backup API; the bot may be running), its other data files and the configuration file.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write the bot's databases (an online snapshot), data files and configuration to a zip archive (0600)."
    )

    @Option(name: .shortAndLong, help: "The bot's configuration file.") var config: String = "config/bot.yaml"
    @Option(help: "The archive to write.") var out: String

    func run() throws {
        let configuration = try loadConfiguration(config)
        let dataDirectory = HostSetup(config: configuration).dataDirectory
        do {
            let manifest = try HostBackup.create(dataDirectory: dataDirectory, configFile: URL(fileURLWithPath: config), to: URL(fileURLWithPath: out))
            print("backup: \(out) (\(manifest.databases.count) databases, \(manifest.files.count) other files, format \(manifest.formatVersion))")
        } catch {
            FileHandle.standardError.write(Data("swiftplex backup: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}

/// `swiftplex restore FILE.zip`: puts a backup's data into the configuration's data directory.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a backup archive into the bot's data directory (not while the bot runs).",
        discussion: """
            Refuses an archive from a newer Swiftplex, a data directory a running bot holds, and a \
            data directory that already holds a bot unless --replace is given. When the \
            configuration file does not exist it is written from the archive (and its data_dir is \
            used); when it exists it is kept, and the archive's copy is written beside it as \
            FILE.from-backup if it differs.
            """
    )

    @Argument(help: "The archive made by swiftplex backup.") var archive: String
    @Option(name: .shortAndLong, help: "The bot's configuration file.") var config: String = "config/bot.yaml"
    @Flag(help: "Overwrite the data of a (stopped) bot already in the data directory.") var replace = false

    func run() throws {
        let archiveURL = URL(fileURLWithPath: archive)
        let configURL = URL(fileURLWithPath: config)
        do {
            if !FileManager.default.fileExists(atPath: config) {
                // The configuration comes from the archive first: it names the data directory.
                try HostBackup.restoreConfiguration(from: archiveURL, to: configURL)
            }
            let dataDirectory = HostSetup(config: try loadConfiguration(config)).dataDirectory
            let manifest = try HostBackup.restore(from: archiveURL, dataDirectory: dataDirectory, configFile: configURL, replace: replace)
            print("restored: \(manifest.databases.count) databases and \(manifest.files.count) other files into \(dataDirectory.path) (made \(manifest.createdAt) by Swiftplex \(manifest.swiftplexVersion))")
        } catch let e as ExitCode {
            throw e
        } catch {
            FileHandle.standardError.write(Data("swiftplex restore: \(error)\n".utf8))
            throw ExitCode.failure
        }
    }
}

func loadConfiguration(_ path: String) throws -> HostConfiguration {
    do { return try HostConfiguration.load(path: path) } catch {
        FileHandle.standardError.write(Data("\(error.description)\n".utf8))
        throw ExitCode(78)  // EX_CONFIG
    }
}
