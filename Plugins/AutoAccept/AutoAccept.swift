import Foundation
import SwiftplexPluginKit

/// `auto-accept`: accepts contact requests to the bot's address, by rules or all of them, and
/// welcomes new contacts.
///
/// With trivial rules (allow everyone, deny no one, no hourly cap) the engine does the work: the
/// address's own auto-accept is switched on with the welcome as its auto-reply. Otherwise the
/// engine's auto-accept is switched off and each `receivedContactRequest` is decided here:
/// deny patterns first, then allow patterns, then the hourly cap (a sliding window of accept
/// times kept in storage, so a restart does not reset it). Accepted contacts get the welcome when
/// they connect. A rejected requester hears nothing (`/_reject`) unless `rejection_notice` is set:
/// then the request is accepted, the notice sent when the contact connects, and the contact deleted
/// `rejection_grace_seconds` later — the tradeoff is that a rejected requester briefly becomes a
/// contact (and learns the bot exists) so that it can be told why. `max_per_hour` caps every
/// contact this plugin makes, those accepted only to hear the notice included: once it is reached,
/// requests are rejected silently (no notice), so a flood of requests never becomes a flood of
/// contacts.
public final class AutoAccept: Plugin {
    public struct Config: Decodable, Sendable {
        var welcome: String?
        var allow: [String] = ["*"]
        var deny: [String] = []
        var maxPerHour = 0
        var acceptIncognito = false
        var rejectionNotice: String?
        var rejectionGraceSeconds = 30

        enum CodingKeys: String, CodingKey {
            case welcome, allow, deny
            case maxPerHour = "max_per_hour"
            case acceptIncognito = "accept_incognito"
            case rejectionNotice = "rejection_notice"
            case rejectionGraceSeconds = "rejection_grace_seconds"
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            welcome = try c.decodeIfPresent(String.self, forKey: .welcome)
            allow = try c.decodeIfPresent([String].self, forKey: .allow) ?? ["*"]
            deny = try c.decodeIfPresent([String].self, forKey: .deny) ?? []
            maxPerHour = try c.decodeIfPresent(Int.self, forKey: .maxPerHour) ?? 0
            acceptIncognito = try c.decodeIfPresent(Bool.self, forKey: .acceptIncognito) ?? false
            rejectionNotice = try c.decodeIfPresent(String.self, forKey: .rejectionNotice)
            rejectionGraceSeconds = try c.decodeIfPresent(Int.self, forKey: .rejectionGraceSeconds) ?? 30
        }
    }

    public static let name = "auto-accept"
    public static let version = "1.0.0"
    public static let description = "Accepts contact requests by display-name rules and an hourly cap, and welcomes new contacts"
    public static let configSchema: JSONSchema? = .object([
        "welcome": .string("Sent to each accepted contact when it connects"),
        "allow": .array(of: .string(), "Display-name patterns to accept (* and ?)", default: ["*"]),
        "deny": .array(of: .string(), "Display-name patterns to reject; checked first", default: []),
        "max_per_hour": .integer("New contacts accepted per hour; 0 = no cap", minimum: 0, default: 0),
        "accept_incognito": .boolean("Accept with a random profile per contact", default: false),
        "rejection_notice": .string("If set, rejected requesters are accepted, told this, and deleted"),
        "rejection_grace_seconds": .integer("Seconds between the rejection notice and deleting the contact", minimum: 0, default: 30),
    ])

    /// Storage keys.
    enum Key {
        static let acceptedAt = "accepted-at"
        static let welcome = "pending-welcome"
        static let notice = "pending-notice"
        static let deletions = "pending-deletions"
    }

    /// Why a request was turned down (for the log).
    enum Rejection: String {
        case denied = "matches a deny pattern"
        case notAllowed = "matches no allow pattern"
        case cap = "the hourly cap is reached"
    }

    let config: Config
    let context: PluginContext
    let allow: [Glob]
    let deny: [Glob]

    /// Allow everyone, deny no one, no cap: the engine's own auto-accept can do it.
    var trivial: Bool { allow.contains { $0.pattern == "*" } && deny.isEmpty && config.maxPerHour == 0 }

    public init(config: Config, context: PluginContext) throws {
        guard config.maxPerHour >= 0 else { throw PluginError.config("max_per_hour", "must be 0 or more") }
        guard config.rejectionGraceSeconds >= 0 else { throw PluginError.config("rejection_grace_seconds", "must be 0 or more") }
        self.config = config
        self.context = context
        allow = config.allow.map(Glob.init)
        deny = config.deny.map(Glob.init)
        try configureAddress()
        if config.rejectionNotice != nil {
            try context.every(.seconds(max(1, min(config.rejectionGraceSeconds, 60))), name: "delete-rejected") { [unowned self] in
                try self.deleteDueContacts()
            }
        }
    }

    public static func routes(_ r: inout Routes<AutoAccept>) {
        r.onEvent("receivedContactRequest") { plugin, event in
            guard let request = event.contactRequest else { throw PluginError(.event, "receivedContactRequest without a contactRequest") }
            try plugin.decide(request)
        }
        r.onEvent("contactConnected") { plugin, event in
            guard let contact = event.connectedContact else { throw PluginError(.event, "contactConnected without a contact") }
            try plugin.connected(contact)
        }
    }

    /// Switches the engine's auto-accept on (trivial rules, with the welcome) or off (rules here).
    func configureAddress() throws {
        let userId = try context.userId()
        let shown: ChatEvent
        do {
            shown = try context.command("/_show_address \(userId)", expecting: "userContactLink")
        } catch {
            throw PluginError(.plugin, "the bot has no contact address to accept requests on (\(error))")
        }
        var settings: [String: JSONValue] = ["businessAddress": shown.json["contactLink"]?["addressSettings"]?["businessAddress"] ?? false]
        if trivial {
            settings["autoAccept"] = .sorted(["acceptIncognito": .bool(config.acceptIncognito)])
            if let welcome = config.welcome { settings["autoReply"] = .sorted(["type": "text", "text": .string(welcome)]) }
        }
        try context.command("/_address_settings \(userId) \(JSONValue.sorted(settings).text)", expecting: "userContactLinkUpdated")
        context.log.info(trivial ? "engine auto-accept on" : "engine auto-accept off; deciding each request")
    }

    /// Accepts or rejects one request by the rules.
    func decide(_ request: ContactRequest) throws {
        if trivial { try accept(request, welcome: true); return }
        let now = Date().timeIntervalSince1970
        var window = try acceptedInLastHour(now: now)
        let capReached = config.maxPerHour > 0 && window.count >= config.maxPerHour
        let rejection: Rejection? =
            if deny.contains(where: { $0.matches(request.displayName) }) { .denied }
            else if !allow.contains(where: { $0.matches(request.displayName) }) { .notAllowed }
            else if capReached { .cap }
            else { nil }
        guard let rejection else {
            try accept(request, welcome: true)
            window.append(now)
            try context.storage.set(window, forKey: Key.acceptedAt)
            return
        }
        context.log.info("contact request \(request.requestId) rejected: \(rejection.rawValue)")
        // A notice needs a contact: it counts against the cap, and past the cap there is none.
        if config.rejectionNotice != nil, !capReached {
            let contactId = try accept(request, welcome: false)
            try update(Key.notice) { $0.insert(contactId) }
            window.append(now)
            try context.storage.set(window, forKey: Key.acceptedAt)
        } else {
            try context.command("/_reject \(request.requestId)", expecting: "contactRequestRejected")
        }
    }

    /// Accept times within the last hour (older ones dropped).
    func acceptedInLastHour(now: Double) throws -> [Double] {
        (try context.storage.value([Double].self, forKey: Key.acceptedAt) ?? []).filter { now - $0 < 3600 }
    }

    @discardableResult
    func accept(_ request: ContactRequest, welcome: Bool) throws -> Int64 {
        let incognito = config.acceptIncognito ? " incognito=on" : ""
        let r = try context.command("/_accept\(incognito) \(request.requestId)", expecting: "acceptingContactRequest")
        guard let contactId = r.json["contact"]?["contactId"]?.int64Value else {
            throw PluginError(.command, "/_accept: no contact in the response")
        }
        context.log.info("contact request \(request.requestId) accepted as contact \(contactId)")
        if welcome, !trivial, config.welcome != nil { try update(Key.welcome) { $0.insert(contactId) } }
        return contactId
    }

    /// Sends the welcome (or the rejection notice) to a contact this plugin accepted.
    func connected(_ contact: Contact) throws {
        if let welcome = config.welcome, try take(contact.contactId, from: Key.welcome) {
            try context.send(contactId: contact.contactId, text: welcome)
        }
        if let notice = config.rejectionNotice, try take(contact.contactId, from: Key.notice) {
            try context.send(contactId: contact.contactId, text: notice)
            var due = try context.storage.value([String: Double].self, forKey: Key.deletions) ?? [:]
            due[String(contact.contactId)] = Date().timeIntervalSince1970 + Double(config.rejectionGraceSeconds)
            try context.storage.set(due, forKey: Key.deletions)
            if config.rejectionGraceSeconds == 0 { try deleteDueContacts() }
        }
    }

    /// Deletes rejected contacts whose notice had its grace period.
    func deleteDueContacts() throws {
        var due = try context.storage.value([String: Double].self, forKey: Key.deletions) ?? [:]
        let now = Date().timeIntervalSince1970
        for (id, at) in due where at <= now {
            do {
                try context.command("/_delete @\(id) full", expecting: "contactDeleted")
                context.log.info("rejected contact \(id) deleted after its notice")
            } catch {
                context.log.warning("could not delete rejected contact \(id): \(error)")
            }
            due[id] = nil
        }
        try context.storage.set(due.isEmpty ? nil : due, forKey: Key.deletions)
    }

    private func update(_ key: String, _ change: (inout Set<Int64>) -> Void) throws {
        var set = Set(try context.storage.value([Int64].self, forKey: key) ?? [])
        change(&set)
        try context.storage.set(set.isEmpty ? nil : set.sorted(), forKey: key)
    }

    /// Removes `id` from the set under `key`; true if it was there.
    private func take(_ id: Int64, from key: String) throws -> Bool {
        var found = false
        try update(key) { found = $0.remove(id) != nil }
        return found
    }
}

@_cdecl("swiftplex_plugin_entry")
public func swiftplexPluginEntry() -> UnsafeRawPointer {
    PluginExport.descriptor(for: AutoAccept.self)
}
