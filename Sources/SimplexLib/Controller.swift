import ChatAPI
import ChatCore
import Dispatch
import Foundation
import Logging
import NIOConcurrencyHelpers
import RelayProtocol

/// One `chat_migrate_init` controller: the Chat API, its running engine, and the queue of events
/// that `chat_recv_msg_wait` hands out. Every method is safe to call from any thread.
final class LibController: @unchecked Sendable {
    let api: ChatAPI
    private let condition = NSCondition()
    private var queued: [JSONValue] = []
    private var closed = false
    private var tasks: [Task<Void, Never>] = []

    init(api: ChatAPI) {
        self.api = api
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
        return queued.isEmpty ? nil : queued.removeFirst()
    }

    /// Runs a command to completion on behalf of a blocking C caller.
    func send(_ command: String) -> String {
        if isClosed { return Envelope.error(ChatFailure(commandError: "the chat controller is closed")) }
        let box = NIOLockedValueBox<Result<JSONValue, ChatFailure>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let api = self.api
        Task {
            let r = await api.run(command)
            box.withLockedValue { $0 = r }
            done.signal()
        }
        done.wait()
        switch box.withLockedValue({ $0 })! {
        case let .success(r): return Envelope.result(r)
        case let .failure(f): return Envelope.error(f)
        }
    }

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
    }
}

enum Envelope {
    static func result(_ v: JSONValue) -> String { JSONValue.object([("result", v)]).description }
    static func error(_ f: ChatFailure) -> String { JSONValue.object([("error", f.chatError)]).description }
}
