import Testing
@testable import Agent

/// The connection state machine alone (no relay, no keys, no database): every role, status and
/// input, the transitions it makes and the ones it refuses.
@Suite struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine

    static let roles: [Machine.Role] = [.inviter, .joiner]
    static let statuses: [Machine.Status] = [.pending, .confirmed, .accepted, .connected]
    static let inputs: [Machine.Input] = [.received(.confirmation), .received(.message), .allow, .send]

    /// Every transition there is; anything else is refused.
    static let transitions: [(Machine.Role, Machine.Status, Machine.Input, Machine.Step, Machine.Status)] = [
        (.inviter, .pending, .received(.confirmation), .acceptConfirmation, .confirmed),
        (.inviter, .confirmed, .allow, .answerJoiner, .accepted),
        (.inviter, .accepted, .received(.message), .completeAccept, .connected),
        (.inviter, .connected, .received(.message), .receiveMessage, .connected),
        (.inviter, .connected, .send, .sendMessage, .connected),
        (.joiner, .pending, .received(.confirmation), .completeJoin, .connected),
        (.joiner, .connected, .received(.message), .receiveMessage, .connected),
        (.joiner, .connected, .send, .sendMessage, .connected),
    ]

    @Test func everyStateAndInputGivesItsTransitionOrARefusal() {
        var advanced = 0, refused = 0
        for role in Self.roles {
            for status in Self.statuses {
                for input in Self.inputs {
                    let decision = Machine(role: role, status: status).decide(input)
                    if let t = Self.transitions.first(where: { $0.0 == role && $0.1 == status && $0.2 == input }) {
                        #expect(decision == .advance(t.3, to: t.4), "\(role) \(status) \(input)")
                        advanced += 1
                    } else {
                        #expect(decision == .refuse, "\(role) \(status) \(input)")
                        refused += 1
                    }
                }
            }
        }
        #expect(advanced == Self.transitions.count)
        #expect(refused == 2 * 4 * 4 - Self.transitions.count)
    }

    @Test func theInvitersHandshakeRunsPendingConfirmedAcceptedConnected() {
        var m = Machine(role: .inviter, status: .pending)
        for (input, step) in [(Machine.Input.received(.confirmation), Machine.Step.acceptConfirmation),
                              (.allow, .answerJoiner), (.received(.message), .completeAccept)] {
            guard case let .advance(taken, next) = m.decide(input) else {
                Issue.record("\(input) refused in \(m.status)")
                return
            }
            #expect(taken == step)
            m.status = next
        }
        #expect(m.status == .connected)
    }

    @Test func theJoinerIsConnectedByTheInvitersConfirmation() {
        let m = Machine(role: .joiner, status: .pending)
        #expect(m.decide(.received(.confirmation)) == .advance(.completeJoin, to: .connected))
    }

    @Test func nothingIsSentAndNoJoinerIsAllowedBeforeTheirTime() {
        for role in Self.roles {
            for status: Machine.Status in [.pending, .confirmed, .accepted] {
                #expect(Machine(role: role, status: status).decide(.send) == .refuse)
            }
        }
        // Allowing twice, too early, or as the joiner.
        #expect(Machine(role: .inviter, status: .accepted).decide(.allow) == .refuse)
        #expect(Machine(role: .inviter, status: .pending).decide(.allow) == .refuse)
        #expect(Machine(role: .joiner, status: .confirmed).decide(.allow) == .refuse)
        // A second confirmation once past pending, and messages before the handshake is done.
        #expect(Machine(role: .inviter, status: .confirmed).decide(.received(.confirmation)) == .refuse)
        #expect(Machine(role: .joiner, status: .connected).decide(.received(.confirmation)) == .refuse)
        #expect(Machine(role: .inviter, status: .pending).decide(.received(.message)) == .refuse)
        #expect(Machine(role: .inviter, status: .confirmed).decide(.received(.message)) == .refuse)
        #expect(Machine(role: .joiner, status: .pending).decide(.received(.message)) == .refuse)
    }
}
