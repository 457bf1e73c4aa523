import SwiftplexBase

/// The content of a message. Every kind has a `text` (the caption of media).
///
/// A kind this model does not know — or a known kind carrying fields it does not know — is kept
/// whole as ``unknown(tag:json:)`` and written back as it came, so content passes through the
/// engine unchanged.
public enum MsgContent: Sendable, Hashable, Codable {
    case text(String)
    case link(text: String, preview: LinkPreview)
    case image(text: String, image: String)
    case video(text: String, image: String, duration: Int)
    case voice(text: String, duration: Int)
    case file(text: String)
    case report(text: String, reason: ReportReason)
    /// Any other content: its `type` tag and the whole object (`type` included).
    case unknown(tag: String, json: JSONValue)

    /// The text (or caption); for unknown content its `text` field if it is a string, else "".
    public var text: String {
        switch self {
        case let .text(t): t
        case let .link(t, _), let .image(t, _), let .video(t, _, _), let .voice(t, _), let .file(t), let .report(t, _): t
        case let .unknown(_, json): json["text"]?.stringValue ?? ""
        }
    }

    /// The `type` tag as written.
    public var tag: String {
        switch self {
        case .text: "text"
        case .link: "link"
        case .image: "image"
        case .video: "video"
        case .voice: "voice"
        case .file: "file"
        case .report: "report"
        case let .unknown(tag, _): tag
        }
    }

    static let fields: [String: Set<String>] = [
        "text": ["type", "text"], "link": ["type", "text", "preview"], "image": ["type", "text", "image"],
        "video": ["type", "text", "image", "duration"], "voice": ["type", "text", "duration"], "file": ["type", "text"],
        "report": ["type", "text", "reason"],
    ]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        let t = try c.tag()
        // A known kind decodes as such only when it has exactly its fields and they parse.
        if let known = Self.fields[t], c.keyNames == known, let typed = try? Self.typed(t, c) {
            self = typed
        } else {
            self = .unknown(tag: t, json: try JSONValue(from: decoder))
        }
    }

    private static func typed(_ t: String, _ c: KeyedDecodingContainer<FieldKey>) throws -> MsgContent {
        let text = try c.decode(String.self, forKey: "text")
        switch t {
        case "text": return .text(text)
        case "link": return .link(text: text, preview: try c.decode(LinkPreview.self, forKey: "preview"))
        case "image": return .image(text: text, image: try c.decode(String.self, forKey: "image"))
        case "video": return .video(text: text, image: try c.decode(String.self, forKey: "image"), duration: try c.decode(Int.self, forKey: "duration"))
        case "voice": return .voice(text: text, duration: try c.decode(Int.self, forKey: "duration"))
        case "file": return .file(text: text)
        case "report": return .report(text: text, reason: try c.decode(ReportReason.self, forKey: "reason"))
        default: throw c.unknown(t, in: "MsgContent")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        if case let .unknown(_, json) = self {
            try json.encode(to: encoder)
            return
        }
        var c = encoder.container(keyedBy: FieldKey.self)
        try c.tag(tag)
        try c.encode(text, forKey: "text")
        switch self {
        case let .link(_, preview): try c.encode(preview, forKey: "preview")
        case let .image(_, image): try c.encode(image, forKey: "image")
        case let .video(_, image, duration):
            try c.encode(image, forKey: "image")
            try c.encode(duration, forKey: "duration")
        case let .voice(_, duration): try c.encode(duration, forKey: "duration")
        case let .report(_, reason): try c.encode(reason, forKey: "reason")
        case .text, .file, .unknown: break
        }
    }
}

public struct LinkPreview: Sendable, Hashable, Codable {
    public var uri: String
    public var title: String
    public var description: String
    public var image: String
    public var content: JSONValue?
    public init(uri: String, title: String, description: String, image: String, content: JSONValue? = nil) {
        self.uri = uri
        self.title = title
        self.description = description
        self.image = image
        self.content = content
    }
}

public enum ReportReason: String, StringEnum { case spam, content, community, profile, other }

/// A reaction to an item: one of SimpleX's emoji, or another kind kept whole.
public enum MsgReaction: Sendable, Hashable, Codable {
    case emoji(String)
    case unknown(tag: String, json: JSONValue)

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        let t = try c.tag()
        if t == "emoji", c.keyNames == ["type", "emoji"], let e = try? c.decode(String.self, forKey: "emoji") {
            self = .emoji(e)
        } else {
            self = .unknown(tag: t, json: try JSONValue(from: decoder))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case let .emoji(e):
            var c = encoder.container(keyedBy: FieldKey.self)
            try c.tag("emoji")
            try c.encode(e, forKey: "emoji")
        case let .unknown(_, json): try json.encode(to: encoder)
        }
    }
}
