/// A connection's life — handshake, then messages — as a pure state machine: its role and
/// status plus an input give the step to take and the status after it, or a refusal. No I/O and
/// no keys: the agent performs the step (the cryptography, the relay calls, the storage) and
/// commits the new status together with its results (`process`, `allow`, `sendKeyed`).
///
/// ```
/// inviter: pending ─confirmation→ confirmed ─allow→ accepted ─hello (message)→ connected
/// joiner:  pending ─inviter's confirmation→ connected
/// connected: message → connected (received); send → connected
/// ```
struct ConnectionStateMachine: Equatable, Sendable {
    typealias Role = ConnectionRecord.Role
    typealias Status = ConnectionRecord.Status

    var role: Role
    var status: Status

    init(role: Role, status: Status) {
        self.role = role
        self.status = status
    }

    init(_ record: ConnectionRecord) {
        self.init(role: record.role, status: record.status)
    }

    enum Input: Equatable, Sendable {
        /// An envelope of this kind arrived on the connection's receiving queue.
        case received(Envelope.Kind)
        /// The user accepts the confirmed joiner.
        case allow
        /// A message (numbered, or an agent control message such as a receipt) is to be sent.
        case send
    }

    enum Step: Equatable, Sendable {
        /// Inviter: the joiner's confirmation — derive the ratchet from its X3DH keys, learn its
        /// reply queue and info; report `confirmation`.
        case acceptConfirmation
        /// Inviter: secure the joiner's reply queue and send our info in a confirmation.
        case answerJoiner
        /// Joiner: the inviter's confirmation — take its info, answer `hello`; report `connected`.
        case completeJoin
        /// Inviter: the joiner's `hello`; report `connected`.
        case completeAccept
        /// Connected: a numbered message or a receipt.
        case receiveMessage
        /// Connected: encrypt and queue a message.
        case sendMessage
    }

    enum Decision: Equatable, Sendable {
        /// Take `step`; the connection is in `status` once its results are committed.
        case advance(Step, to: Status)
        /// The input does not fit the connection's state; nothing changes.
        case refuse
    }

    /// What `input` calls for in this state.
    func decide(_ input: Input) -> Decision {
        switch (role, status, input) {
        case (.inviter, .pending, .received(.confirmation)): .advance(.acceptConfirmation, to: .confirmed)
        case (.joiner, .pending, .received(.confirmation)): .advance(.completeJoin, to: .connected)
        case (.inviter, .accepted, .received(.message)): .advance(.completeAccept, to: .connected)
        case (_, .connected, .received(.message)): .advance(.receiveMessage, to: .connected)
        case (.inviter, .confirmed, .allow): .advance(.answerJoiner, to: .accepted)
        case (_, .connected, .send): .advance(.sendMessage, to: .connected)
        default: .refuse
        }
    }
}
