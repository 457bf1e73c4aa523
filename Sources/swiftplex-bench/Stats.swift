import Foundation
import NIOConcurrencyHelpers

/// Latency samples (nanoseconds) and a count, shared by the tasks of one benchmark run.
final class Recorder: Sendable {
    private let samples = NIOLockedValueBox<[UInt64]>([])

    init(capacity: Int) { samples.withLockedValue { $0.reserveCapacity(capacity) } }

    func record(_ nanoseconds: UInt64) { samples.withLockedValue { $0.append(nanoseconds) } }

    var count: Int { samples.withLockedValue { $0.count } }

    func summary(elapsed: Duration) -> Summary {
        let sorted = samples.withLockedValue { $0.sorted() }
        func pct(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return .nan }
            let i = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
            return Double(sorted[max(0, i)]) / 1e6
        }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Summary(count: sorted.count, perSecond: Double(sorted.count) / seconds, p50ms: pct(0.50), p99ms: pct(0.99))
    }
}

struct Summary {
    var count: Int
    var perSecond: Double
    var p50ms: Double
    var p99ms: Double

    func line(_ name: String) -> String {
        String(format: "%-10@ %9.0f msg/s   p50 %7.3f ms   p99 %7.3f ms   (%d messages)", name as NSString, perSecond, p50ms, p99ms, count)
    }
}

/// Monotonic nanoseconds, for latencies measured inside one process.
@inline(__always) func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

extension Array where Element == UInt8 {
    /// A body of `size` bytes whose first 8 carry the send time.
    static func stamped(size: Int) -> [UInt8] {
        var b = [UInt8](repeating: 0x5A, count: Swift.max(size, 8))
        let t = monotonicNanos()
        for i in 0..<8 { b[i] = UInt8(truncatingIfNeeded: t >> (8 * UInt64(i))) }
        return b
    }

    var stamp: UInt64 {
        var t: UInt64 = 0
        for i in 0..<8 { t |= UInt64(self[i]) << (8 * UInt64(i)) }
        return t
    }
}
