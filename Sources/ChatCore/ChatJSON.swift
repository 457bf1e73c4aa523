import SwiftplexBase

/// Builders for the API's JSON shapes (see docs/simplex-bot-api.md §8): each takes what the
/// store holds and fills the remaining required fields with the values this engine implies.
enum ChatJSON {
    static func obj(_ pairs: [(String, JSONValue)]) -> JSONValue { .object(pairs) }
    static func str(_ s: String) -> JSONValue { .string(s) }
    static func int(_ i: Int64) -> JSONValue { .int(i) }

    /// A LocalProfile: the profile's own fields in order, with `profileId` first and `localAlias`.
    static func localProfile(id: Int64, profile: JSONValue) -> JSONValue {
        var pairs: [(String, JSONValue)] = [("profileId", int(id))]
        if case let .object(p) = profile { pairs += p.filter { $0.0 != "profileId" && $0.0 != "localAlias" } }
        if profile["fullName"] == nil { pairs.append(("fullName", str(""))) }
        pairs.append(("localAlias", str("")))
        return .object(pairs)
    }

    static let features = ["timedMessages", "fullDelete", "reactions", "voice", "files", "calls", "sessions"]

    static func fullPreferences(_ profile: JSONValue) -> JSONValue {
        let prefs = profile["preferences"]
        var pairs: [(String, JSONValue)] = features.map { f in
            (f, prefs?[f] ?? obj([("allow", str("yes"))]))
        }
        pairs.append(("commands", prefs?["commands"] ?? .array([])))
        return .object(pairs)
    }

    static func user(id: Int64, profile: JSONValue, active: Bool, sendReceipts: Bool = true, localName: String? = nil) -> JSONValue {
        obj([
            ("userId", int(id)), ("agentUserId", int(1)), ("userContactId", int(id)),
            ("localDisplayName", localName.map(str) ?? profile["displayName"] ?? str("")),
            ("profile", localProfile(id: id, profile: profile)),
            ("fullPreferences", fullPreferences(profile)),
            ("activeUser", .bool(active)), ("activeOrder", int(id)),
            ("showNtfs", .bool(true)), ("sendRcptsContacts", .bool(sendReceipts)), ("sendRcptsSmallGroups", .bool(true)),
            ("autoAcceptMemberContacts", .bool(false)), ("userChatRelay", .bool(false)), ("clientService", .bool(false)),
        ])
    }

    static func connStatus(_ status: String) -> JSONValue {
        obj([("type", str(status == "ready" ? "ready" : status == "deleted" ? "deleted" : "joined"))])
    }

    /// The id under which an incognito contact's random profile is reported (`customUserProfileId`).
    static func incognitoProfileId(contactId: Int64) -> Int64 { 3_000_000 + contactId }

    static func connection(id: Int64, agentConnId: Int64, status: String, viaAddress: Bool, incognito: Bool, createdAt: String) -> JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("connId", int(id)), ("agentConnId", str(String(agentConnId))), ("connChatVersion", int(1)),
            ("peerChatVRange", obj([("minVersion", int(1)), ("maxVersion", int(1))])), ("connLevel", int(0)),
            ("viaGroupLink", .bool(false)),
        ]
        if incognito { pairs.append(("customUserProfileId", int(incognitoProfileId(contactId: id)))) }
        return .object(pairs + [
            ("connType", str("contact")), ("connStatus", connStatus(status)),
            ("contactConnInitiated", .bool(!viaAddress)), ("localAlias", str("")), ("entityId", int(id)),
            ("pqSupport", .bool(false)), ("pqEncryption", .bool(false)), ("authErrCounter", int(0)),
            ("quotaErrCounter", int(0)), ("createdAt", str(createdAt)),
        ])
    }

    static func pendingConnection(id: Int64, agentConnId: Int64, viaAddress: Bool, link: String?, shortLink: String?, incognito: Bool, createdAt: String) -> JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("pccConnId", int(id)), ("pccAgentConnId", str(String(agentConnId))),
            ("pccConnStatus", obj([("type", str("new"))])), ("viaContactUri", .bool(viaAddress)),
        ]
        if incognito { pairs.append(("customUserProfileId", int(incognitoProfileId(contactId: id)))) }
        if let link { pairs.append(("connLinkInv", createdConnLink(full: link, short: shortLink))) }
        pairs += [("localAlias", str("")), ("createdAt", str(createdAt)), ("updatedAt", str(createdAt))]
        return .object(pairs)
    }

    /// A CreatedConnLink: the full link and, when one was made, the short link.
    static func createdConnLink(full: String, short: String?) -> JSONValue {
        var pairs: [(String, JSONValue)] = [("connFullLink", str(full))]
        if let short { pairs.append(("connShortLink", str(short))) }
        return .object(pairs)
    }

    /// `user` is the profile this user shows the contact (incognito or not); `overrides` are the
    /// preferences set for this contact alone (`/_set prefs`), which win over the profile's.
    static func mergedPreferences(user: JSONValue, overrides: JSONValue?, contact: JSONValue?) -> JSONValue {
        var pairs: [(String, JSONValue)] = features.map { f in
            let own = overrides?[f]
            let mine = own ?? user["preferences"]?[f] ?? obj([("allow", str("yes"))])
            let theirs = contact?["preferences"]?[f] ?? obj([("allow", str("yes"))])
            let allowed = { (p: JSONValue) in p["allow"]?.stringValue != "no" }
            return (f, obj([
                ("enabled", obj([("forUser", .bool(allowed(mine) && allowed(theirs))), ("forContact", .bool(allowed(mine) && allowed(theirs)))])),
                ("userPreference", obj([("type", str(own == nil ? "user" : "contact")), ("preference", mine)])),
                ("contactPreference", theirs),
            ]))
        }
        if let commands = contact?["preferences"]?["commands"] { pairs.append(("commands", commands)) }
        return .object(pairs)
    }

    struct ContactRow {
        var id: Int64
        var agentConnId: Int64
        var profile: JSONValue?
        /// `pending`, `ready`, or `deleted` (by the contact).
        var status: String
        var viaAddress: Bool
        var createdAt: String
        var updatedAt: String
        var chatTs: String?
        var customData: JSONValue?
        /// Preferences set for this contact alone (`/_set prefs`).
        var userPreferences: JSONValue?
        /// The random profile this user shows this contact, when connected incognito.
        var incognitoProfile: JSONValue?
        var invitation: String?
        var shortLink: String?
        /// The name unique among this user's names (`alice`, `alice_1`, …); nil until the peer's profile is known.
        var localName: String? = nil

        var ready: Bool { status == "ready" }
    }

    static func contact(_ c: ContactRow, userProfile: JSONValue) -> JSONValue {
        let profile = c.profile ?? obj([("displayName", str("contact \(c.id)")), ("fullName", str(""))])
        var pairs: [(String, JSONValue)] = [
            ("contactId", int(c.id)), ("localDisplayName", c.localName.map(str) ?? profile["displayName"] ?? str("")),
            ("profile", localProfile(id: 1_000_000 + c.id, profile: profile)),
            ("activeConn", connection(id: c.id, agentConnId: c.agentConnId, status: c.status, viaAddress: c.viaAddress,
                                      incognito: c.incognitoProfile != nil, createdAt: c.createdAt)),
            ("contactUsed", .bool(true)), ("contactStatus", str(c.status == "deleted" ? "deleted" : "active")),
            ("chatSettings", obj([("enableNtfs", str("all")), ("favorite", .bool(false))])),
            ("userPreferences", c.userPreferences ?? obj([])),
            ("mergedPreferences", mergedPreferences(user: c.incognitoProfile ?? userProfile, overrides: c.userPreferences, contact: c.profile)),
            ("createdAt", str(c.createdAt)), ("updatedAt", str(c.updatedAt)),
        ]
        if let ts = c.chatTs { pairs.append(("chatTs", str(ts))) }
        pairs += [("contactGrpInvSent", .bool(false)), ("chatTags", .array([])), ("chatDeleted", .bool(false))]
        if let data = c.customData { pairs.append(("customData", data)) }
        return .object(pairs)
    }

    static func contactRequest(id: Int64, profile: JSONValue, createdAt: String, localName: String?) -> JSONValue {
        obj([
            ("contactRequestId", int(id)), ("agentInvitationId", str(String(id))),
            ("cReqChatVRange", obj([("minVersion", int(1)), ("maxVersion", int(1))])),
            ("localDisplayName", localName.map(str) ?? profile["displayName"] ?? str("")), ("profileId", int(2_000_000 + id)),
            ("profile", localProfile(id: 2_000_000 + id, profile: profile)),
            ("createdAt", str(createdAt)), ("updatedAt", str(createdAt)), ("pqSupport", .bool(false)),
        ])
    }

    /// A CIStatus from the stored status name (`sndNew`, `sndSent`, `sndRcvd`, `sndErrorAuth`, `rcvNew`, `rcvRead`).
    static func itemStatus(_ status: String) -> JSONValue {
        switch status {
        case "sndSent": obj([("type", str(status)), ("sndProgress", str("complete"))])
        case "sndRcvd": obj([("type", str(status)), ("msgRcptStatus", str("ok")), ("sndProgress", str("complete"))])
        default: obj([("type", str(status))])
        }
    }

    static func chatItem(id: Int64, sent: Bool, content: JSONValue, sharedMsgId: String?, status: String, createdAt: String,
                         edited: Bool = false, deleted: Bool = false, reactions: JSONValue = .array([]), quoted: JSONValue? = nil) -> JSONValue {
        let text = content["text"]?.stringValue ?? ""
        var meta: [(String, JSONValue)] = [
            ("itemId", int(id)), ("itemTs", str(createdAt)), ("itemText", str(text)), ("itemStatus", itemStatus(status)),
        ]
        if let sharedMsgId { meta.append(("itemSharedMsgId", str(sharedMsgId))) }
        meta += [
            ("itemEdited", .bool(edited)), ("userMention", .bool(false)), ("hasLink", .bool(false)), ("deletable", .bool(!deleted)),
            ("editable", .bool(sent && !deleted)), ("showGroupAsSender", .bool(false)), ("createdAt", str(createdAt)), ("updatedAt", str(createdAt)),
        ]
        let itemContent = deleted
            ? obj([("type", str(sent ? "sndDeleted" : "rcvDeleted")), ("deleteMode", str("broadcast"))])
            : obj([("type", str(sent ? "sndMsgContent" : "rcvMsgContent")), ("msgContent", content)])
        var pairs: [(String, JSONValue)] = [
            ("chatDir", obj([("type", str(sent ? "directSnd" : "directRcv"))])),
            ("meta", .object(meta)),
            ("content", itemContent),
            ("mentions", obj([])),
        ]
        if let quoted { pairs.append(("quotedItem", quoted)) }
        pairs.append(("reactions", reactions))
        return .object(pairs)
    }

    /// A ChatStats: unread counts of one chat.
    static func chatStats(unread: Int64, minUnreadItemId: Int64) -> JSONValue {
        obj([("unreadCount", int(unread)), ("unreadMentions", int(0)), ("reportsCount", int(0)),
             ("minUnreadItemId", int(minUnreadItemId)), ("unreadChat", .bool(false))])
    }

    static func chatError(_ type: String, _ fields: [(String, JSONValue)] = []) -> JSONValue {
        obj([("type", str("error")), ("errorType", .object([("type", str(type))] + fields))])
    }

    static func storeError(_ type: String, _ fields: [(String, JSONValue)] = []) -> JSONValue {
        obj([("type", str("errorStore")), ("storeError", .object([("type", str(type))] + fields))])
    }
}
