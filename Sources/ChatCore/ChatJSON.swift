/// Builders for the API's JSON shapes (see docs/simplex-bot-api.md §8): each takes what the
/// store holds and fills the remaining required fields with the values this engine implies.
enum ChatJSON {
    static func obj(_ pairs: [(String, JSONValue)]) -> JSONValue { .object(pairs) }
    static func str(_ s: String) -> JSONValue { .string(s) }
    static func int(_ i: Int64) -> JSONValue { .number(Double(i)) }

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

    static func user(id: Int64, profile: JSONValue, active: Bool) -> JSONValue {
        obj([
            ("userId", int(id)), ("agentUserId", int(1)), ("userContactId", int(id)),
            ("localDisplayName", profile["displayName"] ?? str("")),
            ("profile", localProfile(id: id, profile: profile)),
            ("fullPreferences", fullPreferences(profile)),
            ("activeUser", .bool(active)), ("activeOrder", int(id)),
            ("showNtfs", .bool(true)), ("sendRcptsContacts", .bool(true)), ("sendRcptsSmallGroups", .bool(true)),
            ("autoAcceptMemberContacts", .bool(false)), ("userChatRelay", .bool(false)), ("clientService", .bool(false)),
        ])
    }

    static func connStatus(_ ready: Bool) -> JSONValue { obj([("type", str(ready ? "ready" : "joined"))]) }

    static func connection(id: Int64, agentConnId: Int64, ready: Bool, viaAddress: Bool, createdAt: String) -> JSONValue {
        obj([
            ("connId", int(id)), ("agentConnId", str(String(agentConnId))), ("connChatVersion", int(1)),
            ("peerChatVRange", obj([("minVersion", int(1)), ("maxVersion", int(1))])), ("connLevel", int(0)),
            ("viaGroupLink", .bool(false)), ("connType", str("contact")), ("connStatus", connStatus(ready)),
            ("contactConnInitiated", .bool(!viaAddress)), ("localAlias", str("")), ("entityId", int(id)),
            ("pqSupport", .bool(false)), ("pqEncryption", .bool(false)), ("authErrCounter", int(0)),
            ("quotaErrCounter", int(0)), ("createdAt", str(createdAt)),
        ])
    }

    static func pendingConnection(id: Int64, agentConnId: Int64, viaAddress: Bool, link: String?, createdAt: String) -> JSONValue {
        var pairs: [(String, JSONValue)] = [
            ("pccConnId", int(id)), ("pccAgentConnId", str(String(agentConnId))),
            ("pccConnStatus", obj([("type", str("new"))])), ("viaContactUri", .bool(viaAddress)),
        ]
        if let link { pairs.append(("connLinkInv", obj([("connFullLink", str(link))]))) }
        pairs += [("localAlias", str("")), ("createdAt", str(createdAt)), ("updatedAt", str(createdAt))]
        return .object(pairs)
    }

    static func mergedPreferences(user: JSONValue, contact: JSONValue?) -> JSONValue {
        var pairs: [(String, JSONValue)] = features.map { f in
            let mine = user["preferences"]?[f] ?? obj([("allow", str("yes"))])
            let theirs = contact?["preferences"]?[f] ?? obj([("allow", str("yes"))])
            let allowed = { (p: JSONValue) in p["allow"]?.stringValue != "no" }
            return (f, obj([
                ("enabled", obj([("forUser", .bool(allowed(mine) && allowed(theirs))), ("forContact", .bool(allowed(mine) && allowed(theirs)))])),
                ("userPreference", obj([("type", str("user")), ("preference", mine)])),
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
        var ready: Bool
        var viaAddress: Bool
        var createdAt: String
        var updatedAt: String
    }

    static func contact(_ c: ContactRow, userProfile: JSONValue) -> JSONValue {
        let profile = c.profile ?? obj([("displayName", str("contact \(c.id)")), ("fullName", str(""))])
        return obj([
            ("contactId", int(c.id)), ("localDisplayName", profile["displayName"] ?? str("")),
            ("profile", localProfile(id: 1_000_000 + c.id, profile: profile)),
            ("activeConn", connection(id: c.id, agentConnId: c.agentConnId, ready: c.ready, viaAddress: c.viaAddress, createdAt: c.createdAt)),
            ("contactUsed", .bool(true)), ("contactStatus", str("active")),
            ("chatSettings", obj([("enableNtfs", str("all")), ("favorite", .bool(false))])),
            ("userPreferences", obj([])), ("mergedPreferences", mergedPreferences(user: userProfile, contact: c.profile)),
            ("createdAt", str(c.createdAt)), ("updatedAt", str(c.updatedAt)),
            ("contactGrpInvSent", .bool(false)), ("chatTags", .array([])), ("chatDeleted", .bool(false)),
        ])
    }

    static func contactRequest(id: Int64, profile: JSONValue, createdAt: String) -> JSONValue {
        obj([
            ("contactRequestId", int(id)), ("agentInvitationId", str(String(id))),
            ("cReqChatVRange", obj([("minVersion", int(1)), ("maxVersion", int(1))])),
            ("localDisplayName", profile["displayName"] ?? str("")), ("profileId", int(2_000_000 + id)),
            ("profile", localProfile(id: 2_000_000 + id, profile: profile)),
            ("createdAt", str(createdAt)), ("updatedAt", str(createdAt)), ("pqSupport", .bool(false)),
        ])
    }

    static func chatItem(id: Int64, sent: Bool, content: JSONValue, sharedMsgId: String?, status: String, createdAt: String,
                         edited: Bool = false, deleted: Bool = false, reactions: JSONValue = .array([])) -> JSONValue {
        let text = content["text"]?.stringValue ?? ""
        var meta: [(String, JSONValue)] = [
            ("itemId", int(id)), ("itemTs", str(createdAt)), ("itemText", str(text)), ("itemStatus", obj([("type", str(status))])),
        ]
        if let sharedMsgId { meta.append(("itemSharedMsgId", str(sharedMsgId))) }
        meta += [
            ("itemEdited", .bool(edited)), ("userMention", .bool(false)), ("hasLink", .bool(false)), ("deletable", .bool(!deleted)),
            ("editable", .bool(sent && !deleted)), ("showGroupAsSender", .bool(false)), ("createdAt", str(createdAt)), ("updatedAt", str(createdAt)),
        ]
        let itemContent = deleted
            ? obj([("type", str(sent ? "sndDeleted" : "rcvDeleted")), ("deleteMode", str("broadcast"))])
            : obj([("type", str(sent ? "sndMsgContent" : "rcvMsgContent")), ("msgContent", content)])
        return obj([
            ("chatDir", obj([("type", str(sent ? "directSnd" : "directRcv"))])),
            ("meta", .object(meta)),
            ("content", itemContent),
            ("mentions", obj([])), ("reactions", reactions),
        ])
    }

    static func chatError(_ type: String, _ fields: [(String, JSONValue)] = []) -> JSONValue {
        obj([("type", str("error")), ("errorType", .object([("type", str(type))] + fields))])
    }

    static func storeError(_ type: String) -> JSONValue {
        obj([("type", str("errorStore")), ("storeError", obj([("type", str(type))]))])
    }
}
