import Foundation
import NIOPosix
import RelayClient
import RelayProtocol
import RelayServer
import SwiftplexCrypto
import Testing
@testable import Agent

/// Contact queues that no stranger can secure, end to end, and private relays as an agent sees them.
@Suite(.timeLimit(.minutes(2))) struct AddressSecurityTests {
    /// A stranger reads the sender ID from a live address link and SKEYs it; requests still
    /// arrive and are accepted.
    @Test func aStrangersSKEYCannotDisableALiveAddress() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        try await withTestRelay(dir.url) { relay in
            try await withAgent(dir.url.appendingPathComponent("bot_agent.db"), relay: relay.address) { bot, botInbox in
                try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: relay.address) { bob, bobInbox in
                    let (address, link) = try await bot.createAddress()
                    guard case let .contact(contact) = try AgentLink(parsing: link.description) else {
                        Issue.record("not a contact link")
                        return
                    }
                    // The attack, from a connection of its own, with the sender ID from the public link.
                    let stranger = try await RelayConnection.connect(to: contact.queue.relay)
                    await #expect(throws: RelayClientError.relay(.auth)) {
                        try await stranger.secureAsSender(senderId: contact.queue.senderId, senderKey: .newX25519())
                    }
                    await #expect(throws: RelayClientError.relay(.auth)) {
                        try await stranger.secureAsSender(senderId: contact.queue.senderId, senderKey: .newEd25519())
                    }
                    await stranger.close()

                    let bobConn = try await bob.joinAddress(contact, info: "bob".bytes)
                    let request = try await botInbox.next("bob's request") {
                        if case let .contactRequest(a, r, info) = $0, a == address, info == "bob".bytes { r } else { nil }
                    }
                    let botConn = try await bot.acceptRequest(request, info: "bot".bytes)
                    #expect(try await bobInbox.next("bob connected") { if case let .connected(c, info) = $0, c == bobConn { info } else { nil } } == "bot".bytes)
                    #expect(try await botInbox.next("bot connected") { if case let .connected(c, info) = $0, c == botConn { info } else { nil } } == "bob".bytes)
                    try await bob.send(bobConn, "hello".bytes)
                    #expect(try await botInbox.message().body == "hello".bytes)
                }
            }
        }
    }

    /// An agent whose relay address carries the password creates queues on a private relay; the
    /// links it gives out do not carry the password; without the password nothing is created.
    @Test func anAgentUsesThePasswordInItsRelayAddress() async throws {
        let dir = TempDir()
        defer { dir.cleanup() }
        var config = RelayConfiguration(dataDirectory: dir.url.appendingPathComponent("relay"), host: "127.0.0.1", port: 0)
        config.newQueuePassword = "agent-pw"
        let relay = try await RelayServer.start(configuration: config, group: MultiThreadedEventLoopGroup.singleton, logger: quietLogger)
        do {
            #expect(relay.address.password == "agent-pw")
            try await withAgent(dir.url.appendingPathComponent("alice_agent.db"), relay: relay.address) { alice, aliceInbox in
                try await withAgent(dir.url.appendingPathComponent("bob_agent.db"), relay: relay.address) { bob, bobInbox in
                    let (_, address) = try await alice.createAddress()
                    let (aliceConn, invitation) = try await alice.createInvitation()
                    #expect(!address.description.contains("agent-pw"))
                    #expect(!invitation.description.contains("agent-pw"))
                    let bobConn = try await bob.join(try InvitationLink(parsing: invitation.description), info: "bob".bytes)
                    _ = try await aliceInbox.next("confirmation") { if case let .confirmation(c, _) = $0, c == aliceConn { c } else { nil } }
                    try await alice.allow(aliceConn, info: "alice".bytes)
                    _ = try await bobInbox.next("bob connected") { if case let .connected(c, _) = $0, c == bobConn { c } else { nil } }
                }
            }
            try await withAgent(dir.url.appendingPathComponent("eve_agent.db"), relay: relay.address.withoutPassword) { eve, _ in
                await #expect(throws: (any Error).self) { _ = try await eve.createInvitation() }
                await #expect(throws: (any Error).self) { _ = try await eve.createAddress() }
            }
            #expect(relay.stats.queues == 3)
        } catch {
            await relay.shutdown()
            throw error
        }
        await relay.shutdown()
    }
}
