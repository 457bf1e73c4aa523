import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase

// Member profiles in groups (SimpleX `xInfoMember`, `userMemberProfileUpdatedAt`): a member's
// `x.info` changes its profile in the group (`groupMemberUpdated`), forwarded by the host like
// content; the user's own profile change goes to its groups' members as `x.info`.

extension ChatController {
    /// Sends the user's new profile to the members of each group it is in (`x.info`), the group's
    /// membership taking it; a group that refuses (the user not current) is skipped. SimpleX sends
    /// it before the user's next message in each group; **Swiftplex** sends it at once.
    func sendProfileToGroups(userId: Int64, profile: Profile) async {
        guard let json = try? JSONValueEncoder().encode(profile), let p = try? MemberProfile(json: json) else { return }
        let groups = (try? await dbRead { db in
            // Not to groups joined incognito: they know the user by its random profile only.
            try Int64.fetchAll(db, sql: "SELECT id FROM chat_group WHERE user_id = ? AND deleted = 0 AND incognito = 0 ORDER BY id", arguments: [userId])
        }) ?? []
        for groupId in groups where !closing {
            do {
                _ = try await commitGroupInput(groupId, userId: userId, .updateMembershipProfile(p))
            } catch let e as GroupError where e.code == .notJoined {
                // Not in that group any more: nothing to tell.
            } catch {
                logger.info("the profile was not sent to a group", metadata: ["group": "\(groupId)", "error": "\(error)"])
            }
        }
    }

    /// A member as it was before its profile changed (`groupMemberUpdated.fromMember`).
    nonisolated static func memberBefore(_ now: GroupMember, profile old: MemberProfile?) -> GroupMember {
        guard let old else { return now }
        var before = now
        let p = (try? PeerInput.profile(old.json)) ?? Profile(displayName: old.displayName, fullName: old.fullName)
        before.memberProfile = LocalProfile(profileId: now.memberProfile.profileId, profile: p)
        return before
    }
}
