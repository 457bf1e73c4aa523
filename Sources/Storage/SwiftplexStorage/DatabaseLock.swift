import Foundation
import Synchronization
import SwiftplexBase

/// Another process (or another controller in this process) has the databases open.
public struct DatabaseLocked: CodedError {
    public enum Code: Sendable, Hashable { case held }
    public var code: Code { .held }
    /// The lock file that is held.
    public let lockFile: String
    /// The holder's process id, when the lock file names a live one.
    public let holder: Int32?

    public var message: String {
        "database locked: another swiftplex process or controller\(holder.map { " (pid \($0))" } ?? "") has these databases open (lock file \(lockFile)); two writers would reuse the same encryption keys"
    }
}

/// An exclusive lock on one set of engine databases (`<prefix>_chat.db`, `<prefix>_agent.db`):
/// `flock(LOCK_EX)` on `<prefix>.lock`, held for as long as this object lives (the kernel drops
/// it when the process dies, so a crash leaves no stale lock).
///
/// `flock` locks belong to an open file description, so a second acquisition conflicts both in
/// another process and within this one. The file holds the holder's pid, for messages and for
/// `swiftplex reload`'s check that a pid file is not stale.
public final class DatabaseLock: Sendable {
    public let path: String
    /// The lock file's descriptor while held; -1 once released.
    private let fd: Mutex<Int32>

    /// The lock file of the databases at `prefix`.
    public static func lockFile(prefix: String) -> String { prefix + ".lock" }

    /// Lock files this process holds: a second acquisition of one of them is refused at once.
    private static let heldHere = Mutex<Set<String>>([])

    /// Takes the lock or throws ``DatabaseLocked``.
    ///
    /// Only one wait exists: a lock the kernel says is held while no ``DatabaseLock`` of this
    /// process holds it. That is a child process being spawned right now — it shares the lock's
    /// open file description from its fork until its exec — so the attempt is repeated for up to
    /// `spawnGrace`. Any other holder is refused at once.
    public static func acquire(prefix: String, spawnGrace: Duration = .seconds(2)) throws -> DatabaseLock {
        Blocking.willWait("DatabaseLock.acquire (may wait up to spawnGrace)")
        let path = lockFile(prefix: prefix)
        guard heldHere.withLock({ $0.insert(path).inserted }) else {
            throw DatabaseLocked(lockFile: path, holder: getpid())
        }
        do {
            let deadline = ContinuousClock.now + spawnGrace
            while true {
                switch try attempt(path) {
                case let .locked(fd):
                    return DatabaseLock(path: path, fd: fd)
                case let .held(holder):
                    // Held by this very process but not by a lock object of it: a spawning child.
                    guard holder == getpid(), ContinuousClock.now < deadline else {
                        throw DatabaseLocked(lockFile: path, holder: holder)
                    }
                    usleep(10_000)
                }
            }
        } catch {
            _ = heldHere.withLock { $0.remove(path) }
            throw error
        }
    }

    /// The same from async code: the attempt (and its possible wait) on a thread of its own.
    public static func acquire(prefix: String, spawnGrace: Duration = .seconds(2)) async throws -> DatabaseLock {
        try await Blocking.run("database-lock") { try acquire(prefix: prefix, spawnGrace: spawnGrace) as DatabaseLock }
    }

    private enum Attempt { case locked(Int32), held(Int32?) }

    private static func attempt(_ path: String) throws -> Attempt {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw DatabaseLockError(message: "cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        fchmod(fd, 0o600)
        var rc: Int32
        repeat { rc = flock(fd, LOCK_EX | LOCK_NB) } while rc != 0 && errno == EINTR
        if rc != 0 {
            let e = errno
            let holder = Self.readPid(fd)
            close(fd)
            if e == EWOULDBLOCK { return .held(holder) }
            throw DatabaseLockError(message: "cannot lock \(path): \(String(cString: strerror(e)))")
        }
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return .locked(fd)
    }

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = Mutex(fd)
    }

    deinit { release() }

    /// Drops the lock now (idempotent); otherwise it goes when this object does.
    public func release() {
        fd.withLock { fd in
            guard fd >= 0 else { return }
            close(fd)
            fd = -1
            _ = Self.heldHere.withLock { $0.remove(path) }
        }
    }

    /// Whether some process holds the lock of `prefix` now (a probe that takes and drops it).
    public static func isHeld(prefix: String) -> Bool {
        let fd = open(lockFile(prefix: prefix), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }

    /// Whether process `pid` holds the lock of `prefix`: the kernel's lock table (`/proc/locks`)
    /// lists a FLOCK by `pid` on the lock file's inode. False when it cannot be told.
    public static func isHeld(prefix: String, by pid: Int32) -> Bool {
        var st = stat()
        guard stat(lockFile(prefix: prefix), &st) == 0, let table = readAll("/proc/locks") else { return false }
        // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"
        for line in table.split(separator: "\n") {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 6, f[1] == "FLOCK", Int32(f[4]) == pid else { continue }
            if let inode = f[5].split(separator: ":").last.flatMap({ UInt64($0) }), inode == UInt64(st.st_ino) { return true }
        }
        return false
    }

    /// A whole file read to its end (procfs files report size 0, and a size-based read of a long
    /// lock table stops short).
    static func readAll(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                return nil
            }
            data += buffer[..<n]
        }
        return String(decoding: data, as: UTF8.self)
    }

    private static func readPid(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 31, 0) }
        guard n > 0 else { return nil }
        return Int32(String(decoding: buffer[..<n], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// The lock file could not be opened or locked for a reason other than another holder.
public struct DatabaseLockError: CodedError {
    public enum Code: Sendable, Hashable { case lockFile }
    public var code: Code { .lockFile }
    public let message: String
}
