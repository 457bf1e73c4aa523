import SwiftplexPluginKit

/// dice-bot: greets each new contact, answers /roll with a dice roll and counts the messages
/// it has seen (kept in the host's storage across restarts).
public final class DiceBot: Plugin {
    public struct Config: Decodable, Sendable {
        var greeting: String
        var sides: Int?
    }

    public static let name = "dice-bot"
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

    public static func routes(_ r: inout Routes<DiceBot>) {
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
            try plugin.context.reply(to: command.message, text: "🎲 \(Int.random(in: 1...sides)) (d\(sides))")
        }
        r.onMessage(.contentType("text")) { plugin, message in
            let seen = (try plugin.context.storage.value(Int.self, forKey: "seen") ?? 0) + 1
            try plugin.context.storage.set(seen, forKey: "seen")
            plugin.context.log.debug("messages seen: \(seen)")
        }
    }
}

/// The one symbol the host looks up.
@_cdecl("swiftplex_plugin_entry")
public func swiftplexPluginEntry() -> UnsafeRawPointer {
    PluginExport.descriptor(for: DiceBot.self)
}
