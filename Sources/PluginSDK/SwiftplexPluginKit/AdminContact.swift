/// A bot's admin, named by contact identity as `"<contact id>:<local display name>"` (`"1:alice"`,
/// as SimpleX's broadcast bot takes `--publisher`): a message counts as an admin's only when it
/// comes from that contact id *and* the contact has that local name. A name alone would not do —
/// any peer can choose any display name — and the id alone could outlive a contact that was
/// deleted and replaced. The `broadcast` and `channel` plugins name their admins this way.
public struct AdminContact: Hashable, Sendable {
    public let contactId: Int64
    public let localName: String

    public init(contactId: Int64, localName: String) {
        self.contactId = contactId
        self.localName = localName
    }

    /// `"12:alice"`; anything else is a config error (at `field`) that shows the form.
    public init(_ text: String, field: String) throws(PluginError) {
        guard let colon = text.firstIndex(of: ":") else {
            throw PluginError.config(field, "\"\(text)\" is a bare name; an admin is \"<contact id>:<local display name>\", e.g. \"1:\(text)\" (the bot logs each contact's id)")
        }
        let id = text[..<colon]
        let name = String(text[text.index(after: colon)...])
        guard let contactId = Int64(id), contactId > 0 else {
            throw PluginError.config(field, "\"\(text)\": the contact id before ':' must be a positive number, as in \"1:alice\"")
        }
        guard !name.isEmpty else { throw PluginError.config(field, "\"\(text)\": the local display name after ':' is missing, as in \"1:alice\"") }
        self.contactId = contactId
        self.localName = name
    }

    /// The admins of a config list (`admins[i]` in errors).
    public static func list(_ texts: [String], field: String = "admins") throws(PluginError) -> Set<AdminContact> {
        var out: Set<AdminContact> = []
        for (i, text) in texts.enumerated() { out.insert(try AdminContact(text, field: "\(field)[\(i)]")) }
        return out
    }

    /// Whether a received message is this admin's (its contact id and local display name).
    public static func isAdmin(_ message: Message, in admins: Set<AdminContact>) -> Bool {
        guard let id = message.contactId else { return false }
        return admins.contains(AdminContact(contactId: id, localName: message.localDisplayName))
    }
}
