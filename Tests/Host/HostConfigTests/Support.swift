import Foundation
import TestSupport
import Testing
@testable import HostConfig

/// A fresh directory under the system temp dir (the shared `TemporaryDirectory`, 0700), removed
/// when the value goes away.
final class TempDirectory {
    let directory: TemporaryDirectory
    var path: String { directory.path }

    init() throws {
        directory = TemporaryDirectory(prefix: "hostconfig")
    }

    deinit { directory.cleanup() }

    /// Writes `text` to `name` in the directory and returns the file's path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let file = (path as NSString).appendingPathComponent(name)
        try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }
}

/// Loads `yaml` from a real file named `bot.yaml` in a temp dir.
func load(_ yaml: String, environment: [String: String] = [:]) throws -> (HostConfiguration, TempDirectory) {
    let dir = try TempDirectory()
    let file = try dir.write("bot.yaml", yaml)
    return (try HostConfiguration.load(path: file, environment: environment), dir)
}

/// The problems reported for `yaml` (written to a real file), as `LINE:COLUMN: message` lines
/// (the file name, a temp path, left out).
func problems(_ yaml: String, environment: [String: String] = [:]) throws -> [String] {
    let dir = try TempDirectory()
    let file = try dir.write("bot.yaml", yaml)
    do {
        _ = try HostConfiguration.load(path: file, environment: environment)
        Issue.record("expected the config to be refused")
        return []
    } catch {
        #expect(error.problems.allSatisfy { $0.file == file })
        #expect(error.description.hasPrefix(file + ":"))
        return error.problems.map { "\($0.line):\($0.column): \($0.message)" }
    }
}

/// Parses YAML text into a node tree (no interpolation).
func tree(_ yaml: String) throws -> ConfigNode {
    try YAMLReader.parse(Array(yaml.utf8), file: "t.yaml")
}

/// A valid minimal config to which tests add lines.
let minimal = "bot:\n  display_name: Test Bot\n"
