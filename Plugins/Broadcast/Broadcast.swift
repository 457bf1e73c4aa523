import SwiftplexPluginKit

/// `broadcast`: a message from an admin goes to every other contact and the admin gets a
/// summary; anyone else gets the notice.
///
/// Admins are matched by the name unique in the bot's database (`localDisplayName`), not the name
/// a contact chooses: the first contact called "alice" is `alice`, a later one `alice_1`. So an
/// admin must connect before anyone else takes the name (trust on first use); the log says who
/// was treated as an admin by contact id.
public final class Broadcast: Plugin {
    public struct Config: Decodable, Sendable {
        var admins: [String]
        var notice: String
    }

    public static let name = "broadcast"
    public static let version = "1.0.0"
    public static let description = "Forwards admins' messages to every contact; tells others it is a broadcast bot"
    public static let configSchema: JSONSchema? = .object([
        "admins": .array(of: .string(), "Local display names of the contacts allowed to broadcast"),
        "notice": .string("The answer to messages from anyone else"),
    ], required: ["admins", "notice"])

    /// Content types that can be sent on as they came (files need a transfer of their own).
    static let forwardable: Set<String> = ["text", "link"]

    let config: Config
    let context: PluginContext

    public init(config: Config, context: PluginContext) throws {
        guard !config.admins.isEmpty else { throw PluginError.config("admins", "needs at least one name") }
        self.config = config
        self.context = context
    }

    public static func routes(_ r: inout Routes<Broadcast>) {
        r.onMessage(.direct) { plugin, message in try plugin.handle(message) }
    }

    func handle(_ message: Message) throws {
        guard config.admins.contains(message.localDisplayName), let sender = message.contactId else {
            try context.reply(to: message, text: config.notice)
            return
        }
        guard Self.forwardable.contains(message.contentType) else {
            try context.reply(to: message, text: "Only text messages can be broadcast.")
            return
        }
        var sent = 0
        var failed = 0
        for contact in try context.contacts() where contact.contactId != sender && contact.status != "deleted" {
            do {
                try context.send(chatRef: "@\(contact.contactId)", content: message.content)
                sent += 1
            } catch {
                failed += 1
                context.log.warning("broadcast to contact \(contact.contactId) failed: \(error)")
            }
        }
        context.log.info("broadcast from contact \(sender): sent to \(sent), failed \(failed)")
        let summary = "Sent to \(sent) contact\(sent == 1 ? "" : "s")" + (failed > 0 ? ", failed for \(failed)." : ".")
        try context.reply(to: message, text: summary)
    }
}

@_cdecl("swiftplex_plugin_entry")
public func swiftplexPluginEntry() -> UnsafeRawPointer {
    PluginExport.descriptor(for: Broadcast.self)
}
