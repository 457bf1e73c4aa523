import Foundation
import SwiftplexBase
import Logging
import NIOPosix
import RelayProtocol
import SwiftplexCrypto
import RelayServer
import TestSupport
import Testing
@testable import Agent

/// The agent suites' name for the shared temporary directory (created 0700, removed by `cleanup()`).
typealias TempDir = TemporaryDirectory

var quietLogger: Logger {
    var l = Logger(label: "agent-test")
    l.logLevel = .critical
    return l
}

/// An agent's events, awaited as they arrive (an `AsyncInbox` over `agent.events`).
final class AgentInbox: Sendable {
    let events: AsyncInbox<AgentEvent>

    init(_ agent: Agent) {
        events = AsyncInbox(agent.events)
    }

    /// Waits for the first event matching `predicate` (earlier non-matching ones are kept).
    func next<T: Sendable>(timeout: Duration = .seconds(15), _ what: String = "event", _ match: @escaping @Sendable (AgentEvent) -> T?) async throws -> T {
        try await events.first(what, timeout: timeout, match)
    }

    func message(timeout: Duration = .seconds(15)) async throws -> (seq: UInt64, body: [UInt8], integrity: MessageIntegrity) {
        try await next(timeout: timeout, "message") { if case let .message(_, seq, body, integrity) = $0 { (seq, body, integrity) } else { nil } }
    }
}

/// Runs `body` with an in-process relay whose data lives in `directory`.
func withTestRelay<T>(_ directory: URL, _ body: (RelayServer) async throws -> T) async throws -> T {
    let config = RelayConfiguration(dataDirectory: directory.appendingPathComponent("relay"), host: "127.0.0.1", port: 0)
    let relay = try await RelayServer.start(configuration: config, group: MultiThreadedEventLoopGroup.singleton, logger: quietLogger)
    do {
        let r = try await body(relay)
        await relay.shutdown()
        return r
    } catch {
        await relay.shutdown()
        throw error
    }
}

/// Runs an agent (its `run()` in a child task) for the duration of `body`, then stops it.
@discardableResult
func withAgent<T: Sendable>(_ path: URL, relay: RelayAddress, options: AgentOptions = AgentOptions(),
                            _ body: (Agent, AgentInbox) async throws -> T) async throws -> T {
    // Opening the database blocks: on a thread of its own (docs/architecture.md, "Blocking work").
    let agent = try await Blocking.run("agent-open") { try Agent(databasePath: path, relays: [relay], logger: quietLogger, options: options) }
    let inbox = AgentInbox(agent)
    return try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try? await agent.run() }
        defer { group.cancelAll() }
        return try await body(agent, inbox)
    }
}

/// Alice invites, Bob joins, Alice allows; both connected. Returns (alice's connection, bob's).
@discardableResult
func connect(_ alice: Agent, _ aliceInbox: AgentInbox, _ bob: Agent, _ bobInbox: AgentInbox) async throws -> (Int64, Int64) {
    let (aliceConn, link) = try await alice.createInvitation()
    let parsed = try InvitationLink(parsing: link.description)
    let bobConn = try await bob.join(parsed, info: "bob".bytes)
    let info = try await aliceInbox.next("confirmation") { if case let .confirmation(c, info) = $0, c == aliceConn { info } else { nil } }
    #expect(info == "bob".bytes)
    try await alice.allow(aliceConn, info: "alice".bytes)
    let bobSees = try await bobInbox.next("bob connected") { if case let .connected(c, info) = $0, c == bobConn { info } else { nil } }
    #expect(bobSees == "alice".bytes)
    let aliceSees = try await aliceInbox.next("alice connected") { if case let .connected(c, info) = $0, c == aliceConn { info } else { nil } }
    #expect(aliceSees == "bob".bytes)
    return (aliceConn, bobConn)
}

extension String {
    var bytes: [UInt8] { Array(utf8) }
}

extension SilentListener {
    /// A relay address at the silent listener (any fingerprint: the handshake never gets that far).
    var address: RelayAddress { RelayAddress(fingerprint: Array(repeating: 7, count: 32), host: "127.0.0.1", port: port) }
}

/// An invitation link whose queue is on `relay`, as a peer could send in a contact request.
func invitation(on relay: RelayAddress) -> InvitationLink {
    InvitationLink(queue: QueueURI(relay: relay, senderId: Array(repeating: 1, count: 24), recipientDhKey: X25519.PrivateKey().publicKey),
                   keys: X3DH.PrivateKeys().publicKeys)
}
