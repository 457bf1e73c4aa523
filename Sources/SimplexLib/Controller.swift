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
    private var queued: [JSONValue] = []
    private var closed = false
    private var tasks: [Task<Void, Never>] = []
    /// Commands whose callers wait (guarded by `condition`).
    private var waitingSlots: [ReplySlot] = []
    /// The exclusive lock on the databases, held until `close()` has closed them.
    private var databaseLock: DatabaseLock?
    private let commands: AsyncStream<(String, ReplySlot)>.Continuation

    init(api: ChatAPI, lock: DatabaseLock) {
        self.api = api
        databaseLock = lock
        let controller = api.controller
        let (commandStream, commands) = AsyncStream.makeStream(of: (String, ReplySlot).self, bufferingPolicy: .unbounded)
        self.commands = commands
        // The C ABI has no async context to lend us: the engine and its event pump run in tasks
        // owned by this controller and cancelled by `close()`.
        let engine = Task { _ = try? await controller.run() }
        let pump = Task { [weak self] in
            for await event in api.events {
                guard let self else { return }
                self.enqueue(event)
            }
        }
        let commandPump = Task {
            for await (line, slot) in commandStream { slot.fill(await api.respond(line)) }
        }
        tasks = [engine, pump, commandPump]
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
        return queued.isEmpty ? nil : queued.removeFirst()
    }

    /// Runs a command to completion on behalf of a blocking C caller.
    ///
    /// Commands go to one long-lived pump task (no task is created per command), and the caller
    /// spins briefly before it sleeps, since most commands answer within tens of microseconds:
    /// the sleep-and-wake of a blocked thread is what made the C path slower than the Swift one.
    ///
    /// Every call returns: a command sent after (or while) the controller closes gets an error
    /// envelope. Each waiting slot is registered under the lock that `close()` takes, so `close()`
    /// answers every slot the pump did not (a yield after the stream finished, or a command still
    /// buffered when the pump was cancelled, would otherwise leave its caller blocked for ever).
    func send(_ command: String) -> [UInt8] {
        let slot = ReplySlot()
        condition.lock()
        if closed {
            condition.unlock()
            return Array(Self.closedEnvelope.utf8)
        }
        waitingSlots.append(slot)
        condition.unlock()
        if case .terminated = commands.yield((command, slot)) { slot.fill(.failure(Self.closedFailure)) }
        let result = slot.wait()
        condition.lock()
        if let i = waitingSlots.lastIndex(where: { $0 === slot }) { waitingSlots.remove(at: i) }
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
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
        commands.finish()
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
        // Whatever the pump did not answer (it was cancelled, or the command came after the
        // stream finished) is answered now: no caller stays blocked.
        condition.lock()
        let unanswered = waitingSlots
        waitingSlots.removeAll()
        let lock = databaseLock
        databaseLock = nil
        condition.unlock()
        for slot in unanswered { slot.fill(.failure(Self.closedFailure)) }
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

/// Where the command pump leaves one command's result for the blocked C caller.
final class ReplySlot: @unchecked Sendable {  // `value` is guarded by `lock`; `ready` is atomic
    private let lock = NSLock()
    private let ready = SpinFlag()
    private var value: Result<ChatResponse, ChatFailure>?
    private let semaphore = DispatchSemaphore(value: 0)

    /// The first fill wins; later ones (the close of the controller racing the pump) do nothing.
    func fill(_ v: Result<ChatResponse, ChatFailure>) {
        let first = lock.withLock { () -> Bool in
            guard value == nil else { return false }
            value = v
            return true
        }
        guard first else { return }
        ready.set()
        semaphore.signal()
    }

    func wait() -> Result<ChatResponse, ChatFailure> {
        // Spin up to ~100 µs, then sleep.
        let deadline = DispatchTime.now().uptimeNanoseconds + 100_000
        while !ready.isSet && DispatchTime.now().uptimeNanoseconds < deadline { sched_yield() }
        semaphore.wait()
        return lock.withLock { value! }
    }
}

/// A boolean flag readable without a lock (for spinning).
final class SpinFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    func set() { lock.withLock { flag = true } }
    var isSet: Bool { lock.withLock { flag } }
}
