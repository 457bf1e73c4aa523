import Foundation

/// One thread that runs jobs in order: the queue of one plugin instance.
///
/// Plugins are C code that may block (a host callback waits for the Chat API), so they run on
/// their own threads, never on Swift's cooperative pool. The thread spins briefly before it
/// sleeps, so events arriving in a burst are picked up without a kernel wake-up each.
final class SerialWorker: @unchecked Sendable {
    typealias Job = () -> Void

    private var mutex = pthread_mutex_t()
    private var condition = pthread_cond_t()
    private var jobs: [Job] = []
    private var stopping = false
    private var thread: pthread_t?
    private let name: String
    /// Jobs queued and not yet finished (read without the lock for statistics only).
    private(set) var pending = 0

    init(name: String) {
        self.name = name
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&condition, nil)
        let box = Unmanaged.passRetained(self)
        var t = pthread_t()
        let rc = pthread_create(&t, nil, { arg in
            let worker = Unmanaged<SerialWorker>.fromOpaque(arg!).takeRetainedValue()
            worker.loop()
            return nil
        }, box.toOpaque())
        precondition(rc == 0, "cannot create a plugin thread: \(rc)")
        thread = t
    }

    deinit {
        pthread_cond_destroy(&condition)
        pthread_mutex_destroy(&mutex)
    }

    /// Number of jobs waiting or running.
    var depth: Int {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return pending
    }

    /// Queues a job unless `limit` jobs are already waiting. Returns false when refused.
    @discardableResult
    func submit(limit: Int = .max, _ job: @escaping Job) -> Bool {
        pthread_mutex_lock(&mutex)
        guard !stopping, pending < limit else {
            pthread_mutex_unlock(&mutex)
            return false
        }
        jobs.append(job)
        pending += 1
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
        return true
    }

    /// Runs `job` on the worker and waits for its result without blocking a cooperative thread.
    func run<T: Sendable>(_ job: @escaping @Sendable () -> T) async -> T? {
        await withCheckedContinuation { (cont: CheckedContinuation<T?, Never>) in
            let accepted = submit { cont.resume(returning: job()) }
            if !accepted { cont.resume(returning: nil) }
        }
    }

    /// Lets the queued jobs finish, then ends the thread. Jobs submitted later are refused.
    func shutdown() {
        pthread_mutex_lock(&mutex)
        stopping = true
        pthread_cond_signal(&condition)
        pthread_mutex_unlock(&mutex)
    }

    private func loop() {
        Thread.current.name = String(name.prefix(15))
        while true {
            pthread_mutex_lock(&mutex)
            if jobs.isEmpty && !stopping {
                // Spin a little (lock released) before sleeping: bursts avoid a wake-up each.
                pthread_mutex_unlock(&mutex)
                var spins = 0
                while spins < 300 {
                    pthread_mutex_lock(&mutex)
                    let ready = !jobs.isEmpty || stopping
                    pthread_mutex_unlock(&mutex)
                    if ready { break }
                    spins += 1
                    sched_yield()
                }
                pthread_mutex_lock(&mutex)
            }
            while jobs.isEmpty && !stopping {
                pthread_cond_wait(&condition, &mutex)
            }
            if jobs.isEmpty && stopping {
                pthread_mutex_unlock(&mutex)
                return
            }
            var batch: [Job] = []
            swap(&batch, &jobs)
            pthread_mutex_unlock(&mutex)
            for job in batch {
                job()
                pthread_mutex_lock(&mutex)
                pending -= 1
                pthread_mutex_unlock(&mutex)
            }
        }
    }
}
