import ChatModel
import Foundation
import Hummingbird
import PluginHost
import SwiftplexBase

/// One route of the admin API: the router is built from these, and so is the OpenAPI document
/// (``AdminOpenAPI``), so the two cannot drift. `AdminAPITests` checks the running router's
/// routes against the served document both ways, and calls every documented path.
struct AdminRoute: Sendable {
    enum Access: Sendable { case open, token }

    enum Kind: Sendable {
        case http(@Sendable (Request, AdminRequestContext) async throws -> Response)
        /// Serves the document made from the whole table.
        case openAPI
        /// The chat events over a WebSocket.
        case events
    }

    /// A query parameter (an integer unless said otherwise).
    struct Parameter: Sendable {
        var name: String
        var description: String
        var type = "integer"
    }

    /// A JSON schema, by reference to the document's components or a paged list.
    enum Schema: Sendable {
        case ref(String)
        /// `{key: [Object], total, offset, limit}`.
        case page(String)
    }

    enum Body: Sendable {
        /// `{"text": "…"}`
        case textMessage
        /// `{"cmd": "…"}`
        case command
    }

    struct Answer: Sendable {
        var status: String
        var description: String
        var contentType = "application/json"
        var schema: Schema?
        init(status: String, description: String, contentType: String = "application/json", schema: Schema? = nil) {
            self.status = status
            self.description = description
            self.contentType = contentType
            self.schema = schema
        }
    }

    let method: HTTPRequest.Method
    /// The OpenAPI form, `{name}` for a path parameter.
    let path: String
    let summary: String
    let access: Access
    let query: [Parameter]
    let body: Body?
    let answers: [Answer]
    let kind: Kind

    init(_ method: HTTPRequest.Method, _ path: String, _ summary: String, access: Access = .token, query: [Parameter] = [],
         body: Body? = nil, kind: Kind, answers: [Answer]) {
        self.method = method
        self.path = path
        self.summary = summary
        self.access = access
        self.query = query
        self.body = body
        self.answers = answers
        self.kind = kind
    }

    init(_ method: HTTPRequest.Method, _ path: String, _ summary: String, access: Access = .token, query: [Parameter] = [],
         body: Body? = nil, answers: [Answer], handler: @escaping @Sendable (Request, AdminRequestContext) async throws -> Response) {
        self.init(method, path, summary, access: access, query: query, body: body, kind: .http(handler), answers: answers)
    }

    /// Hummingbird's form of the path (`:name` for `{name}`).
    var routerPath: String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { part in
            part.hasPrefix("{") && part.hasSuffix("}") ? ":" + part.dropFirst().dropLast() : String(part)
        }.joined(separator: "/")
    }

    /// The path's parameters, in order.
    var pathParameters: [String] {
        path.split(separator: "/").filter { $0.hasPrefix("{") && $0.hasSuffix("}") }.map { String($0.dropFirst().dropLast()) }
    }
}

/// The admin API's OpenAPI 3 document, made from the route table.
enum AdminOpenAPI {
    static func document(_ routes: [AdminRoute]) -> JSONValue {
        var paths: [(String, JSONValue)] = []
        for route in routes {
            let operation = self.operation(route)
            if let i = paths.firstIndex(where: { $0.0 == route.path }), case var .object(methods) = paths[i].1 {
                methods.append((route.method.rawValue.lowercased(), operation))
                paths[i].1 = .object(methods)
            } else {
                paths.append((route.path, .object([(route.method.rawValue.lowercased(), operation)])))
            }
        }
        return .object([
            ("openapi", .string("3.0.3")),
            ("info", .object([("title", .string("Swiftplex bot host admin API")), ("version", .string(SwiftplexVersion.current))])),
            ("security", .array([.object([("bearer", .array([]))])])),
            ("components", components),
            ("paths", .object(paths)),
        ])
    }

    static func operation(_ route: AdminRoute) -> JSONValue {
        var op: [(String, JSONValue)] = [("summary", .string(route.summary))]
        var parameters: [JSONValue] = route.pathParameters.map { name in
            let type = name.hasSuffix("Id") ? "integer" : "string"
            return .object([("name", .string(name)), ("in", .string("path")), ("required", .bool(true)),
                            ("schema", .object([("type", .string(type))]))])
        }
        parameters += route.query.map { p in
            .object([("name", .string(p.name)), ("in", .string("query")), ("required", .bool(false)),
                     ("description", .string(p.description)), ("schema", .object([("type", .string(p.type))]))])
        }
        if !parameters.isEmpty { op.append(("parameters", .array(parameters))) }
        if let body = route.body {
            let (field, example) = switch body {
            case .textMessage: ("text", "hello from the operator")
            case .command: ("cmd", "/_contacts 1")
            }
            let schema: JSONValue = .object([("type", .string("object")), ("required", .array([.string(field)])),
                                             ("properties", .object([(field, .object([("type", .string("string")), ("example", .string(example))]))]))])
            op.append(("requestBody", .object([("required", .bool(true)),
                                               ("content", .object([("application/json", .object([("schema", schema)]))]))])))
        }
        var responses: [(String, JSONValue)] = route.answers.map { a in
            var r: [(String, JSONValue)] = [("description", .string(a.description))]
            if a.status != "101" {
                let schema: JSONValue = a.schema.map(Self.schema) ?? .object([("type", .string("string"))])
                r.append(("content", .object([(a.contentType, .object([("schema", schema)]))])))
            }
            return (a.status, .object(r))
        }
        responses.append(("default", .object([("$ref", .string("#/components/responses/Error"))])))
        op.append(("responses", .object(responses)))
        if route.access == .open { op.append(("security", .array([]))) }
        return .object(op)
    }

    static func schema(_ s: AdminRoute.Schema) -> JSONValue {
        switch s {
        case let .ref(name): return .object([("$ref", .string("#/components/schemas/\(name)"))])
        case let .page(key):
            return object(["bot": string, key: .object([("type", .string("array")), ("items", schema(.ref("Object")))]),
                           "total": integer, "offset": integer, "limit": integer], order: ["bot", key, "total", "offset", "limit"])
        }
    }

    static let integer: JSONValue = .object([("type", .string("integer"))])
    static let boolean: JSONValue = .object([("type", .string("boolean"))])
    static let string: JSONValue = .object([("type", .string("string"))])

    static func object(_ properties: [String: JSONValue], order: [String]) -> JSONValue {
        .object([("type", .string("object")), ("required", .array(order.map(JSONValue.string))),
                 ("properties", .object(order.map { ($0, properties[$0]!) }))])
    }

    static func array(_ items: JSONValue) -> JSONValue { .object([("type", .string("array")), ("items", items)]) }

    static var components: JSONValue {
        let counters = object(Dictionary(uniqueKeysWithValues: ["handled", "errors", "timeouts", "dropped", "crashes", "restarts", "protocolErrors", "refusedCalls"].map { ($0, integer) }),
                              order: ["handled", "errors", "timeouts", "dropped", "crashes", "restarts", "protocolErrors", "refusedCalls"])
        let states: JSONValue = .object([("type", .string("string")), ("enum", .array(PluginCondition.allCases.map { .string($0.rawValue) }))])
        let plugin = object(["bot": string, "name": string, "plugin": string, "version": string, "isolation": string, "state": states, "queueDepth": integer,
                             "counters": counters],
                            order: ["bot", "name", "plugin", "version", "isolation", "state", "queueDepth", "counters"])
        let outcome: JSONValue = .object([("type", .string("string")), ("enum", .array(["started", "unchanged", "stopped", "failed", "rolledBack"].map(JSONValue.string)))])
        let result = object(["bot": string, "name": string, "outcome": outcome, "failed": boolean, "message": string],
                            order: ["bot", "name", "outcome", "failed", "message"])
        let nullableString: JSONValue = .object([("type", .string("string")), ("nullable", .bool(true))])
        // Relay mode (`chat_relay:`): {relayAddress, refusedChannels, refusedJoins, channels: [{groupId, name, channelLink,
        // relayStatus, subscribers, forwarded, deliveriesPending}]}; null for an ordinary bot.
        let relayMode: JSONValue = .object([("type", .string("object")), ("nullable", .bool(true))])
        let bot = object(["name": string, "default": boolean, "displayName": string, "dataPrefix": string, "userId": integer, "engineRunning": boolean,
                          "relaysConnected": integer, "address": nullableString, "plugins": integer, "eventSubscribers": integer, "chatRelay": relayMode],
                         order: ["name", "default", "displayName", "dataPrefix", "userId", "engineRunning", "relaysConnected", "address", "plugins",
                                 "eventSubscribers", "chatRelay"])
        // A channel's relay as its owner sees it (the engine's `GroupRelay`, SimpleX's JSON).
        let relayStatus: JSONValue = .object([("type", .string("string")), ("enum", .array(RelayStatus.allCases.map { .string($0.rawValue) }))])
        let chatRelay = object(["chatRelayId": integer, "address": string, "relayProfile": schema(.ref("Object")), "domains": array(string),
                                "preset": boolean, "enabled": boolean, "deleted": boolean],
                               order: ["chatRelayId", "address", "relayProfile", "domains", "preset", "enabled", "deleted"])
        let groupRelay = object(["groupRelayId": integer, "groupMemberId": integer, "userChatRelay": chatRelay, "relayStatus": schema(.ref("RelayStatus")),
                                 "relayCap": schema(.ref("Object"))],
                                order: ["groupRelayId", "groupMemberId", "userChatRelay", "relayStatus", "relayCap"])
        let role: JSONValue = .object([("type", .string("string")), ("enum", .array(["owner", "relay", "subscriber"].map(JSONValue.string)))])
        // `relays` (owner) or `relaysError` (the engine refused /_get relays) only for the owner.
        let channel = object(["groupInfo": schema(.ref("Object")), "role": role], order: ["groupInfo", "role"])
            .adding("relays", array(schema(.ref("GroupRelay")))).adding("relaysError", string)
        let botReadiness = object(["name": string, "ready": boolean, "engineRunning": boolean, "relaysConnected": integer],
                                  order: ["name", "ready", "engineRunning", "relaysConnected"])
        return .object([
            ("securitySchemes", .object([("bearer", .object([("type", .string("http")), ("scheme", .string("bearer"))]))])),
            ("schemas", .object([
                ("Object", .object([("type", .string("object"))])),
                ("Error", object(["error": object(["type": string, "message": string], order: ["type", "message"])], order: ["error"])),
                // Without the token only `ready`; the rest with it.
                ("Readiness", .object([("type", .string("object")), ("required", .array([.string("ready")])),
                                       ("properties", .object([("ready", boolean), ("engineRunning", boolean), ("relaysConnected", integer),
                                                               ("relaysDown", array(string)), ("bots", array(botReadiness))]))])),
                ("Status", object(["engineRunning": boolean, "uptimeSeconds": integer, "version": string, "relays": array(string),
                                   "relaysConnected": integer, "embeddedRelay": boolean, "address": nullableString, "plugins": integer,
                                   "authFailures": integer, "eventSubscribers": integer, "bots": array(bot)],
                                  order: ["engineRunning", "uptimeSeconds", "version", "relays", "relaysConnected", "embeddedRelay", "address",
                                          "plugins", "authFailures", "eventSubscribers", "bots"])),
                ("Bot", bot),
                ("Bots", object(["bots": array(bot)], order: ["bots"])),
                ("Plugins", object(["plugins": array(plugin)], order: ["plugins"])),
                ("ReloadResults", object(["results": array(result)], order: ["results"])),
                ("Address", object(["bot": string, "link": string, "qrSvg": string], order: ["bot", "link", "qrSvg"])),
                ("GroupMembers", object(["bot": string, "groupInfo": schema(.ref("Object")), "members": array(schema(.ref("Object")))],
                                        order: ["bot", "groupInfo", "members"])),
                ("RelayStatus", relayStatus),
                ("GroupRelay", groupRelay),
                ("GroupRelays", object(["bot": string, "groupInfo": schema(.ref("Object")), "relays": array(schema(.ref("GroupRelay")))],
                                       order: ["bot", "groupInfo", "relays"])),
                ("Channel", channel),
                ("Channels", object(["bot": string, "channels": array(schema(.ref("Channel"))), "total": integer, "offset": integer, "limit": integer],
                                    order: ["bot", "channels", "total", "offset", "limit"])),
            ])),
            ("responses", .object([("Error", .object([("description", .string("A typed error")),
                                                     ("content", .object([("application/json", .object([("schema", schema(.ref("Error")))]))]))]))])),
        ])
    }
}

/// The web dashboard's files (plain HTML, JavaScript and CSS in the package's resources; no
/// build step). Read once; only these names are served.
///
/// Looked for (SwiftPM's `Bundle.module` would stop the process when its bundle is missing, so
/// it is not used): `$SWIFTPLEX_DASHBOARD_DIR`, then `Swiftplex_BotHost.resources/Dashboard`
/// beside the executable (where `swift build` puts it), then `../share/swiftplex/dashboard`.
/// Without them the API works and `/` answers a typed `dashboardMissing` error.
enum Dashboard {
    static let names = [("index.html", "text/html; charset=utf-8"), ("dashboard.js", "text/javascript; charset=utf-8"),
                        ("dashboard.css", "text/css; charset=utf-8")]

    static var candidates: [URL] {
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        var dirs: [URL] = []
        if let env = ProcessInfo.processInfo.environment["SWIFTPLEX_DASHBOARD_DIR"], !env.isEmpty { dirs.append(URL(fileURLWithPath: env)) }
        dirs.append(exe.appendingPathComponent("Swiftplex_BotHost.resources/Dashboard"))
        dirs.append(exe.deletingLastPathComponent().appendingPathComponent("share/swiftplex/dashboard"))
        return dirs
    }

    static let files: [String: (type: String, bytes: [UInt8])] = {
        for dir in candidates {
            var files: [String: (String, [UInt8])] = [:]
            for (name, type) in names {
                if let data = try? Data(contentsOf: dir.appendingPathComponent(name)) { files[name] = (type, [UInt8](data)) }
            }
            if files.count == names.count { return files }
        }
        return [:]
    }()

    static func response(_ name: String) throws -> Response {
        guard let file = files[name] else {
            throw AdminError(.internalServerError, "dashboardMissing", "the dashboard's \(name) is not installed: put Swiftplex_BotHost.resources/Dashboard beside the executable, or the files in ../share/swiftplex/dashboard, or name their directory in SWIFTPLEX_DASHBOARD_DIR")
        }
        var headers: HTTPFields = [.contentType: file.type]
        headers[.cacheControl] = "no-cache"
        // The page loads only its own script and style, and talks only to this host.
        headers[.contentSecurityPolicy] = "default-src 'self'; img-src 'self' data: blob:; connect-src 'self' ws: wss:; frame-ancestors 'none'"
        headers[.init("X-Content-Type-Options")!] = "nosniff"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: file.bytes)))
    }
}

extension JSONValue {
    /// An object schema with one more optional property.
    fileprivate func adding(_ name: String, _ schema: JSONValue) -> JSONValue {
        guard case var .object(fields) = self, let i = fields.firstIndex(where: { $0.0 == "properties" }), case var .object(properties) = fields[i].1 else { return self }
        properties.append((name, schema))
        fields[i].1 = .object(properties)
        return .object(fields)
    }
}
