import SwiftplexBase

/// A profile as sent to peers and given in commands (`/_create user`, `/_profile`).
///
/// Fields this model does not know are kept in ``otherFields`` and written back, as the engine
/// passes profiles on unchanged.
public struct Profile: Sendable, Hashable, Codable {
    public var displayName: String
    public var fullName: String
    public var shortDescr: String?
    public var description: String?
    public var image: String?
    public var contactLink: String?
    public var preferences: Preferences?
    public var peerType: ChatPeerType?
    public var badge: JSONValue?
    public var contactDomain: JSONValue?
    /// Fields this model does not know, in the order they came (an object).
    public var otherFields: JSONValue

    public init(displayName: String, fullName: String = "", shortDescr: String? = nil, description: String? = nil, image: String? = nil,
                contactLink: String? = nil, preferences: Preferences? = nil, peerType: ChatPeerType? = nil, badge: JSONValue? = nil,
                contactDomain: JSONValue? = nil, otherFields: JSONValue = .object([])) {
        self.displayName = displayName
        self.fullName = fullName
        self.shortDescr = shortDescr
        self.description = description
        self.image = image
        self.contactLink = contactLink
        self.preferences = preferences
        self.peerType = peerType
        self.badge = badge
        self.contactDomain = contactDomain
        self.otherFields = otherFields
    }

    static let fieldNames: Set<String> = ["displayName", "fullName", "shortDescr", "description", "image", "contactLink",
                                          "preferences", "peerType", "badge", "contactDomain"]

    public init(from decoder: any Decoder) throws {
        try self.init(fields: try decoder.container(keyedBy: FieldKey.self), reserved: [])
    }

    /// Reads the profile's fields from `c`; `reserved` are fields of an enclosing type (LocalProfile's).
    init(fields c: KeyedDecodingContainer<FieldKey>, reserved: Set<String>) throws {
        self.init(displayName: try c.decode(String.self, forKey: "displayName"), fullName: try c.decode(String.self, forKey: "fullName"),
                  shortDescr: try c.decodeIfPresent(String.self, forKey: "shortDescr"),
                  description: try c.decodeIfPresent(String.self, forKey: "description"),
                  image: try c.decodeIfPresent(String.self, forKey: "image"),
                  contactLink: try c.decodeIfPresent(String.self, forKey: "contactLink"),
                  preferences: try c.decodeIfPresent(Preferences.self, forKey: "preferences"),
                  peerType: try c.decodeIfPresent(ChatPeerType.self, forKey: "peerType"),
                  badge: try c.decodeIfPresent(JSONValue.self, forKey: "badge"),
                  contactDomain: try c.decodeIfPresent(JSONValue.self, forKey: "contactDomain"),
                  otherFields: try c.otherFields(excluding: Self.fieldNames.union(reserved)))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        try encodeFields(into: &c)
    }

    func encodeFields(into c: inout KeyedEncodingContainer<FieldKey>) throws {
        try c.encode(displayName, forKey: "displayName")
        try c.encode(fullName, forKey: "fullName")
        try c.encodeIfPresent(shortDescr, forKey: "shortDescr")
        try c.encodeIfPresent(description, forKey: "description")
        try c.encodeIfPresent(image, forKey: "image")
        try c.encodeIfPresent(contactLink, forKey: "contactLink")
        try c.encodeIfPresent(preferences, forKey: "preferences")
        try c.encodeIfPresent(peerType, forKey: "peerType")
        try c.encodeIfPresent(badge, forKey: "badge")
        try c.encodeIfPresent(contactDomain, forKey: "contactDomain")
        for (k, v) in otherFields.objectValue ?? [] { try c.encode(v, forKey: FieldKey(k)) }
    }
}

/// A profile as stored locally (User.profile, Contact.profile, UserContactRequest.profile): the
/// Profile's fields with `profileId` first and `localAlias`.
public struct LocalProfile: Sendable, Hashable, Codable {
    public var profileId: Int64
    public var profile: Profile
    public var localAlias: String
    public var localBadge: JSONValue?
    public var contactDomainVerified: Bool?

    public init(profileId: Int64, profile: Profile, localAlias: String = "", localBadge: JSONValue? = nil, contactDomainVerified: Bool? = nil) {
        self.profileId = profileId
        self.profile = profile
        self.localAlias = localAlias
        self.localBadge = localBadge
        self.contactDomainVerified = contactDomainVerified
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        self.init(profileId: try c.decode(Int64.self, forKey: "profileId"),
                  profile: try Profile(fields: c, reserved: ["profileId", "localAlias", "localBadge", "contactDomainVerified"]),
                  localAlias: try c.decode(String.self, forKey: "localAlias"),
                  localBadge: try c.decodeIfPresent(JSONValue.self, forKey: "localBadge"),
                  contactDomainVerified: try c.decodeIfPresent(Bool.self, forKey: "contactDomainVerified"))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        try c.encode(profileId, forKey: "profileId")
        try profile.encodeFields(into: &c)
        try c.encode(localAlias, forKey: "localAlias")
        try c.encodeIfPresent(localBadge, forKey: "localBadge")
        try c.encodeIfPresent(contactDomainVerified, forKey: "contactDomainVerified")
    }
}

public enum ChatPeerType: String, StringEnum { case human, bot }

/// Whether a chat feature is allowed: `always`, `yes`, `no`.
public enum FeatureAllowed: String, StringEnum { case always, yes, no }

public struct SimplePreference: Sendable, Hashable, Codable {
    public var allow: FeatureAllowed
    public init(allow: FeatureAllowed) { self.allow = allow }
}

public struct TimedMessagesPreference: Sendable, Hashable, Codable {
    public var allow: FeatureAllowed
    public var ttl: Int?
    public init(allow: FeatureAllowed, ttl: Int? = nil) {
        self.allow = allow
        self.ttl = ttl
    }
}

/// The chat features a preference can be set for, in the order the API writes them.
public enum ChatFeature: String, StringEnum, CaseIterable {
    case timedMessages, fullDelete, reactions, voice, files, calls, sessions
}

/// The user-set profile preferences, all optional.
public struct Preferences: Sendable, Hashable, Codable {
    public var timedMessages: TimedMessagesPreference?
    public var fullDelete: SimplePreference?
    public var reactions: SimplePreference?
    public var voice: SimplePreference?
    public var files: SimplePreference?
    public var calls: SimplePreference?
    public var sessions: SimplePreference?
    public var commands: [ChatBotCommand]?

    public init(timedMessages: TimedMessagesPreference? = nil, fullDelete: SimplePreference? = nil, reactions: SimplePreference? = nil,
                voice: SimplePreference? = nil, files: SimplePreference? = nil, calls: SimplePreference? = nil,
                sessions: SimplePreference? = nil, commands: [ChatBotCommand]? = nil) {
        self.timedMessages = timedMessages
        self.fullDelete = fullDelete
        self.reactions = reactions
        self.voice = voice
        self.files = files
        self.calls = calls
        self.sessions = sessions
        self.commands = commands
    }
}

/// Preferences with every feature filled in (`User.fullPreferences`).
public struct FullPreferences: Sendable, Hashable, Codable {
    public var timedMessages: TimedMessagesPreference
    public var fullDelete: SimplePreference
    public var reactions: SimplePreference
    public var voice: SimplePreference
    public var files: SimplePreference
    public var calls: SimplePreference
    public var sessions: SimplePreference
    public var commands: [ChatBotCommand]

    public init(timedMessages: TimedMessagesPreference, fullDelete: SimplePreference, reactions: SimplePreference, voice: SimplePreference,
                files: SimplePreference, calls: SimplePreference, sessions: SimplePreference, commands: [ChatBotCommand]) {
        self.timedMessages = timedMessages
        self.fullDelete = fullDelete
        self.reactions = reactions
        self.voice = voice
        self.files = files
        self.calls = calls
        self.sessions = sessions
        self.commands = commands
    }
}

/// An entry of a bot's command menu: a command, or a labelled sub-menu.
public indirect enum ChatBotCommand: Sendable, Hashable, Codable {
    case command(keyword: String, label: String, params: String?)
    case menu(label: String, commands: [ChatBotCommand])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        switch try c.tag() {
        case "command":
            self = .command(keyword: try c.decode(String.self, forKey: "keyword"), label: try c.decode(String.self, forKey: "label"),
                            params: try c.decodeIfPresent(String.self, forKey: "params"))
        case "menu":
            self = .menu(label: try c.decode(String.self, forKey: "label"), commands: try c.decode([ChatBotCommand].self, forKey: "commands"))
        case let t: throw c.unknown(t, in: "ChatBotCommand")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        switch self {
        case let .command(keyword, label, params):
            try c.tag("command")
            try c.encode(keyword, forKey: "keyword")
            try c.encode(label, forKey: "label")
            try c.encodeIfPresent(params, forKey: "params")
        case let .menu(label, commands):
            try c.tag("menu")
            try c.encode(label, forKey: "label")
            try c.encode(commands, forKey: "commands")
        }
    }
}
