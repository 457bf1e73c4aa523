import ArgumentParser

/// `swiftplex plugin …`: plugin authoring helpers.
struct PluginCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "plugin", abstract: "Plugin authoring helpers.",
                                                    subcommands: [PluginNewCommand.self])
}
