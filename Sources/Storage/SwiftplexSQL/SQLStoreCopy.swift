import SwiftplexBase
// Copying one database's rows into another of the same schema, whichever backends they are on
// (`swiftplex store copy`, docs/postgres.md "Moving a bot between SQLite and PostgreSQL"). The
// tables, their columns, keys, foreign keys and id counters are read from the migrated schema
// itself (`SQLSchema`), never from a list kept by hand: a migration that adds a table is copied
// without a change here.

/// A table as the migrated schema describes it.
public struct SQLTable: Sendable, Equatable {
    public var name: String
    /// In the table's order.
    public var columns: [String]
    /// The primary key's columns, in key order (empty: none).
    public var primaryKey: [String]
    /// The tables its foreign keys point to (itself left out).
    public var references: Set<String>
    /// The column whose ids a counter hands out: SQLite's `INTEGER PRIMARY KEY AUTOINCREMENT`
    /// (`sqlite_sequence`), PostgreSQL's identity column (its sequence).
    public var counterColumn: String?
    /// PostgreSQL: the identity column's sequence, as the server names it.
    public var sequence: String?

    public init(name: String, columns: [String], primaryKey: [String], references: Set<String>, counterColumn: String? = nil, sequence: String? = nil) {
        self.name = name
        self.columns = columns
        self.primaryKey = primaryKey
        self.references = references
        self.counterColumn = counterColumn
        self.sequence = sequence
    }
}

/// Reading a database's schema through the SQL layer (`sqlite_master` and its pragmas on SQLite,
/// the catalogs of the store's schema on PostgreSQL).
public enum SQLSchema {
    /// The record of applied migrations each backend keeps beside the tables (not data).
    public static let migrationTables: Set<String> = ["grdb_migrations", "swiftplex_migrations"]

    /// Every table of the database but SQLite's own and the migrations' record, parents before
    /// the tables whose foreign keys point to them.
    public static func tables(_ db: any SQLConnection) throws -> [SQLTable] {
        let unordered: [SQLTable]
        switch db.dialect {
        case .sqlite: unordered = try sqliteTables(db)
        case .postgres: unordered = try postgresTables(db)
        }
        return try dependencyOrder(unordered)
    }

    private static func sqliteTables(_ db: any SQLConnection) throws -> [SQLTable] {
        let rows = try db.rows("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
        var tables: [SQLTable] = []
        for row in rows {
            let name = try row.get("name", as: String.self)
            if name.hasPrefix("sqlite_") || migrationTables.contains(name) { continue }
            let sql = try row.get("sql", as: String?.self) ?? ""
            var columns: [(cid: Int64, name: String)] = []
            var key: [(position: Int64, name: String)] = []
            for c in try db.rows("SELECT cid, name, pk FROM pragma_table_info(?)", [.text(name)]) {
                let column = try c.get("name", as: String.self)
                columns.append((try c.get("cid", as: Int64.self), column))
                let pk = try c.get("pk", as: Int64.self)
                if pk > 0 { key.append((pk, column)) }
            }
            let parents = try db.rows("SELECT \"table\" AS parent FROM pragma_foreign_key_list(?)", [.text(name)])
                .map { try $0.get("parent", as: String.self) }
            let primaryKey = key.sorted { $0.position < $1.position }.map(\.name)
            let autoincrement = sql.uppercased().contains("AUTOINCREMENT") && primaryKey.count == 1
            tables.append(SQLTable(name: name, columns: columns.sorted { $0.cid < $1.cid }.map(\.name), primaryKey: primaryKey,
                                   references: Set(parents).subtracting([name]), counterColumn: autoincrement ? primaryKey[0] : nil))
        }
        return tables
    }

    private static func postgresTables(_ db: any SQLConnection) throws -> [SQLTable] {
        let names = try db.rows("""
            SELECT c.relname::text AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') ORDER BY c.relname
            """).map { try $0.get("name", as: String.self) }
        var tables: [SQLTable] = []
        for name in names where !migrationTables.contains(name) {
            var columns: [String] = []
            var identity: [String] = []
            for c in try db.rows("""
                SELECT column_name::text AS name, is_identity::text AS identity FROM information_schema.columns
                WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position
                """, [.text(name)]) {
                let column = try c.get("name", as: String.self)
                columns.append(column)
                if try c.get("identity", as: String?.self) == "YES" { identity.append(column) }
            }
            let primaryKey = try db.rows("""
                SELECT k.column_name::text AS name FROM information_schema.table_constraints t
                JOIN information_schema.key_column_usage k
                  ON k.constraint_name = t.constraint_name AND k.table_schema = t.table_schema AND k.table_name = t.table_name
                WHERE t.table_schema = current_schema() AND t.table_name = ? AND t.constraint_type = 'PRIMARY KEY'
                ORDER BY k.ordinal_position
                """, [.text(name)]).map { try $0.get("name", as: String.self) }
            let parents = try db.rows("""
                SELECT DISTINCT p.relname::text AS parent FROM pg_constraint k
                JOIN pg_class c ON c.oid = k.conrelid JOIN pg_class p ON p.oid = k.confrelid
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE k.contype = 'f' AND n.nspname = current_schema() AND c.relname = ?
                """, [.text(name)]).map { try $0.get("parent", as: String.self) }
            // The column a sequence hands ids to: an identity column, or a single-column key
            // with a sequence of its own (`serial`).
            var counterColumn: String?
            var sequence: String?
            for column in identity + (primaryKey.count == 1 ? primaryKey : []) where sequence == nil {
                if let s = try db.value(String.self, "SELECT pg_get_serial_sequence(?, ?) AS s", quoted(name), column) {
                    counterColumn = column
                    sequence = s
                }
            }
            tables.append(SQLTable(name: name, columns: columns, primaryKey: primaryKey, references: Set(parents).subtracting([name]),
                                   counterColumn: counterColumn, sequence: sequence))
        }
        return tables
    }

    /// `tables` with every table after those its foreign keys point to (by name among equals).
    static func dependencyOrder(_ tables: [SQLTable]) throws -> [SQLTable] {
        var remaining = tables.sorted { $0.name < $1.name }
        var placed: Set<String> = []
        var ordered: [SQLTable] = []
        let names = Set(tables.map(\.name))
        while !remaining.isEmpty {
            guard let i = remaining.firstIndex(where: { $0.references.intersection(names).isSubset(of: placed) }) else {
                throw SQLError(.statement, "the foreign keys of \(remaining.map(\.name).joined(separator: ", ")) form a cycle: no order to copy them in")
            }
            let t = remaining.remove(at: i)
            placed.insert(t.name)
            ordered.append(t)
        }
        return ordered
    }

    /// The number of rows of `table`.
    public static func count(_ db: any SQLConnection, _ table: String) throws -> Int {
        try db.value(Int.self, "SELECT COUNT(*) AS n FROM \(quoted(table))") ?? 0
    }

    /// The largest id the table's counter has handed out (0: none): SQLite's `sqlite_sequence`,
    /// a PostgreSQL sequence's last value. Ids of deleted rows are not handed out again.
    public static func counter(_ db: any SQLConnection, _ table: SQLTable) throws -> Int64 {
        guard table.counterColumn != nil else { return 0 }
        switch db.dialect {
        case .sqlite:
            guard try db.value(Int.self, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'") == 1 else { return 0 }
            return try db.value(Int64.self, "SELECT seq FROM sqlite_sequence WHERE name = ?", table.name) ?? 0
        case .postgres:
            guard let sequence = table.sequence else { return 0 }
            // NULL until the sequence handed out its first value.
            return try db.value(Int64.self, "SELECT pg_sequence_last_value(?::regclass) AS v", sequence) ?? 0
        }
    }

    /// Sets the table's counter so that the next id it hands out is past `value` and past every
    /// id in the table.
    public static func setCounter(_ db: any SQLConnection, _ table: SQLTable, atLeast value: Int64) throws {
        guard let column = table.counterColumn else { return }
        let largest = try db.value(Int64.self, "SELECT max(\(quoted(column))) AS m FROM \(quoted(table.name))") ?? 0
        let target = max(value, largest)
        switch db.dialect {
        case .sqlite:
            if try db.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", target, table.name) == 0, target > 0 {
                try db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", table.name, target)
            }
        case .postgres:
            guard let sequence = table.sequence else { return }
            if target > 0 {
                _ = try db.rows("SELECT setval(?::regclass, ?, true) AS v", [.text(sequence), .integer(target)])
            } else {
                _ = try db.rows("SELECT setval(?::regclass, 1, false) AS v", [.text(sequence)])
            }
        }
    }
}

/// Why a copy between stores did not happen or did not finish.
public struct StoreCopyError: CodedError {
    public enum Code: String, Sendable {
        /// A location that names nothing usable (a malformed URL, a bad schema name, both the same).
        case badLocation
        /// The source holds no databases there.
        case sourceMissing
        /// A running bot (or another process) holds the source or the destination.
        case inUse
        /// The destination holds rows and `force` was not given.
        case notEmpty
        /// The source's and the destination's tables differ.
        case schema
        /// A server could not be reached, or a database not opened.
        case connection
        /// A statement of the copy failed (the destination is incomplete).
        case copy
        /// The destination does not hold what the source holds after the copy.
        case verification
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// The copy of one database (`label`: chat, agent) from one store to another of the same schema.
public struct SQLStoreCopy: Sendable {
    public let label: String
    public let source: any SQLStore
    public let destination: any SQLStore
    /// The source's tables, parents first.
    public let tables: [SQLTable]
    /// The destination's tables by name (their counters' sequences differ between backends).
    let destinationTables: [String: SQLTable]
    /// Rows per table in the source and, before anything was done, in the destination.
    public let sourceRows: [String: Int]
    public let destinationRows: [String: Int]

    /// Reads both schemas and counts their rows. Throws ``StoreCopyError`` `.schema` when a table,
    /// a column or a key of one is not in the other.
    public static func prepare(label: String, from source: any SQLStore, to destination: any SQLStore) async throws -> SQLStoreCopy {
        let (tables, sourceRows) = try await source.read { db in
            let tables = try SQLSchema.tables(db)
            return (tables, try Dictionary(uniqueKeysWithValues: tables.map { ($0.name, try SQLSchema.count(db, $0.name)) }))
        }
        let (theirs, destinationRows) = try await destination.read { db in
            let tables = try SQLSchema.tables(db)
            return (tables, try Dictionary(uniqueKeysWithValues: tables.map { ($0.name, try SQLSchema.count(db, $0.name)) }))
        }
        let byName = Dictionary(uniqueKeysWithValues: theirs.map { ($0.name, $0) })
        let missing = Set(tables.map(\.name)).symmetricDifference(byName.keys).sorted()
        guard missing.isEmpty else {
            throw StoreCopyError(.schema, "\(label): the source's and the destination's tables differ (\(missing.joined(separator: ", "))): made by different versions of Swiftplex?")
        }
        for t in tables {
            let d = byName[t.name]!
            guard Set(t.columns) == Set(d.columns), t.primaryKey == d.primaryKey else {
                throw StoreCopyError(.schema, "\(label): table \(t.name) differs: columns \(t.columns) key \(t.primaryKey) in the source, \(d.columns) key \(d.primaryKey) in the destination")
            }
        }
        return SQLStoreCopy(label: label, source: source, destination: destination, tables: tables, destinationTables: byName,
                            sourceRows: sourceRows, destinationRows: destinationRows)
    }

    /// Rows the destination held when prepared.
    public var destinationTotal: Int { destinationRows.values.reduce(0, +) }
    public var sourceTotal: Int { sourceRows.values.reduce(0, +) }

    /// Deletes every row of the destination, children first, in one transaction.
    public func clearDestination() async throws {
        let tables = self.tables
        try await destination.write { db in
            for t in tables.reversed() { try db.execute("DELETE FROM \(quoted(t.name))", [SQLValue]()) }
        }
    }

    /// Copies every table, parents first, `batch` rows per read of the source and per transaction
    /// of the destination (in key order, ids and values as stored), then sets the destination's id
    /// counters past the source's, and checks that each table holds as many rows as the source's.
    /// `progress` gets a line per batch.
    public func copy(batch: Int, progress: @Sendable (String) -> Void) async throws {
        precondition(batch > 0)
        for table in tables {
            let want = sourceRows[table.name] ?? 0
            var copied = 0
            var after: [SQLValue]?
            var offset = 0
            while true {
                let rows = try await source.read { [after, offset] db in try Self.readBatch(db, table, after: after, offset: offset, limit: batch) }
                if rows.isEmpty { break }
                do {
                    try await destination.write { db in try Self.insert(db, table, rows) }
                } catch {
                    throw StoreCopyError(.copy, "\(label): copying table \(table.name) failed after \(copied) of \(want) rows: \(error)")
                }
                copied += rows.count
                offset += rows.count
                if !table.primaryKey.isEmpty {
                    let last = rows[rows.count - 1]
                    after = table.primaryKey.map { column in last[table.columns.firstIndex(of: column)!] }
                }
                progress("\(label): \(table.name) \(copied)/\(want) rows")
                if rows.count < batch { break }
            }
        }
        // The counters: no id the source handed out (its rows', and those of rows it deleted) is
        // handed out again by the destination.
        let counters = try await source.read { [tables] db in
            try tables.map { ($0.name, try SQLSchema.counter(db, $0)) }
        }
        let destinationTables = self.destinationTables
        try await destination.write { db in
            for (name, value) in counters {
                try SQLSchema.setCounter(db, destinationTables[name]!, atLeast: value)
            }
        }
        try await verify()
    }

    /// Both sides hold as many rows per table as the source did when prepared.
    func verify() async throws {
        let tables = self.tables
        let count: @Sendable (any SQLConnection) throws -> [String: Int] = { db in
            try Dictionary(uniqueKeysWithValues: tables.map { ($0.name, try SQLSchema.count(db, $0.name)) })
        }
        let now = try await source.read(count)
        let got = try await destination.read(count)
        for t in tables where got[t.name] != sourceRows[t.name] || now[t.name] != sourceRows[t.name] {
            throw StoreCopyError(.verification, "\(label): table \(t.name) holds \(got[t.name] ?? 0) rows in the destination, \(sourceRows[t.name] ?? 0) in the source "
                + "(now \(now[t.name] ?? 0)) — did something write to either meanwhile?")
        }
    }

    /// Up to `limit` rows after the key `after` (or from the start), in key order; a table
    /// without a primary key is read in the order of all its columns, by offset.
    static func readBatch(_ db: any SQLConnection, _ table: SQLTable, after: [SQLValue]?, offset: Int, limit: Int) throws -> [[SQLValue]] {
        let columns = table.columns.map(quoted).joined(separator: ", ")
        let key = table.primaryKey.isEmpty ? table.columns : table.primaryKey
        let order = key.map(quoted).joined(separator: ", ")
        var sql = "SELECT \(columns) FROM \(quoted(table.name))"
        var arguments: [SQLValue] = []
        if table.primaryKey.isEmpty {
            sql += " ORDER BY \(order) LIMIT ? OFFSET ?"
            arguments = [.integer(Int64(limit)), .integer(Int64(offset))]
        } else {
            if let after {
                sql += key.count == 1
                    ? " WHERE \(order) > ?"
                    : " WHERE (\(order)) > (\(Array(repeating: "?", count: key.count).joined(separator: ", ")))"
                arguments = after
            }
            sql += " ORDER BY \(order) LIMIT ?"
            arguments.append(.integer(Int64(limit)))
        }
        return try db.rows(sql, arguments).map(\.values)
    }

    /// Most placeholders in one statement (SQLite's older limit is 999).
    static let maxParameters = 900

    /// Inserts `rows` (values in `table.columns` order), several per statement.
    static func insert(_ db: any SQLConnection, _ table: SQLTable, _ rows: [[SQLValue]]) throws {
        let width = table.columns.count
        let perStatement = max(1, maxParameters / max(1, width))
        let head = "INSERT INTO \(quoted(table.name)) (\(table.columns.map(quoted).joined(separator: ", "))) VALUES "
        let tuple = "(" + Array(repeating: "?", count: width).joined(separator: ", ") + ")"
        var start = 0
        while start < rows.count {
            let chunk = rows[start..<min(rows.count, start + perStatement)]
            let sql = head + Array(repeating: tuple, count: chunk.count).joined(separator: ", ")
            try db.execute(sql, chunk.flatMap { $0 })
            start += chunk.count
        }
    }
}
