import ChatModel
import SwiftplexBase
import SwiftplexSQL

/// What the terminal's commands need beside the API's (`@name text`, `/ac name`, `/p name`, …):
/// they act as the active user and name contacts, groups and requests by their local names.
extension ChatController {
    /// The active user's id (`noActiveUser` when there is none).
    public func activeUserId() async throws -> Int64 { try await activeUser().id }

    /// The contact with this local name (`contactNotFoundByName` when none has it). Local names
    /// are unique per user; a current contact is taken before a deleted one.
    public func contactId(userId: Int64, named name: String) async throws -> Int64 {
        guard case let .contactsList(_, contacts) = try await listContacts(userId: userId) else {
            throw ChatFailure.store(.contactNotFoundByName(contactName: name))
        }
        let named = contacts.filter { $0.localDisplayName == name }
        guard let contact = named.first(where: { $0.contactStatus != .deleted }) ?? named.first else {
            throw ChatFailure.store(.contactNotFoundByName(contactName: name))
        }
        return contact.contactId
    }

    /// The group with this local name (`groupNotFoundByName` when none has it).
    public func groupId(userId: Int64, named name: String) async throws -> Int64 {
        guard case let .group(.groupsList(list)) = try await listGroups(userId: userId, contactId: nil, search: nil),
              let group = list.groups.first(where: { $0.localDisplayName == name }) else {
            throw ChatFailure.store(.groupNotFoundByName(groupName: name))
        }
        return group.groupId
    }

    /// The pending contact request with this local name (`contactRequestNotFoundByName`).
    public func contactRequestId(userId: Int64, named name: String) async throws -> Int64 {
        let requests = try await dbRead { db in
            try ContactRequestRecord.filter(ContactRequestRecord.Columns.userId == userId).order(ContactRequestRecord.Columns.id).fetchAll(db)
        }.map(RequestRow.init)
        guard let request = requests.first(where: { ($0.localName ?? $0.profile.displayName) == name }) else {
            throw ChatFailure.store(.contactRequestNotFoundByName(contactName: name))
        }
        return request.id
    }

    /// Changes the user's display name and full name, keeping the rest of its profile (`/p`).
    public func updateProfileNames(userId: Int64, displayName: String, fullName: String) async throws -> ChatResponse {
        var profile = try await user(userId).profile
        profile.displayName = displayName
        profile.fullName = fullName
        return try await updateProfile(userId: userId, profile: try JSONValueEncoder().encode(profile))
    }
}
