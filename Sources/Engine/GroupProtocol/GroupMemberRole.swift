import SwiftplexBase

/// A member's role, ordered as SimpleX orders them (`Types/Shared.hs`, `deriving Ord`):
/// a role from a newer client (`unknown`) < `relay` < `observer` < `author` < `member` <
/// `moderator` < `admin` < `owner`. Each role may do what the roles below it may do (see
/// ``GroupPermissions``); `relay` forwards a channel's messages and never authors any.
///
/// On the wire a role is its name (`"owner"`); a name this version does not know is kept as
/// `unknown(name)`, as SimpleX keeps it (`GRUnknown`), and it ranks below every known role, so it
/// is allowed nothing.
public enum GroupMemberRole: Sendable, Hashable, Comparable, CustomStringConvertible {
    case unknown(String)
    case relay
    case observer
    case author
    case member
    case moderator
    case admin
    case owner

    /// Every known role, lowest first.
    public static let known: [GroupMemberRole] = [.relay, .observer, .author, .member, .moderator, .admin, .owner]

    public init(name: String) {
        switch name {
        case "relay": self = .relay
        case "observer": self = .observer
        case "author": self = .author
        case "member": self = .member
        case "moderator": self = .moderator
        case "admin": self = .admin
        case "owner": self = .owner
        default: self = .unknown(name)
        }
    }

    public var name: String {
        switch self {
        case let .unknown(name): name
        case .relay: "relay"
        case .observer: "observer"
        case .author: "author"
        case .member: "member"
        case .moderator: "moderator"
        case .admin: "admin"
        case .owner: "owner"
        }
    }

    public var description: String { name }

    private var rank: Int {
        switch self {
        case .unknown: 0
        case .relay: 1
        case .observer: 2
        case .author: 3
        case .member: 4
        case .moderator: 5
        case .admin: 6
        case .owner: 7
        }
    }

    public static func < (lhs: GroupMemberRole, rhs: GroupMemberRole) -> Bool {
        if lhs.rank != rhs.rank { return lhs.rank < rhs.rank }
        // Two unknown roles: no order between them is meaningful; order by name so that `<` is a
        // strict total order (and `==` agrees with it).
        if case let .unknown(a) = lhs, case let .unknown(b) = rhs { return a < b }
        return false
    }

    public var isKnown: Bool { if case .unknown = self { false } else { true } }
}

/// Where a member stands in the group (SimpleX `GroupMemberStatus`, `Types.hs`); the JSON names
/// are SimpleX's (`"intro-inv"` included).
public enum GroupMemberStatus: String, Sendable, Hashable, CaseIterable {
    case rejected
    case removed
    case left
    case deleted
    case unknown
    case invited
    case pendingApproval = "pending_approval"
    case pendingReview = "pending_review"
    case introduced
    case introInvited = "intro-inv"
    case accepted
    case announced
    case connected
    case complete
    case creator

    /// SimpleX `memberCurrent'`: counted as in the group (messages go to it).
    public var isCurrent: Bool {
        switch self {
        case .introduced, .introInvited, .accepted, .announced, .connected, .complete, .creator: true
        case .rejected, .removed, .left, .deleted, .unknown, .invited, .pendingApproval, .pendingReview: false
        }
    }

    /// SimpleX `memberRemoved`: gone for good — nothing it sends is applied any more.
    public var isRemoved: Bool {
        switch self {
        case .rejected, .removed, .left, .deleted: true
        default: false
        }
    }
}

/// How a member came to be known (SimpleX `GroupMemberCategory`): the user itself, a member the
/// user invited, the member who invited the user, a member who joined before the user (introduced
/// with `x.grp.mem.intro`), or one who joined after (announced with `x.grp.mem.new`).
public enum GroupMemberCategory: String, Sendable, Hashable, CaseIterable {
    case user
    case invitee
    case host
    case pre
    case post
}
