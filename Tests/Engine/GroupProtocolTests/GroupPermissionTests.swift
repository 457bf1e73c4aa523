import Foundation
import TestSupport
import Testing
@testable import GroupProtocol

/// The permission tables of docs/groups.md §2, read from the file: `GroupPermissions` must agree
/// with every cell, for every pair of roles.
struct PermissionTables {
    /// Table name → rows (by the role in the first column) → cells (by column header).
    let tables: [String: [String: [String: String]]]
    let columns: [String: [String]]

    init() throws {
        let docs = Repository.path("docs/groups.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        var tables: [String: [String: [String: String]]] = [:]
        var columns: [String: [String]] = [:]
        var current: String?
        var header: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("<!-- permissions: ") {
                current = String(line.dropFirst("<!-- permissions: ".count).dropLast(" -->".count))
                header = []
                continue
            }
            guard let name = current else { continue }
            guard line.hasPrefix("|") else {
                current = nil
                continue
            }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "**", with: "") }
            if header.isEmpty {
                header = Array(cells.dropFirst())
                columns[name] = header
            } else if cells.first?.hasPrefix("---") == false {
                var row: [String: String] = [:]
                for (h, c) in zip(header, cells.dropFirst()) { row[h] = c }
                tables[name, default: [:]][cells[0]] = row
            }
        }
        self.tables = tables
        self.columns = columns
    }

    func cell(_ table: String, row: GroupMemberRole, column: String) -> String? { tables[table]?[row.name]?[column] }
}

@Suite struct GroupPermissionTests {
    let doc: PermissionTables
    init() throws { doc = try PermissionTables() }

    @Test func docsHaveEveryTableWithEveryRole() {
        for name in ["single", "invite", "admit", "link", "remove", "block", "deleteMessage", "changeRole"] {
            #expect(doc.tables[name]?.count == GroupMemberRole.known.count, "table \(name) has a row per role")
        }
        for name in ["invite", "admit", "link", "remove", "block", "deleteMessage", "changeRole"] {
            #expect(doc.columns[name] == GroupMemberRole.known.map(\.name), "table \(name) has a column per role")
        }
    }

    func allowed(_ cell: String?, _ what: String) -> Bool? {
        switch cell {
        case "✓": return true
        case "·": return false
        default:
            Issue.record("\(what): cell \(cell ?? "missing") is neither ✓ nor ·")
            return nil
        }
    }

    @Test(arguments: GroupMemberRole.known)
    func singleRoleActions(actor: GroupMemberRole) {
        let actions: [(String, GroupAction)] = [
            ("send content", .sendContent), ("host (introduce, forward)", .host), ("update profile", .updateProfile), ("delete group", .deleteGroup),
        ]
        for (column, action) in actions {
            guard let expected = allowed(doc.cell("single", row: actor, column: column), "\(actor) \(column)") else { continue }
            #expect((GroupPermissions.check(actor: actor, action: action) == nil) == expected, "\(actor.name) \(column)")
        }
    }

    /// Actions with a role argument or a target: every actor × every role.
    @Test(arguments: ["invite", "admit", "link", "remove", "block", "deleteMessage"])
    func actorByRoleTables(table: String) {
        for actor in GroupMemberRole.known {
            for other in GroupMemberRole.known {
                guard let expected = allowed(doc.cell(table, row: actor, column: other.name), "\(table) \(actor) \(other)") else { continue }
                let result: GroupError? = switch table {
                case "invite": GroupPermissions.check(actor: actor, action: .invite(as: other))
                case "admit": GroupPermissions.check(actor: actor, action: .admit(as: other))
                case "link": GroupPermissions.check(actor: actor, action: .manageLink(joinAs: other))
                case "remove": GroupPermissions.check(actor: actor, action: .remove, target: other)
                case "block": GroupPermissions.check(actor: actor, action: .block, target: other)
                default: GroupPermissions.check(actor: actor, action: .deleteMessage, target: other)
                }
                #expect((result == nil) == expected, "\(table): \(actor.name) on \(other.name)")
                if let result { #expect(result.code == .notAuthorized) }
            }
        }
    }

    /// `changeRole`: each cell is the least role needed to change from the row's role to the
    /// column's; every actor is checked against it.
    @Test func changeRoleTable() throws {
        for from in GroupMemberRole.known {
            for to in GroupMemberRole.known {
                let cell = try #require(doc.cell("changeRole", row: from, column: to.name))
                let required: GroupMemberRole? = cell == "—" ? nil : GroupMemberRole(name: cell)
                if let required { #expect(required.isKnown, "cell \(cell)") }
                for actor in GroupMemberRole.known {
                    let result = GroupPermissions.check(actor: actor, action: .changeRole(to: to), target: from)
                    let expected = required.map { actor >= $0 } ?? false
                    #expect((result == nil) == expected, "\(actor.name) changing \(from.name) → \(to.name) (needs \(cell))")
                    if let result, let required { #expect(result.requiredRole == required || result.requiredRole == nil) }
                }
            }
        }
    }

    @Test func unknownRolesMayDoNothingAndCannotBeGiven() {
        let unknown = GroupMemberRole.unknown("commenter")
        let actions: [GroupAction] = [.sendContent, .host, .updateProfile, .deleteGroup, .invite(as: .observer), .admit(as: .observer), .manageLink(joinAs: .observer)]
        for a in actions { #expect(GroupPermissions.check(actor: unknown, action: a) != nil, "\(a)") }
        for a in [GroupAction.remove, .block, .deleteMessage, .changeRole(to: .observer)] {
            #expect(GroupPermissions.check(actor: unknown, action: a, target: .observer) != nil, "\(a)")
        }
        #expect(GroupPermissions.check(actor: .owner, action: .invite(as: unknown)) != nil)
        #expect(GroupPermissions.check(actor: .owner, action: .changeRole(to: unknown), target: .member) != nil)
        #expect(GroupPermissions.check(actor: .owner, action: .changeRole(to: .member), target: unknown) != nil)
        // Target-less use of a targeted action is refused, not crashed on.
        #expect(GroupPermissions.check(actor: .owner, action: .remove) != nil)
    }

    @Test func refusalsNameTheRequiredRole() {
        let e = GroupPermissions.check(actor: .member, action: .remove, target: .observer)
        #expect(e?.requiredRole == .admin)
        #expect(GroupPermissions.check(actor: .admin, action: .remove, target: .owner)?.requiredRole == .owner)
        #expect(GroupPermissions.check(actor: .observer, action: .sendContent)?.requiredRole == .author)
        #expect(throws: GroupError.self) { try GroupPermissions.authorize(actor: .moderator, action: .changeRole(to: .admin), target: .member) }
    }
}
