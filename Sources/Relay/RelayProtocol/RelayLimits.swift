/// Sizes fixed by the relay protocol. Every connection moves whole blocks of ``blockSize`` bytes,
/// so an observer of the TLS stream learns nothing from message lengths.
public enum RelayLimits {
    /// Every block on the wire has exactly this many bytes (before TLS).
    public static let blockSize = 16_384
    /// Length of queue IDs (recipient, sender), message IDs and short-link IDs.
    public static let entityIdLength = 24
    /// Length of correlation IDs chosen by clients.
    public static let correlationIdLength = 24
    /// Length of the per-connection session identifier the relay sends in its hello.
    public static let sessionIdLength = 32
    /// Bytes of block framing: content length (2) and transmission count (1).
    public static let blockHeaderLength = 3
    /// The largest single transmission that fits in a block with its 2-byte length prefix.
    public static let maxTransmissionLength = blockSize - blockHeaderLength - 2
    /// The largest message body a client may SEND. Chosen so that both the signed SEND
    /// transmission and the re-encrypted MSG delivery fit in one block.
    public static let maxMessageBodyLength = 16_064
    /// The largest short-link blob (LSET) a relay stores.
    public static let maxLinkDataLength = 13_824
    /// The most authorised (signed) transmissions one client block may carry: the relay checks at
    /// most this many signatures per block it reads, and refuses a block with more (`ERR BLOCK`,
    /// then closes the connection). Clients pack at most this many transmissions into a block.
    public static let maxAuthorizedPerBlock = 64
    /// The longest queue-creation password a relay address may carry.
    public static let maxPasswordLength = 128
    /// The current and oldest supported protocol versions.
    public static let currentVersion: UInt16 = 1
    public static let minimumVersion: UInt16 = 1
}
