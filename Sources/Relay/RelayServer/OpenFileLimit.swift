#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import SwiftplexBase

/// The process's open-file limit (`RLIMIT_NOFILE`): every connection is a file descriptor, so a
/// relay for thousands of clients needs a soft limit above `--max-connections`. Debian's default
/// soft limit is 1,024; the hard limit (often 524,288 under systemd, `LimitNOFILE=`) is the
/// ceiling an unprivileged process may raise it to.
public enum OpenFileLimit {
    public struct Limits: Sendable, Equatable, CustomStringConvertible {
        public var soft: Int
        public var hard: Int
        public var description: String { "soft \(soft), hard \(hard)" }
    }

    public struct Failure: CodedError {
        public enum Code: Sendable, Hashable { case tooFewFiles }
        public var code: Code { .tooFewFiles }
        public let needed: Int
        public let limits: Limits
        public var message: String {
            "\(needed) open files are needed and the hard limit is \(limits.hard): raise it (ulimit -Hn as root, or LimitNOFILE= in the systemd unit)"
        }
    }

    public static func current() -> Limits? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return Limits(soft: clamp(limit.rlim_cur), hard: clamp(limit.rlim_max))
    }

    /// Raises the soft limit to at least `needed` (to the hard limit, as servers commonly do) and
    /// returns the limits now in force. Throws when the hard limit is below `needed` (the soft
    /// limit is raised to the hard limit anyway, so the process gets as far as it can).
    @discardableResult
    public static func raise(toAtLeast needed: Int) throws -> Limits {
        guard var limits = current() else { throw Failure(needed: needed, limits: Limits(soft: 0, hard: 0)) }
        if limits.soft < needed, limits.soft < limits.hard {
            var limit = rlimit()
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            limit.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { limits.soft = limits.hard }
        }
        guard limits.soft >= needed else { throw Failure(needed: needed, limits: limits) }
        return limits
    }

    private static func clamp(_ value: rlim_t) -> Int { value > rlim_t(Int.max) ? Int.max : Int(value) }
}
