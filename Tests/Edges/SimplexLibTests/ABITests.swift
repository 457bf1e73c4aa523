import Foundation
import TestSupport
import Testing

/// The libsimplex C ABI, called the way a C or Python host calls it: through dlopen/dlsym on the
/// built `libsimplex.so` (built by `make test`, or `swift build --product simplex`).
final class LibSimplex: @unchecked Sendable {
    typealias MigrateInit = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> UnsafeMutablePointer<CChar>?
    typealias SendCmd = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>?
    typealias RecvWait = @convention(c) (UnsafeMutableRawPointer?, Int32) -> UnsafeMutablePointer<CChar>?
    typealias Close = @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutablePointer<CChar>?
    typealias WriteFile = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, UnsafePointer<UInt8>?, Int32) -> UnsafeMutablePointer<CChar>?
    typealias ReadFile = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> UnsafeMutablePointer<UInt8>?
    typealias DecryptFile = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>?

    static let symbols = ["chat_migrate_init", "chat_close_store", "chat_send_cmd", "chat_recv_msg_wait", "chat_write_file",
                          "chat_read_file", "chat_encrypt_file", "chat_decrypt_file", "hs_init_with_rtsopts"]

    let handle: UnsafeMutableRawPointer
    let migrateInit: MigrateInit
    let sendCmd: SendCmd
    let recvWait: RecvWait
    let close: Close
    let writeFile: WriteFile
    let readFile: ReadFile
    let decryptFile: DecryptFile

    static let shared: LibSimplex = {
        let dir = ProcessInfo.processInfo.environment["SWIFTPLEX_BIN_DIR"].map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let path = dir.appendingPathComponent("libsimplex.so").path
        guard let h = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            fatalError("cannot load \(path) (build it with `swift build --product simplex`): \(String(cString: dlerror()))")
        }
        return LibSimplex(handle: h)
    }()

    private init(handle: UnsafeMutableRawPointer) {
        self.handle = handle
        func sym<T>(_ name: String, _: T.Type) -> T { unsafeBitCast(dlsym(handle, name)!, to: T.self) }
        migrateInit = sym("chat_migrate_init", MigrateInit.self)
        sendCmd = sym("chat_send_cmd", SendCmd.self)
        recvWait = sym("chat_recv_msg_wait", RecvWait.self)
        close = sym("chat_close_store", Close.self)
        writeFile = sym("chat_write_file", WriteFile.self)
        readFile = sym("chat_read_file", ReadFile.self)
        decryptFile = sym("chat_decrypt_file", DecryptFile.self)
    }

    /// Takes ownership of a returned string: copies it and frees it with libc free.
    static func take(_ p: UnsafeMutablePointer<CChar>?) -> String {
        guard let p else { Issue.record("libsimplex returned NULL"); return "" }
        defer { free(p) }
        return String(cString: p)
    }

    func initialise(_ prefix: String, key: String = "", confirm: String = "yesUp") -> (String, UnsafeMutableRawPointer?) {
        var ctrl: UnsafeMutableRawPointer?
        let r = Self.take(migrateInit(prefix, key, confirm, &ctrl))
        return (r, ctrl)
    }

    func send(_ ctrl: UnsafeMutableRawPointer?, _ cmd: String) -> String { Self.take(sendCmd(ctrl, cmd)) }
}

@Suite(.serialized, .timeLimit(.minutes(1))) struct ABITests {
    let lib = LibSimplex.shared

    // The C ABI blocks its caller, as it should: C and Python callers are plain threads. Each
    // test runs on a thread of its own so that it never holds one of Swift's few cooperative
    // threads, which the engine behind the library needs.
    @Test func exportsEverySymbolTheLibrariesLookUp() async { await offPool { self.exportsEverySymbolTheLibrariesLookUpBody() } }
    @Test func migrateInitReportsItsOutcomes() async { await offPool { self.migrateInitReportsItsOutcomesBody() } }
    @Test func commandsAnswerWithResultOrErrorEnvelopes() async { await offPool { self.commandsAnswerWithResultOrErrorEnvelopesBody() } }
    @Test func misuseGivesErrorsNotCrashes() async { await offPool { self.misuseGivesErrorsNotCrashesBody() } }
    @Test func receiveWaitTimesOutWithAnEmptyStringAndCloseWakesAWaiter() async { await offPool { self.receiveWaitTimesOutWithAnEmptyStringAndCloseWakesAWaiterBody() } }
    @Test func severalControllersAndThreadsAtOnce() async { await offPool { self.severalControllersAndThreadsAtOnceBody() } }
    @Test func filesAreEncryptedAndAuthenticated() async throws { try await offPool { try self.filesAreEncryptedAndAuthenticatedBody() } }
    @Test func commandsRacingCloseAlwaysReturn() async throws { try await offPool { try self.commandsRacingCloseAlwaysReturnBody() } }
    @Test func handlesAreNeverReused() async { await offPool { self.handlesAreNeverReusedBody() } }
    @Test func aSecondControllerOnTheSameDatabasesIsRefused() async { await offPool { self.aSecondControllerOnTheSameDatabasesIsRefusedBody() } }
    @Test func decryptedFilesAreWrittenPrivate() async throws { try await offPool { try self.decryptedFilesAreWrittenPrivateBody() } }


    func prefix() -> String {
        TemporaryDirectory(prefix: "swiftplex-abi").appendingPathComponent("bot").path
    }

    func exportsEverySymbolTheLibrariesLookUpBody() {
        for s in LibSimplex.symbols { #expect(dlsym(lib.handle, s) != nil, "\(s)") }
    }

    func migrateInitReportsItsOutcomesBody() {
        #expect(lib.initialise(prefix(), confirm: "sometimes").0 == #"{"type":"invalidConfirmation"}"#)
        #expect(lib.initialise(prefix(), key: "secret").0.contains(#""type":"errorNotADatabase""#))
        let pending = lib.initialise(prefix(), confirm: "error")
        #expect(pending.0.contains(#""type":"errorMigration""#) && pending.0.contains(#""upName":"v1""#) && pending.1 == nil)
        let p = prefix()
        let (ok, ctrl) = lib.initialise(p)
        #expect(ok == #"{"type":"ok"}"# && ctrl != nil)
        #expect(LibSimplex.take(lib.close(ctrl)) == "")
        // Once migrated, the "error" mode opens it.
        let again = lib.initialise(p, confirm: "error")
        #expect(again.0 == #"{"type":"ok"}"#)
        _ = LibSimplex.take(lib.close(again.1))
    }

    func commandsAnswerWithResultOrErrorEnvelopesBody() {
        let (_, ctrl) = lib.initialise(prefix())
        #expect(lib.send(ctrl, "/user") == #"{"error":{"type":"error","errorType":{"type":"noActiveUser"}}}"#)
        let created = lib.send(ctrl, #"/_create user {"profile": {"displayName": "abi", "fullName": ""}, "pastTimestamp": false, "userChatRelay": false, "clientService": false}"#)
        #expect(created.hasPrefix(#"{"result":{"type":"activeUser","user":{"userId":1"#))
        #expect(lib.send(ctrl, "/nonsense").contains(#""type":"commandError""#))
        #expect(lib.send(ctrl, "/_show_address 1") == #"{"error":{"type":"errorStore","storeError":{"type":"userContactLinkNotFound"}}}"#)
        _ = LibSimplex.take(lib.close(ctrl))
    }

    func misuseGivesErrorsNotCrashesBody() {
        #expect(lib.send(nil, "/user").contains(#""error""#))
        #expect(lib.send(UnsafeMutableRawPointer(bitPattern: 0xDEAD_BEE0), "/user").contains("invalid or closed"))
        let (_, ctrl) = lib.initialise(prefix())
        #expect(LibSimplex.take(lib.sendCmd(ctrl, nil)).contains(#""error""#))
        #expect(LibSimplex.take(lib.close(ctrl)) == "")
        #expect(LibSimplex.take(lib.close(ctrl)) != "")
        #expect(lib.send(ctrl, "/user").contains("invalid or closed"))
        #expect(LibSimplex.take(lib.recvWait(ctrl, 1000)).contains(#""error""#))
        var none: UnsafeMutableRawPointer?
        #expect(LibSimplex.take(lib.migrateInit(nil, "", "yesUp", &none)).contains("errorSQL"))
    }

    func receiveWaitTimesOutWithAnEmptyStringAndCloseWakesAWaiterBody() {
        let (_, ctrl) = lib.initialise(prefix())
        let started = ContinuousClock.now
        #expect(LibSimplex.take(lib.recvWait(ctrl, 100_000)) == "")
        #expect(ContinuousClock.now - started >= .milliseconds(90))
        // A thread blocked for 20 s returns promptly when another thread closes the controller.
        // (Callers of the C ABI are plain threads, never Swift tasks: it blocks.)
        let handle = UInt(bitPattern: ctrl)
        let result = NIOLockedBox()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread { [lib] in
            result.set(LibSimplex.take(lib.recvWait(UnsafeMutableRawPointer(bitPattern: handle), 20_000_000)))
            done.signal()
        }
        // Kept: the waiter blocked inside a C call is no event one can await; the pause makes the
        // close below (almost always) wake a blocked waiter rather than refuse a late one. Both
        // outcomes are accepted below, so it orders nothing the assertions depend on.
        Thread.sleep(forTimeInterval: 0.1)
        _ = LibSimplex.take(lib.close(ctrl))
        #expect(done.wait(timeout: .now() + 5) == .success)
        let r = result.get()
        #expect(r == "" || r.contains(#""error""#))
    }

    func severalControllersAndThreadsAtOnceBody() {
        let controllers = (0..<3).map { _ in lib.initialise(prefix()).1 }
        for (i, c) in controllers.enumerated() {
            _ = lib.send(c, #"/_create user {"profile": {"displayName": "u\#(i)", "fullName": ""}, "pastTimestamp": false, "userChatRelay": false, "clientService": false}"#)
        }
        let handles = controllers.map { UInt(bitPattern: $0) }
        // 12 threads: four per controller, sending commands and waiting for events at once.
        DispatchQueue.concurrentPerform(iterations: 12) { [lib] n in
            let ctrl = UnsafeMutableRawPointer(bitPattern: handles[n % 3])
            for _ in 0..<20 { _ = lib.send(ctrl, "/users") }
            _ = LibSimplex.take(lib.recvWait(ctrl, 1000))
        }
        for (i, c) in controllers.enumerated() {
            #expect(lib.send(c, "/user").contains(#""displayName":"u\#(i)""#))
            _ = LibSimplex.take(lib.close(c))
        }
    }

    func filesAreEncryptedAndAuthenticatedBody() throws {
        let dir = URL(fileURLWithPath: prefix()).deletingLastPathComponent()
        let path = dir.appendingPathComponent("secret.bin").path
        let data: [UInt8] = Array("file contents\0with a NUL".utf8)
        let result = LibSimplex.take(lib.writeFile(nil, path, data, Int32(data.count)))
        #expect(result.hasPrefix(#"{"type":"result","cryptoArgs":{"fileKey":""#))
        let key = try #require(result.firstMatch(of: /"fileKey":"([^"]+)"/)?.1).description
        let nonce = try #require(result.firstMatch(of: /"fileNonce":"([^"]+)"/)?.1).description
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count == data.count + 16)

        let buffer = try #require(lib.readFile(path, key, nonce))
        #expect(buffer[0] == 0)
        let length = Int(buffer[1]) | Int(buffer[2]) << 8 | Int(buffer[3]) << 16 | Int(buffer[4]) << 24
        #expect(Array(UnsafeBufferPointer(start: buffer + 5, count: length)) == data)
        free(buffer)

        let out = dir.appendingPathComponent("plain.bin").path
        #expect(LibSimplex.take(lib.decryptFile(path, key, nonce, out)) == "")
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: out))) == data)

        var tampered = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        tampered[0] ^= 1
        try Data(tampered).write(to: URL(fileURLWithPath: path))
        let bad = try #require(lib.readFile(path, key, nonce))
        #expect(bad[0] == 1)
        free(bad)
        #expect(LibSimplex.take(lib.decryptFile(path, key, nonce, out)) == "file authentication failed")
    }
}

extension ABITests {
    /// Threads send commands while another closes the controller, many times over: every
    /// `chat_send_cmd` returns (a result, or an error envelope once closed). Before the fix a
    /// command queued as the controller closed was never answered and its caller blocked for ever;
    /// the test bounds the wait and fails instead of hanging.
    func commandsRacingCloseAlwaysReturnBody() throws {
        for round in 0..<60 {
            let (ok, ctrl) = lib.initialise(prefix())
            try #require(ok == #"{"type":"ok"}"#)
            let handle = UInt(bitPattern: ctrl)
            let threads = 8
            let progress = Counter(), finished = Counter(), closedAnswers = Counter()
            for _ in 0..<threads {
                Thread.detachNewThread { [lib] in
                    let c = UnsafeMutableRawPointer(bitPattern: handle)
                    while true {
                        let r = lib.send(c, "/users")
                        progress.add()
                        if r.contains("closed") { closedAnswers.add(); break }
                        #expect(r.hasPrefix(#"{"result""#) || r.hasPrefix(#"{"error""#))
                    }
                    finished.add()
                }
            }
            // Close while the threads are sending (each has had a few answers already).
            try progress.wait(atLeast: threads * 3, timeout: 20)
            _ = LibSimplex.take(lib.close(ctrl))
            do {
                try finished.wait(atLeast: threads, timeout: 20)
            } catch {
                Issue.record("round \(round): \(threads - finished.value) chat_send_cmd callers never returned after chat_close_store")
                return
            }
            #expect(closedAnswers.value == threads)
        }
    }

    /// A closed controller's handle never names a later controller: handles come from a counter,
    /// not from addresses the allocator hands out again.
    func handlesAreNeverReusedBody() {
        var seen: [UInt] = []
        var previous: UnsafeMutableRawPointer?
        for _ in 0..<12 {
            let (ok, ctrl) = lib.initialise(prefix())
            #expect(ok == #"{"type":"ok"}"#)
            seen.append(UInt(bitPattern: ctrl))
            if let previous { #expect(lib.send(previous, "/users").contains("invalid or closed")) }
            _ = LibSimplex.take(lib.close(ctrl))
            previous = ctrl
        }
        #expect(Set(seen).count == seen.count, "handles reused: \(seen.map { String($0, radix: 16) })")
        // Handles only go up, so none can come back.
        #expect(seen == seen.sorted(), "handles not increasing: \(seen.map { String($0, radix: 16) })")
    }

    /// Two controllers on one set of databases would encrypt with the same chain keys: the second
    /// `chat_migrate_init` is refused with a typed error while the first is open, and allowed
    /// once it is closed.
    func aSecondControllerOnTheSameDatabasesIsRefusedBody() {
        let p = prefix()
        let (ok, first) = lib.initialise(p)
        #expect(ok == #"{"type":"ok"}"#)
        var second: UnsafeMutableRawPointer?
        let refused = LibSimplex.take(lib.migrateInit(p, "", "yesUp", &second))
        #expect(refused.contains(#""type":"errorSQL""#) && refused.contains("database locked"), "\(refused)")
        #expect(second == nil)
        // The first is untouched by the refusal.
        #expect(lib.send(first, "/users").hasPrefix(#"{"result""#))
        _ = LibSimplex.take(lib.close(first))
        let (again, ctrl) = lib.initialise(p)
        #expect(again == #"{"type":"ok"}"#)
        _ = LibSimplex.take(lib.close(ctrl))
    }

    /// `chat_decrypt_file` writes the plaintext 0600 whatever the umask (and narrows an existing file).
    func decryptedFilesAreWrittenPrivateBody() throws {
        let dir = URL(fileURLWithPath: prefix()).deletingLastPathComponent()
        let path = dir.appendingPathComponent("secret.bin").path
        let data: [UInt8] = Array("private".utf8)
        let result = LibSimplex.take(lib.writeFile(nil, path, data, Int32(data.count)))
        let key = try #require(result.firstMatch(of: /"fileKey":"([^"]+)"/)?.1).description
        let nonce = try #require(result.firstMatch(of: /"fileNonce":"([^"]+)"/)?.1).description
        let fresh = dir.appendingPathComponent("fresh.bin").path
        let existing = dir.appendingPathComponent("existing.bin").path
        _ = FileManager.default.createFile(atPath: existing, contents: Data("old".utf8), attributes: [.posixPermissions: 0o644])
        let old = umask(0o022)
        defer { umask(old) }
        #expect(LibSimplex.take(lib.decryptFile(path, key, nonce, fresh)) == "")
        #expect(LibSimplex.take(lib.decryptFile(path, key, nonce, existing)) == "")
        for file in [fresh, existing, path] {
            var st = stat()
            #expect(stat(file, &st) == 0)
            #expect(st.st_mode & 0o777 == 0o600, "\(file): \(String(st.st_mode & 0o777, radix: 8))")
        }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: existing))) == data)
    }
}

/// A count shared by helper threads, with a bounded wait.
final class Counter: @unchecked Sendable {
    private let condition = NSCondition()
    private var n = 0
    var value: Int { condition.lock(); defer { condition.unlock() }; return n }
    func add() { condition.lock(); n += 1; condition.broadcast(); condition.unlock() }
    struct Timeout: Error {}
    func wait(atLeast target: Int, timeout seconds: Double) throws {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while n < target {
            if !condition.wait(until: deadline) { throw Timeout() }
        }
    }
}

/// A string shared between a test and a helper thread.
final class NIOLockedBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value = ""
    func set(_ v: String) { lock.lock(); value = v; lock.unlock() }
    func get() -> String { lock.lock(); defer { lock.unlock() }; return value }
}

/// Runs `body` on a new thread and waits for it without blocking a cooperative thread.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { cont in
        Thread.detachNewThread { cont.resume(with: Result { try body() }) }
    }
}

func offPool(_ body: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { cont in
        Thread.detachNewThread { body(); cont.resume() }
    }
}
