import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import RelayProtocol
@testable import RelayServer
import SwiftplexCrypto
import TestSupport
import Testing

/// The relay's connection handler without a network, as swift-nio tests its own
/// handlers: blocks written in, blocks read out of a `NIOAsyncTestingChannel`, whose loop also runs
/// the core's answers (they come from the store's thread) over a real store in a temporary
/// directory. The loop's clock is moved by hand, so timeouts and rates are tested without waiting.
@Suite(.timeLimit(.minutes(1))) struct RelayConnectionHandlerTests {
    /// Counts the reads the handler lets through to the socket (it sits in front of the handler).
    final class ReadCounter: ChannelOutboundHandler, Sendable {
        typealias OutboundIn = ByteBuffer
        let reads = NIOLockedValueBox(0)
        func read(context: ChannelHandlerContext) {
            reads.withLockedValue { $0 += 1 }
            context.read()
        }
    }

    /// One connection: the channel, the client's view of its session, the relay core behind it.
    struct Connection {
        let channel: NIOAsyncTestingChannel
        let core: RelayCore
        let reads: ReadCounter
        let directory: TempDirectory
        var session: SessionKeys?

        static func open(configure: (inout RelayConfiguration) -> Void = { _ in }) async throws -> Connection {
            let directory = TempDirectory()
            var config = RelayConfiguration(dataDirectory: directory.url, host: "127.0.0.1", port: 0)
            // The loop's clock only moves by hand here: no slices that wait for it.
            config.unprovenSliceNanoseconds = .max
            configure(&config)
            let store = try RelayStore(path: directory.appendingPathComponent("relay.db"))
            let core = try RelayCore(store: store, configuration: config, logger: testLogger)
            try await core.load()
            let reads = ReadCounter()
            let configuration = config
            let channel = try await NIOAsyncTestingChannel { channel in
                try channel.pipeline.syncOperations.addHandler(reads)
                try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(BlockDecoder()))
                try channel.pipeline.syncOperations.addHandler(RelayConnectionHandler(core: core, configuration: configuration, logger: testLogger))
            }
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 5223)).get()
            return Connection(channel: channel, core: core, reads: reads, directory: directory)
        }

        /// Reads the relay's hello and answers it.
        mutating func hello() async throws -> ServerHello {
            let block = try await channel.waitForOutboundWrite(as: ByteBuffer.self)
            #expect(block.readableBytes == RelayLimits.blockSize)
            let parts = try BlockCodec.decode(block)
            let hello = try ServerHello.decode(try #require(parts.first))
            session = SessionKeys(sessionId: hello.sessionId, relaySessionKey: hello.sessionKey)
            try await channel.writeInbound(BlockCodec.encode([ClientHello(version: RelayLimits.currentVersion).encoded()], allocator: channel.allocator)[0])
            return hello
        }

        func transmission(_ command: ClientCommand, entityId: [UInt8] = [], key: AuthPrivateKey? = nil) throws -> Transmission {
            Transmission.signed(command: command.encoded(), correlationId: Sodium.randomBytes(24), entityId: entityId, key: key,
                                session: try #require(session))
        }

        func write(_ transmissions: [Transmission]) async throws {
            for block in BlockCodec.encode(transmissions.map { $0.encoded(allocator: channel.allocator) }, allocator: channel.allocator) {
                try await channel.writeInbound(block)
            }
        }

        /// The transmissions of the next block the relay writes.
        func nextBlock() async throws -> [(correlationId: [UInt8], entityId: [UInt8], response: ServerResponse)] {
            let block = try await channel.waitForOutboundWrite(as: ByteBuffer.self)
            #expect(block.readableBytes == RelayLimits.blockSize)
            return try BlockCodec.decode(block).map { part in
                let t = try Transmission.decode(part)
                return (t.correlationId, t.entityId, try ServerResponse.decode(t.command))
            }
        }

        /// The answer to `t`, skipping anything else the relay writes meanwhile.
        func answer(to t: Transmission) async throws -> ServerResponse {
            while true {
                if let r = try await nextBlock().first(where: { $0.correlationId == t.correlationId }) { return r.response }
            }
        }

        /// Asks the handler to read; true if it let the read through.
        func readAttempt() async throws -> Bool {
            let before = reads.reads.withLockedValue { $0 }
            let channel = self.channel
            try await channel.testingEventLoop.executeInContext { channel.read() }
            return reads.reads.withLockedValue { $0 } > before
        }

        func close() async {
            _ = try? await channel.finish(acceptAlreadyClosed: true)
            try? await core.store.closeStore()
            directory.cleanup()
        }
    }

    @Test func theRelaySaysHelloAndAnswersEachCommandWithItsCorrelationIdInOneBlock() async throws {
        var c = try await Connection.open()
        let hello = try await c.hello()
        #expect(hello.sessionId.count == RelayLimits.sessionIdLength)
        let ping = try c.transmission(.ping)
        let unsignedSub = try c.transmission(.subscribe, entityId: Sodium.randomBytes(24))
        let signedPing = Transmission(signature: Sodium.randomBytes(64), correlationId: Sodium.randomBytes(24), entityId: [],
                                      command: ClientCommand.ping.encoded())
        let subWithoutEntity = try c.transmission(.subscribe, key: .newEd25519())
        try await c.write([ping, unsignedSub, signedPing, subWithoutEntity])
        // Everything answered in the same tick shares one block, in order.
        let block = try await c.nextBlock()
        #expect(block.map(\.correlationId) == [ping, unsignedSub, signedPing, subWithoutEntity].map(\.correlationId))
        #expect(block.map(\.response) == [.pong, .error(.noAuth), .error(.hasAuth), .error(.noEntity)])
        #expect(block[1].entityId == unsignedSub.entityId)
        #expect(c.channel.isActive)
        await c.close()
    }

    @Test func aQueueIsCreatedAndAMessageSentIsPushedToItsSubscriber() async throws {
        var c = try await Connection.open()
        _ = try await c.hello()
        let recipientKey = AuthPrivateKey.newX25519()
        let dh = X25519.PrivateKey()
        let new = try c.transmission(.new(recipientKey: recipientKey.publicKey, recipientDhKey: dh.publicKey), key: recipientKey)
        try await c.write([new])
        guard case let .ids(rid, sid, _) = try await c.answer(to: new) else { Issue.record("NEW not answered IDS"); return }
        let sub = try c.transmission(.subscribe, entityId: rid, key: recipientKey)
        try await c.write([sub])
        #expect(try await c.answer(to: sub) == .ok)
        let send = try c.transmission(.send(flags: [], body: [1, 2, 3]), entityId: sid)
        try await c.write([send])
        // The OK and the pushed MSG (empty correlation ID, the recipient ID as entity).
        var sawOK = false
        var pushed: [UInt8]?
        while !sawOK || pushed == nil {
            for r in try await c.nextBlock() {
                if r.correlationId == send.correlationId { #expect(r.response == .ok); sawOK = true }
                if case let .message(id, _) = r.response {
                    #expect(r.correlationId.isEmpty)
                    #expect(r.entityId == rid)
                    pushed = id
                }
            }
        }
        let ack = try c.transmission(.ack(messageId: try #require(pushed)), entityId: rid, key: recipientKey)
        try await c.write([ack])
        #expect(try await c.answer(to: ack) == .ok)
        #expect(c.core.stats.messagesDelivered == 1)
        await c.close()
    }

    @Test func aBadHelloClosesTheConnection() async throws {
        let c = try await Connection.open()
        _ = try await c.channel.waitForOutboundWrite(as: ByteBuffer.self)
        try await c.channel.writeInbound(BlockCodec.encode([ClientHello(version: 999).encoded()], allocator: c.channel.allocator)[0])
        try await c.channel.closeFuture.get()
        await c.close()
    }

    @Test func aBlockWhoseFramingLiesIsAnsweredBlockThenClosed() async throws {
        var c = try await Connection.open()
        _ = try await c.hello()
        var block = c.channel.allocator.buffer(repeating: 0, count: RelayLimits.blockSize)
        block.setInteger(UInt16(RelayLimits.blockSize), at: 0)
        try await c.channel.writeInbound(block)
        #expect(try await c.nextBlock().map(\.response) == [.error(.block)])
        try await c.channel.closeFuture.get()
        await c.close()
    }

    @Test func tooManyAuthorisedTransmissionsInABlockAreRefusedBeforeAnySignatureIsChecked() async throws {
        var c = try await Connection.open()
        _ = try await c.hello()
        let signed = (0...RelayLimits.maxAuthorizedPerBlock).map { _ in
            Transmission(signature: Sodium.randomBytes(64), correlationId: Sodium.randomBytes(24), entityId: Sodium.randomBytes(24),
                         command: ClientCommand.subscribe.encoded())
        }
        try await c.write(signed)
        #expect(try await c.nextBlock().map(\.response) == [.error(.block)])
        try await c.channel.closeFuture.get()
        #expect(c.core.stats.authFailures == 0)
        await c.close()
    }

    @Test func withoutAHelloTheConnectionIsClosedAtTheHandshakeTimeout() async throws {
        let c = try await Connection.open { $0.handshakeTimeout = .seconds(10) }
        _ = try await c.channel.waitForOutboundWrite(as: ByteBuffer.self)
        await c.channel.testingEventLoop.advanceTime(by: .seconds(9))
        #expect(c.channel.isActive)
        await c.channel.testingEventLoop.advanceTime(by: .seconds(1))
        try await c.channel.closeFuture.get()
        await c.close()
    }

    @Test func anIdleConnectionIsClosedAndAnActiveOneIsNot() async throws {
        var c = try await Connection.open { $0.idleTimeout = .seconds(60) }
        _ = try await c.hello()
        await c.channel.testingEventLoop.advanceTime(by: .seconds(45))
        let ping = try c.transmission(.ping)
        try await c.write([ping])
        #expect(try await c.answer(to: ping) == .pong)
        // 60 s after the PING (not after the hello) it is idle.
        await c.channel.testingEventLoop.advanceTime(by: .seconds(45))
        #expect(c.channel.isActive)
        await c.channel.testingEventLoop.advanceTime(by: .seconds(30))
        try await c.channel.closeFuture.get()
        await c.close()
    }

    /// PONGs the relay has written so far (without waiting: runs the loop's pending tasks first).
    private func pongsWritten(_ c: Connection) async throws -> Int {
        try await c.channel.testingEventLoop.executeInContext {}
        var n = 0
        while let block = try await c.channel.readOutbound(as: ByteBuffer.self) {
            n += try BlockCodec.decode(block).filter { try ServerResponse.decode(Transmission.decode($0).command) == .pong }.count
        }
        return n
    }

    @Test func overItsCommandRateTheConnectionIsNotReadUntilItsBucketRefills() async throws {
        var c = try await Connection.open { $0.commandRate = RateLimit(perSecond: 100, burst: 100) }
        _ = try await c.hello()
        #expect(try await c.readAttempt())
        // 200 PINGs in one block against a burst of 100: the budget is checked after each
        // transmission, so the 101st overdraws it and the other 99 wait in the connection's inbox.
        let pings = try (0..<200).map { _ in try c.transmission(.ping) }
        try await c.write(pings)
        var answered = 0
        while answered < 101 { answered += try await c.nextBlock().filter { $0.response == .pong }.count }
        #expect(answered == 101)
        #expect(try await pongsWritten(c) == 0)
        #expect(c.core.stats.throttled == 1)
        // Nothing more is read from the socket while they wait.
        let before = c.reads.reads.withLockedValue { $0 }
        #expect(try await c.readAttempt() == false)
        // The rest go out as the bucket refills (one per 10 ms at 100/s), then reading resumes by itself.
        await c.channel.testingEventLoop.advanceTime(by: .milliseconds(500))
        answered += try await pongsWritten(c)
        #expect(answered > 101 && answered < 200)
        #expect(c.reads.reads.withLockedValue { $0 } == before)
        await c.channel.testingEventLoop.advanceTime(by: .milliseconds(600))
        answered += try await pongsWritten(c)
        #expect(answered == 200)
        #expect(c.reads.reads.withLockedValue { $0 } == before + 1)
        #expect(try await c.readAttempt())
        await c.close()
    }

    @Test func aBlockOfBadSignaturesCostsOnlyTheChecksItsAuthBudgetAllowsAtOnce() async throws {
        var c = try await Connection.open {
            $0.authFailureRate = RateLimit(perSecond: 2, burst: 2)
            $0.maxAuthFailures = 1000
        }
        _ = try await c.hello()
        // 10 badly signed SUBs in one block against 2 AUTHs/s with a burst of 2: the third AUTH
        // overdraws the budget, and the seven behind it are not even checked until it refills.
        let subs = (0..<10).map { _ in
            Transmission(signature: Sodium.randomBytes(64), correlationId: Sodium.randomBytes(24), entityId: Sodium.randomBytes(24),
                         command: ClientCommand.subscribe.encoded())
        }
        try await c.write(subs)
        var answers: [[UInt8]] = []
        while answers.count < 3 { answers += try await c.nextBlock().filter { $0.response == .error(.auth) }.map(\.correlationId) }
        try await c.channel.testingEventLoop.executeInContext {}
        #expect(try await c.channel.readOutbound(as: ByteBuffer.self) == nil)
        #expect(c.core.stats.authFailures == 3)
        #expect(c.core.stats.throttled == 1)
        #expect(try await c.readAttempt() == false)
        // One more every half second of the loop's time, in order; all ten after 3.5 s.
        await c.channel.testingEventLoop.advanceTime(by: .milliseconds(501))
        #expect(c.core.stats.authFailures == 4)
        await c.channel.testingEventLoop.advanceTime(by: .seconds(3))
        #expect(c.core.stats.authFailures == 10)
        while answers.count < 10 { answers += try await c.nextBlock().filter { $0.response == .error(.auth) }.map(\.correlationId) }
        #expect(answers == subs.map(\.correlationId))
        #expect(c.channel.isActive)
        await c.close()
    }
}
