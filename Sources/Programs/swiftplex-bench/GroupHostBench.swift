import Foundation
import GroupProtocol
import SwiftplexBase

/// `swiftplex-bench group --host-only`: the host's group machine alone. For each size N it builds
/// the state a host has after inviting N-1 members one after another — an introduction for every
/// pair, all connected except those of the last `pending` members, which the host still forwards
/// for — and times `handle(.received(…))` for messages from an old member and from a newcomer.
/// Each size's time per message is printed as a ratio to the first size's, measured in the same
/// run: a machine that scanned every introduction per message would grow with N², one that
/// follows only the introductions still in progress stays flat for an old member's message, and
/// for a newcomer's (forwarded to each of the N−1 others) grows with the forwards alone — its time
/// per forward stays flat.
struct GroupHostBench {
    var sizes: [Int]
    var messages: Int
    var pending: Int
    var warmup: Int

    struct Row {
        var n: Int
        var introductions: Int
        var oldMemberMicros: Double
        var newcomerMicros: Double
        var forwardsPerNewcomerMessage: Int
    }

    func run() throws {
        #if DEBUG
        print("warning: debug build; figures mean little (use: swift build -c release)")
        #endif
        print("group host benchmark: the host's machine only, \(messages) received messages per sender kind after \(warmup) warm-up, \(pending) members still being introduced")
        var rows: [Row] = []
        for n in sizes { rows.append(try measure(n)) }
        let base = rows[0]
        func perForward(_ r: Row) -> Double { r.newcomerMicros / Double(max(r.forwardsPerNewcomerMessage, 1)) }
        print("    N   introductions   µs/msg old member   ratio   µs/msg newcomer   ratio   forwards per newcomer message   µs/forward   ratio")
        for r in rows {
            print(String(format: "%5d  %14d  %18.2f  %6.2f  %16.2f  %6.2f  %30d  %11.3f  %6.2f", r.n, r.introductions, r.oldMemberMicros,
                         r.oldMemberMicros / base.oldMemberMicros, r.newcomerMicros, r.newcomerMicros / base.newcomerMicros,
                         r.forwardsPerNewcomerMessage, perForward(r), perForward(r) / perForward(base)))
        }
        if let last = rows.last, rows.count > 1 {
            let growth = Double(last.n) / Double(base.n)
            // Scanning every introduction per message would make both of these grow with N.
            let worst = max(last.oldMemberMicros / base.oldMemberMicros, perForward(last) / perForward(base))
            print(String(format: "N grew %.0f×, N² %.0f×; the time of an old member's message and of one forward of a newcomer's grew at most %.2f×: ",
                         growth, growth * growth, worst)
                  + (worst < growth ? "below linear growth, not with N² (goal): met" : "NOT below linear growth"))
        }
    }

    private func id(_ i: Int) -> MemberId { MemberId(String(format: "m%07d", i))! }

    private func measure(_ n: Int) throws -> Row {
        let host = id(0)
        let settled = n - 1 - pending
        var members: [GroupMemberState] = []
        var intros: [Introduction] = []
        for i in 1..<n {
            members.append(GroupMemberState(memberId: id(i), role: .member, status: .connected, category: .invitee,
                                            profile: MemberProfile(displayName: "member \(i)"), invitedBy: host))
            // Member i was introduced to every member before it.
            for j in 1..<i {
                intros.append(Introduction(key: Introduction.Key(re: id(j), to: id(i)), status: i > settled ? .invitationForwarded : .connected))
            }
        }
        let me = GroupMemberState(memberId: host, role: .owner, status: .creator, category: .user, profile: MemberProfile(displayName: "host"))
        var state = GroupState(membership: me, profile: GroupProfile(displayName: "bench"), members: members, introductions: intros)
        var counter = 0
        func message(_ text: String) -> GroupEnvelope {
            counter += 1
            return GroupEnvelope(msgId: "b\(counter)", event: "x.msg.new", params: ["content": ["type": "text", "text": .string(text)]])
        }
        var forwards = 0
        func time(from sender: MemberId, count: Int) throws -> Double {
            let clock = ContinuousClock()
            let start = clock.now
            for _ in 0..<count {
                let effects = try state.handle(.received(from: sender, message("hello"), brokerTs: "2026-12-03T00:00:00Z"), newMessageId: { "f" })
                forwards = effects.reduce(0) { if case .send = $1 { $0 + 1 } else { $0 } }
            }
            let d = clock.now - start
            return (Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12) / Double(count)
        }
        let old = id(1), newcomer = id(n - 1)
        _ = try time(from: old, count: warmup)
        _ = try time(from: newcomer, count: warmup)
        let oldMicros = try time(from: old, count: messages)
        let newMicros = try time(from: newcomer, count: messages)
        return Row(n: n, introductions: intros.count, oldMemberMicros: oldMicros, newcomerMicros: newMicros, forwardsPerNewcomerMessage: forwards)
    }
}
