/// Which chat a command addresses: `@<contactId>`, `#<groupId>` (optionally with a member-support
/// scope, `#5(_support)` / `#5(_support:<memberId>)`), or `*<noteFolderId>`.
public enum ChatRef: Sendable, Hashable, CustomStringConvertible {
    case direct(Int64)
    case group(Int64, supportScope: SupportScope?)
    case local(Int64)

    public enum SupportScope: Sendable, Hashable {
        case all
        case member(Int64)
    }

    init?(_ word: Substring) {
        guard let sigil = word.first else { return nil }
        let rest = word.dropFirst()
        switch sigil {
        case "@":
            guard let id = Int64(rest), id > 0 else { return nil }
            self = .direct(id)
        case "*":
            guard let id = Int64(rest), id > 0 else { return nil }
            self = .local(id)
        case "#":
            if let open = rest.firstIndex(of: "(") {
                guard rest.hasSuffix(")"), let id = Int64(rest[..<open]), id > 0 else { return nil }
                let scope = rest[rest.index(after: open)..<rest.index(before: rest.endIndex)]
                if scope == "_support" {
                    self = .group(id, supportScope: .all)
                } else if scope.hasPrefix("_support:"), let member = Int64(scope.dropFirst("_support:".count)), member > 0 {
                    self = .group(id, supportScope: .member(member))
                } else {
                    return nil
                }
            } else {
                guard let id = Int64(rest), id > 0 else { return nil }
                self = .group(id, supportScope: nil)
            }
        default:
            return nil
        }
    }

    public var description: String {
        switch self {
        case let .direct(id): "@\(id)"
        case let .local(id): "*\(id)"
        case let .group(id, nil): "#\(id)"
        case let .group(id, .all?): "#\(id)(_support)"
        case let .group(id, .member(m)?): "#\(id)(_support:\(m))"
        }
    }
}
