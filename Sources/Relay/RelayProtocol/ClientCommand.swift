import NIOCore
import SwiftplexCrypto

/// Flags a sender attaches to a message; delivered to the recipient inside the encrypted envelope.
public struct MessageFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The recipient may be notified (push) about this message.
    public static let notification = MessageFlags(rawValue: 1)
}

/// Who may send a command, which decides the key that must sign it and the ID it addresses.
public enum CommandParty: Sendable {
    /// Creates a queue; entity ID empty; signed by the recipient key it carries.
    case creator
    /// Addresses the recipient ID; authorised by the queue's recipient key.
    case recipient
    /// Addresses the sender ID; signed by the sender key (unsigned SEND allowed on an unsecured queue).
    case sender
    /// Addresses a short-link ID; never signed (the data is encrypted end to end).
    case linkReader
    /// No entity; never signed.
    case anyone
}

/// Commands a client sends to a relay.
public enum ClientCommand: Sendable, Equatable {
    /// Create a queue owned by `recipientKey`, of `mode` (fixed for its life); the relay answers
    /// `IDS`. `password` is the relay's queue-creation password, when it has one (private relays).
    case new(recipientKey: AuthPublicKey, recipientDhKey: X25519.PublicKey, mode: QueueMode = .messaging, password: [UInt8]? = nil)
    /// Recipient secures the queue with the sender's key.
    case key(senderKey: AuthPublicKey)
    /// Sender secures the queue with its own key (signed by that key).
    case secureBySender(senderKey: AuthPublicKey)
    /// Recipient subscribes: messages arrive as `MSG`, one at a time until `ACK`.
    case subscribe
    /// Recipient acknowledges the message with this ID; the next one follows.
    case ack(messageId: [UInt8])
    /// Recipient polls for the oldest message without subscribing.
    case get
    /// Recipient disables the queue: further SENDs fail with AUTH.
    case off
    /// Recipient deletes the queue and all its messages.
    case delete
    /// Sender appends a message.
    case send(flags: MessageFlags, body: [UInt8])
    /// Keep-alive.
    case ping
    /// Recipient stores encrypted short-link data for its queue; the relay answers `LINK <id>`.
    case linkSet(data: [UInt8])
    /// Anyone who knows a link ID reads its data; the relay answers `LNK <data>`.
    case linkGet
    /// Recipient removes its short-link data.
    case linkDelete

    public var party: CommandParty {
        switch self {
        case .new: .creator
        case .key, .subscribe, .ack, .get, .off, .delete, .linkSet, .linkDelete: .recipient
        case .secureBySender, .send: .sender
        case .linkGet: .linkReader
        case .ping: .anyone
        }
    }

    public var tag: String {
        switch self {
        case .new: "NEW"
        case .key: "KEY"
        case .secureBySender: "SKEY"
        case .subscribe: "SUB"
        case .ack: "ACK"
        case .get: "GET"
        case .off: "OFF"
        case .delete: "DEL"
        case .send: "SEND"
        case .ping: "PING"
        case .linkSet: "LSET"
        case .linkGet: "LGET"
        case .linkDelete: "LDEL"
        }
    }

    public func encode(into b: inout ByteBuffer) {
        b.writeString(tag)
        switch self {
        case let .new(rk, dh, mode, password):
            b.writeInteger(UInt8(ascii: " "))
            b.writeShortBytes(rk.wireBytes)
            b.writeShortBytes(dh.bytes)
            b.writeInteger(mode.rawValue)
            if let password { b.writeShortBytes(password) }
        case let .key(k), let .secureBySender(k):
            b.writeInteger(UInt8(ascii: " "))
            b.writeShortBytes(k.wireBytes)
        case let .ack(id):
            b.writeInteger(UInt8(ascii: " "))
            b.writeShortBytes(id)
        case let .send(flags, body):
            b.writeInteger(UInt8(ascii: " "))
            b.writeInteger(flags.rawValue)
            b.writeLongBytes(body)
        case let .linkSet(data):
            b.writeInteger(UInt8(ascii: " "))
            b.writeLongBytes(data)
        case .subscribe, .get, .off, .delete, .ping, .linkGet, .linkDelete:
            break
        }
    }

    public func encoded(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var b = allocator.buffer(capacity: 16)
        encode(into: &b)
        return b
    }

    /// Parses a command; trailing bytes, unknown tags and bad key lengths are `CMD SYNTAX`.
    public static func decode(_ buffer: ByteBuffer) throws(RelayErrorCode) -> ClientCommand {
        var b = buffer
        let tag = Self.readTag(&b)
        let command: ClientCommand
        do {
            switch tag {
            case "NEW":
                guard let rk = b.readShortBytes(), let dh = b.readShortBytes() else { throw RelayErrorCode.syntax }
                // `[mode][password]` are optional: a bare NEW makes a messaging queue without a password.
                var mode = QueueMode.messaging
                var password: [UInt8]?
                if let m = b.readInteger(as: UInt8.self) {
                    guard let parsed = QueueMode(rawValue: m) else { throw RelayErrorCode.syntax }
                    mode = parsed
                    if b.readableBytes > 0 {
                        guard let p = b.readShortBytes(), !p.isEmpty else { throw RelayErrorCode.syntax }
                        password = p
                    }
                }
                command = .new(recipientKey: try AuthPublicKey(wireBytes: rk), recipientDhKey: try X25519.PublicKey(bytes: dh),
                               mode: mode, password: password)
            case "KEY":
                guard let k = b.readShortBytes() else { throw RelayErrorCode.syntax }
                command = .key(senderKey: try AuthPublicKey(wireBytes: k))
            case "SKEY":
                guard let k = b.readShortBytes() else { throw RelayErrorCode.syntax }
                command = .secureBySender(senderKey: try AuthPublicKey(wireBytes: k))
            case "SUB": command = .subscribe
            case "ACK":
                guard let id = b.readShortBytes(), id.count == RelayLimits.entityIdLength else { throw RelayErrorCode.syntax }
                command = .ack(messageId: id)
            case "GET": command = .get
            case "OFF": command = .off
            case "DEL": command = .delete
            case "SEND":
                guard let flags = b.readInteger(as: UInt8.self), let body = b.readLongBytes() else { throw RelayErrorCode.syntax }
                guard body.count <= RelayLimits.maxMessageBodyLength else { throw RelayErrorCode.largeMessage }
                command = .send(flags: MessageFlags(rawValue: flags), body: body)
            case "PING": command = .ping
            case "LSET":
                guard let data = b.readLongBytes() else { throw RelayErrorCode.syntax }
                guard data.count <= RelayLimits.maxLinkDataLength else { throw RelayErrorCode.largeMessage }
                command = .linkSet(data: data)
            case "LGET": command = .linkGet
            case "LDEL": command = .linkDelete
            default: throw RelayErrorCode.syntax
            }
        } catch let e as RelayErrorCode {
            throw e
        } catch {
            throw .syntax
        }
        guard b.readableBytes == 0 else { throw .syntax }
        return command
    }

    /// Reads an ASCII tag up to a space (consumed) or the end of the buffer.
    static func readTag(_ b: inout ByteBuffer) -> String {
        let view = b.readableBytesView
        let end = view.firstIndex(of: UInt8(ascii: " ")) ?? view.endIndex
        let length = end - view.startIndex
        guard length <= 8 else { return "" }
        let tag = b.readString(length: length) ?? ""
        if b.readableBytes > 0 { b.moveReaderIndex(forwardBy: 1) } // the space
        return tag
    }
}
