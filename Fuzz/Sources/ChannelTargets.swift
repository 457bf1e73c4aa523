import ChannelProtocol
import GroupProtocol
import SwiftplexBase

/// Channels as a relay and a subscriber receive them: the typed channel events (`x.grp.relay.*`,
/// `x.member`) as connection info from anyone holding a relay's address or link, and binary
/// batches (`=`) of plain, signed and forwarded elements from an owner or a relay, and (mode byte 2)
/// a channel link's user data (`GroupShortLinkData`). Whatever decodes re-encodes to the same
/// message; a batch re-encodes to the same bytes; link data reads back to the same value.
enum ChannelMessageTarget: FuzzTarget {
    static let name = "channel-message"
    static let summary = "ChannelProtocol ChannelMessage.decode (x.grp.relay.*, x.member), ChannelBatch.decode (signed/forward elements), GroupShortLinkData, round trips"

    static func fuzz(_ data: [UInt8]) {
        var r = ByteReader(data)
        let mode = r.byte()
        let bytes = r.rest()
        if mode == 2 {
            guard let data = try? GroupShortLinkData(bytes: bytes) else { return }
            fuzzCheck((try? GroupShortLinkData(bytes: data.bytes)) == data, "group short-link data does not read back to itself")
        } else if mode & 1 == 0 {
            guard let envelope = try? GroupMessage.decodeEnvelope(bytes, asConnInfo: true),
                  let message = try? envelope.channelMessage() else { return }
            guard let again = try? GroupMessage.encode(message.envelope(msgId: envelope.msgId), asConnInfo: true) else { return }
            let reread = try? GroupMessage.decodeEnvelope(again, asConnInfo: true).channelMessage()
            fuzzCheck(reread == message, "\(envelope.event) does not survive re-encoding")
        } else {
            guard let items = try? ChannelBatch.decode(bytes) else { return }
            fuzzCheck((try? ChannelBatch.decode(bytes)) == items, "the same batch decoded twice differs")
            let again = try? ChannelBatch.encode(items)
            fuzzCheck(again == bytes, "a batch does not re-encode to its bytes")
            for case let .forward(f) in items { _ = try? f.element.envelope() }
        }
    }

    static func seeds() throws -> [[UInt8]] {
        let messages = [
            #"{"v":"1","msgId":"YWJj","event":"x.grp.relay.inv","params":{"groupRelayInvitation":{"fromMember":{"memberId":"AQIDBAUGBwgJCgsM","memberRole":"owner"},"fromMemberProfile":{"displayName":"alice","fullName":""},"relayMemberId":"DQ4PEBESExQVFhcY","groupLink":"https://smp.example/c#a2V5"}}}"#,
            #"{"v":"1","msgId":"YWJk","event":"x.grp.relay.acpt","params":{"relayLink":"https://relay.example/g#a2V5","relayCap":{"webDomain":"relay.example"}}}"#,
            #"{"v":"1","msgId":"YWJl","event":"x.grp.relay.reject","params":{"reason":"rejoin_rejected"}}"#,
            #"{"v":"1","msgId":"YWJm","event":"x.grp.relay.test","params":{"challenge":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"}}"#,
            #"{"v":"1","msgId":"YWJn","event":"x.member","params":{"profile":{"displayName":"sam","fullName":""},"newMemberId":"c2Ft","newMemberKey":"MCowBQYDK2VwAyEAAQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=","viaRelay":"DQ4PEBESExQVFhcY"}}"#,
        ]
        var seeds = messages.map { [UInt8(0)] + Array($0.utf8) }
        let post = Array(#"{"v":"1","msgId":"cDE","event":"x.msg.new","params":{"content":{"type":"text","text":"hello"},"asGroup":true}}"#.utf8)
        let signed = ChannelElement.signed(binding: .channel, signatures: [Array(repeating: 7, count: 64)], body: post)
        let fwd = ForwardedElement(sender: .member(MemberId("AQIDBAUGBwgJCgsM")!, name: "alice"), brokerTs: 1_795_000_000, element: signed)
        let chan = ForwardedElement(sender: .channel, brokerTs: 1_795_000_001, element: .plain(body: post))
        seeds.append([1] + (try ChannelBatch.encode([.element(signed)])))
        seeds.append([1] + (try ChannelBatch.encode([.forward(fwd), .forward(chan), .element(.plain(body: post))])))
        let profile = ChannelProfiles.channelProfile(displayName: "news", channelLink: "https://relay.example/c#a2V5", publicGroupId: Array(repeating: 9, count: 32))
        seeds.append([2] + GroupShortLinkData(groupProfile: profile, publicMemberCount: 3).bytes)
        return seeds
    }
}
