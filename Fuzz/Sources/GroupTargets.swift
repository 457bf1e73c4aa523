import GroupProtocol
import SwiftplexBase

/// The group chat protocol as a member receives it (`GroupMessage.decodeEnvelope`, then the typed
/// `x.grp.*` decoding): bytes from any member of any group, and, as connection info, from anyone
/// holding a group link. Whatever decodes to a typed message re-encodes to an envelope that
/// decodes to the same message.
enum GroupMessageTarget: FuzzTarget {
    static let name = "group-message"
    static let summary = "GroupProtocol decodeEnvelope and GroupMessage.decode (x.grp.* params, forwarded envelopes), re-encoding round trip"

    static func fuzz(_ data: [UInt8]) {
        var r = ByteReader(data)
        let asConnInfo = r.byte() & 1 == 1
        let bytes = r.rest()
        guard let envelope = try? GroupMessage.decodeEnvelope(bytes, asConnInfo: asConnInfo) else { return }
        // Decoding is a function of the bytes.
        fuzzCheck((try? GroupMessage.decodeEnvelope(bytes, asConnInfo: asConnInfo)) == envelope, "the same bytes decoded twice differ")
        guard let message = try? envelope.groupMessage() else { return }
        // Re-encoding may be longer than the input (escapes, added defaults) and so over the limit:
        // that is refused, never sent; anything encoded must read back as the same message.
        guard let again = try? GroupMessage.encode(message.envelope(msgId: envelope.msgId)) else { return }
        let reread = try? GroupMessage.decodeEnvelope(again).groupMessage()
        fuzzCheck(reread == message, "\(envelope.event) does not survive re-encoding")
    }

    static func seeds() throws -> [[UInt8]] {
        let member = #"{"memberId":"AQIDBAUGBwgJCgsM","memberRole":"member","v":"1-18","profile":{"displayName":"carol","fullName":""}}"#
        let envelopes = [
            #"{"v":"1","msgId":"YWJj","event":"x.grp.mem.new","params":{"memberInfo":\#(member)}}"#,
            #"{"v":"1","msgId":"YWJk","event":"x.grp.mem.intro","params":{"memberInfo":\#(member),"memberRestrictions":{"restriction":"blocked"}}}"#,
            #"{"v":"1","msgId":"YWJl","event":"x.grp.mem.fwd","params":{"memberInfo":\#(member),"memberIntro":{"groupConnReq":"simplex:/invitation#/?v=2-7"}}}"#,
            #"{"v":"1","msgId":"YWJm","event":"x.grp.mem.role","params":{"memberId":"AQIDBAUGBwgJCgsM","role":"moderator"}}"#,
            #"{"v":"1","msgId":"YWJn","event":"x.grp.mem.del","params":{"memberId":"AQIDBAUGBwgJCgsM","messages":true}}"#,
            #"{"v":"1","msgId":"YWJo","event":"x.grp.info","params":{"groupProfile":{"displayName":"team","fullName":"","groupPreferences":{"history":{"enable":"on"}}}}}"#,
            #"{"v":"1","msgId":"YWJp","event":"x.grp.msg.forward","params":{"memberId":"AQIDBAUGBwgJCgsM","memberName":"carol","msgTs":"2026-11-23T17:43:42.123Z","msg":{"msgId":"YWJq","event":"x.msg.new","params":{"content":{"type":"text","text":"hi"}}}}}"#,
            #"{"v":"1","event":"x.grp.link.inv","params":{"groupLinkInvitation":{"fromMember":{"memberId":"AQIDBAUGBwgJCgsM","memberRole":"admin"},"fromMemberName":"alice","invitedMember":{"memberId":"DQ4PEBESExQVFhcY","memberRole":"member"},"groupProfile":{"displayName":"team","fullName":""},"groupSize":3}}}"#,
        ]
        // The first byte chooses message (0) or connection info (1).
        return envelopes.enumerated().map { [UInt8($0.offset & 1)] + Array($0.element.utf8) }
    }
}
