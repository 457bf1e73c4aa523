import SwiftplexBase

/// What a member may want to do in a group — as a local command, or as the sender of a received
/// control message. The same check decides both: a command the user may not give is refused
/// with `groupUserRole`, a received message its sender may not send is refused, never applied.
public enum GroupAction: Sendable, Hashable {
    /// Send content (`x.msg.new`, `x.msg.update`) to the group.
    case sendContent
    /// Invite a contact (`x.grp.inv`), or — as the host — announce (`x.grp.mem.new`) or pass on
    /// (`x.grp.mem.fwd`) a member joining with this role.
    case invite(as: GroupMemberRole)
    /// Introduce existing members to a new one (`x.grp.mem.intro`), and forward members'
    /// messages (`x.grp.msg.forward`) — the host's part.
    case host
    /// Create or change the group link for joiners with this role (`/_create link`, `/_set link role`).
    case manageLink(joinAs: GroupMemberRole)
    /// Admit a member waiting for review with this role (`x.grp.link.acpt`).
    case admit(as: GroupMemberRole)
    /// Change a member's role from the target's role to this one (`x.grp.mem.role`).
    case changeRole(to: GroupMemberRole)
    /// Remove the target member (`x.grp.mem.del`).
    case remove
    /// Block or unblock the target member for all (`x.grp.mem.restrict`).
    case block
    /// Delete a message of the target member for all (`x.msg.del` with its `memberId`).
    case deleteMessage
    /// Change the group's profile or preferences (`x.grp.info`, `x.grp.prefs`).
    case updateProfile
    /// Delete the group for everyone (`x.grp.del`).
    case deleteGroup
}

/// The permission table, in one place (docs/groups.md "Roles and permissions" prints it and a test
/// checks the two agree). Sources: SimpleX `Library/Subscriber.hs` (`memberCanSend`,
/// `checkHostRole`, `xGrpMemIntro`, `xGrpMemRole` with `roleRequiredToChange`, `xGrpMemRestrict`,
/// `xGrpMemDel`, `groupMessageDelete`, `xGrpInfo`, `xGrpDel`, `xGrpLinkAcpt`,
/// `isMemberGrpFwdRelay`), `Library/Internal.hs` (`roleRequiredToChange`), `Commands.hs`
/// (`APICreateGroupLink`: admin, role at most member).
public enum GroupPermissions {
    /// Nil when `actor` may do `action` to a member whose role is `target` (ignored by actions
    /// without a target); otherwise the refusal, naming the least sufficient role when there is one.
    public static func check(actor: GroupMemberRole, action: GroupAction, target: GroupMemberRole? = nil) -> GroupError? {
        func need(_ role: GroupMemberRole, _ what: String) -> GroupError? {
            actor >= role ? nil : GroupError(.notAuthorized, "\(what) needs role \(role.name) (actor is \(actor.name))", requiredRole: role)
        }
        func refuse(_ what: String) -> GroupError { GroupError(.notAuthorized, what) }
        func needTarget(_ what: String) -> GroupError? {
            target == nil ? refuse("\(what) needs a target member") : nil
        }

        switch action {
        case .sendContent:
            // `memberCanSend`: role above observer; relays never author.
            return need(.author, "sending messages")
        case let .invite(role):
            guard role.isKnown, role != .relay else { return refuse("members cannot join as \(role.name)") }
            return need(max(.admin, role), "inviting as \(role.name)")
        case .host:
            return need(.admin, "introducing and forwarding members")
        case let .manageLink(role):
            guard role >= .observer, role <= .member else { return refuse("group link role must be observer, author or member, not \(role.name)") }
            return need(.admin, "managing the group link")
        case let .admit(role):
            guard role.isKnown, role != .relay else { return refuse("members cannot be admitted as \(role.name)") }
            return need(max(.moderator, role), "admitting as \(role.name)")
        case let .changeRole(to):
            if let e = needTarget("changing a role") { return e }
            let from = target!
            guard from != .relay, to != .relay else { return refuse("the relay role cannot be assigned or changed") }
            guard from.isKnown, to.isKnown else { return refuse("unknown roles cannot be changed or assigned") }
            return need(requiredToChange(from: from, to: to), "changing role \(from.name) to \(to.name)")
        case .remove:
            if let e = needTarget("removing a member") { return e }
            return need(max(.admin, target!), "removing a \(target!.name)")
        case .block:
            if let e = needTarget("blocking a member") { return e }
            return need(max(.moderator, target!), "blocking a \(target!.name)")
        case .deleteMessage:
            if let e = needTarget("deleting a member's message") { return e }
            return need(max(.moderator, target!), "deleting a message of a \(target!.name)")
        case .updateProfile:
            return need(.owner, "changing the group profile")
        case .deleteGroup:
            return need(.owner, "deleting the group")
        }
    }

    /// `check` as a throwing call.
    public static func authorize(actor: GroupMemberRole, action: GroupAction, target: GroupMemberRole? = nil) throws(GroupError) {
        if let e = check(actor: actor, action: action, target: target) { throw e }
    }

    /// SimpleX `roleRequiredToChange`: moderators move members between observer, author and
    /// member; anything involving a higher role needs admin and at least both roles (so only
    /// owners touch owners).
    public static func requiredToChange(from: GroupMemberRole, to: GroupMemberRole) -> GroupMemberRole {
        if from <= .member && to <= .member { return .moderator }
        return max(.admin, from, to)
    }
}
