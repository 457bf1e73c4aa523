import ChatCore
import SwiftplexBase

/// Readable lines for the engine's events and errors (raw JSON only for typed-in API commands).
enum EventText {
    static func lines(for event: JSONValue) -> [String] {
        func name(_ contact: JSONValue?) -> String { Sanitize.line(contact?["localDisplayName"]?.stringValue ?? "?") }
        switch event["type"]?.stringValue {
        case "contactConnected":
            return ["\(name(event["contact"])) connected"]
        case "receivedContactRequest":
            let n = name(event["contactRequest"])
            // A name that does not print as it is (or looks like a request number) cannot be typed
            // back: the request is then addressed by its number.
            let raw = event["contactRequest"]?["localDisplayName"]?.stringValue ?? "?"
            let id = event["contactRequest"]?["contactRequestId"]?.intValue
            let handle = raw == n && !raw.hasPrefix("#") && !raw.contains("'") ? quoted(n) : id.map { "#\($0)" } ?? quoted(n)
            return ["contact request from \(n) (/ac \(handle) to accept, /rc \(handle) to reject)"]
        case "acceptingContactRequest":
            return ["accepting contact request from \(name(event["contact"]))"]
        case "contactDeletedByContact":
            return ["\(name(event["contact"])) deleted the contact"]
        case "newChatItems":
            guard case let .array(items)? = event["chatItems"] else { return [] }
            return items.compactMap { item in
                let content = item["chatItem"]?["content"]
                if item["chatInfo"]?["type"]?.stringValue == "group" {
                    let g = group(item["chatInfo"]?["groupInfo"])
                    // A channel's post as the channel (SimpleX's CLI: `#news> text`), not as the relay that brought it.
                    if item["chatItem"]?["chatDir"]?["type"]?.stringValue == "channelRcv", content?["type"]?.stringValue == "rcvMsgContent" {
                        return "#\(g)> \(text(content?["msgContent"]))"
                    }
                    switch content?["type"]?.stringValue {
                    case "rcvMsgContent": return "#\(g) \(memberName(item["chatItem"]?["chatDir"]?["groupMember"]))> \(text(content?["msgContent"]))"
                    case "sndMsgContent": return "sent to #\(g): \(text(content?["msgContent"]))"
                    default: return nil
                    }
                }
                let who = name(item["chatInfo"]?["contact"])
                switch content?["type"]?.stringValue {
                case "rcvMsgContent": return "@\(who): \(text(content?["msgContent"]))"
                case "sndMsgContent": return "sent to @\(who): \(text(content?["msgContent"]))"
                default: return nil
                }
            }
        case "chatItemUpdated":
            let item = event["chatItem"]
            return ["@\(name(item?["chatInfo"]?["contact"])) (edited): \(text(item?["chatItem"]?["content"]?["msgContent"]))"]
        case "chatItemsDeleted":
            guard case let .array(deletions)? = event["chatItemDeletions"] else { return [] }
            return deletions.map { "@\(name($0["deletedChatItem"]?["chatInfo"]?["contact"])) deleted a message" }
        case "chatItemReaction":
            let reaction = event["reaction"]
            let who = name(reaction?["chatInfo"]?["contact"])
            let emoji = Sanitize.line(reaction?["chatReaction"]?["reaction"]?["emoji"]?.stringValue ?? "?")
            return ["@\(who) \(event["added"]?.boolValue == false ? "removed the reaction" : "reacted") \(emoji)"]
        case "receivedGroupInvitation":
            let g = group(event["groupInfo"])
            return ["#\(g): \(name(event["contact"])) invites you to join the group (/j \(quoted(g)) to join)"]
        case "userJoinedGroup":
            if event["groupInfo"]?["membership"]?["memberRole"]?.stringValue == "relay" {
                return ["#\(group(event["groupInfo"])): you joined the group as relay"]
            }
            if event["groupInfo"]?["useRelays"]?.boolValue == true {
                return ["#\(group(event["groupInfo"])): subscribed through relay \(memberName(event["hostMember"]))"]
            }
            if event["groupInfo"]?["membership"]?["memberStatus"]?.stringValue == "pending_review" {
                return ["#\(group(event["groupInfo"])): you joined the group; a moderator reviews you before you can take part"]
            }
            return ["#\(group(event["groupInfo"])): you joined the group"]
        case "groupLinkConnecting" where event["groupInfo"]?["useRelays"]?.boolValue == true:
            return ["#\(group(event["groupInfo"])): joining the channel through relay \(memberName(event["hostMember"]))"]
        case "groupRelayUpdated":
            return ["#\(group(event["groupInfo"])): relay \(relayName(event["groupRelay"]?["userChatRelay"] ?? .null)) is \(Sanitize.line(event["groupRelay"]?["relayStatus"]?.stringValue ?? "?"))"]
        case "groupLinkDataUpdated" where event["relaysChanged"]?.boolValue == true:
            // SimpleX's CLI prints its groupLinkRelaysUpdated so: the relays, then the link.
            var lines = ["#\(group(event["groupInfo"])): group link relays updated, current relays:"]
            lines += (event["groupRelays"]?.arrayValue ?? []).map(relayStatusLine)
            if let link = event["groupLink"]?["connLinkContact"]?["connShortLink"]?.stringValue {
                lines += ["group link:", Sanitize.line(link)]
            }
            return lines
        case "groupLinkConnecting":
            return ["#\(group(event["groupInfo"])): joining the group through its link (host \(memberName(event["hostMember"])))"]
        case "joinedGroupMember":
            if event["member"]?["memberStatus"]?.stringValue == "pending_review" {
                let gid = event["groupInfo"]?["groupId"]?.intValue ?? 0, mid = event["member"]?["groupMemberId"]?.intValue ?? 0
                return ["#\(group(event["groupInfo"])): \(memberName(event["member"])) joined and waits for review (/_accept member #\(gid) \(mid) member)"]
            }
            return ["#\(group(event["groupInfo"])): \(memberName(event["member"])) joined the group"]
        case "memberAcceptedByOther":
            return ["#\(group(event["groupInfo"])): \(memberName(event["acceptingMember"])) admitted \(memberName(event["member"]))"]
        case "connectedToGroupMember":
            return ["#\(group(event["groupInfo"])): connected to \(memberName(event["member"]))"]
        case "leftMember":
            return ["#\(group(event["groupInfo"])): \(memberName(event["member"])) left the group"]
        case "deletedMember":
            return ["#\(group(event["groupInfo"])): \(memberName(event["byMember"])) removed \(memberName(event["deletedMember"]))"]
        case "deletedMemberUser":
            return ["#\(group(event["groupInfo"])): \(memberName(event["member"])) removed you from the group"]
        case "memberRole":
            let from = Sanitize.line(event["fromRole"]?.stringValue ?? "?"), to = Sanitize.line(event["toRole"]?.stringValue ?? "?")
            return ["#\(group(event["groupInfo"])): \(memberName(event["byMember"])) changed the role of \(memberName(event["member"])) from \(from) to \(to)"]
        case "groupDeleted":
            return ["#\(group(event["groupInfo"])): \(memberName(event["member"])) deleted the group"]
        case "newMemberContactReceivedInv":
            let who = memberName(event["member"]), g = group(event["groupInfo"])
            if event["contact"]?["groupDirectInv"]?["groupDirectInvStartedConnection"]?.boolValue == true {
                return ["#\(g): \(who) opens a direct chat with you"]
            }
            let id = event["contact"]?["contactId"]?.intValue ?? 0
            return ["#\(g): \(who) invites you to a direct chat (/_accept member contact @\(id) to accept)"]
        case "groupMemberUpdated":
            let from = Sanitize.line(event["fromMember"]?["memberProfile"]?["displayName"]?.stringValue ?? "?")
            let to = Sanitize.line(event["toMember"]?["memberProfile"]?["displayName"]?.stringValue ?? "?")
            return ["#\(group(event["groupInfo"])): \(from) updated the profile\(from == to ? "" : " (now \(to))")"]
        case "hostConnected":
            return ["connected to relay \(Sanitize.line(event["transportHost"]?.stringValue ?? "?"))"]
        case "hostDisconnected":
            return ["lost the connection to relay \(Sanitize.line(event["transportHost"]?.stringValue ?? "?")); reconnecting"]
        case "subscriptionStatus" where event["subscriptionStatus"]?["type"]?.stringValue == "removed":
            let count = event["connections"]?.arrayValue?.count ?? 0
            let error = Sanitize.line(event["subscriptionStatus"]?["subError"]?.stringValue ?? "?")
            return ["relay \(Sanitize.line(event["server"]?.stringValue ?? "?")) no longer has the queues of \(count) connection(s) (\(error)): messages on them cannot arrive"]
        case "chatError":
            return ["error: \(errorWords(event))"]
        default:
            return []
        }
    }

    /// A message's text, or its content type in brackets for files, images and the like;
    /// sanitised, continuation lines marked (see ``Sanitize``).
    static func text(_ msgContent: JSONValue?) -> String {
        let t = Sanitize.text(msgContent?["text"]?.stringValue ?? "")
        let type = Sanitize.line(msgContent?["type"]?.stringValue ?? "?")
        if type == "text" { return t }
        return t.isEmpty ? "[\(type)]" : "[\(type)] \(t)"
    }

    /// A group's local name, sanitised.
    static func group(_ groupInfo: JSONValue?) -> String { Sanitize.line(groupInfo?["localDisplayName"]?.stringValue ?? "?") }

    /// A group member's local name, sanitised.
    static func memberName(_ member: JSONValue?) -> String {
        Sanitize.line(member?["localDisplayName"]?.stringValue ?? member?["memberProfile"]?["displayName"]?.stringValue ?? "?")
    }

    /// A chat relay's name (`UserChatRelay`): its profile's display name, else its id.
    static func relayName(_ relay: JSONValue) -> String {
        if let name = relay["relayProfile"]?["displayName"]?.stringValue, !name.isEmpty { return Sanitize.line(name) }
        return "id \(relay["chatRelayId"]?.intValue.map(String.init) ?? "?")"
    }

    /// A channel relay's line (`GroupRelay`), as SimpleX's CLI: `  - relay id 1: active` (with its name).
    static func relayStatusLine(_ relay: JSONValue) -> String {
        let chatRelay = relay["userChatRelay"] ?? .null
        let id = chatRelay["chatRelayId"]?.intValue.map(String.init) ?? "?"
        return "  - relay id \(id) (\(relayName(chatRelay))): \(Sanitize.line(relay["relayStatus"]?.stringValue ?? "?"))"
    }

    static func quoted(_ name: String) -> String { name.contains(" ") ? "'\(name)'" : name }

    /// An API answer's `chatError` in words: its message when it has one, else its type split
    /// into words ("noActiveUser" → "no active user").
    static func errorWords(_ response: JSONValue) -> String {
        guard let error = response["chatError"] else {
            return "unexpected answer \(response["type"]?.stringValue ?? "without a type")"
        }
        let detail = error["errorType"] ?? error["storeError"] ?? error["agentError"] ?? error
        if let message = detail["message"]?.stringValue, !message.isEmpty { return Sanitize.line(message) }
        return Sanitize.line(words(detail["type"]?.stringValue ?? error["type"]?.stringValue ?? "unknown error"))
    }

    static func words(_ camel: String) -> String {
        var out = ""
        for c in camel {
            if c.isUppercase, !out.isEmpty { out += " " }
            out += c.lowercased()
        }
        return out
    }
}
