import Foundation
import NIOConcurrencyHelpers
import SwiftplexBase
import Synchronization

/// The child side of `isolation: process`: loads one plugin and serves it over stdin/stdout
/// frames (see ``Frames``). Run by the `swiftplex-plugin-runner` executable.
public enum PluginChild {
    /// Serves the plugin at `path` until the host says stop or goes away; returns the exit code.
    public static func run(path: String) -> Int32 {
        signal(SIGPIPE, SIG_IGN)
        // The frames get private descriptors; the plugin's own stdout goes to stderr (logged by
        // the host) and its stdin is /dev/null, so nothing it prints or reads can break a frame.
        let framesOut = dup(STDOUT_FILENO)
        let framesIn = dup(STDIN_FILENO)
        dup2(STDERR_FILENO, STDOUT_FILENO)
        let devNull = open("/dev/null", O_RDONLY)
        if devNull >= 0 { dup2(devNull, STDIN_FILENO); close(devNull) }
        let writer = FrameWriter(fd: framesOut)
        let library: PluginLibrary
        do {
            library = try PluginLibrary.load(path: path)
        } catch {
            writer.send(.loadFailed(code: "\(error.code)", error: error.message))
            return 2
        }
        writer.send(.hello(library.info))

        let worker = SerialWorker(name: "plugin-child")
        let services = RemoteServices(writer: writer)
        let finished = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var instance: PluginInstance?
        services.timers = PluginTimers { json in
            worker.submit { _ = instance?.handle(json) }
        }

        let reader = FrameReader(fd: framesIn)
        Thread.detachNewThread {
            while true {
                let control: Control
                switch Result(catching: { try reader.next() }) {
                case let .success(.event(seq, event)):
                    worker.submit {
                        services.handlingEvent = seq
                        let error = instance?.handle(event)
                        services.handlingEvent = nil
                        writer.send(.done(seq: seq, error: error?.message))
                    }
                    continue
                case let .success(.control(c)):
                    control = c
                case .success(.done), .failure:
                    // The host went away (or wrote garbage): stop the plugin and leave.
                    worker.submit { instance?.stop(); instance = nil; finished.signal() }
                    return
                }
                switch control {
                case let .start(config):
                    worker.submit {
                        switch PluginInstance.start(library, services: services, configJSON: config) {
                        case let .success(i):
                            instance = i
                            writer.send(.started)
                        case let .failure(e):
                            writer.send(.startFailed(error: e.message))
                        }
                    }
                case let .result(id, answer):
                    services.resolve(id: id, answer)
                case .stop:
                    worker.submit {
                        services.timers?.close()
                        instance?.stop()
                        instance = nil
                        finished.signal()
                    }
                case .hello, .loadFailed, .started, .startFailed, .call, .log, .unknown:
                    break  // not the host's to send, or newer than this runner: ignored
                }
            }
        }
        finished.wait()
        return 0
    }
}

/// Host callbacks in the child process: forwarded to the host and answered by it, except timers,
/// which run in the child and feed its own queue.
final class RemoteServices: HostServices, @unchecked Sendable {
    private let writer: FrameWriter
    private struct State {
        var nextId = 1
        var waiting: [Int: (DispatchSemaphore, Box)] = [:]
        var handlingEvent: UInt64?
    }

    private let state = Mutex(State())
    /// Set once, before the first event.
    var timers: PluginTimers?
    /// The event the plugin is handling (its seq), named in its `command` calls so the host can
    /// give them that event's idempotency keys.
    var handlingEvent: UInt64? {
        get { state.withLock { $0.handlingEvent } }
        set { state.withLock { $0.handlingEvent = newValue } }
    }

    final class Box: @unchecked Sendable { var answer = Control.Answer() }

    init(writer: FrameWriter) { self.writer = writer }

    /// Sends the call and waits, on the plugin's own thread, for the host's answer (an empty one
    /// if the host has gone).
    private func call(_ call: Control.Call) -> Control.Answer {
        let sem = DispatchSemaphore(value: 0)
        let box = Box()
        let id = state.withLock { state in
            defer { state.nextId += 1 }
            state.waiting[state.nextId] = (sem, box)
            return state.nextId
        }
        guard writer.send(.call(id: id, call)) else {
            state.withLock { $0.waiting[id] = nil }
            return Control.Answer()
        }
        sem.wait()
        return box.answer
    }

    func resolve(id: Int, _ answer: Control.Answer) {
        let w = state.withLock { $0.waiting.removeValue(forKey: id) }
        guard let (sem, box) = w else { return }
        box.answer = answer
        sem.signal()
    }

    func command(_ line: String) -> String {
        call(.command(line, event: handlingEvent)).value
            ?? #"{"type":"chatCmdError","chatError":{"type":"error","errorType":{"type":"commandError","message":"the host did not answer"}}}"#
    }

    func log(level: Int32, message: String) {
        writer.send(.log(level: level, message: message))
    }

    func storageGet(_ key: String) -> String? { call(.storageGet(key: key)).value }

    func storageSet(_ key: String, _ value: String?) -> Bool {
        call(.storageSet(key: key, value: value)).ok ?? false
    }

    func timerStart(name: String, delayMs: UInt64, repeatMs: UInt64) -> UInt64 {
        timers?.start(name: name, delayMs: delayMs, repeatMs: repeatMs) ?? 0
    }

    func timerCancel(_ id: UInt64) -> Bool { timers?.cancel(id) ?? false }

    func setCommands(_ json: String) -> Bool { call(.setCommands(json)).ok ?? false }
}
