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

/// One size of a benchmark's work, for `Growth.report`: how much work, how long it took, and the
/// process's resident memory after it.
struct GrowthPoint {
    var work: Int
    var seconds: Double
    var residentBytes: Int
}

/// How time and memory grow as the work grows — so a regression in complexity (a quadratic queue,
/// a scan per message) shows, not only one in constants.
enum Growth {
    static func report(_ title: String, unit: String, _ points: [GrowthPoint]) {
        guard points.count > 1, let first = points.first, let last = points.last, first.work > 0 else { return }
        print("growth of \(title):")
        for p in points {
            print(String(format: "  %9d %@: %8.3f s, %9.3f µs per %@, %7.1f MB resident", p.work, unit as NSString, p.seconds,
                         p.seconds * 1e6 / Double(max(1, p.work)), unit as NSString, Double(p.residentBytes) / 1e6))
        }
        let work = Double(last.work) / Double(first.work)
        let time = last.seconds / max(first.seconds, 1e-9)
        let perUnit = time / work
        print(String(format: "  work ×%.0f: time ×%.2f (per %@ ×%.2f), memory ×%.2f — %@", work, time, unit as NSString, perUnit,
                     Double(last.residentBytes) / Double(max(1, first.residentBytes)),
                     (perUnit > 1.5 ? "time grows faster than the work" : "time grows with the work (linear)") as NSString))
    }
}

/// VmRSS of a process (this one by default), in bytes; 0 if it cannot be read.
func residentBytes(ofProcess pid: Int32? = nil) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid.map(String.init) ?? "self")/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kb = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
    return kb * 1024
}
