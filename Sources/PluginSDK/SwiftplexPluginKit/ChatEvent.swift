import Foundation

/// One event as the Chat API emits it (`{"type": "...", ...}`), with typed views of the common
/// ones. Views read only the fields they need, so a newer engine adding fields breaks nothing.
public struct ChatEvent: Sendable {
    /// The event's `type` tag, e.g. `newChatItems`.
    public let type: String
    /// The whole event.
    public let json: JSONValue

    public init(json: JSONValue) throws(PluginError) {
        guard let type = json["type"]?.stringValue else { throw PluginError(.event, "an event needs a string \"type\"") }
        self.type = type
        self.json = json
    }

    public init(parsing text: String) throws(PluginError) {
        try self.init(json: try JSONValue.parse(text, as: .event))
    }

    /// The received messages of a `newChatItems` event (sent items and non-message items are
    /// left out); empty for other events.
    public var messages: [Message] {
        guard type == "newChatItems", let items = json["chatItems"]?.arrayValue else { return [] }
        return items.compactMap(Message.init(item:))
    }

    /// The request of a `receivedContactRequest` event.
    public var contactRequest: ContactRequest? {
        guard type == "receivedContactRequest", let r = json["contactRequest"] else { return nil }
        return ContactRequest(json: r)
    }

    /// The contact of a `contactConnected` event.
    public var connectedContact: Contact? {
        guard type == "contactConnected", let c = json["contact"] else { return nil }
        return Contact(json: c)
    }

    /// The group event (`receivedGroupInvitation`, `connectedToGroupMember`, `deletedMember`, …;
    /// ``GroupEvent/types``), typed; nil for other events.
    public var groupEvent: GroupEvent? { GroupEvent(type: type, json: json) }
}

/// Where a message was sent: a direct chat with a contact or a group.
public enum ChatType: String, Sendable, Hashable {
    case direct, group
}

/// A contact, as in `contactsList`, `contactConnected` and direct messages.
public struct Contact: Sendable, Hashable {
    public let contactId: Int64
    /// The name the contact chose (`profile.displayName`); anyone can choose any name.
    public let displayName: String
    /// The name unique in the bot's database (`localDisplayName`: a second "alice" is "alice_1").
    public let localDisplayName: String
    /// `active`, `deleted`, `deletedByUser`.
    public let status: String?

    public init?(json: JSONValue) {
        guard let id = json["contactId"]?.int64Value else { return nil }
        contactId = id
        localDisplayName = json["localDisplayName"]?.stringValue ?? ""
        displayName = json["profile"]?["displayName"]?.stringValue ?? localDisplayName
        status = json["contactStatus"]?.stringValue
    }
}

/// A received message (an item of `newChatItems` whose content is `rcvMsgContent`).
public struct Message: Sendable {
    public let chatType: ChatType
    /// The item's id (for quoting, reactions).
    public let itemId: Int64
    /// The sender's contact id: the contact of a direct chat, or the member's contact (if any) in a group.
    public let contactId: Int64?
    /// The group of a group message.
    public let groupId: Int64?
    /// The sender's chosen display name.
    public let displayName: String
    /// The sender's name unique in the bot's database (for direct chats; the member's name in groups).
    public let localDisplayName: String
    /// The group of a group message (its id, names and the bot's role in it).
    public let group: GroupRef?
    /// The sender of a group message: member id, names, role, when it joined.
    public let member: GroupMemberInfo?
    /// `msgContent.type`: `text`, `link`, `image`, `file`, ….
    public let contentType: String
    /// `msgContent.text` (a caption for media).
    public let text: String
    /// The whole `msgContent`.
    public let content: JSONValue
    /// The item's time (`meta.itemTs`): when it was sent, as far as the receiving side knows.
    public let sentAt: Date?

    init?(item: JSONValue) {
        guard item["chatItem"]?["content"]?["type"]?.stringValue == "rcvMsgContent",
              let content = item["chatItem"]?["content"]?["msgContent"],
              let info = item["chatInfo"] else { return nil }
        self.content = content
        contentType = content["type"]?.stringValue ?? "unknown"
        text = content["text"]?.stringValue ?? ""
        itemId = item["chatItem"]?["meta"]?["itemId"]?.int64Value ?? 0
        sentAt = item["chatItem"]?["meta"]?["itemTs"]?.stringValue.flatMap(GroupMemberInfo.parseTimestamp)
        hasLink = contentType == "link" || item["chatItem"]?["meta"]?["hasLink"]?.boolValue == true || Message.containsLink(text)
        switch info["type"]?.stringValue {
        case "direct":
            guard let contact = info["contact"].flatMap(Contact.init(json:)) else { return nil }
            chatType = .direct
            contactId = contact.contactId
            groupId = nil
            displayName = contact.displayName
            localDisplayName = contact.localDisplayName
            group = nil
            member = nil
        case "group":
            guard let group = info["groupInfo"].flatMap(GroupRef.init(json:)) else { return nil }
            let sender = item["chatItem"]?["chatDir"]?["groupMember"]
            chatType = .group
            groupId = group.groupId
            self.group = group
            member = sender.flatMap(GroupMemberInfo.init(json:))
            contactId = sender?["memberContactId"]?.int64Value
            localDisplayName = sender?["localDisplayName"]?.stringValue ?? ""
            displayName = sender?["memberProfile"]?["displayName"]?.stringValue ?? localDisplayName
        default:
            return nil
        }
    }

    /// Whether the message contains a link: a `link` message, or text with a URL (as SimpleX's
    /// `hasLink`, which the Chat API sets on the item).
    public let hasLink: Bool

    /// The chat reference commands take: `@<contactId>` or `#<groupId>`.
    public var chatRef: String {
        switch chatType {
        case .direct: "@\(contactId ?? 0)"
        case .group: "#\(groupId ?? 0)"
        }
    }
}

extension Message {
    /// A URL-looking run in `text`: `scheme://`, `www.`, or a `simplex:` link.
    static func containsLink(_ text: String) -> Bool {
        let lower = text.lowercased()
        return lower.contains("://") || lower.contains("www.") || lower.contains("simplex:/")
    }
}

/// A request to connect through the bot's address (`receivedContactRequest`).
public struct ContactRequest: Sendable, Hashable {
    /// The id `/_accept` and `/_reject` take.
    public let requestId: Int64
    /// The name the requester chose.
    public let displayName: String
    public let localDisplayName: String
    /// The requester's full name, often empty.
    public let fullName: String

    public init?(json: JSONValue) {
        guard let id = json["contactRequestId"]?.int64Value else { return nil }
        requestId = id
        localDisplayName = json["localDisplayName"]?.stringValue ?? ""
        displayName = json["profile"]?["displayName"]?.stringValue ?? localDisplayName
        fullName = json["profile"]?["fullName"]?.stringValue ?? ""
    }
}
