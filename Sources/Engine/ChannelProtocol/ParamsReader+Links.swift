import GroupProtocol
import SwiftplexBase

extension ParamsReader {
    /// A short link of the given kinds (`groupLink` is a channel link `/c#` or a group link `/g#`,
    /// `relayLink` a relay's per-channel link, which SimpleX creates as a group link).
    func link(_ key: String, kinds: Set<SimplexLinkType>) throws(GroupMessageError) -> String {
        let s = try string(key, maxLength: ChannelLimits.maxLinkBytes)
        guard let kind = SimplexLink.recognize(s), kinds.contains(kind.type) else {
            throw invalid(key, "is not a \(kinds.map(\.rawValue).sorted().joined(separator: " or ")) link")
        }
        return s
    }
}
