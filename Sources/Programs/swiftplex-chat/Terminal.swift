import Foundation
import Synchronization

/// Standard output and error, one whole line per write so that event lines and command answers
/// never interleave mid-line, and unbuffered so that a pipe sees each line at once.
final class Terminal: Sendable {
    /// Held for each whole write.
    private let writing = Mutex(())
    /// Whether stdout is a terminal: the QR code then sets its own colours.
    let isInteractive = isatty(STDOUT_FILENO) == 1

    func line(_ text: String) {
        write(text + "\n", to: FileHandle.standardOutput)
    }

    /// Text without a newline, e.g. a prompt.
    func prompt(_ text: String) {
        write(text, to: FileHandle.standardOutput)
    }

    func error(_ error: any Error) {
        write("error: \(error)\n", to: FileHandle.standardError)
    }

    private func write(_ text: String, to handle: FileHandle) {
        writing.withLock { _ in handle.write(Data(text.utf8)) }
    }
}

/// What the input loop reacts to: a typed line, the end of input, a stop signal, or the end of
/// a wait (`-t`).
enum InputEvent: Sendable {
    case line(String)
    case end
    case signal(Int32)
    case timeUp
}

/// Lines from standard input on a thread of their own (reading blocks), and SIGINT/SIGTERM, as
/// one stream; the signals are taken from their default handlers so the engine can stop cleanly.
/// Without `readingLines` (headless, `-e`) standard input is left alone: only signals come.
struct LineInput: Sendable {
    let events: AsyncStream<InputEvent>
    private let continuation: AsyncStream<InputEvent>.Continuation

    static func standardInput(readingLines: Bool = true) -> LineInput {
        let (stream, continuation) = AsyncStream.makeStream(of: InputEvent.self)
        let queue = DispatchQueue(label: "swiftplex-chat.signals")
        let sources = [SIGINT, SIGTERM].map { sig -> any DispatchSourceSignal in
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { continuation.yield(.signal(sig)) }
            source.resume()
            return source
        }
        if readingLines {
            let thread = Thread {
                while let line = readLine(strippingNewline: true) { continuation.yield(.line(line)) }
                continuation.yield(.end)
            }
            thread.start()
        }
        let keep = SignalSources(sources)
        continuation.onTermination = { _ in keep.cancelAll() }
        return LineInput(events: stream, continuation: continuation)
    }

    /// Delivers `.timeUp` after `duration`.
    func timeUp(after duration: Duration) {
        let continuation = continuation
        Task {
            try? await Task.sleep(for: duration)
            continuation.yield(.timeUp)
        }
    }
}

/// The signal sources, kept alive by the stream and cancelled when it ends.
final class SignalSources: @unchecked Sendable {  // immutable; cancel is thread-safe
    private let sources: [any DispatchSourceSignal]
    init(_ sources: [any DispatchSourceSignal]) { self.sources = sources }
    func cancelAll() { sources.forEach { $0.cancel() } }
}
