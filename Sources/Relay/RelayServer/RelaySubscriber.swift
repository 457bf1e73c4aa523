import RelayProtocol

/// A connection as the relay core sees it: something that can receive server-initiated
/// transmissions (`MSG`, `END`). Implemented by ``RelayConnectionHandler``'s session.
protocol RelaySubscriber: AnyObject, Sendable {
    var connectionId: UInt64 { get }
    func push(_ response: ServerResponse, entityId: [UInt8])
}
