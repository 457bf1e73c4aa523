import SwiftplexPluginKit

/// `broadcast`: a message from an admin goes to every other contact and the admin gets a
/// summary; anyone else gets the notice.
///
/// Admins are named by contact identity, as `"<contact id>:<local display name>"` (`"1:alice"`,
/// as SimpleX's broadcast bot takes `--publisher`): a message counts as an admin's only when it
/// comes from that contact id *and* the contact has that local name. A name alone would not do —
/// any peer can choose any display name — and the id alone could outlive a contact that was
/// deleted and replaced. The log says, by contact id, who was treated as an admin and who not.
public final class Broadcast: Plugin {
    public struct Config: Decodable, Sendable {
        var admins: [String]
        var notice: String
    }

    /// One admin: the contact id and the local display name it must have (SwiftplexPluginKit's ``AdminContact``).
    typealias Admin = AdminContact

    public static let name = "broadcast"
    public static let version = "1.0.0"
    public static let description = "Forwards admins' messages to every contact; tells others it is a broadcast bot"
    public static let configSchema: JSONSchema? = .object([
        "admins": .array(of: .string(), "Contacts allowed to broadcast, each as \"<contact id>:<local display name>\" (e.g. \"1:alice\")"),
        "notice": .string("The answer to messages from anyone else"),
    ], required: ["admins", "notice"])

    /// Content types that can be sent on as they came (files need a transfer of their own).
    static let forwardable: Set<String> = ["text", "link"]

    let config: Config
    let admins: Set<Admin>
    let context: PluginContext

    public init(config: Config, context: PluginContext) throws {
        guard !config.admins.isEmpty else { throw PluginError.config("admins", "needs at least one \"<contact id>:<local display name>\"") }
        var admins: Set<Admin> = []
        for (i, text) in config.admins.enumerated() { admins.insert(try Admin(text, field: "admins[\(i)]")) }
        self.config = config
        self.admins = admins
        self.context = context
    }

    public static func routes(_ r: inout Routes<Broadcast>) {
        r.onMessage(.direct) { plugin, message in try plugin.handle(message) }
    }

    func handle(_ message: Message) throws {
        guard let sender = message.contactId, admins.contains(Admin(contactId: sender, localName: message.localDisplayName)) else {
            if let id = message.contactId { context.log.info("contact \(id) is not an admin: sent the notice") }
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
