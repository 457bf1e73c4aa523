import ChatModel
import SwiftplexBase

/// What peers and commands hand the engine, checked and decoded into model values before anything
/// is stored: a profile, message content, a quote. Malformed input is refused with a typed
/// ``ChatProtocolError`` (`malformed`); nothing else of the message or the connection is lost.
enum PeerInput {
    /// Fields of the local profile types, never taken from a peer's profile.
    static let localFields = ["profileId", "localAlias", "localBadge", "contactDomainVerified"]

    /// A Profile: an object with a string `displayName`; `fullName` defaults to "", well-formed
    /// `preferences` (a feature's `allow` is `always`, `yes` or `no`; commands are commands),
    /// optional strings where the model has them. Unknown fields are kept (``Profile/otherFields``).
    static func profile(_ value: JSONValue) throws(ChatProtocolError) -> Profile {
        guard case var .object(pairs) = value else { throw ChatProtocolError(.malformed, "a profile must be an object") }
        guard value["displayName"]?.stringValue != nil else { throw ChatProtocolError(.malformed, "a profile needs a displayName string") }
        pairs.removeAll { localFields.contains($0.0) }
        if value["fullName"] == nil { pairs.insert(("fullName", .string("")), at: 1) }
        do {
            return try JSONValueDecoder().decode(Profile.self, from: .object(pairs))
        } catch {
            throw ChatProtocolError(.malformed, "malformed profile: \(error)")
        }
    }

    /// MsgContent: an object with a string `type`; a known kind with bad fields, or an unknown
    /// kind, is kept whole (``MsgContent/unknown(tag:json:)``) as SimpleX passes content on.
    static func content(_ value: JSONValue?) throws(ChatProtocolError) -> MsgContent {
        guard let value, case .object = value, value["type"]?.stringValue != nil else {
            throw ChatProtocolError(.malformed, "message content must be an object with a type")
        }
        do {
            return try JSONValueDecoder().decode(MsgContent.self, from: value)
        } catch {
            throw ChatProtocolError(.malformed, "malformed message content: \(error)")
        }
    }

    /// A quote's reference (`msgRef`): the quoted message's shared id, when it was sent and by which side.
    struct QuoteRef: Sendable, Equatable {
        var msgId: String?
        var sentAt: ChatTimestamp
        /// Whether the quoting peer sent the quoted message (from its side).
        var sent: Bool?
        var content: MsgContent
    }

    /// A received `quote`: `{"msgRef": {"msgId", "sentAt", "sent"}, "content": {…}}`. `sentAt`
    /// must be a timestamp; a missing one is now.
    static func quote(_ value: JSONValue) throws(ChatProtocolError) -> QuoteRef {
        guard let ref = value["msgRef"], case .object = ref else { throw ChatProtocolError(.malformed, "a quote needs msgRef") }
        let content = try content(value["content"])
        var sentAt = ChatTimestamp.now()
        if let at = ref["sentAt"] {
            guard let text = at.stringValue, let parsed = ChatTimestamp(parsing: text) else {
                throw ChatProtocolError(.malformed, "a quote's sentAt must be a timestamp")
            }
            sentAt = parsed
        }
        if let id = ref["msgId"], id.stringValue == nil { throw ChatProtocolError(.malformed, "a quote's msgId must be a string") }
        if let sent = ref["sent"], sent.boolValue == nil { throw ChatProtocolError(.malformed, "a quote's sent must be a boolean") }
        return QuoteRef(msgId: ref["msgId"]?.stringValue, sentAt: sentAt, sent: ref["sent"]?.boolValue, content: content)
    }

    /// A profile in an agent message's info (`x.info` or `x.contact`); nil when there is none or
    /// it is malformed (the connection goes on, without the peer's profile).
    static func profile(fromInfo info: [UInt8]) -> Profile? {
        guard let m = try? ChatMessage(decoding: info), m.event == "x.info" || m.event == "x.contact", let p = m.params["profile"] else { return nil }
        return try? profile(p)
    }
}
