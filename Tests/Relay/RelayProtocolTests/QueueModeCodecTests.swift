import NIOCore
import SwiftplexCrypto
import Testing
@testable import RelayProtocol

/// `NEW` carries the queue mode and the relay's queue-creation password; relay
/// addresses carry the password, queue URIs never do.
@Suite struct QueueModeCodecTests {
    let fp = Base64URL.encode([UInt8](repeating: 7, count: 32))
    let key = AuthPublicKey.ed25519(Ed25519.PrivateKey().publicKey)
    let dh = X25519.PrivateKey().publicKey

    @Test func newCarriesModeAndPassword() throws {
        for mode in QueueMode.allCases {
            for password in [nil, Array("s3cret".utf8)] {
                let c = ClientCommand.new(recipientKey: key, recipientDhKey: dh, mode: mode, password: password)
                #expect(try ClientCommand.decode(c.encoded()) == c)
            }
        }
    }

    @Test func aBareNewIsAMessagingQueueWithoutPassword() throws {
        var b = ByteBufferAllocator().buffer(string: "NEW ")
        b.writeShortBytes(key.wireBytes)
        b.writeShortBytes(dh.bytes)
        #expect(try ClientCommand.decode(b) == .new(recipientKey: key, recipientDhKey: dh, mode: .messaging, password: nil))
    }

    @Test func unknownModesAndEmptyPasswordsAreSyntaxErrors() throws {
        var b = ByteBufferAllocator().buffer(string: "NEW ")
        b.writeShortBytes(key.wireBytes)
        b.writeShortBytes(dh.bytes)
        var unknown = b
        unknown.writeInteger(UInt8(ascii: "Z"))
        #expect(throws: RelayErrorCode.syntax) { try ClientCommand.decode(unknown) }
        var empty = b
        empty.writeInteger(QueueMode.contact.rawValue)
        empty.writeShortBytes([UInt8]())
        #expect(throws: RelayErrorCode.syntax) { try ClientCommand.decode(empty) }
        var trailing = b
        trailing.writeInteger(QueueMode.contact.rawValue)
        trailing.writeShortBytes(Array("pw".utf8))
        trailing.writeInteger(UInt8(1))
        #expect(throws: RelayErrorCode.syntax) { try ClientCommand.decode(trailing) }
    }

    @Test func relayAddressesCarryAPasswordThatIsNotPartOfTheirIdentity() throws {
        let a = try RelayAddress(parsing: "smp://\(fp):s3cret@relay.example.org:6000")
        #expect(a.password == "s3cret" && a.host == "relay.example.org" && a.port == 6000)
        #expect(a.description == "smp://\(fp):s3cret@relay.example.org:6000")
        #expect(try RelayAddress(parsing: a.description) == a)
        let plain = try RelayAddress(parsing: "smp://\(fp)@relay.example.org:6000")
        #expect(plain == a && plain.hashValue == a.hashValue)
        #expect(a.withoutPassword.description == plain.description)
        for bad in ["smp://\(fp):@host", "smp://\(fp):pass word@host", "smp://\(fp):pa/ss@host",
                    "smp://\(fp):\(String(repeating: "x", count: RelayLimits.maxPasswordLength + 1))@host"] {
            #expect(throws: AddressError(.password, "")) { try RelayAddress(parsing: bad) }
        }
    }

    @Test func queueURIsNeverCarryThePassword() throws {
        let relay = try RelayAddress(parsing: "smp://\(fp):s3cret@localhost:5224")
        let uri = QueueURI(relay: relay, senderId: Sodium.randomBytes(24), recipientDhKey: dh)
        #expect(!uri.description.contains("s3cret"))
        #expect(uri.relay.password == nil)
        #expect(try QueueURI(parsing: uri.description) == uri)
    }

    @Test func blocksPackAtMostTheAskedNumberOfTransmissions() throws {
        let a = ByteBufferAllocator()
        let ts = (0..<100).map { _ in a.buffer(bytes: [1, 2, 3]) }
        let blocks = BlockCodec.encode(ts, maxPerBlock: RelayLimits.maxAuthorizedPerBlock, allocator: a)
        #expect(blocks.count == 2)
        #expect(try BlockCodec.decode(blocks[0]).count == RelayLimits.maxAuthorizedPerBlock)
    }
}
