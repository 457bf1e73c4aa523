import ChatAPI
import ChatCore
import ChatModel
import Foundation
import Logging
import NIOConcurrencyHelpers
import SwiftplexBase

/// A chat engine in a `libsimplex.so` loaded at run time with `dlopen` — SimpleX's official
/// build, or Swiftplex's own — through the C ABI the official Python library uses
/// (docs/simplex-bot-api.md, "The C ABI"): `hs_init_with_rtsopts` once per process, then
/// `chat_migrate_init` with the database, `chat_send_cmd` for commands, `chat_recv_msg_wait` for
/// events, `chat_close_store` at the end.
///
/// Every call blocks its thread, so none runs on Swift's concurrency pool: commands run on a
/// queue of their own (several at once: the library is thread-safe per controller and a command
/// can wait on the network), events are read by a thread of their own.
public final class LibSimplexEngine: BotEngine, @unchecked Sendable {  // `ctrl` is an opaque handle the library makes thread-safe; the rest is Sendable
    public let library: String
    private let functions: Functions
    private let ctrl: UnsafeMutableRawPointer
    private let logger: Logger
    public let events: AsyncStream<EncodedChatEvent>
    private let eventSink: AsyncStream<EncodedChatEvent>.Continuation
    private let commands = DispatchQueue(label: "swiftplex.libsimplex.commands", attributes: .concurrent)
    private let state = NIOLockedValueBox(State())

    private struct State {
        var reading = false
        var stopping = false
        var closed = false
        var readerDone: [CheckedContinuation<Void, Never>] = []
    }

    public var kind: String { "libsimplex" }
    public var controller: ChatController? { nil }

    /// The library's functions this engine calls.
    struct Functions: @unchecked Sendable {  // C function pointers into a library that is never unloaded
        typealias MigrateInit = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
                                                UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> UnsafeMutablePointer<CChar>?
        typealias SendCommand = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>?
        typealias ReceiveWait = @convention(c) (UnsafeMutableRawPointer?, Int32) -> UnsafeMutablePointer<CChar>?
        typealias CloseStore = @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutablePointer<CChar>?
        typealias RuntimeInit = @convention(c) (UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> Void

        let migrateInit: MigrateInit
        let sendCommand: SendCommand
        let receiveWait: ReceiveWait
        let closeStore: CloseStore
        let runtimeInit: RuntimeInit
    }

    /// Where the engine keeps its data: SQLite files at a prefix (with an optional encryption
    /// key), or PostgreSQL schemas under a prefix (the library's PostgreSQL build).
    public enum Database: Sendable, CustomStringConvertible {
        case sqlite(prefix: String, key: String)
        case postgres(connection: String, schemaPrefix: String)

        /// `chat_migrate_init`'s first two arguments, as the Python library passes them.
        var arguments: (String, String) {
            switch self {
            case let .sqlite(prefix, key): (prefix, key)
            case let .postgres(connection, schemaPrefix): (schemaPrefix, connection)
            }
        }

        public var description: String {
            switch self {
            case let .sqlite(prefix, _): "\(prefix)_chat.db and \(prefix)_agent.db"
            case let .postgres(_, schemaPrefix): "the PostgreSQL schemas \(schemaPrefix)_*"
            }
        }
    }

    private init(library: String, functions: Functions, ctrl: UnsafeMutableRawPointer, logger: Logger) {
        self.library = library
        self.functions = functions
        self.ctrl = ctrl
        self.logger = logger
        (events, eventSink) = AsyncStream.makeStream(of: EncodedChatEvent.self)
    }

    /// Loads the library (once per process), initialises its runtime and opens the engine on
    /// `database`, migrating it as `confirm` allows (`yesUp`: pending up-migrations; `error`:
    /// none). A missing library, a missing symbol or a migration the engine will not run are
    /// errors naming the file.
    public static func open(library: String, database: Database, confirm: String = "yesUp", logger: Logger) async throws -> LibSimplexEngine {
        try await Blocking.run("libsimplex-open") {
            let functions = try Loaded.functions(library)
            var ctrl: UnsafeMutableRawPointer?
            let (path, key) = database.arguments
            guard let raw = functions.migrateInit(path, key, confirm, &ctrl) else {
                throw BotHostError("\(library): chat_migrate_init returned no result")
            }
            let text = String(cString: raw)
            free(raw)
            let result = try? JSONValue.parse(text)
            guard result?["type"]?.stringValue == "ok", let ctrl else {
                let why = result.map(Self.describeMigration) ?? text
                throw BotHostError("\(library) cannot open \(database): \(why)")
            }
            return LibSimplexEngine(library: library, functions: functions, ctrl: ctrl, logger: logger)
        }
    }

    /// What a failed `chat_migrate_init` said, for a start-up error.
    static func describeMigration(_ result: JSONValue) -> String {
        switch result["type"]?.stringValue {
        case "errorMigration":
            if let ups = result["migrationError"]?["upMigrations"]?.arrayValue {
                let names = ups.compactMap { $0["upName"]?.stringValue }
                return "the database needs migrations that must be confirmed (\(names.joined(separator: ", "))): back it up, then start with engine.confirm_migrations: yesUp"
            }
            if let downs = result["migrationError"]?["downMigrations"]?.arrayValue {
                return "the database is newer than this library (it would need down-migrations \(downs.compactMap(\.stringValue).joined(separator: ", "))): use a newer library, or engine.confirm_migrations: yesUpDown"
            }
            return "migration error: \(result)"
        case "errorNotADatabase": return "\(result["dbFile"]?.stringValue ?? "a file") is not a database (or the key is wrong)"
        case "errorSQL": return "SQL error in \(result["dbFile"]?.stringValue ?? "the database"): \(result["migrationSQLError"]?.stringValue ?? "")"
        case let t?: return "\(t): \(result)"
        case nil: return "unexpected answer \(result)"
        }
    }

    public func execute(_ line: String, idempotencyKey: String?) async -> JSONValue {
        let envelope = await call { [self] in line.withCString { functions.sendCommand(ctrl, $0) } }
        guard let envelope else { return ForeignResponse.commandError(message: "the chat engine is closed") }
        if case .object = envelope["result"] { return envelope["result"]! }
        if let error = envelope["error"] { return ForeignResponse.commandError(error) }
        return ForeignResponse.commandError(message: "invalid chat command result from \(library): \(envelope.description.prefix(500))")
    }

    public func respond(_ line: String, idempotencyKey: String?) async -> Result<ChatResponse, ChatFailure> {
        ForeignResponse.typed(await execute(line, idempotencyKey: idempotencyKey))
    }

    /// Runs one blocking library call on the command queue; its JSON result (nil once closed).
    private func call(_ body: @escaping @Sendable () -> UnsafeMutablePointer<CChar>?) async -> JSONValue? {
        guard !state.withLockedValue({ $0.closed }) else { return nil }
        return await withCheckedContinuation { (continuation: CheckedContinuation<JSONValue?, Never>) in
            commands.async {
                guard let raw = body() else { return continuation.resume(returning: .object([("error", ChatFailure(commandError: "the library returned no result").chatError)])) }
                let text = String(cString: raw)
                free(raw)
                continuation.resume(returning: (try? JSONValue.parse(text)) ?? .object([("error", ChatFailure(commandError: "the library's result is not JSON: \(text.prefix(200))").chatError)]))
            }
        }
    }

    /// Reads events on a thread of its own (`chat_recv_msg_wait`, half a second at a time) until
    /// cancelled.
    public func run() async throws {
        let start = state.withLockedValue { s -> Bool in
            guard !s.reading, !s.closed else { return false }
            s.reading = true
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in readEvents() }
        thread.name = "libsimplex-events"
        thread.start()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let done = state.withLockedValue { s -> Bool in
                    if !s.reading { return true }
                    s.readerDone.append(c)
                    return false
                }
                if done { c.resume() }
            }
        } onCancel: {
            state.withLockedValue { $0.stopping = true }
        }
    }

    private func readEvents() {
        while !state.withLockedValue({ $0.stopping || $0.closed }) {
            guard let raw = functions.receiveWait(ctrl, 500_000) else { continue }
            let text = String(cString: raw)
            free(raw)
            guard !text.isEmpty else { continue }
            guard let envelope = try? JSONValue.parse(text) else {
                logger.warning("libsimplex sent an event that is not JSON; ignored", metadata: ["bytes": "\(text.utf8.count)"])
                continue
            }
            if let event = envelope["result"] ?? envelope["resp"] {
                eventSink.yield(EncodedChatEvent(foreign: event))
            } else if let error = envelope["error"] {
                // Asynchronous background errors: passed on as the chatError events they are.
                eventSink.yield(EncodedChatEvent(foreign: .object([("type", .string("chatError")), ("chatError", error)])))
            }
        }
        let waiters = state.withLockedValue { s -> [CheckedContinuation<Void, Never>] in
            s.reading = false
            defer { s.readerDone.removeAll() }
            return s.readerDone
        }
        waiters.forEach { $0.resume() }
    }

    /// Closes the engine's store (after `/_stop`); commands sent afterwards fail.
    public func close() async {
        let first = state.withLockedValue { s -> Bool in
            defer { s.closed = true; s.stopping = true }
            return !s.closed
        }
        guard first else { return }
        // Commands already running finish first (the queue's barrier waits for them).
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            commands.async(flags: .barrier) { [self] in
                if let raw = functions.closeStore(ctrl) {
                    let text = String(cString: raw)
                    free(raw)
                    if !text.isEmpty { logger.warning("chat_close_store failed", metadata: ["library": "\(library)", "error": "\(text)"]) }
                }
                c.resume()
            }
        }
        eventSink.finish()
    }

    /// The libraries loaded in this process, by path: each is loaded and its runtime initialised once.
    private enum Loaded {
        private static let loaded = NIOLockedValueBox<[String: Functions]>([:])

        static func functions(_ library: String) throws -> Functions {
            try loaded.withLockedValue { table in
                if let f = table[library] { return f }
                guard FileManager.default.fileExists(atPath: library) else {
                    throw BotHostError("engine library \(library) does not exist (SimpleX's libsimplex.so: see docs/simplex-network.md)")
                }
                guard let handle = dlopen(library, RTLD_NOW | RTLD_LOCAL) else {
                    throw BotHostError("cannot load the engine library \(library): \(dlerror().map { String(cString: $0) } ?? "dlopen failed")")
                }
                func symbol<T>(_ name: String, _: T.Type) throws -> T {
                    guard let p = dlsym(handle, name) else {
                        throw BotHostError("\(library) is not a SimpleX chat library: it has no \(name)")
                    }
                    return unsafeBitCast(p, to: T.self)
                }
                let f = Functions(migrateInit: try symbol("chat_migrate_init", Functions.MigrateInit.self),
                                  sendCommand: try symbol("chat_send_cmd", Functions.SendCommand.self),
                                  receiveWait: try symbol("chat_recv_msg_wait", Functions.ReceiveWait.self),
                                  closeStore: try symbol("chat_close_store", Functions.CloseStore.self),
                                  runtimeInit: try symbol("hs_init_with_rtsopts", Functions.RuntimeInit.self))
                // The runtime's options as SimpleX's own clients pass them (its signal handlers off:
                // the host handles SIGTERM and SIGINT).
                let args = ["simplex", "+RTS", "-A64m", "-H64m", "-xn", "--install-signal-handlers=no"]
                var argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
                var argc = Int32(args.count)
                argv.withUnsafeMutableBufferPointer { buffer in
                    var base = buffer.baseAddress
                    f.runtimeInit(&argc, &base)
                }
                // argv stays allocated: the runtime may keep pointers into it.
                table[library] = f
                return f
            }
        }
    }
}
