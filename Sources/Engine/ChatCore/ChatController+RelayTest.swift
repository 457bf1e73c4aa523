import Agent
import ChannelProtocol
import ChatModel
import Foundation
import SwiftplexSQL
import GroupProtocol
import SwiftplexBase
import SwiftplexCrypto

// `/relay test <address>` (SimpleX's CLI; `x.grp.relay.test`, docs/channels.md §9 "Testing a
// chat relay"): before using a chat relay, an owner checks that its address answers and that
// whoever answers holds the address — the relay signs the owner's random challenge with its
// address link's root key, which the owner reads from the address's link data (SimpleX SUB
// `xGrpRelayTest`: only on the relay user's own address). The owner's contact request and the
// relay's answering connection are deleted once the answer is in; nothing else is kept but the
// registered relay's `tested`.

extension ChatController {
    /// How long the owner waits for a relay's answer to `x.grp.relay.test`.
    nonisolated static let relayTestTimeout: Duration = .seconds(20)

    /// `/relay test <address>` (the active user) or `/_relay test <userId> <address>`:
    /// `chatRelayTestResult {user, relayAddress, relayProfile?, testFailure?}`. An address that is
    /// no chat relay's is refused (`channelError` `invalidLink` / `notRelayAddress`); a test that
    /// fails says at which step (`resolve`, `connect`, `confirm`, `verify`).
    public func testChatRelay(userId: Int64?, address: String) async throws -> ChatResponse {
        let u: UserRow
        if let userId { u = try await user(userId) } else { u = try await activeUser() }
        guard let kind = SimplexLink.recognize(address)?.type else { throw ChatFailure(ChannelError(.invalidLink, "not a SimpleX link: \(address)")) }
        guard kind == .relay else { throw ChatFailure(ChannelError(.notRelayAddress, "a chat relay's address is a /r link")) }
        let short: ShortLink
        do { short = try ShortLink(parsing: address) } catch { throw ChatFailure(ChannelError(.invalidLink, "the relay address cannot be read: \(error)")) }
        try requireStarted()
        var profile: RelayProfile?
        func result(_ failure: RelayTestFailure?) async throws -> ChatResponse {
            let (uid, passed) = (u.id, failure == nil)
            try await dbWrite { db in
                _ = try ChatRelayRecord.filter(ChatRelayRecord.Columns.userId == uid && Column("address") == address).updateAll(db, Column("tested").set(to: passed))
            }
            if let failure { logger.info("a chat relay test failed", metadata: ["step": "\(failure.testStep)", "error": "\(failure.testError)"]) }
            return .channel(.chatRelayTestResult(ChatRelayTestResult(user: userModel(u), relayAddress: address, relayProfile: profile, testFailure: failure)))
        }
        let resolved: ResolvedShortLink
        do { resolved = try await agentCall { try await agent.resolveWithData(short) } } catch {
            return try await result(RelayTestFailure(testStep: "resolve", testError: "\(error)"))
        }
        guard case let .contact(full) = resolved.link, let root = resolved.rootKey else {
            return try await result(RelayTestFailure(testStep: "resolve", testError: "the address has no link data"))
        }
        if let data = resolved.data, let json = try? JSONValue.parse(utf8: data.userData, maxDepth: 8, maxBytes: 16_384) {
            profile = json["relayProfile"].flatMap { try? JSONValueDecoder().decode(RelayProfile.self, from: $0) }
        }
        let challenge = Sodium.randomBytes(32)
        let info = try GroupMessage.encode(ChannelMessage.relayTest(challenge: challenge, signature: nil).envelope(msgId: ChatMessage.newMessageId()), asConnInfo: true)
        channelRuntime.relayTestsInFlight += 1
        defer { channelRuntime.relayTestsInFlight -= 1 }
        let conn: Int64
        do { conn = try await agentCall { try await agent.joinAddress(full, info: info, autoAllow: false) } } catch {
            return try await result(RelayTestFailure(testStep: "connect", testError: "\(error)"))
        }
        let answer = await relayTestAnswer(conn, timeout: Self.relayTestTimeout)
        do { try await agent.deleteConnection(conn) } catch let e as AgentError where e.code == .unknownConnection {}
        guard let answer else {
            return try await result(RelayTestFailure(testStep: "confirm", testError: "no answer within \(Self.relayTestTimeout)"))
        }
        guard case let .relayTest(echoed, signature)? = try? answer.channelMessage(), echoed == challenge else {
            return try await result(RelayTestFailure(testStep: "confirm", testError: "the answer is not x.grp.relay.test with the challenge"))
        }
        guard let signature else { return try await result(RelayTestFailure(testStep: "verify", testError: "the relay did not sign the challenge")) }
        guard root.isValidSignature(signature, for: challenge) else {
            return try await result(RelayTestFailure(testStep: "verify", testError: "the signature does not verify with the address's key"))
        }
        return try await result(nil)
    }

    /// The relay's answer on the test connection `conn`, or nil after `timeout`.
    private func relayTestAnswer(_ conn: Int64, timeout: Duration) async -> GroupEnvelope? {
        if let early = channelRuntime.relayTestAnswers.removeValue(forKey: conn) { return early }
        return await withCheckedContinuation { (c: CheckedContinuation<GroupEnvelope?, Never>) in
            channelRuntime.relayTestWaiters[conn] = c
            Task { // on this actor
                try? await Task.sleep(for: timeout)
                self.finishRelayTest(conn, nil)
            }
        }
    }

    private func finishRelayTest(_ conn: Int64, _ answer: GroupEnvelope?) {
        if let waiter = channelRuntime.relayTestWaiters.removeValue(forKey: conn) {
            waiter.resume(returning: answer)
        } else if let answer, channelRuntime.relayTestsInFlight > 0 {
            channelRuntime.relayTestAnswers[conn] = answer // before the test waits for it
        }
    }

    /// A confirmation carrying `x.grp.relay.test` while a test runs: the relay's answer (no other
    /// connection expects one). True when it was taken.
    func takeRelayTestAnswer(_ event: AgentEvent) async throws -> Bool {
        guard channelRuntime.relayTestsInFlight > 0, case let .confirmation(conn, info) = event,
              let env = try? GroupMessage.decodeEnvelope(info, asConnInfo: true), env.event == ChannelMessage.Event.relayTest.rawValue,
              try await channelConnection(conn) == nil else { return false }
        finishRelayTest(conn, env)
        return true
    }

    // MARK: - The relay's side

    /// `x.grp.relay.test {challenge}` on a relay user's address: answered with the challenge
    /// signed by the address link's root key (`x.grp.relay.test {challenge, signature}`) as the
    /// accepting connection's info; that connection is then deleted. An address made before the
    /// key was kept answers unsigned (the owner's test fails at `verify`).
    func answerRelayTest(user u: UserRow, request: Int64, _ env: GroupEnvelope) async throws {
        guard case let .relayTest(challenge, nil)? = try? env.channelMessage() else {
            logger.info("a malformed relay test was refused")
            refusedRelayAddressRequests += 1
            try? await agent.rejectRequest(request)
            return
        }
        let uid = u.id
        let key = try await dbRead { db in try String.fetchOne(db, sql: "SELECT root_key FROM relay_address_key WHERE user_id = ?", arguments: [uid]) }
        let signature = try key.map { try Self.privateKey($0).signature(for: challenge) }
        let body = try GroupMessage.encode(ChannelMessage.relayTest(challenge: challenge, signature: signature).envelope(msgId: ChatMessage.newMessageId()),
                                           asConnInfo: true)
        let agent = self.agent
        inBackground {
            let conn = try await agent.acceptRequest(request, info: body)
            try await agent.deleteConnection(conn) // its outbox (the answer) is delivered first
        }
    }

    /// Keeps a relay address's link root key (`relay_address_key`, the 0600 chat database; never
    /// logged) so that the relay can prove it holds the address.
    nonisolated static func saveRelayAddressKey(_ db: Database, userId: Int64, _ key: Ed25519.PrivateKey) throws {
        try db.execute(sql: "DELETE FROM relay_address_key WHERE user_id = ?", arguments: [userId])
        try db.execute(sql: "INSERT INTO relay_address_key (user_id, root_key) VALUES (?, ?)", arguments: [userId, Base64URL.encode(key.secretBytes)])
    }
}
