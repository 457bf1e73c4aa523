import Foundation

/// Chat API events and responses shaped as the SimpleX bot API has them (docs/simplex-bot-api.md
/// §6–8), for feeding plugins in tests. Only the fields a plugin may read are filled in, with
/// plausible values for the rest of the required ones.
public enum ChatFixtures {
    public static let ts = "2026-01-01T00:00:00.000000Z"

    public static func json(_ object: [String: Any]) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }

    public static func user(_ userId: Int64 = 1, name: String = "bot") -> [String: Any] {
        ["userId": userId, "agentUserId": userId, "userContactId": userId, "localDisplayName": name,
         "profile": profile(id: userId, name: name), "fullPreferences": [String: Any](), "activeUser": true, "activeOrder": 1,
         "showNtfs": true, "sendRcptsContacts": false, "sendRcptsSmallGroups": false, "autoAcceptMemberContacts": false,
         "userChatRelay": false, "clientService": false]
    }

    static func profile(id: Int64, name: String) -> [String: Any] {
        ["profileId": id, "displayName": name, "fullName": "", "localAlias": ""]
    }

    /// A `Contact`; `localName` defaults to the display name.
    public static func contact(_ id: Int64, name: String, localName: String? = nil, status: String = "active") -> [String: Any] {
        ["contactId": id, "localDisplayName": localName ?? name, "profile": profile(id: 1000 + id, name: name),
         "contactUsed": true, "contactStatus": status, "chatSettings": ["enableNtfs": "all", "favorite": false],
         "userPreferences": [String: Any](), "mergedPreferences": [String: Any](), "createdAt": ts, "updatedAt": ts,
         "contactGrpInvSent": false, "chatTags": [Int](), "chatDeleted": false]
    }

    static func item(_ itemId: Int64, dir: [String: Any], content: [String: Any]) -> [String: Any] {
        ["chatDir": dir,
         "meta": ["itemId": itemId, "itemTs": ts, "itemText": content["text"] ?? "", "itemStatus": ["type": "rcvNew"],
                  "itemEdited": false, "userMention": false, "hasLink": false, "deletable": true, "editable": false,
                  "showGroupAsSender": false, "createdAt": ts, "updatedAt": ts],
         "content": ["type": "rcvMsgContent", "msgContent": content], "mentions": [String: Any](), "reactions": [Any]()]
    }

    /// `newChatItems` with one received message in a direct chat.
    public static func directMessage(from contactId: Int64, name: String, localName: String? = nil, text: String,
                                     contentType: String = "text", itemId: Int64 = 100, userId: Int64 = 1) -> String {
        var content: [String: Any] = ["type": contentType, "text": text]
        if contentType == "image" { content["image"] = "data:image/png;base64,AA==" }
        let chatItem: [String: Any] = ["chatInfo": ["type": "direct", "contact": contact(contactId, name: name, localName: localName)],
                                       "chatItem": item(itemId, dir: ["type": "directRcv"], content: content)]
        return json(["type": "newChatItems", "user": user(userId), "chatItems": [chatItem]])
    }

    /// A `GroupMember` of group `groupId`.
    public static func member(_ groupMemberId: Int64 = 50, groupId: Int64, name: String, memberId: String = "bWVt", role: String = "member",
                              category: String = "post", contactId: Int64? = nil, createdAt: String = ts, blocked: Bool = false) -> [String: Any] {
        var member: [String: Any] = ["groupMemberId": groupMemberId, "groupId": groupId, "indexInGroup": 1, "memberId": memberId,
                                     "memberRole": role, "memberCategory": category, "memberStatus": "connected", "blockedByAdmin": blocked,
                                     "localDisplayName": name, "memberProfile": profile(id: 3000 + groupMemberId, name: name),
                                     "createdAt": createdAt, "updatedAt": createdAt]
        if let contactId { member["memberContactId"] = contactId }
        return member
    }

    /// A `GroupInfo`; the bot's own membership has `userRole`.
    public static func groupInfo(_ groupId: Int64, name: String = "team", userRole: String = "admin", userJoinedAt: String = ts) -> [String: Any] {
        ["groupId": groupId, "localDisplayName": name, "groupProfile": ["displayName": name, "fullName": ""],
         "membership": member(1, groupId: groupId, name: "bot", memberId: "Ym90", role: userRole, category: "user", createdAt: userJoinedAt)]
    }

    /// `newChatItems` with one message from a member of a group.
    public static func groupMessage(groupId: Int64, memberName: String, memberContactId: Int64?, text: String, itemId: Int64 = 200,
                                    groupMemberId: Int64 = 50, memberId: String = "bWVt", role: String = "member", category: String = "post",
                                    joinedAt: String = ts, contentType: String = "text", userRole: String = "admin",
                                    userJoinedAt: String = ts) -> String {
        let sender = member(groupMemberId, groupId: groupId, name: memberName, memberId: memberId, role: role, category: category,
                            contactId: memberContactId, createdAt: joinedAt)
        var content: [String: Any] = ["type": contentType, "text": text]
        if contentType == "image" { content["image"] = "data:image/png;base64,AA==" }
        let chatItem: [String: Any] = ["chatInfo": ["type": "group", "groupInfo": groupInfo(groupId, userRole: userRole, userJoinedAt: userJoinedAt)],
                                       "chatItem": item(itemId, dir: ["type": "groupRcv", "groupMember": sender], content: content)]
        return json(["type": "newChatItems", "user": user(), "chatItems": [chatItem]])
    }

    /// A group event: `type` with `groupInfo` and the given members and fields.
    public static func groupEvent(_ type: String, groupId: Int64, _ fields: [String: Any]) -> String {
        var event: [String: Any] = ["type": type, "user": user(), "groupInfo": groupInfo(groupId)]
        for (k, v) in fields { event[k] = v }
        return json(event)
    }

    /// `receivedGroupInvitation` from contact `contactId`.
    public static func groupInvitation(groupId: Int64, from contactId: Int64, role: String = "admin") -> String {
        groupEvent("receivedGroupInvitation", groupId: groupId,
                   ["contact": contact(contactId, name: "inviter"), "fromMemberRole": "owner", "memberRole": role])
    }

    /// A response `type` with `user` and `groupInfo` (`userAcceptedGroupSent`, `membersBlockedForAllUser`, …).
    public static func groupResponse(_ type: String, groupId: Int64, _ fields: [String: Any] = [:]) -> String {
        groupEvent(type, groupId: groupId, fields)
    }

    /// `newChatItems` with an item the bot sent (plugins must ignore it).
    public static func sentMessage(to contactId: Int64, text: String) -> String {
        var i = item(300, dir: ["type": "directSnd"], content: ["type": "text", "text": text])
        i["content"] = ["type": "sndMsgContent", "msgContent": ["type": "text", "text": text]]
        return json(["type": "newChatItems", "user": user(),
                     "chatItems": [["chatInfo": ["type": "direct", "contact": contact(contactId, name: "x")], "chatItem": i]]])
    }

    public static func contactRequest(_ requestId: Int64, name: String) -> String {
        json(["type": "receivedContactRequest", "user": user(),
              "contactRequest": ["contactRequestId": requestId, "agentInvitationId": "aW52", "cReqChatVRange": ["minVersion": 1, "maxVersion": 1],
                                 "localDisplayName": name, "profileId": 2000 + requestId, "profile": profile(id: 2000 + requestId, name: name),
                                 "createdAt": ts, "updatedAt": ts, "pqSupport": false]])
    }

    public static func contactConnected(_ contactId: Int64, name: String) -> String {
        json(["type": "contactConnected", "user": user(), "contact": contact(contactId, name: name)])
    }

    // MARK: Responses

    public static func activeUser(_ userId: Int64 = 1) -> String { json(["type": "activeUser", "user": user(userId)]) }

    public static func contactsList(_ contacts: [(Int64, String)]) -> String {
        json(["type": "contactsList", "user": user(), "contacts": contacts.map { contact($0.0, name: $0.1) }])
    }

    public static func acceptingContactRequest(contactId: Int64, name: String) -> String {
        json(["type": "acceptingContactRequest", "user": user(), "contact": contact(contactId, name: name)])
    }

    public static func contactRequestRejected(_ requestId: Int64, name: String) -> String {
        json(["type": "contactRequestRejected", "user": user(),
              "contactRequest": ["contactRequestId": requestId, "localDisplayName": name, "profile": profile(id: 2000 + requestId, name: name)]])
    }

    public static func contactDeleted(_ contactId: Int64) -> String {
        json(["type": "contactDeleted", "user": user(), "contact": contact(contactId, name: "x")])
    }

    /// `userContactLink` / `userContactLinkUpdated` with the given address settings.
    public static func contactLink(_ type: String = "userContactLink", settings: [String: Any] = ["businessAddress": false]) -> String {
        json(["type": type, "user": user(),
              "contactLink": ["userContactLinkId": 1, "connLinkContact": ["connFullLink": "simplex:/contact#/?v=1&smp=x"],
                              "shortLinkDataSet": false, "shortLinkLargeDataSet": false, "addressSettings": settings]])
    }

    /// `newChatItems` answering a `/_send` (the sent item).
    public static func sent(to contactId: Int64, text: String) -> String {
        var i = item(400, dir: ["type": "directSnd"], content: ["type": "text", "text": text])
        i["content"] = ["type": "sndMsgContent", "msgContent": ["type": "text", "text": text]]
        return json(["type": "newChatItems", "user": user(),
                     "chatItems": [["chatInfo": ["type": "direct", "contact": contact(contactId, name: "x")], "chatItem": i]]])
    }

    public static func chatCmdError(_ storeError: String) -> String {
        json(["type": "chatCmdError", "chatError": ["type": "errorStore", "storeError": ["type": storeError]]])
    }

    /// The text of the message a `/_send <ref> json [...]` command sends, and the ref.
    public static func parseSend(_ command: String) -> (ref: String, content: [String: Any])? {
        let parts = command.split(separator: " ", maxSplits: 3)
        guard parts.count == 4, parts[0] == "/_send", parts[2] == "json",
              let arr = try? JSONSerialization.jsonObject(with: Data(parts[3].utf8)) as? [[String: Any]],
              let content = arr.first?["msgContent"] as? [String: Any] else { return nil }
        return (String(parts[1]), content)
    }
}
