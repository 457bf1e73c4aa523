import Foundation
import Testing
@testable import HostConfig

/// `isolation_limits:` of a plugin entry (the bounds on an isolated child).
@Suite struct IsolationLimitsConfigTests {
    @Test func limitsAreReadAndOmittedOnesStayDefault() throws {
        let (c, _) = try load(minimal + """
            plugins:
              - name: iso
                path: auto-reply
                isolation: process
                isolation_limits:
                  max_frame_bytes: 1048576
                  max_concurrent_calls: 4
              - name: plain
                path: auto-reply
            """)
        #expect(c.plugins[0].isolationLimits == .init(maxFrameBytes: 1 << 20, maxConcurrentCalls: 4))
        #expect(c.plugins[1].isolationLimits == .init())
    }

    @Test func badLimitsAreReportedWithTheirPositions() throws {
        let p = try problems(minimal + """
            plugins:
              - name: iso
                path: auto-reply
                isolation_limits:
                  max_concurrent_calls: 0
                  max_frame_bytes: lots
                  max_calls: 3
            """)
        let base = minimal.split(separator: "\n", omittingEmptySubsequences: false).count - 1
        #expect(p.contains { $0.hasPrefix("\(base + 5):") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("\(base + 6):") && $0.contains("lots") }, "\(p)")
        #expect(p.contains { $0.hasPrefix("\(base + 7):") && $0.contains("max_calls") }, "\(p)")
    }
}
