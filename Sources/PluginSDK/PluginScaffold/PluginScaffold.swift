import Foundation
import SwiftplexBase

/// Writes a new out-of-tree plugin package — Package.swift, one Swift file with a small greeter
/// plugin, a README — that builds `lib<name>.so` against SwiftplexPluginKit. `swiftplex plugin new
/// NAME` calls it; `examples/swift-plugin` is what it writes.
public enum PluginScaffold {
    /// Why a package was not written.
    public struct Failure: CodedError {
        public enum Code: String, Sendable { case invalidName, directoryExists, write }
        public let code: Code
        public let message: String
        public init(code: Code, message: String) {
            self.code = code
            self.message = message
        }
    }

    /// Writes the package for plugin `name` into `directory` (which must not exist yet).
    /// - Parameters:
    ///   - name: the plugin's name and library name: `[a-z][a-z0-9-]*`, at most 64 characters.
    ///   - directory: where the package goes; created with its parents.
    ///   - sdkPath: the Swiftplex package (a path, absolute or relative to `directory`) that
    ///     provides SwiftplexPluginKit.
    public static func create(name: String, in directory: URL, sdkPath: String) throws(Failure) {
        try validate(name: name)
        if FileManager.default.fileExists(atPath: directory.path) {
            throw Failure(code: .directoryExists, message: "\(directory.path) already exists")
        }
        let module = moduleName(for: name)
        let files: [(String, String)] = [
            ("Package.swift", packageManifest(name: name, module: module, sdkPath: sdkPath)),
            ("Sources/\(module)/\(module).swift", pluginSource(name: name, module: module)),
            ("README.md", readme(name: name)),
            (".gitignore", ".build/\nPackage.resolved\n"),
        ]
        do {
            for (path, text) in files {
                let url = directory.appendingPathComponent(path)
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(text.utf8).write(to: url, options: .withoutOverwriting)
            }
        } catch {
            throw Failure(code: .write, message: "cannot write the package into \(directory.path): \(error.localizedDescription)")
        }
    }

    /// Checks a plugin name: a lower-case letter, then lower-case letters, digits and dashes.
    public static func validate(name: String) throws(Failure) {
        let ok = name.count <= 64 && name.unicodeScalars.enumerated().allSatisfy { i, c in
            ("a"..."z").contains(c) || (i > 0 && (("0"..."9").contains(c) || c == "-"))
        }
        guard !name.isEmpty, ok else {
            throw Failure(code: .invalidName, message: "plugin name \"\(name)\" must match [a-z][a-z0-9-]* (at most 64 characters)")
        }
    }

    /// `dice-bot` → `DiceBot`: the Swift module (target) name.
    public static func moduleName(for name: String) -> String {
        name.split(separator: "-").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
    }

    static func packageManifest(name: String, module: String, sdkPath: String) -> String {
        """
        // swift-tools-version:6.0
        import PackageDescription

        // The plugin \(name): `swift build` makes .build/debug/lib\(name).so for the Swiftplex host.
        let package = Package(
            name: "\(name)",
            products: [
                .library(name: "\(name)", type: .dynamic, targets: ["\(module)"]),
            ],
            dependencies: [
                .package(name: "Swiftplex", path: "\(sdkPath)"),
            ],
            targets: [
                .target(name: "\(module)", dependencies: [.product(name: "SwiftplexPluginKit", package: "Swiftplex")]),
            ]
        )

        """
    }

    static func pluginSource(name: String, module: String) -> String {
        """
        import SwiftplexPluginKit

        /// \(name): greets each new contact, answers /roll with a dice roll and counts the messages
        /// it has seen (kept in the host's storage across restarts).
        public final class \(module): Plugin {
            public struct Config: Decodable, Sendable {
                var greeting: String
                var sides: Int?
            }

            public static let name = "\(name)"
            public static let version = "0.1.0"
            public static let description = "Greets new contacts and rolls dice"
            public static let configSchema: JSONSchema? = .object([
                "greeting": .string("Sent to each new contact"),
                "sides": .integer("Sides of the dice", minimum: 2, maximum: 1000, default: 6),
            ], required: ["greeting"])

            let config: Config
            let context: PluginContext

            public init(config: Config, context: PluginContext) throws {
                if let sides = config.sides, sides < 2 { throw PluginError.config("sides", "must be 2 or more") }
                self.config = config
                self.context = context
            }

            public static func routes(_ r: inout Routes<\(module)>) {
                r.onEvent("contactConnected") { plugin, event in
                    guard let contact = event.connectedContact else { return }
                    try plugin.context.send(contactId: contact.contactId, text: plugin.config.greeting)
                }
                r.onCommand("roll", label: "Roll a dice (/roll or /roll 20)") { plugin, command in
                    let sides = command.arguments.first.flatMap { Int($0) } ?? plugin.config.sides ?? 6
                    guard (2...1000).contains(sides) else {
                        try plugin.context.reply(to: command.message, text: "A dice has 2 to 1000 sides.")
                        return
                    }
                    try plugin.context.reply(to: command.message, text: "🎲 \\(Int.random(in: 1...sides)) (d\\(sides))")
                }
                r.onMessage(.contentType("text")) { plugin, message in
                    let seen = (try plugin.context.storage.value(Int.self, forKey: "seen") ?? 0) + 1
                    try plugin.context.storage.set(seen, forKey: "seen")
                    plugin.context.log.debug("messages seen: \\(seen)")
                }
            }
        }

        /// The one symbol the host looks up.
        @_cdecl("swiftplex_plugin_entry")
        public func swiftplexPluginEntry() -> UnsafeRawPointer {
            PluginExport.descriptor(for: \(module).self)
        }

        """
    }

    static func readme(name: String) -> String {
        """
        # \(name)

        A Swiftplex plugin built with SwiftplexPluginKit.

        Build it:

            swift build            # makes .build/debug/lib\(name).so

        Use it from the host's YAML:

            plugins:
              - name: \(name)
                path: /path/to/.build/debug/lib\(name).so
                config:
                  greeting: "Hello! Type /roll to roll a dice."

        What it does: greets each new contact with `greeting`, answers `/roll [sides]` with a roll of
        a dice (6 sides unless `sides` or the argument says otherwise), and counts text messages in
        the host's storage. See docs/plugins.md in the Swiftplex repository for the SDK.

        """
    }
}
