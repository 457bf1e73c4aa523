import ArgumentParser
import Foundation
import PluginScaffold

/// `swiftplex plugin new NAME`: scaffolds an out-of-tree plugin package.
struct PluginNewCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "new", abstract: "Create a new plugin package (Swift, SwiftplexPluginKit).")

    @Argument(help: "The plugin's name: lowercase letters, digits and dashes, e.g. dice-bot.") var name: String
    @Option(help: "Where to create it (default: ./<name>).") var directory: String?
    @Option(help: "Path of the Swiftplex source tree that provides SwiftplexPluginKit (default: the tree this swiftplex was built from).")
    var sdk: String?

    /// The source tree this binary was built from (its Package.swift is the SDK package).
    static var builtFromTree: String {
        // Sources/Programs/swiftplex/PluginNewCommand.swift: four folders up.
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }

    func run() throws {
        let target = URL(fileURLWithPath: directory ?? name)
        let sdkPath = sdk ?? Self.builtFromTree
        guard FileManager.default.fileExists(atPath: URL(fileURLWithPath: sdkPath).appendingPathComponent("Package.swift").path) else {
            throw ValidationError("no Swiftplex source tree at \(sdkPath) (pass --sdk PATH to the directory with Swiftplex's Package.swift)")
        }
        do {
            try PluginScaffold.create(name: name, in: target, sdkPath: sdkPath)
        } catch {
            throw ValidationError("\(error)")
        }
        print("""
            created \(target.path)
            build:  cd \(target.path) && swift build --product \(name)
            use it: plugins: [{name: \(name), path: \(target.path)/.build/debug/lib\(name).so}]
            """)
    }
}
