import GroupProtocol
import SwiftplexBase

/// Why a channel operation — a local command, a message from a peer, a link — was refused. A
/// refused input changes nothing (except where a machine says it counts refusals per relay).
/// Messages name the event and the field, never a value a peer sent.
public struct ChannelError: CodedError {
    public enum Code: String, Sendable {
        /// The link is a chat relay's address (`/r#`): it serves channel owners, nobody connects to it.
        case relayAddress
        /// A chat relay's address was expected (`/relays name=<name> <address>`), and this link is
        /// another kind (a contact address, an invitation, a group or channel link).
        case notRelayAddress
        /// The text is not a SimpleX link this module recognises.
        case invalidLink
        /// The actor's role does not allow the action.
        case notAuthorized
        /// The message came from a peer that may not send it (content authored by a relay, an
        /// introduction from a subscriber, …).
        case unexpectedSender
        /// The message's signature is missing where one is required, or does not verify.
        case badSignature
        /// The message's params or its element bytes are malformed.
        case malformedMessage
        /// The input does not fit the channel's or the relay's state.
        case invalidState
        /// The relay, owner or subscriber is not known to this channel.
        case unknownMember
        /// The member id is taken already.
        case duplicateMember
        /// The relay refuses this channel (it left it; `/_relay allow` clears that).
        case rejected
        /// The channel's or the relay's link data does not match what it must (entity id, channel id).
        case linkDataMismatch
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The error SimpleX's clients show for a relay address given to connect (SimpleX's iOS
    /// product plan; docs/channels.md §0).
    public static let relayAddressText = "This is a chat relay address, it cannot be used to connect."

    static func malformed(_ e: GroupMessageError) -> ChannelError { ChannelError(.malformedMessage, e.message) }
}
