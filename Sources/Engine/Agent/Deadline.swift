import NIOConcurrencyHelpers

/// Runs `operation` for at most `limit`, or throws ``AgentError/Code/timeout`` naming `what`.
///
/// At the deadline (or when the caller is cancelled) the operation is cancelled and left to end
/// on its own (a relay client call ends at its own timeout); the caller goes on at once. So an
/// operation run this way must do nothing that matters after the deadline: the agent uses it
/// only for the network steps of a join or an allow, and commits their result itself afterwards.
func withDeadline<T: Sendable>(_ limit: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    let waiting = NIOLockedValueBox<CheckedContinuation<T, any Error>?>(nil)
    let timer = NIOLockedValueBox<Task<Void, Never>?>(nil)
    let work = NIOLockedValueBox<Task<Void, Never>?>(nil)
    @Sendable func finish(_ result: Result<T, any Error>) {
        waiting.withLockedValue { w in defer { w = nil }; return w }?.resume(with: result)
    }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            waiting.withLockedValue { $0 = continuation }
            let w = Task {
                let result: Result<T, any Error>
                do { result = .success(try await operation()) } catch { result = .failure(error) }
                timer.withLockedValue { $0 }?.cancel()
                finish(result)
            }
            work.withLockedValue { $0 = w }
            let t = Task {
                try? await Task.sleep(for: limit)
                guard !Task.isCancelled else { return }
                w.cancel()
                finish(.failure(AgentError(.timeout, "\(what) took longer than \(limit)")))
            }
            timer.withLockedValue { $0 = t }
        }
    } onCancel: {
        timer.withLockedValue { $0 }?.cancel()
        work.withLockedValue { $0 }?.cancel()
        finish(.failure(CancellationError()))
    }
}
