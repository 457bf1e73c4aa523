import SwiftplexBase

/// The engine's id of a direct contact (the chat store's `contact_id`); the group machine only
/// passes it back in effects.
public typealias ContactRef = Int64

/// One member as the group machine knows it (the engine persists these).
public struct GroupMemberState: Sendable, Hashable {
    public var memberId: MemberId
    public var role: GroupMemberRole
    public var status: GroupMemberStatus
    public var category: GroupMemberCategory
    public var profile: MemberProfile?
    /// The member who announced or introduced it to us (SimpleX `invitedByGroupMemberId`): the
    /// only one expected to forward its messages, and where `x.grp.mem.con` about it goes.
    public var invitedBy: MemberId?
    /// Blocked for all by a moderator (`x.grp.mem.restrict`).
    public var blocked: Bool
    /// The direct contact involved: the one we invited (invitee), or who invited us (host).
    public var contact: ContactRef?
    /// Host only: the invitee came through the group link (it gets `x.grp.link.mem` once connected).
    public var viaLink: Bool
    /// Host only: a link joiner's connection is up while it waits for review (`pending_review`),
    /// so that admitting it introduces it at once.
    public var pendingConnected: Bool

    public init(memberId: MemberId, role: GroupMemberRole, status: GroupMemberStatus, category: GroupMemberCategory,
                profile: MemberProfile? = nil, invitedBy: MemberId? = nil, blocked: Bool = false, contact: ContactRef? = nil,
                viaLink: Bool = false, pendingConnected: Bool = false) {
        self.memberId = memberId
        self.role = role
        self.status = status
        self.category = category
        self.profile = profile
        self.invitedBy = invitedBy
        self.blocked = blocked
        self.contact = contact
        self.viaLink = viaLink
        self.pendingConnected = pendingConnected
    }

    /// Waiting for admission (knocking): `pending_approval` or `pending_review`.
    public var isPending: Bool { status == .pendingApproval || status == .pendingReview }

    /// The member's connection to us is up (messages go to it directly).
    public var isConnected: Bool { status == .connected || status == .complete || status == .creator }

    public var info: MemberInfo {
        MemberInfo(memberId: memberId, memberRole: role, profile: profile ?? MemberProfile(displayName: String(memberId.text.prefix(7))))
    }
}

/// The host's record of introducing an existing member (`re`) to a new one (`to`) — SimpleX
/// `group_member_intros` with its statuses (`new`, `sent`, `rcv`, `fwd`, `re-con`, `to-con`, `con`).
public struct Introduction: Sendable, Hashable {
    public struct Key: Sendable, Hashable {
        /// The member who was in the group already.
        public let re: MemberId
        /// The new member.
        public let to: MemberId
        public init(re: MemberId, to: MemberId) {
            self.re = re
            self.to = to
        }
    }

    public enum Status: String, Sendable, Hashable {
        /// `x.grp.mem.intro` sent to the new member.
        case sent
        /// The new member's `x.grp.mem.inv` arrived.
        case invitationReceived = "rcv"
        /// `x.grp.mem.fwd` sent to the existing member.
        case invitationForwarded = "fwd"
        /// The existing member reported the connection (`x.grp.mem.con`).
        case reConnected = "re-con"
        /// The new member reported it.
        case toConnected = "to-con"
        /// Both did.
        case connected = "con"

        /// The host forwards between the two until both have reported the connection. (SimpleX
        /// `getForwardIntroducedMembers` stops at the first report, as its members already send
        /// to a connection that is ready for sending; a Swiftplex member sends to another only
        /// once its own side is connected, so a host that stopped at the first report would drop
        /// what the other side writes in between. A copy that comes both ways is a duplicate.)
        public var needsForwarding: Bool {
            switch self {
            case .sent, .invitationReceived, .invitationForwarded, .reConnected, .toConnected: true
            case .connected: false
            }
        }
    }

    public var key: Key
    public var status: Status

    public init(key: Key, status: Status) {
        self.key = key
        self.status = status
    }
}

/// What the group machine is told.
public enum GroupInput: Sendable, Hashable {
    // Local commands.
    /// Invite a contact (`/_add #g <contact> <role>`) with a new random member id; `profile` is the
    /// contact's profile, which the host announces the invitee with (SimpleX: the contact's profile).
    case addMember(contact: ContactRef, memberId: MemberId, role: GroupMemberRole, profile: MemberProfile? = nil)
    /// Accept the received invitation (`/_join #g`).
    case join
    /// `/_member role #g <member> <role>`.
    case changeRole(MemberId, to: GroupMemberRole)
    /// `/_remove #g <member>[ messages=on]`.
    case remove(MemberId, messages: Bool)
    /// `/_block #g <member> blocked=on|off`.
    case block(MemberId, blocked: Bool)
    /// `/_leave #g`.
    case leave
    /// `/_delete #g` (owner: for everyone).
    case deleteGroup
    /// `/_group_profile #g <json>`.
    case updateProfile(GroupProfile)
    /// Content the user sends (`x.msg.new`, `x.msg.update`, `x.msg.del`, `x.msg.react`, …).
    case sendContent(event: String, params: JSONValue)
    /// A join request through the group link (host): admit the requester as a new member with
    /// the link's role — `pending_review` when `review` (the profile's `memberAdmission.review`)
    /// — answering the agent's contact request `request` with `x.grp.link.inv`.
    case linkRequest(memberId: MemberId, role: GroupMemberRole, profile: MemberProfile, request: Int64, review: Bool)
    /// `/_accept member #g <member> <role>`: admit a member waiting for review.
    case acceptMember(MemberId, role: GroupMemberRole)
    /// The user's profile changed (`/_profile`): the membership takes it and the members get `x.info`.
    case updateMembershipProfile(MemberProfile)

    // From peers.
    /// A message on the member connection of `from` (never the handshake's connection info),
    /// with the relay's receive time (RFC 3339) used when forwarding it.
    case received(from: MemberId, GroupEnvelope, brokerTs: String)

    // Connection events.
    /// The agent made the invitation connection asked for by `createInvitation(for:)`.
    case invitationCreated(for: MemberId, connRequest: String)
    /// The joiner's confirmation on our invitation connection for `from`, with its connection info.
    case confirmation(from: MemberId, info: GroupEnvelope)
    /// The connection with the member is up (agent `CON`).
    case connected(MemberId)
}

/// What the engine must do, in order. Nothing here has happened yet: the engine performs each
/// effect (agent calls, store writes, API events) and commits the machine's new state with them.
public enum GroupEffect: Sendable, Hashable {
    /// Send a message over the member's connection (queued by the agent until it is up).
    case send(GroupEnvelope, to: MemberId)
    /// Send a message over the direct contact connection (`x.grp.inv`).
    case sendToContact(GroupEnvelope, contact: ContactRef)
    /// Create an invitation connection for this member; answer with `invitationCreated`.
    case createInvitation(for: MemberId)
    /// Join the member's connection request with this connection info.
    case joinConnection(for: MemberId, connRequest: String, info: GroupEnvelope)
    /// Accept the member's confirmation, answering with `info` (nil: the engine's usual `x.ok`).
    case allowConnection(for: MemberId, info: GroupEnvelope?)
    /// Accept the agent's contact request `request` (a group link join) for this member, with
    /// `info` (`x.grp.link.inv`) as the connection info.
    case acceptLinkRequest(for: MemberId, request: Int64, info: GroupEnvelope)
    /// Delete the member's connection (and its relay queues).
    case deleteConnection(for: MemberId)
    /// Delete every member connection of the group (the user left, was removed, or it was deleted).
    case deleteAllConnections
    /// Persist the member's record.
    case saveMember(GroupMemberState)
    /// Persist the user's own membership.
    case saveMembership(GroupMemberState)
    /// Persist the group's profile.
    case saveProfile(GroupProfile)
    /// Persist an introduction's status (host only); `nil` status deletes it.
    case saveIntroduction(Introduction.Key, Introduction.Status?)
    /// Send the group's history to the new member (when the group's `history` preference is on).
    case sendHistory(to: MemberId)
    /// Apply received content (`x.msg.*`, `x.info`, `x.file.cancel`) from `author` as a chat item:
    /// it passed the sender checks; `blocked` marks the author as blocked by a moderator (SimpleX
    /// stores such items as `blocked by admin`). `msgTs` is the forward's `msgTs` (when the forwarder
    /// received it from the author — the item's time, SimpleX `itemTs`), nil when received directly.
    case applyContent(GroupEnvelope, author: MemberId, forwardedBy: MemberId?, blocked: Bool, msgTs: String?)
    /// Report an API event.
    case emit(GroupEvent)
}

/// Group events, named after the SimpleX bot API events the engine builds from them.
public enum GroupEvent: Sendable, Hashable {
    /// `sentGroupInvitation`.
    case sentGroupInvitation(member: MemberId, contact: ContactRef)
    /// `receivedGroupInvitation {fromMemberRole, memberRole}`.
    case receivedGroupInvitation(contact: ContactRef, fromMemberRole: GroupMemberRole, memberRole: GroupMemberRole)
    /// `userAcceptedGroupSent`.
    case userAcceptedGroupSent
    /// `userJoinedGroup {hostMember}`.
    case userJoinedGroup(host: MemberId)
    /// `joinedGroupMember` (host: the invitee is connected).
    case joinedGroupMember(MemberId)
    /// `joinedGroupMemberConnecting {hostMember, member}` (`x.grp.mem.new`).
    case joinedGroupMemberConnecting(host: MemberId, member: MemberId)
    /// `connectedToGroupMember`.
    case connectedToGroupMember(MemberId)
    /// `memberRole {byMember, member, fromRole, toRole}`; `byMember` nil when the user did it
    /// (`membersRoleUser`).
    case memberRole(by: MemberId?, member: MemberId, from: GroupMemberRole, to: GroupMemberRole)
    /// The user's own role changed (`memberRole` with the membership as member).
    case userRole(by: MemberId, from: GroupMemberRole, to: GroupMemberRole)
    /// `memberBlockedForAll`; `by` nil for the user's own command (`membersBlockedForAllUser`).
    case memberBlockedForAll(by: MemberId?, member: MemberId, blocked: Bool)
    /// `deletedMember`; `by` nil for the user's own command (`userDeletedMembers`).
    case deletedMember(by: MemberId?, member: MemberId, withMessages: Bool)
    /// `deletedMemberUser`.
    case deletedMemberUser(by: MemberId, withMessages: Bool)
    /// `leftMember`.
    case leftMember(MemberId)
    /// `leftMemberUser`.
    case leftMemberUser
    /// `groupDeleted`; `by` nil when the user deleted it (`groupDeletedUser`).
    case groupDeleted(by: MemberId?)
    /// `groupUpdated {fromGroup, toGroup, member_}`; `by` nil for the user's own change.
    case groupUpdated(by: MemberId?, from: GroupProfile, to: GroupProfile)
    /// `memberAcceptedByOther` (knocking).
    case memberAcceptedByOther(by: MemberId, member: MemberId)
    /// `groupLinkConnecting {hostMember}` (the joiner got the host's `x.grp.link.inv`).
    case groupLinkConnecting(host: MemberId)
    /// The user admitted a member waiting for review (`memberAccepted`, the command's response).
    case memberAccepted(MemberId)
    /// `groupMemberUpdated {fromMember, toMember}`: a member's `x.info` changed its profile.
    case memberUpdated(MemberId, from: MemberProfile?, to: MemberProfile)
}
