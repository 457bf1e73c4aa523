/// Errors a relay sends in `ERR` responses. The set is closed: clients can switch over it.
///
/// `auth` is deliberately the single answer for "no such queue", "wrong key" and "queue disabled",
/// so a relay reveals nothing about which queues exist.
public enum RelayErrorCode: String, Sendable, Hashable, CaseIterable, Error {
    /// The block could not be parsed (bad framing, too many transmissions).
    case block = "BLOCK"
    /// The transmission's session or protocol version is wrong.
    case session = "SESSION"
    /// The command could not be parsed.
    case syntax = "CMD SYNTAX"
    /// The command is not allowed here (e.g. GET on a subscribed queue, SKEY on a secured queue).
    case prohibited = "CMD PROHIBITED"
    /// The command must be signed but was not.
    case noAuth = "CMD NO_AUTH"
    /// The command must not be signed but was.
    case hasAuth = "CMD HAS_AUTH"
    /// The command needs an entity ID but has none (or has one it must not).
    case noEntity = "CMD NO_ENTITY"
    /// Authorisation failed, or the queue does not exist. Returned in constant time.
    case auth = "AUTH"
    /// The queue holds its maximum number of messages.
    case quota = "QUOTA"
    /// No message to deliver or acknowledge.
    case noMessage = "NO_MSG"
    /// The message or link data is larger than the protocol allows.
    case largeMessage = "LARGE_MSG"
    /// The relay failed internally; the command had no effect.
    case `internal` = "INTERNAL"
    /// The relay is shutting down or overloaded; try again later.
    case unavailable = "UNAVAILABLE"
}
