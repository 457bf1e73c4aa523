import Foundation

/// Where a PostgreSQL database is, and which schema of it a store uses — the one parser of
/// connection strings for every PostgreSQL store (the engine's, through ``PostgresBackend``, and
/// the relay's). A value only: the driver lives in the PostgreSQL backend (SwiftplexSQLPostgres).
///
/// Two forms:
/// - a URL: `postgresql://user[:password]@host[:port]/database[?schema=name&sslmode=disable|prefer|require&host=/socket/dir]`
///   (`postgres://` too);
/// - libpq's keywords: `host=… port=… user=… password=… dbname=… sslmode=…` (values may be quoted
///   with `'…'`), which is what the SimpleX libraries' `PostgresDb` may pass.
///
/// The password may also come from `PGPASSWORD`; it is never printed (``description`` leaves it
/// out, and no error message carries it). A host starting with `/` is the directory of the
/// server's Unix socket (`.s.PGSQL.<port>` in it).
public struct PostgresLocation: Sendable, CustomStringConvertible, Equatable {
    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    /// Tables live in this schema (created if missing): several stores share one database, each
    /// in a schema of its own.
    public var schema: String
    /// `disable`, `prefer` or `require`.
    public var sslMode: String

    /// Whether `value` names PostgreSQL (a URL or libpq keywords) rather than an SQLite file.
    public static func isPostgres(_ value: String) -> Bool {
        value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") || isKeywordForm(value)
    }

    private static func isKeywordForm(_ value: String) -> Bool {
        let v = value.drop(while: { $0 == " " })
        return ["host=", "hostaddr=", "dbname=", "user="].contains { v.hasPrefix($0) }
    }

    /// Parses `value`; `defaultSchema` when it names none. Throws ``SQLError`` `.connection` saying
    /// what is wrong (never repeating a password).
    public init(url value: String, defaultSchema: String = "swiftplex",
                environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        var host: String?
        var port: Int?
        var user: String?
        var password: String?
        var database: String?
        var options: [(String, String)] = []
        if Self.isKeywordForm(value) {
            for (key, v) in try Self.keywords(value) {
                switch key {
                case "host", "hostaddr": host = v
                case "port":
                    guard let p = Int(v) else { throw SQLError(.connection, "the PostgreSQL port must be a number") }
                    port = p
                case "user": user = v
                case "password": password = v
                case "dbname": database = v
                case "schema", "sslmode": options.append((key, v))
                default: throw SQLError(.connection, "unknown PostgreSQL connection keyword \(key) (host, port, user, password, dbname, sslmode, schema)")
                }
            }
        } else {
            guard value.hasPrefix("postgresql://") || value.hasPrefix("postgres://"), let c = URLComponents(string: value) else {
                throw SQLError(.connection, "not a PostgreSQL URL (postgresql://user@host:port/database?schema=name)")
            }
            host = c.host.flatMap { $0.isEmpty ? nil : $0.removingPercentEncoding ?? $0 }
            port = c.port
            user = c.user.map { $0.removingPercentEncoding ?? $0 }
            password = c.password.map { $0.removingPercentEncoding ?? $0 }
            database = String(c.path.drop(while: { $0 == "/" }))
            for item in c.queryItems ?? [] {
                switch item.name {
                case "schema", "sslmode": options.append((item.name, item.value ?? ""))
                case "host": host = item.value
                default: throw SQLError(.connection, "unknown PostgreSQL URL parameter \(item.name) (schema, sslmode, host)")
                }
            }
        }
        guard let host, !host.isEmpty else {
            throw SQLError(.connection, "the PostgreSQL connection string has no host (postgresql://user@host/… or host=…)")
        }
        guard let user, !user.isEmpty else {
            throw SQLError(.connection, "the PostgreSQL connection string has no user (postgresql://user@host/… or user=…)")
        }
        guard let database, !database.isEmpty else {
            throw SQLError(.connection, "the PostgreSQL connection string has no database (postgresql://…/database or dbname=…)")
        }
        var schema = defaultSchema
        var sslMode = "disable"
        for (name, v) in options {
            if name == "schema" { schema = v } else { sslMode = v }
        }
        try Self.validate(schema: schema)
        guard ["disable", "prefer", "require"].contains(sslMode) else {
            throw SQLError(.connection, "sslmode must be disable, prefer or require")
        }
        self.host = host
        self.port = port ?? 5432
        self.user = user
        self.password = password ?? environment["PGPASSWORD"]
        self.database = database
        self.schema = schema
        self.sslMode = sslMode
    }

    /// The same database with another schema (a store per schema prefix: `<prefix>_chat`, …).
    public func with(schema: String) throws -> PostgresLocation {
        try Self.validate(schema: schema)
        var copy = self
        copy.schema = schema
        return copy
    }

    /// A schema name is 1–63 of `a–z 0–9 _`, starting with a letter or `_`: it needs no quoting
    /// and cannot smuggle SQL.
    public static func validate(schema: String) throws {
        guard !schema.isEmpty, schema.utf8.count <= 63, schema.first.map({ $0 == "_" || ($0.isASCII && $0.isLowercase) }) == true,
              schema.allSatisfy({ $0 == "_" || ($0.isASCII && ($0.isLowercase || $0.isNumber)) }) else {
            throw SQLError(.connection, "the schema must be 1–63 of a–z 0–9 _ (starting with a letter or _), not \(schema.debugDescription)")
        }
    }

    /// libpq's `key=value` pairs separated by spaces; a value may be quoted with `'`, with `\'`
    /// and `\\` inside.
    private static func keywords(_ value: String) throws -> [(String, String)] {
        var result: [(String, String)] = []
        var chars = Array(value)[...]
        func skipSpaces() { while chars.first?.isWhitespace == true { chars.removeFirst() } }
        skipSpaces()
        while !chars.isEmpty {
            var key = ""
            while let c = chars.first, c != "=", !c.isWhitespace { key.append(c); chars.removeFirst() }
            skipSpaces()
            guard chars.first == "=" else { throw SQLError(.connection, "the PostgreSQL connection string has \(key) without =value") }
            chars.removeFirst()
            skipSpaces()
            var v = ""
            if chars.first == "'" {
                chars.removeFirst()
                var closed = false
                while let c = chars.popFirst() {
                    if c == "\\", let next = chars.popFirst() { v.append(next); continue }
                    if c == "'" { closed = true; break }
                    v.append(c)
                }
                guard closed else { throw SQLError(.connection, "the PostgreSQL connection string has an unclosed quote after \(key)=") }
            } else {
                while let c = chars.first, !c.isWhitespace { v.append(c); chars.removeFirst() }
            }
            result.append((key, v))
            skipSpaces()
        }
        return result
    }

    /// The schema as an SQL identifier.
    public var quotedSchema: String { "\"\(schema)\"" }

    /// The location without the password.
    public var description: String {
        host.hasPrefix("/")
            ? "postgresql://\(user)@/\(database)?host=\(host)&schema=\(schema)"
            : "postgresql://\(user)@\(host):\(port)/\(database)?schema=\(schema)"
    }
}
