import SwiftplexBase

/// Why a group message's params were not accepted. Messages name the event and the field, never
/// its value (which may be a peer's text or a connection request).
public struct GroupMessageError: CodedError {
    public enum Code: String, Sendable {
        /// A required field is absent.
        case missingField
        /// A field has the wrong JSON type (a number where a string belongs, …).
        case wrongType
        /// A field has the right type but a value the protocol does not allow (an empty member id,
        /// a role name where none is allowed, a time that is not a time).
        case invalidValue
        /// The message, a field or a list is beyond the protocol's limits.
        case tooLarge
        /// `x.grp.msg.forward` inside `x.grp.msg.forward`, or an event that is never forwarded.
        case notForwardable
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// Why a group operation — a local command or a message received from a member — was refused.
/// A refused input changes nothing.
public struct GroupError: CodedError {
    public enum Code: String, Sendable {
        /// The actor's role does not allow the action (`requiredRole` says what would).
        case notAuthorized
        /// The message names a member this group does not know.
        case unknownMember
        /// The member (id) is already in the group.
        case duplicateMember
        /// The member left, was removed or the group was deleted: nothing from it is applied.
        case memberNotCurrent
        /// The message came from a member that may not send it (an introduction from anyone but
        /// the host, a forward from an unexpected forwarder, …).
        case unexpectedSender
        /// The input does not fit the group's or the member's state.
        case invalidState
        /// The user is not (or no longer) in the group.
        case notJoined
        /// The message's params are malformed (the ``GroupMessageError`` is in the message).
        case malformedMessage
        /// The group has as many members as its limit allows (``GroupState/memberLimit``).
        case groupFull
    }

    public let code: Code
    public let message: String
    /// For `notAuthorized`: the least role that the action needs, when one role would do.
    public let requiredRole: GroupMemberRole?

    public init(_ code: Code, _ message: String, requiredRole: GroupMemberRole? = nil) {
        self.code = code
        self.message = message
        self.requiredRole = requiredRole
    }
}
