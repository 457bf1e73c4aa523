import ChatCore
import ChatModel
import SwiftplexBase

extension ChatAPI {
    /// Runs a terminal command (``CLICommand``) as the active user: names are looked up, then the
    /// engine's own operation runs and its response is the answer.
    func dispatchCLI(_ command: CLICommand) async throws -> ChatResponse {
        let c = controller
        let userId = try await c.activeUserId()
        switch command {
        case let .addContact(incognito, short):
            return try await c.addContact(userId: userId, incognito: incognito, short: short)
        case let .createAddress(short):
            return try await c.createAddress(userId: userId, short: short)
        case .showAddress:
            return try await c.showAddress(userId: userId)
        case .deleteAddress:
            return try await c.deleteAddress(userId: userId)
        case let .setProfileAddress(enabled):
            return try await c.setProfileAddress(userId: userId, enabled: enabled)
        case let .autoAccept(setting):
            guard case let .userContactLink(_, link) = try await c.showAddress(userId: userId) else {
                throw ChatFailure(ChatError.store(.userContactLinkNotFound))
            }
            var settings: [(String, JSONValue)] = [("businessAddress", .bool(link.addressSettings.businessAddress))]
            if let setting {
                settings.append(("autoAccept", .object([("acceptIncognito", .bool(setting.incognito))])))
                if let reply = setting.reply { settings.append(("autoReply", reply)) }
            }
            return try await c.setAddressSettings(userId: userId, settings: .object(settings))
        case let .acceptContact(name, incognito):
            return try await c.acceptRequest(try await c.contactRequestId(userId: userId, named: name), incognito: incognito)
        case let .rejectContact(name):
            return try await c.rejectRequest(try await c.contactRequestId(userId: userId, named: name))
        case .listContacts:
            return try await c.listContacts(userId: userId)
        case let .listGroups(contact, search):
            let contactId = try await contact.asyncMap { try await c.contactId(userId: userId, named: $0) }
            return try await c.listGroups(userId: userId, contactId: contactId, search: search)
        case let .sendMessage(.contact(name), text):
            return try await c.send(contactId: try await c.contactId(userId: userId, named: name), messages: [Self.textMessage(text)])
        case let .sendMessage(.group(name), text):
            return try await c.sendToGroup(groupId: try await c.groupId(userId: userId, named: name), messages: [Self.textMessage(text)])
        case let .updateProfile(displayName, fullName):
            return try await c.updateProfileNames(userId: userId, displayName: displayName, fullName: fullName)
        case let .help(section):
            return .chatHelp(helpSection: section.rawValue)
        case let .newGroup(name, fullName, incognito):
            let profile = JSONValue.object([("displayName", .string(name)), ("fullName", .string(fullName))])
            return try await c.createGroup(userId: userId, incognito: incognito, profile: profile)
        case let .addMember(group, contact, role):
            let groupId = try await c.groupId(userId: userId, named: group)
            return try await c.addMember(groupId: groupId, contactId: try await c.contactId(userId: userId, named: contact), role: role)
        case let .joinGroup(group):
            return try await c.joinGroup(groupId: try await c.groupId(userId: userId, named: group))
        case let .leaveGroup(group):
            return try await c.leaveGroup(groupId: try await c.groupId(userId: userId, named: group))
        case let .listMembers(group):
            return try await c.listMembers(groupId: try await c.groupId(userId: userId, named: group))
        case let .deleteContact(name, mode):
            let contactId = try await c.contactId(userId: userId, named: name)
            switch mode {
            case let .full(notify), let .entity(notify): return try await c.deleteContact(contactId: contactId, notify: notify, messagesOnly: false)
            case .messages: return try await c.deleteContact(contactId: contactId, notify: false, messagesOnly: true)
            }
        case let .deleteGroup(group):
            return try await c.deleteGroup(groupId: try await c.groupId(userId: userId, named: group))
        }
    }

    /// A text message as `/_send` takes it (a ComposedMessage).
    static func textMessage(_ text: String) -> JSONValue {
        .object([("msgContent", .object([("type", "text"), ("text", .string(text))])), ("mentions", .object([]))])
    }
}

extension Optional {
    fileprivate func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
