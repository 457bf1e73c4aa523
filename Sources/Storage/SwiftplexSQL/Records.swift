import SwiftplexBase
import Synchronization

// Records: Codable structs stored one per row. A record's properties are its columns (named by
// `databaseColumnName(forKey:)`); `Bool` is stored 0/1, `Data` and `[UInt8]` as blobs, enums as
// their raw values. Requests on a record type (`filter`, `order`, `fetchOne`, …) build one
// statement each.

/// A type stored in a table.
public protocol TableRecord {
    static var databaseTableName: String { get }
    /// The primary key's columns (`["id"]` unless the table says otherwise).
    static var databasePrimaryKey: [String] { get }
    /// The column a Codable property is stored in (the property's name unless the type says otherwise).
    static func databaseColumnName(forKey key: String) -> String
}

extension TableRecord {
    public static var databasePrimaryKey: [String] { ["id"] }
    public static func databaseColumnName(forKey key: String) -> String { key }
}

/// A record read from rows.
public protocol FetchableRecord: TableRecord, Decodable {}

/// A record written to its table. An `INSERT` leaves a nil `id` to the database and hands the new
/// row's id to `didInsert`.
public protocol MutablePersistableRecord: TableRecord, Encodable {
    mutating func didInsert(_ inserted: InsertionSuccess)
}

extension MutablePersistableRecord {
    public mutating func didInsert(_: InsertionSuccess) {}
}

/// A record whose key is not made by the database (no `id` to hand back): written without mutating.
public protocol PersistableRecord: MutablePersistableRecord {}

extension PersistableRecord {
    public func insert(_ db: any SQLConnection, onConflict: ConflictResolution = .abort) throws {
        var copy = self
        try copy.performInsert(db, onConflict: onConflict)
    }

    public func save(_ db: any SQLConnection) throws {
        var copy = self
        try copy.performSave(db)
    }
}

/// The outcome of an `INSERT`: the new row's id (`RETURNING id`), when the table has an `id` key.
public struct InsertionSuccess: Sendable {
    public let rowID: Int64
}

/// What an `INSERT` does when the row conflicts with one already there.
public enum ConflictResolution: Sendable {
    /// Fail (the default).
    case abort
    /// Insert nothing (`ON CONFLICT DO NOTHING`); `changesCount` is then 0.
    case ignore
    /// Replace the row with the same primary key.
    case replace
}

/// A record with no row to update.
public struct RecordNotFound: CodedError {
    public enum Code: Sendable, Hashable { case noRow }
    public var code: Code { .noRow }
    public let table: String
    public var message: String { "no row of \(table) to update" }
}

// MARK: - Writing

/// A record type's columns and the SQL of its writes, made once per type (and again only if the
/// type encodes another set of properties): a write encodes the record and binds its values, it
/// does not build its statement's text anew.
final class RecordTable: Sendable {
    /// The coding keys in the order the type encodes them, and their columns.
    let keys: [String]
    let names: [String]
    /// Where the primary key's columns are among `names`; nil when one is missing.
    let keyPositions: [Int]?
    /// Where `id` is, when the key is `id` alone (an insert with a NULL id leaves it to the database).
    let generatedId: Int?
    /// `INSERT`s by conflict resolution (abort, ignore, replace), with every column and without `id`.
    let inserts: [String]
    let insertsWithoutId: [String]
    /// `UPDATE … SET <every other column> WHERE <key>`; nil when the key is every column.
    let update: String?
    /// `<key columns> = ? AND …`.
    let keyCondition: String

    init(keys: [String], naming: (String) -> String, table: String, primaryKey: [String]) {
        self.keys = keys
        let names = keys.map(naming)
        self.names = names
        var positions: [Int] = []
        for k in primaryKey {
            guard let i = names.firstIndex(of: k) else { break }
            positions.append(i)
        }
        keyPositions = positions.count == primaryKey.count ? positions : nil
        generatedId = primaryKey == ["id"] ? names.firstIndex(of: "id") : nil
        let quotedTable = quoted(table)
        func inserts(_ columns: [String]) -> [String] {
            let list = columns.map(quoted).joined(separator: ", ")
            let marks = Array(repeating: "?", count: columns.count).joined(separator: ", ")
            let base = columns.isEmpty ? "INSERT INTO \(quotedTable) DEFAULT VALUES" : "INSERT INTO \(quotedTable) (\(list)) VALUES (\(marks))"
            let others = columns.filter { !primaryKey.contains($0) }
            let target = primaryKey.map(quoted).joined(separator: ", ")
            let replace = others.isEmpty
                ? " ON CONFLICT (\(target)) DO NOTHING"
                : " ON CONFLICT (\(target)) DO UPDATE SET " + others.map { quoted($0) + " = excluded." + quoted($0) }.joined(separator: ", ")
            return [base, base + " ON CONFLICT DO NOTHING", base + replace]
        }
        self.inserts = inserts(names)
        if let id = generatedId {
            var without = names
            without.remove(at: id)
            insertsWithoutId = inserts(without)
        } else {
            insertsWithoutId = self.inserts
        }
        keyCondition = primaryKey.map { quoted($0) + " = ?" }.joined(separator: " AND ")
        let others = names.filter { !primaryKey.contains($0) }
        update = others.isEmpty ? nil : "UPDATE \(quotedTable) SET " + others.map { quoted($0) + " = ?" }.joined(separator: ", ") + " WHERE " + keyCondition
    }

    private static let tables = Mutex<[ObjectIdentifier: RecordTable]>([:])

    /// The table of `Record` for the keys it encoded.
    static func of<Record: TableRecord>(_: Record.Type, keys: [String]) -> RecordTable {
        let id = ObjectIdentifier(Record.self)
        if let known = tables.withLock({ $0[id] }), known.keys == keys { return known }
        let made = RecordTable(keys: keys, naming: Record.databaseColumnName(forKey:), table: Record.databaseTableName, primaryKey: Record.databasePrimaryKey)
        tables.withLock { $0[id] = made }
        return made
    }
}

/// A record encoded once for a write: its values and its table's SQL.
struct EncodedRecord {
    let table: RecordTable
    let values: [SQLValue]

    func keyValues<Record: TableRecord>(_: Record.Type) throws -> [SQLValue] {
        guard let positions = table.keyPositions else {
            let missing = Record.databasePrimaryKey.first { !table.names.contains($0) } ?? ""
            throw SQLError(.column, "\(Record.databaseTableName) has no key column \(missing)")
        }
        return positions.map { values[$0] }
    }

    var keyIsNull: Bool { table.keyPositions?.contains { values[$0] == .null } ?? false }
}

extension MutablePersistableRecord {
    /// The record's columns and values, in the order of its properties.
    func databaseColumns() throws -> [(String, SQLValue)] {
        let encoded = try encoded()
        return Array(zip(encoded.table.names, encoded.values))
    }

    func encoded() throws -> EncodedRecord {
        let encoder = RecordEncoder(naming: Self.databaseColumnName(forKey:))
        try encode(to: encoder)
        return EncodedRecord(table: RecordTable.of(Self.self, keys: encoder.storage.keys), values: encoder.storage.values)
    }

    public mutating func insert(_ db: any SQLConnection, onConflict: ConflictResolution = .abort) throws {
        try performInsert(db, onConflict: onConflict)
    }

    mutating func performInsert(_ db: any SQLConnection, onConflict: ConflictResolution) throws {
        try performInsert(db, onConflict: onConflict, encoded())
    }

    private mutating func performInsert(_ db: any SQLConnection, onConflict: ConflictResolution, _ record: EncodedRecord) throws {
        let table = record.table
        let variant = switch onConflict {
        case .abort: 0
        case .ignore: 1
        case .replace: 2
        }
        if let id = table.generatedId {
            var values = record.values
            let sql: String
            if values[id] == .null {
                values.remove(at: id)
                sql = table.insertsWithoutId[variant]
            } else {
                sql = table.inserts[variant]
            }
            let rows = try db.rows(sql + " RETURNING \"id\"", values)
            if let row = rows.first { didInsert(InsertionSuccess(rowID: try row.get(0, as: Int64.self))) }
        } else {
            try db.execute(table.inserts[variant], record.values)
        }
    }

    /// Updates every column of the row with this record's key; throws `RecordNotFound` when there is none.
    public func update(_ db: any SQLConnection) throws {
        guard try updateChanges(db, encoded()) else { throw RecordNotFound(table: Self.databaseTableName) }
    }

    /// Updates only `columns` of the row with this record's key; throws `RecordNotFound` when there is none.
    public func update(_ db: any SQLConnection, columns: [Column]) throws {
        let record = try encoded()
        let keyArguments = try record.keyValues(Self.self)
        let names = Set(columns.map(\.name))
        let changed = zip(record.table.names, record.values).filter { names.contains($0.0) }
        guard changed.count == names.count else {
            throw SQLError(.column, "\(Self.databaseTableName) has no column among \(names.subtracting(record.table.names).sorted())")
        }
        let set = changed.map { quoted($0.0) + " = ?" }.joined(separator: ", ")
        guard try db.execute("UPDATE \(quoted(Self.databaseTableName)) SET \(set) WHERE \(record.table.keyCondition)", changed.map(\.1) + keyArguments) > 0 else {
            throw RecordNotFound(table: Self.databaseTableName)
        }
    }

    /// Updates the row with this record's key, or inserts one when there is none.
    public mutating func save(_ db: any SQLConnection) throws { try performSave(db) }

    mutating func performSave(_ db: any SQLConnection) throws {
        let record = try encoded()
        if !record.keyIsNull, try updateChanges(db, record) { return }
        try performInsert(db, onConflict: .abort, record)
    }

    /// Deletes the row with this record's key; false when there was none.
    @discardableResult
    public func delete(_ db: any SQLConnection) throws -> Bool {
        let record = try encoded()
        let arguments = try record.keyValues(Self.self)
        return try db.execute("DELETE FROM \(quoted(Self.databaseTableName)) WHERE \(record.table.keyCondition)", arguments) > 0
    }

    private func updateChanges(_ db: any SQLConnection, _ record: EncodedRecord) throws -> Bool {
        let keyArguments = try record.keyValues(Self.self)
        guard let update = record.table.update, let positions = record.table.keyPositions else {
            return try Self.filter(SQLExpression(sql: record.table.keyCondition, arguments: keyArguments)).fetchCount(db) > 0
        }
        var arguments: [SQLValue] = []
        arguments.reserveCapacity(record.values.count)
        for (i, v) in record.values.enumerated() where !positions.contains(i) { arguments.append(v) }
        arguments.append(contentsOf: keyArguments)
        return try db.execute(update, arguments) > 0
    }
}

// MARK: - Requests

/// A `SELECT` (or `UPDATE`/`DELETE`) on one record type's table, built up by `filter`, `order`,
/// `limit`; run by `fetchOne`, `fetchAll`, `fetchCount`, `isEmpty`, `updateAll`, `deleteAll`.
public struct QueryInterfaceRequest<Record: TableRecord>: Sendable {
    var conditions: [SQLExpression] = []
    var orderings: [String] = []
    var limitCount: Int?

    public func filter(_ condition: SQLExpression) -> Self {
        var r = self
        r.conditions.append(condition)
        return r
    }

    /// The row whose (single-column) primary key is `key`.
    public func filter(key: some SQLValueConvertible) -> Self {
        filter(Record.singleKeyCondition(key.sqlValue))
    }

    public func order(_ terms: any SQLOrderingTerm...) -> Self {
        var r = self
        r.orderings = terms.map(\.orderingSQL)
        return r
    }

    public func limit(_ n: Int) -> Self {
        var r = self
        r.limitCount = n
        return r
    }

    /// One value per row (an aggregate such as `max(column)` gives one row).
    public func select<T: SQLValueConvertible>(_ expression: SQLExpression, as _: T.Type) -> SelectRequest<T> {
        SelectRequest(base: self, expression: expression)
    }

    var whereClause: (String, [SQLValue]) {
        guard !conditions.isEmpty else { return ("", []) }
        return (" WHERE " + conditions.map(\.sql).joined(separator: " AND "), conditions.flatMap(\.arguments))
    }

    func selectSQL(_ selection: String) -> (String, [SQLValue]) {
        let (clause, arguments) = whereClause
        var sql = "SELECT \(selection) FROM \(quoted(Record.databaseTableName))" + clause
        if !orderings.isEmpty { sql += " ORDER BY " + orderings.joined(separator: ", ") }
        if let limitCount { sql += " LIMIT \(limitCount)" }
        return (sql, arguments)
    }

    public func fetchCount(_ db: any SQLConnection) throws -> Int {
        let (sql, arguments) = selectSQL("count(*)")
        return try db.rows(sql, arguments).first?.get(0, as: Int.self) ?? 0
    }

    public func isEmpty(_ db: any SQLConnection) throws -> Bool {
        let (sql, arguments) = limit(1).selectSQL("1")
        return try db.rows(sql, arguments).isEmpty
    }

    /// Sets `assignments` on every row the request selects; returns how many.
    @discardableResult
    public func updateAll(_ db: any SQLConnection, _ assignments: ColumnAssignment...) throws -> Int {
        try updateAll(db, assignments: assignments)
    }

    func updateAll(_ db: any SQLConnection, assignments: [ColumnAssignment]) throws -> Int {
        precondition(orderings.isEmpty && limitCount == nil, "updateAll takes conditions only")
        let (clause, arguments) = whereClause
        let set = assignments.map { quoted($0.column) + " = " + $0.value.sql }.joined(separator: ", ")
        return try db.execute("UPDATE \(quoted(Record.databaseTableName)) SET \(set)" + clause, assignments.flatMap(\.value.arguments) + arguments)
    }

    /// Deletes every row the request selects; returns how many.
    @discardableResult
    public func deleteAll(_ db: any SQLConnection) throws -> Int {
        precondition(orderings.isEmpty && limitCount == nil, "deleteAll takes conditions only")
        let (clause, arguments) = whereClause
        return try db.execute("DELETE FROM \(quoted(Record.databaseTableName))" + clause, arguments)
    }
}

extension QueryInterfaceRequest where Record: FetchableRecord {
    public func fetchAll(_ db: any SQLConnection) throws -> [Record] {
        let (sql, arguments) = selectSQL("*")
        return try db.rows(sql, arguments).map { try Record(row: $0) }
    }

    public func fetchOne(_ db: any SQLConnection) throws -> Record? {
        let (sql, arguments) = limit(1).selectSQL("*")
        return try db.rows(sql, arguments).first.map { try Record(row: $0) }
    }
}

/// A request for one expression per row (`select(max(column), as: Int64?.self)`).
public struct SelectRequest<T: SQLValueConvertible>: Sendable {
    let sql: (String, [SQLValue])

    init<R>(base: QueryInterfaceRequest<R>, expression: SQLExpression) {
        let (sql, arguments) = base.selectSQL(expression.sql)
        self.sql = (sql, expression.arguments + arguments)
    }

    /// The first row's value (`.some(nil)` when it is NULL and `T` is optional), nil when no row.
    public func fetchOne(_ db: any SQLConnection) throws -> T? {
        guard let row = try db.rows(sql.0, sql.1).first else { return nil }
        return try row.get(0, as: T.self)
    }
}

extension TableRecord {
    static func singleKeyCondition(_ key: SQLValue) -> SQLExpression {
        precondition(databasePrimaryKey.count == 1, "\(databaseTableName) has a composite key: use key: [column: value]")
        return SQLExpression(sql: quoted(databasePrimaryKey[0]) + " = ?", arguments: [key])
    }

    static func keyCondition(_ key: [String: (any SQLValueConvertible)?]) -> SQLExpression {
        let names = key.keys.sorted()
        return SQLExpression(sql: names.map { quoted($0) + " = ?" }.joined(separator: " AND "),
                             arguments: names.map { key[$0].flatMap { $0?.sqlValue } ?? .null })
    }

    public static func all() -> QueryInterfaceRequest<Self> { QueryInterfaceRequest() }
    public static func filter(_ condition: SQLExpression) -> QueryInterfaceRequest<Self> { all().filter(condition) }
    public static func filter(key: some SQLValueConvertible) -> QueryInterfaceRequest<Self> { all().filter(key: key) }
    public static func order(_ terms: any SQLOrderingTerm...) -> QueryInterfaceRequest<Self> {
        var r = all()
        r.orderings = terms.map(\.orderingSQL)
        return r
    }
    public static func limit(_ n: Int) -> QueryInterfaceRequest<Self> { all().limit(n) }
    public static func select<T: SQLValueConvertible>(_ expression: SQLExpression, as type: T.Type) -> SelectRequest<T> {
        all().select(expression, as: type)
    }

    public static func fetchCount(_ db: any SQLConnection) throws -> Int { try all().fetchCount(db) }

    @discardableResult
    public static func updateAll(_ db: any SQLConnection, _ assignments: ColumnAssignment...) throws -> Int {
        try all().updateAll(db, assignments: assignments)
    }

    @discardableResult
    public static func deleteAll(_ db: any SQLConnection) throws -> Int { try all().deleteAll(db) }

    /// Deletes the row whose primary key is `key`; false when there was none.
    @discardableResult
    public static func deleteOne(_ db: any SQLConnection, key: some SQLValueConvertible) throws -> Bool {
        try all().filter(key: key).deleteAll(db) > 0
    }

    /// Deletes the row whose composite key is `key` (column → value); false when there was none.
    @discardableResult
    public static func deleteOne(_ db: any SQLConnection, key: [String: (any SQLValueConvertible)?]) throws -> Bool {
        try all().filter(keyCondition(key)).deleteAll(db) > 0
    }
}

extension TableRecord where Self: FetchableRecord {
    public static func fetchAll(_ db: any SQLConnection) throws -> [Self] { try all().fetchAll(db) }
    public static func fetchOne(_ db: any SQLConnection) throws -> Self? { try all().fetchOne(db) }

    public static func fetchOne(_ db: any SQLConnection, key: some SQLValueConvertible) throws -> Self? {
        try all().filter(key: key).fetchOne(db)
    }

    public static func fetchOne(_ db: any SQLConnection, key: [String: (any SQLValueConvertible)?]) throws -> Self? {
        try all().filter(keyCondition(key)).fetchOne(db)
    }

    /// Every record a raw statement returns (its columns named as the table's).
    public static func fetchAll(_ db: any SQLConnection, sql: String, arguments: StatementArguments = []) throws -> [Self] {
        try db.rows(sql, arguments.values).map { try Self(row: $0) }
    }

    public static func fetchOne(_ db: any SQLConnection, sql: String, arguments: StatementArguments = []) throws -> Self? {
        try db.rows(sql, arguments.values).first.map { try Self(row: $0) }
    }

    public static func fetchAll(_ statement: SQLStatement, arguments: StatementArguments = []) throws -> [Self] {
        try fetchAll(statement.db, sql: statement.sql, arguments: arguments)
    }

    public static func fetchOne(_ statement: SQLStatement, arguments: StatementArguments = []) throws -> Self? {
        try fetchOne(statement.db, sql: statement.sql, arguments: arguments)
    }
}

extension FetchableRecord {
    public init(row: SQLRow) throws {
        try self.init(from: RowDecoder(row: row, naming: Self.databaseColumnName(forKey:), record: ObjectIdentifier(Self.self)))
    }
}
