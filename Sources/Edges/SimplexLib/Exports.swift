import ChatAPI
import ChatCore
import CSodium
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayProtocol
import SwiftplexBase
import SwiftplexCrypto
import SwiftplexSQL
import SwiftplexStorage
import SwiftplexSQLPostgres

// The libsimplex C ABI (see docs/simplex-bot-api.md §2). Every returned string is allocated with
// malloc and owned by the caller, who frees it with free(); no function returns NULL.

/// Controllers handed out as opaque handles, so a stale or foreign pointer is refused instead
/// of being dereferenced. A handle is a number from a counter that only goes up (never an
/// object's address, which the allocator reuses): a closed controller's handle can never name
/// a later one. Handles are multiples of 16 from 0x1000 up, so they look like aligned pointers.
private let controllers = NIOLockedValueBox<(next: UInt, table: [UInt: LibController])>((0x1000, [:]))

private func cString(_ s: String) -> UnsafeMutablePointer<CChar> {
    strdup(s) ?? strdup("")!
}

/// A malloc'd NUL-terminated copy of UTF-8 bytes (JSON text has no NUL of its own).
private func cString(_ bytes: [UInt8]) -> UnsafeMutablePointer<CChar> {
    guard let p = malloc(bytes.count + 1)?.assumingMemoryBound(to: CChar.self) else { return strdup("")! }
    bytes.withUnsafeBytes { raw in
        if let base = raw.baseAddress { memcpy(p, base, bytes.count) }
    }
    p[bytes.count] = 0
    return p
}

private func controller(_ ctrl: UnsafeMutableRawPointer?) -> LibController? {
    guard let ctrl else { return nil }
    return controllers.withLockedValue { $0.table[UInt(bitPattern: ctrl)] }
}

private func string(_ p: UnsafePointer<CChar>?) -> String? {
    p.map { String(cString: $0) }
}

private let logger: Logger = {
    var l = Logger(label: "libsimplex")
    l.logLevel = .warning
    return l
}()

/// Relays from `SWIFTPLEX_SERVERS` (comma-separated `smp://` addresses); invalid entries are skipped.
private func environmentRelays() -> [RelayAddress] {
    (ProcessInfo.processInfo.environment["SWIFTPLEX_SERVERS"] ?? "")
        .split(separator: ",").compactMap { try? RelayAddress(parsing: String($0).trimmingCharacters(in: .whitespaces)) }
}

@_cdecl("hs_init_with_rtsopts")
public func hs_init_with_rtsopts(_ argc: UnsafeMutablePointer<Int32>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) {
    // Nothing to initialise: there is no Haskell runtime here.
}

@_cdecl("chat_migrate_init")
public func chat_migrate_init(_ path: UnsafePointer<CChar>?, _ key: UnsafePointer<CChar>?, _ confirm: UnsafePointer<CChar>?,
                              _ ctrlOut: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> UnsafeMutablePointer<CChar> {
    func result(_ v: JSONValue) -> UnsafeMutablePointer<CChar> { cString(v.description) }
    guard let ctrlOut else {
        return result(.object([("type", .string("errorSQL")), ("dbFile", .string("")), ("migrationSQLError", .string("a controller pointer is required"))]))
    }
    guard let mode = string(confirm).flatMap(MigrationConfirmation.init(rawValue:)) else {
        return result(.object([("type", .string("invalidConfirmation"))]))
    }
    // The Python library's PostgresDb passes (schema prefix, connection string); SqliteDb passes
    // (file prefix, encryption key). The library offers PostgreSQL: its backend is passed in here.
    SQLBackends.use(postgres: PostgresStore.backend)
    let database: EngineDatabase
    let dbFile: String
    let key = string(key) ?? ""
    if PostgresLocation.isPostgres(key) {
        do {
            database = try EngineDatabase.postgres(connection: key, schemaPrefix: string(path))
        } catch {
            return result(.object([("type", .string("errorSQL")), ("dbFile", .string("")), ("migrationSQLError", .string("\(error)"))]))
        }
        dbFile = database.description
    } else {
        guard let prefix = string(path), !prefix.isEmpty else {
            return result(.object([("type", .string("errorSQL")), ("dbFile", .string("")), ("migrationSQLError", .string("a database path prefix is required"))]))
        }
        dbFile = prefix + "_chat.db"
        if !key.isEmpty {
            return result(.object([("type", .string("errorNotADatabase")), ("dbFile", .string(dbFile)),
                                   ("message", .string("database encryption is not supported yet: open the database with an empty key"))]))
        }
        database = .sqlite(prefix: prefix)
    }
    // One controller per set of databases, across processes and within this one: two would
    // encrypt with the same chain keys. SQLite files: a lock file held until chat_close_store has
    // closed them; PostgreSQL schemas: the stores' advisory locks.
    var lock: DatabaseLock?
    if case let .sqlite(prefix) = database {
        do {
            lock = try DatabaseLock.acquire(prefix: prefix)
        } catch {
            return result(.object([("type", .string("errorSQL")), ("dbFile", .string(dbFile)), ("migrationSQLError", .string("\(error)"))]))
        }
    }
    do {
        let controller = try ChatController(database: database, defaultRelays: environmentRelays(), logger: logger, confirmation: mode)
        let lib = LibController(api: ChatAPI(controller: controller), lock: lock)
        let handle = controllers.withLockedValue { c -> UInt in
            let h = c.next
            c.next += 16
            c.table[h] = lib
            return h
        }
        ctrlOut.pointee = UnsafeMutableRawPointer(bitPattern: handle)
        return result(.object([("type", .string("ok"))]))
    } catch let e as MigrationPending {
        lock?.release()
        return result(.object([("type", .string("errorMigration")), ("dbFile", .string(e.dbFile)),
                               ("migrationError", .object([("type", .string("upgrade")),
                                                           ("upMigrations", .array(e.migrations.map { .object([("upName", .string($0)), ("withDown", .bool(false))]) }))]))]))
    } catch {
        lock?.release()
        return result(.object([("type", .string("errorSQL")), ("dbFile", .string(dbFile)), ("migrationSQLError", .string("\(error)"))]))
    }
}

@_cdecl("chat_close_store")
public func chat_close_store(_ ctrl: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<CChar> {
    guard let ctrl, let lib = controllers.withLockedValue({ $0.table.removeValue(forKey: UInt(bitPattern: ctrl)) }) else {
        return cString("invalid or already closed chat controller")
    }
    lib.close()
    return cString("")
}

@_cdecl("chat_send_cmd")
public func chat_send_cmd(_ ctrl: UnsafeMutableRawPointer?, _ cmd: UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar> {
    guard let lib = controller(ctrl) else { return cString(Envelope.error(ChatFailure(commandError: "invalid or closed chat controller"))) }
    guard let command = string(cmd) else { return cString(Envelope.error(ChatFailure(commandError: "no command"))) }
    return cString(lib.send(command))
}

@_cdecl("chat_recv_msg_wait")
public func chat_recv_msg_wait(_ ctrl: UnsafeMutableRawPointer?, _ wait: Int32) -> UnsafeMutablePointer<CChar> {
    guard let lib = controller(ctrl) else { return cString(Envelope.error(ChatFailure(commandError: "invalid or closed chat controller"))) }
    guard let event = lib.next(waitMicroseconds: wait) else { return cString("") }
    return cString(Envelope.result(event))
}

// MARK: - Files: XSalsa20-Poly1305 over the whole file, tag appended (see docs §2.8)

enum FileCrypto {
    static func encrypt(_ plain: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8] {
        var stream = [UInt8](repeating: 0, count: 32) + plain
        crypto_stream_xsalsa20_xor(&stream, stream, UInt64(stream.count), nonce, key)
        let polyKey = Array(stream[0..<32])
        let cipher = Array(stream[32...])
        var tag = [UInt8](repeating: 0, count: 16)
        crypto_onetimeauth(&tag, cipher, UInt64(cipher.count), polyKey)
        return cipher + tag
    }

    static func decrypt(_ data: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8]? {
        guard data.count >= 16, key.count == 32, nonce.count == 24 else { return nil }
        let cipher = Array(data[..<(data.count - 16)])
        let tag = Array(data[(data.count - 16)...])
        var polyKey = [UInt8](repeating: 0, count: 32)
        crypto_stream_xsalsa20(&polyKey, 32, nonce, key)
        guard crypto_onetimeauth_verify(tag, cipher, UInt64(cipher.count), polyKey) == 0 else { return nil }
        var stream = [UInt8](repeating: 0, count: 32) + cipher
        crypto_stream_xsalsa20_xor(&stream, stream, UInt64(stream.count), nonce, key)
        return Array(stream[32...])
    }

    static func base64URLPadded(_ b: [UInt8]) -> String {
        let s = Base64URL.encode(b)
        return s + String(repeating: "=", count: (4 - s.count % 4) % 4)
    }

    static func writeResult(_ path: String, _ plain: [UInt8]) -> String {
        let key = randomBytes(32)
        let nonce = randomBytes(24)
        let data = Data(encrypt(plain, key: key, nonce: nonce))
        if let error = writePrivate(path, [UInt8](data)) {
            return JSONValue.object([("type", .string("error")), ("writeError", .string(error))]).description
        }
        return JSONValue.object([("type", .string("result")), ("cryptoArgs", .object([
            ("fileKey", .string(base64URLPadded(key))), ("fileNonce", .string(base64URLPadded(nonce))),
        ]))]).description
    }

    /// Writes `bytes` to `path` as a 0600 file (created so, never with the umask's mode, and
    /// narrowed to 0600 if it existed); nil on success, else why not.
    static func writePrivate(_ path: String, _ bytes: [UInt8]) -> String? {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return "cannot write \(path): \(String(cString: strerror(errno)))" }
        defer { close(fd) }
        guard fchmod(fd, 0o600) == 0 else { return "cannot write \(path): \(String(cString: strerror(errno)))" }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return "cannot write \(path): \(String(cString: strerror(errno)))"
            }
            offset += n
        }
        return nil
    }

    static func randomBytes(_ n: Int) -> [UInt8] {
        var b = [UInt8](repeating: 0, count: n)
        randombytes_buf(&b, n)
        return b
    }
}

@_cdecl("chat_write_file")
public func chat_write_file(_ ctrl: UnsafeMutableRawPointer?, _ path: UnsafePointer<CChar>?, _ data: UnsafePointer<UInt8>?, _ len: Int32) -> UnsafeMutablePointer<CChar> {
    guard let path = string(path), len >= 0, data != nil || len == 0 else {
        return cString(JSONValue.object([("type", .string("error")), ("writeError", .string("path and data are required"))]).description)
    }
    let bytes = len == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: Int(len)))
    return cString(FileCrypto.writeResult(path, bytes))
}

@_cdecl("chat_encrypt_file")
public func chat_encrypt_file(_ ctrl: UnsafeMutableRawPointer?, _ from: UnsafePointer<CChar>?, _ to: UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar> {
    guard let from = string(from), let to = string(to), let data = FileManager.default.contents(atPath: from) else {
        return cString(JSONValue.object([("type", .string("error")), ("writeError", .string("cannot read the source file"))]).description)
    }
    return cString(FileCrypto.writeResult(to, [UInt8](data)))
}

@_cdecl("chat_read_file")
public func chat_read_file(_ path: UnsafePointer<CChar>?, _ key: UnsafePointer<CChar>?, _ nonce: UnsafePointer<CChar>?) -> UnsafeMutablePointer<UInt8> {
    func failure(_ message: String) -> UnsafeMutablePointer<UInt8> {
        let text = Array(message.utf8)
        let p = malloc(1 + text.count + 1)!.assumingMemoryBound(to: UInt8.self)
        p[0] = 1
        for (i, c) in text.enumerated() { p[1 + i] = c }
        p[1 + text.count] = 0
        return p
    }
    guard let path = string(path), let k = string(key).flatMap({ Base64URL.decode($0) }), let n = string(nonce).flatMap({ Base64URL.decode($0) }) else {
        return failure("path, key and nonce are required (key and nonce in base64url)")
    }
    guard let data = FileManager.default.contents(atPath: path) else { return failure("cannot read \(path)") }
    guard let plain = FileCrypto.decrypt([UInt8](data), key: k, nonce: n) else { return failure("file authentication failed") }
    let p = malloc(5 + plain.count)!.assumingMemoryBound(to: UInt8.self)
    p[0] = 0
    var length = UInt32(plain.count).littleEndian
    withUnsafeBytes(of: &length) { for i in 0..<4 { p[1 + i] = $0[i] } }
    plain.withUnsafeBufferPointer { buf in if let base = buf.baseAddress { (p + 5).update(from: base, count: plain.count) } }
    return p
}

@_cdecl("chat_decrypt_file")
public func chat_decrypt_file(_ from: UnsafePointer<CChar>?, _ key: UnsafePointer<CChar>?, _ nonce: UnsafePointer<CChar>?, _ to: UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar> {
    guard let from = string(from), let to = string(to), let k = string(key).flatMap({ Base64URL.decode($0) }),
          let n = string(nonce).flatMap({ Base64URL.decode($0) }) else {
        return cString("source, destination, key and nonce are required")
    }
    guard let data = FileManager.default.contents(atPath: from) else { return cString("cannot read \(from)") }
    guard let plain = FileCrypto.decrypt([UInt8](data), key: k, nonce: n) else { return cString("file authentication failed") }
    // The plaintext is written 0600 whatever the umask: it is what the encryption protected.
    if let error = FileCrypto.writePrivate(to, plain) { return cString(error) }
    return cString("")
}

/// For `swiftplex-bench libsimplex`: puts an event on a controller's queue as the engine would.
package func simplexEnqueueEvent(_ ctrl: UnsafeMutableRawPointer?, _ event: JSONValue) -> Bool {
    guard let lib = controller(ctrl) else { return false }
    lib.enqueueForBenchmark(event)
    return true
}
