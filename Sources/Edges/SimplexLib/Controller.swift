import ChatAPI
import ChatCore
import ChatModel
import Dispatch
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayProtocol
import SwiftplexBase
import SwiftplexStorage

/// One `chat_migrate_init` controller: the Chat API, its running engine, and the queue of events
/// that `chat_recv_msg_wait` hands out. Every method is safe to call from any thread.
final class LibController: @unchecked Sendable {
    let api: ChatAPI
    private let condition = NSCondition()
    /// Events not handed out yet (O(1) to take however long the backlog; `Array.removeFirst`
    /// made a backlog of 100,000 events quadratic).
    private var queued = FIFO<JSONValue>()
    private var closed = false
    private var tasks: [Task<Void, Never>] = []
    /// Commands whose callers wait (guarded by `condition`).
    private var running: [CallerThreadExecutor] = []
    /// The exclusive lock on SQLite databases, held until `close()` has closed them (PostgreSQL
    /// schemas are held by the stores' advisory locks).
    private var databaseLock: DatabaseLock?

    init(api: ChatAPI, lock: DatabaseLock?) {
        self.api = api
        databaseLock = lock
        let controller = api.controller
        // The C ABI has no async context to lend us: the engine and its event pump run in tasks
        // owned by this controller and cancelled by `close()`.
        let engine = Task { _ = try? await controller.run() }
        let pump = Task { [weak self] in
            for await event in api.events {
                guard let self else { return }
                self.enqueue(event)
            }
        }
        tasks = [engine, pump]
    }

    func enqueueForBenchmark(_ e: JSONValue) { enqueue(e) }

    private func enqueue(_ e: JSONValue) {
        condition.lock()
        queued.append(e)
        condition.signal()
        condition.unlock()
    }

    /// Waits up to `microseconds` for an event; nil on timeout or once closed.
    func next(waitMicroseconds: Int32) -> JSONValue? {
        let deadline = Date().addingTimeInterval(Double(max(0, waitMicroseconds)) / 1_000_000)
        condition.lock()
        defer { condition.unlock() }
        while queued.isEmpty, !closed {
            if !condition.wait(until: deadline) { break }
        }
        return queued.popFirst()
    }

    /// Runs a command to completion on behalf of a blocking C caller, on the caller's thread.
    ///
    /// The command runs in a task whose executor preference is a ``CallerThreadExecutor``: its jobs
    /// — including those on the engine's (default) actors and the resumptions after relay or
    /// database waits — are run by this thread, which waits for them, instead of being handed to
    /// the cooperative pool and the result handed back (two thread hand-offs per command were
    /// most of what the C path cost over a Swift caller's).
    ///
    /// Every call returns: a command sent after (or while) the controller closes gets an error
    /// envelope. Each waiting command is registered under the lock that `close()` takes, so
    /// `close()` answers every command still running when it has stopped the engine.
    func send(_ command: String) -> [UInt8] {
        Blocking.willWait("chat_send_cmd")
        let executor = CallerThreadExecutor()
        condition.lock()
        if closed {
            condition.unlock()
            return Array(Self.closedEnvelope.utf8)
        }
        running.append(executor)
        condition.unlock()
        let api = self.api
        Task(executorPreference: executor) {
            executor.finish(await api.respond(command))
        }
        let result = executor.run()
        condition.lock()
        if let i = running.lastIndex(where: { $0 === executor }) { running.remove(at: i) }
        condition.unlock()
        switch result {
        case let .success(r): return Envelope.result(r)
        case let .failure(f): return Envelope.errorBytes(f)
        }
    }

    static let closedFailure = ChatFailure(commandError: "the chat controller is closed")
    static var closedEnvelope: String { Envelope.error(closedFailure) }

    var isClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return closed
    }

    /// Stops the engine and closes its databases before returning, so the same files can be
    /// opened again at once. Blocks the calling (foreign) thread.
    func close() {
        Blocking.willWait("chat_close_store")
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
        let running = tasks
        let controller = api.controller
        let done = DispatchSemaphore(value: 0)
        Task {
            for t in running { t.cancel() }
            for t in running { await t.value }
            await controller.close()
            done.signal()
        }
        done.wait()
        // A command still waiting (for a relay, say) is answered now: no caller stays blocked.
        // Its task may still finish later; its answer is then dropped.
        condition.lock()
        let unanswered = self.running
        self.running.removeAll()
        let lock = databaseLock
        databaseLock = nil
        condition.unlock()
        for executor in unanswered { executor.finish(.failure(Self.closedFailure)) }
        lock?.release()  // after the databases are closed
    }
}

enum Envelope {
    static func result(_ v: JSONValue) -> String { JSONValue.object([("result", v)]).description }
    static func error(_ f: ChatFailure) -> String { JSONValue.object([("error", f.chatError)]).description }

    /// `{"result":…}` of a typed response, written straight from the model value (the same text
    /// as `result(ChatAPI.encode(r))`), on the caller's thread.
    static func result(_ r: ChatResponse) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        out.append(contentsOf: #"{"result":"#.utf8)
        ChatAPI.write(r, into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `{"error":…}` of a failure, as bytes.
    static func errorBytes(_ f: ChatFailure) -> [UInt8] {
        var out: [UInt8] = []
        out.append(contentsOf: #"{"error":"#.utf8)
        ChatAPI.write(f.error, into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }
}

/// A task executor whose jobs are run by one waiting thread — the C caller of `chat_send_cmd` —
/// until the command's result is in. Jobs enqueued by other threads (an event loop resuming a
/// relay round trip) wake it; it spins briefly before sleeping, since most jobs follow within
/// microseconds.
final class CallerThreadExecutor: TaskExecutor, @unchecked Sendable {  // state guarded by `condition`
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var result: Result<ChatResponse, ChatFailure>?
    /// Set when `run` has returned: later jobs (a command's task outliving its answer at close)
    /// go to the global executor instead.
    private var done = false

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        if done {
            condition.unlock()
            globalConcurrentExecutor.enqueue(ExecutorJob(job))
            return
        }
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// The first result wins (the close of the controller racing the command).
    func finish(_ r: Result<ChatResponse, ChatFailure>) {
        condition.lock()
        if result == nil { result = r }
        condition.signal()
        condition.unlock()
    }

    /// Runs jobs on this thread until the result is in, and returns it.
    func run() -> Result<ChatResponse, ChatFailure> {
        let me = asUnownedTaskExecutor()
        var spins = 0
        condition.lock()
        while true {
            if let r = result {
                done = true
                let left = jobs
                jobs.removeAll()
                condition.unlock()
                // Jobs that came after the answer (the task's last steps) finish elsewhere.
                for job in left { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
                return r
            }
            if !jobs.isEmpty {
                let batch = jobs
                jobs.removeAll(keepingCapacity: true)
                condition.unlock()
                // The caller's own thread, lent to the command: a wait here holds up that caller only.
                Blocking.allowingWaits { for job in batch { job.runSynchronously(on: me) } }
                spins = 0
                condition.lock()
                continue
            }
            if spins < 200 {
                spins += 1
                condition.unlock()
                sched_yield()
                condition.lock()
                continue
            }
            condition.wait()
        }
    }
}
