/// The shape of every Swiftplex error: a closed `Code` to switch over and a message safe to log
/// (never key material or message contents). Equality and hashing use the code alone.
public protocol CodedError: Error, Hashable, CustomStringConvertible, Sendable {
    associatedtype Code: Hashable & Sendable
    var code: Code { get }
    var message: String { get }
}

extension CodedError {
    public var description: String { message }
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
